package verify

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"
)

// SchemeTwitch is Twitch EventSub over webhooks.
const SchemeTwitch = "twitch"

// Twitch EventSub's webhook headers (Twitch docs, "Handling webhook events":
// https://dev.twitch.tv/docs/eventsub/handling-webhook-events).
const (
	twitchMessageIDHeader        = "Twitch-Eventsub-Message-Id"
	twitchTimestampHeader        = "Twitch-Eventsub-Message-Timestamp"
	twitchSignatureHeader        = "Twitch-Eventsub-Message-Signature"
	twitchMessageTypeHeader      = "Twitch-Eventsub-Message-Type"
	twitchSubscriptionTypeHeader = "Twitch-Eventsub-Subscription-Type"
	twitchSignaturePrefix        = "sha256="
	// twitchVerification is the message type of the challenge Twitch sends
	// when a subscription is created ("Responding to a challenge request");
	// "notification" and "revocation" are ordinary events.
	twitchVerification = "webhook_callback_verification"
	// twitchTimestampLayout is how Twitch writes its timestamps: RFC 3339
	// in UTC with nanoseconds ("All timestamps are in RFC3339 format and
	// use nanoseconds"), e.g. 2019-11-16T10:11:12.634234626Z.
	twitchTimestampLayout = "2006-01-02T15:04:05.000000000Z07:00"
	// twitchTolerance: Twitch's docs tell receivers to reject messages
	// whose timestamp is older than 10 minutes ("Guarding against replay
	// attacks", https://dev.twitch.tv/docs/eventsub/#guarding-against-replay-attacks);
	// whguard bounds both directions.
	twitchTolerance = 10 * time.Minute
	// Twitch takes subscription secrets of 10 to 100 ASCII characters
	// (Create EventSub Subscription, transport.secret).
	twitchMinSecretLen, twitchMaxSecretLen = 10, 100
)

// twitchScheme verifies Twitch EventSub: "Twitch-Eventsub-Message-Signature:
// sha256=<hex>" where the hex is HMAC-SHA256(secret, message id + timestamp
// + body), the two headers as received, without separators, and the secret
// (chosen when subscribing) used as raw bytes. A new secret means new
// subscriptions, so the old one stays configured as a previous secret while
// its subscriptions live; every configured secret is tried.
type twitchScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var (
	_ Scheme   = (*twitchScheme)(nil)
	_ resigner = (*twitchScheme)(nil)
)

// newTwitchScheme builds the twitch scheme from the configured secrets.
func newTwitchScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, decodeTwitchSecret)
	if err != nil {
		return nil, err
	}
	return &twitchScheme{keys: keys, tolerance: tolerance}, nil
}

// decodeTwitchSecret uses the secret's bytes, refusing one Twitch would
// never have accepted for a subscription (the error does not quote it).
func decodeTwitchSecret(s string) ([]byte, error) {
	if len(s) < twitchMinSecretLen || len(s) > twitchMaxSecretLen {
		return nil, errors.New("a Twitch EventSub secret is 10 to 100 ASCII characters: the transport.secret given when subscribing")
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return nil, errors.New("a Twitch EventSub secret is ASCII: the transport.secret given when subscribing")
		}
	}
	return []byte(s), nil
}

// Verify checks the headers, the timestamp (±tolerance) and the signature,
// and only then reads the body. A webhook_callback_verification is answered
// with its challenge, verbatim, as text/plain (a handshake); any other
// message is an event whose id is the signed message id (Twitch keeps it
// when it resends) and whose type is Twitch-Eventsub-Subscription-Type.
func (s *twitchScheme) Verify(in Input, now time.Time) (Verified, error) {
	header := in.Header.Get(twitchSignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(twitchSignatureHeader)
	}
	id := in.Header.Get(twitchMessageIDHeader)
	if id == "" {
		return Verified{}, missingHeader(twitchMessageIDHeader)
	}
	ts := in.Header.Get(twitchTimestampHeader)
	if ts == "" {
		return Verified{}, missingHeader(twitchTimestampHeader)
	}
	if err := checkHeaderLen(twitchSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	if err := checkHeaderLen(twitchMessageIDHeader, id); err != nil {
		return Verified{}, err
	}
	at, ok := parseRFC3339(ts)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: malformed %s header, expected an RFC 3339 time", ErrUnauthorized, twitchTimestampHeader)
	}
	if err := checkTimestampAt(at, now, s.tolerance); err != nil {
		return Verified{}, err
	}
	value, ok := strings.CutPrefix(header, twitchSignaturePrefix)
	sig, hexOK := slackDecodeHexSHA256(value)
	if !ok || !hexOK {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected %s and 64 hex digits", ErrUnauthorized, twitchSignatureHeader, twitchSignaturePrefix)
	}
	// Twitch's sample verifier signs both headers as received.
	if !anyKeyMatches(s.keys, []signature{sig}, []byte(id+ts), in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}

	if in.Header.Get(twitchMessageTypeHeader) == twitchVerification {
		return twitchChallenge(in.Body)
	}
	return Verified{ID: id, Type: in.Header.Get(twitchSubscriptionTypeHeader)}, nil
}

// twitchChallenge answers a verified webhook_callback_verification: status
// 200, the body's "challenge" string verbatim, Content-Type text/plain
// (twitch-cli's "verify-subscription" checks all three).
func twitchChallenge(body []byte) (Verified, error) {
	v, err := parseJSON(body)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedBody, "%w: %s body unparseable: %w", ErrBadRequest, twitchVerification, err)
	}
	challenge, ok := v.stringField("challenge")
	if !ok || challenge == "" {
		return Verified{}, refusef(ReasonMalformedBody, "%w: %s without a string \"challenge\"", ErrBadRequest, twitchVerification)
	}
	return Verified{Handshake: []byte(challenge), AnswerType: "text/plain"}, nil
}

// resign writes a new Twitch-Eventsub-Message-Timestamp (RFC 3339 with
// nanoseconds, as Twitch writes it) and its signature under the current
// secret, keeping the message id, which is signed too.
func (s *twitchScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := at.UTC().Format(twitchTimestampLayout)
	id := h.Get(twitchMessageIDHeader)
	h.Set(twitchTimestampHeader, ts)
	h.Set(twitchSignatureHeader, twitchSignaturePrefix+hex.EncodeToString(macSHA256(s.keys[0], id+ts, body)))
}

// unsign removes the signature header resign writes.
func (s *twitchScheme) unsign(h http.Header) { h.Del(twitchSignatureHeader) }
