package verify

import (
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"time"
)

// Discord interaction headers (Discord developer docs, "Interactions:
// Receiving and Responding", security and authorization; discordgo
// VerifyInteraction).
const (
	discordSignatureHeader = "X-Signature-Ed25519"
	discordTimestampHeader = "X-Signature-Timestamp"
)

// Interaction types and the responses whguard gives them (Discord docs,
// "Interaction Object": interaction type; "Interaction Response Object":
// interaction callback type).
const (
	discordPing                           = "1"
	discordApplicationCommand             = "2"
	discordMessageComponent               = "3"
	discordApplicationCommandAutocomplete = "4"
	discordModalSubmit                    = "5"

	// PONG, the answer to a PING.
	discordPong = `{"type":1}`
	// DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: "thinking…"; the backend sends
	// the message later through the interaction webhook.
	discordDeferredChannelMessage = `{"type":5}`
	// DEFERRED_UPDATE_MESSAGE: acknowledge a component; the backend edits
	// the message later.
	discordDeferredUpdateMessage = `{"type":6}`
)

// discordScheme verifies Discord interactions: X-Signature-Ed25519 is the
// hex ed25519 signature of "{X-Signature-Timestamp}{body}" by the
// application's key (the timestamp as received, like discordgo). Secrets are
// not used. Discord needs an answer within 3 s, so whguard answers itself
// (docs/ingress.md): PING with PONG as a handshake, commands and modal
// submits with a deferred channel message, components with a deferred
// update; the backend follows up through the interaction's webhook.
type discordScheme struct {
	key       ed25519.PublicKey
	tolerance time.Duration
}

var _ Scheme = (*discordScheme)(nil)

func newDiscordScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	key, err := parseDiscordPublicKey(cfg.PublicKey)
	if err != nil {
		return nil, err
	}
	return &discordScheme{key: key, tolerance: tolerance}, nil
}

// parseDiscordPublicKey reads the application's public key as the developer
// portal shows it: 64 hex digits (surrounding whitespace ignored). Errors
// never quote the key.
func parseDiscordPublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if len(s) != hex.EncodedLen(ed25519.PublicKeySize) {
		return nil, fieldErrorf(FieldPublicKey, "public key is not a hex ed25519 key: expected %d hex digits", hex.EncodedLen(ed25519.PublicKeySize))
	}
	key, err := hex.DecodeString(s)
	if err != nil {
		return nil, fieldErrorf(FieldPublicKey, "public key is not a hex ed25519 key: not hex (expected %d hex digits)", hex.EncodedLen(ed25519.PublicKeySize))
	}
	return ed25519.PublicKey(key), nil
}

// Verify checks the timestamp (Discord documents no bound; the default
// 5 minutes apply) and the signature, and only then reads the interaction:
// the id is the body's "id", the type "interaction.<type>".
func (s *discordScheme) Verify(in Input, now time.Time) (Verified, error) {
	sigHex, ts, err := timestampedHeaders(in, discordSignatureHeader, discordTimestampHeader, now, s.tolerance)
	if err != nil {
		return Verified{}, err
	}
	var sig [ed25519.SignatureSize]byte
	if len(sigHex) != hex.EncodedLen(len(sig)) {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected %d hex digits", ErrUnauthorized, discordSignatureHeader, hex.EncodedLen(len(sig)))
	}
	if _, err := hex.Decode(sig[:], []byte(sigHex)); err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected %d hex digits", ErrUnauthorized, discordSignatureHeader, hex.EncodedLen(len(sig)))
	}
	msg := make([]byte, 0, len(ts)+len(in.Body))
	msg = append(append(msg, ts...), in.Body...)
	if !ed25519.Verify(s.key, msg, sig[:]) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: signature does not verify", ErrUnauthorized)
	}
	return discordInteraction(in.Body)
}

// discordInteraction reads a verified interaction and decides the answer.
func discordInteraction(body []byte) (Verified, error) {
	v, err := parseJSON(body)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedBody, "%w: interaction body unparseable: %w", ErrBadRequest, err)
	}
	t, ok := v.field("type")
	if !ok || t.kind != kindNumber {
		return Verified{}, refusef(ReasonMalformedBody, "%w: interaction body has no numeric \"type\"", ErrBadRequest)
	}
	var reply string
	switch t.text { // the canonical number: 1.0 and 1e0 read as 1
	case discordPing:
		return Verified{Handshake: []byte(discordPong)}, nil
	case discordApplicationCommand, discordModalSubmit:
		reply = discordDeferredChannelMessage
	case discordMessageComponent:
		reply = discordDeferredUpdateMessage
	case discordApplicationCommandAutocomplete:
		return Verified{}, refusef(ReasonUnsupportedEvent, "%w: autocomplete interactions need a synchronous answer (the choices) that whguard cannot give; "+
			"serve autocomplete from the application itself", ErrBadRequest)
	default:
		return Verified{}, refusef(ReasonUnsupportedEvent, "%w: unknown interaction type", ErrBadRequest)
	}
	// Every interaction carries a snowflake "id"; without one Check keys
	// the interaction by its content digest.
	id, _ := v.stringField("id")
	return Verified{ID: id, Type: "interaction." + t.text, Reply: []byte(reply)}, nil
}
