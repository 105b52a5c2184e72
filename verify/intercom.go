package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"time"
)

// Intercom's signature header (Intercom developer docs, "Webhooks":
// "Signed notifications"): the GitHub-style legacy SHA-1 header.
const (
	intercomSignatureHeader = "X-Hub-Signature"
	intercomSignaturePrefix = "sha1="
)

// intercomSignature is one decoded HMAC-SHA1 value.
type intercomSignature [sha1.Size]byte

// intercomScheme verifies Intercom: "X-Hub-Signature: sha1=<hex>" where the
// hex is HMAC-SHA1(secret, body), the secret (presumably the app's client
// secret; unconfirmed) used as raw bytes. Intercom signs no timestamp, so replays are bounded only by
// deduplication.
type intercomScheme struct {
	keys [][]byte
}

var (
	_ Scheme           = (*intercomScheme)(nil)
	_ volatileDeclarer = (*intercomScheme)(nil)
)

func newIntercomScheme(cfg ProviderConfig) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &intercomScheme{keys: keys}, nil
}

// Volatile: a redelivered notification carries a new delivery_attempts
// count and first_sent_at (an inference, not stated by Intercom: the
// notification object documents them as delivery metadata, not event data).
func (*intercomScheme) Volatile() []string {
	return []string{"delivery_attempts", "first_sent_at"}
}

// Verify checks the signature; the event id is the notification's "id"
// ("notif_…") and the type its "topic" (e.g. "conversation.user.created"),
// both "" when absent (Check then uses the digest).
func (s *intercomScheme) Verify(in Input, _ time.Time) (Verified, error) {
	header := in.Header.Get(intercomSignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(intercomSignatureHeader)
	}
	if err := checkHeaderLen(intercomSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	sig, err := parseIntercomSignature(header)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, intercomSignatureHeader, err)
	}
	var sum intercomSignature
	matched := false
	for _, key := range s.keys {
		mac := hmac.New(sha1.New, key)
		mac.Write(in.Body)
		if hmac.Equal(mac.Sum(sum[:0]), sig[:]) {
			matched = true
			break
		}
	}
	if !matched {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, nil // Intercom posts JSON; Check digests (or refuses) the rest
	}
	id, _ := v.stringField("id")
	typ, _ := v.stringField("topic")
	return Verified{ID: id, Type: typ}, nil
}

// parseIntercomSignature reads "sha1=" followed by 40 hex digits.
func parseIntercomSignature(header string) (intercomSignature, error) {
	var sig intercomSignature
	return sig, decodePrefixedHex(header, intercomSignaturePrefix, sig[:])
}
