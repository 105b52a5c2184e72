package verify

import (
	"crypto/sha256"
	"errors"
	"time"
)

// SchemeTelegram verifies Telegram Bot API webhooks: Telegram signs
// nothing, but sends the secret_token given to setWebhook in the
// X-Telegram-Bot-Api-Secret-Token header of every update
// (https://core.telegram.org/bots/api#setwebhook).
const SchemeTelegram = "telegram"

// telegramTokenHeader carries the secret token verbatim.
const telegramTokenHeader = "X-Telegram-Bot-Api-Secret-Token"

// telegramMaxSecret is the longest secret_token setWebhook accepts.
const telegramMaxSecret = 256

// telegramScheme compares the secret-token header with every configured
// secret in constant time. Nothing is signed: the body is authenticated
// only by TLS.
type telegramScheme struct {
	// digests holds SHA-256 of each configured secret token.
	digests [][sha256.Size]byte
}

var _ Scheme = (*telegramScheme)(nil)

// newTelegramScheme checks that each secret is one setWebhook accepts:
// 1–256 characters of A-Z, a-z, 0-9, _ and - (a secret of another shape
// could never be sent by Telegram).
func newTelegramScheme(cfg ProviderConfig) (Scheme, error) {
	if _, err := secretKeys(cfg.Secrets, checkTelegramSecret); err != nil {
		return nil, err
	}
	return &telegramScheme{digests: credentialDigests(cfg.Secrets)}, nil
}

// errTelegramSecret says what a secret_token may hold; it quotes nothing.
var errTelegramSecret = errors.New("a Telegram secret_token is 1 to 256 characters of A-Z, a-z, 0-9, _ and - (core.telegram.org/bots/api#setwebhook)")

// checkTelegramSecret refuses a secret setWebhook would refuse.
func checkTelegramSecret(s string) ([]byte, error) {
	if len(s) > telegramMaxSecret {
		return nil, errTelegramSecret
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') && c != '_' && c != '-' {
			return nil, errTelegramSecret
		}
	}
	return []byte(s), nil
}

// Verify compares the secret token in constant time. The id is the
// Update's update_id, which Telegram documents as what to ignore repeated
// updates by (https://core.telegram.org/bots/api#update); it is not
// signed (IDSigned is false). The type is the name of the Update's one
// optional field that is present ("message", "callback_query", …): "At
// most one of the optional parameters can be present in any given
// update" (same page); a body with none or several gives no type.
func (s *telegramScheme) Verify(in Input, _ time.Time) (Verified, error) {
	if err := checkCredentialHeader(in.Header, telegramTokenHeader, s.digests); err != nil {
		return Verified{}, err
	}
	v, err := parseJSON(in.Body)
	if err != nil || v.kind != kindObject {
		return Verified{}, nil // Check keys it by the digest, or refuses it
	}
	var out Verified
	if id, ok := v.field("update_id"); ok && id.kind == kindNumber && isInteger(id.text) {
		out.ID = id.text
	}
	for _, m := range v.members {
		if m.key == "update_id" {
			continue
		}
		if out.Type != "" {
			return Verified{ID: out.ID}, nil // several: not an Update
		}
		out.Type = m.key
	}
	return out, nil
}

// isInteger tells whether a number's canonical text (canonical_number.go)
// is an integer written in plain digits, with an optional minus sign: the
// text of every JSON integer literal of up to 21 digits.
func isInteger(text string) bool {
	if len(text) > 0 && text[0] == '-' {
		text = text[1:]
	}
	if text == "" {
		return false
	}
	for i := 0; i < len(text); i++ {
		if !isDigit(text[i]) {
			return false
		}
	}
	return true
}
