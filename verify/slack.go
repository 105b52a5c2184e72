package verify

import (
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// Slack's request-signing headers (Slack docs, "Verifying requests from
// Slack"; slack-go SecretsVerifier reads the same two).
const (
	slackSignatureHeader = "X-Slack-Signature"
	slackTimestampHeader = "X-Slack-Request-Timestamp"
	slackSignaturePrefix = "v0="
	// slackURLVerification is the Events API handshake type: Slack posts
	// {"type":"url_verification","challenge":"…"} when a request URL is
	// set, and expects the challenge back.
	slackURLVerification = "url_verification"
)

// slackScheme verifies Slack: "X-Slack-Signature: v0=<hex>" where the hex is
// HMAC-SHA256(signing secret, "v0:{X-Slack-Request-Timestamp}:{body}"), the
// secret used as raw bytes. Slack sends one signature per request; every
// configured secret is tried (so a secret rotation works).
type slackScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var _ Scheme = (*slackScheme)(nil)

func newSlackScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &slackScheme{keys: keys, tolerance: tolerance}, nil
}

// Verify checks the timestamp (±tolerance; slack-go's NewSecretsVerifier
// uses ±5 minutes, our DefaultTolerance) and the signature, and only then
// reads the body:
//
//   - a JSON url_verification answers the challenge (a handshake);
//   - an Events API callback gives the id "event_id" and the type
//     "event.type", else the top-level "type";
//   - anything else (slash commands and interactivity are form posts) has
//     no id: Check keys it by the digest of its sorted form parameters.
func (s *slackScheme) Verify(in Input, now time.Time) (Verified, error) {
	header, ts, err := timestampedHeaders(in, slackSignatureHeader, slackTimestampHeader, now, s.tolerance)
	if err != nil {
		return Verified{}, err
	}
	sig, err := slackParseV0Signature(header)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, slackSignatureHeader, err)
	}
	// The timestamp is signed as received, like slack-go does ("v0:%s:");
	// parseUnixSeconds allowed only digits in it.
	if !anyKeyMatches(s.keys, []signature{sig}, []byte("v0:"+ts+":"), in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	return slackEvent(in.Body)
}

// slackEvent reads a verified Slack body.
func slackEvent(body []byte) (Verified, error) {
	v, err := parseJSON(body)
	if err != nil || v.kind != kindObject {
		// A form post (slash command, interactivity) or another body: no
		// id of its own. Check reports JSON it cannot digest.
		return Verified{}, nil
	}
	typ, _ := v.stringField("type")
	if typ == slackURLVerification {
		challenge, ok := v.stringField("challenge")
		if !ok {
			return Verified{}, refusef(ReasonMalformedBody, "%w: url_verification without a string \"challenge\"", ErrBadRequest)
		}
		// Slack accepts the challenge as plain text, form or a JSON object
		// {"challenge": …} (Events API docs, "url_verification").
		reply := append([]byte(`{"challenge":`), appendString(nil, challenge)...)
		return Verified{Handshake: append(reply, '}')}, nil
	}
	id, _ := v.stringField("event_id")
	if event, ok := v.field("event"); ok {
		if inner, ok := event.stringField("type"); ok && inner != "" {
			typ = inner
		}
	}
	return Verified{ID: id, Type: typ}, nil
}

// slackParseV0Signature reads "v0=" followed by 64 hex digits: the signature
// header of Slack and of Zoom, which copied Slack's scheme.
func slackParseV0Signature(header string) (signature, error) {
	value, ok := strings.CutPrefix(header, slackSignaturePrefix)
	if !ok {
		return signature{}, errors.New("expected the " + slackSignaturePrefix + " prefix")
	}
	sig, ok := slackDecodeHexSHA256(value)
	if !ok {
		return signature{}, errors.New("expected 64 hex digits")
	}
	return sig, nil
}

// slackDecodeHexSHA256 decodes exactly 64 hex digits (either case) into an
// HMAC-SHA256 value without allocating. Paddle and Linear use the same
// encoding and call it too.
func slackDecodeHexSHA256(value string) (signature, bool) {
	var sig signature
	if len(value) != hex.EncodedLen(len(sig)) {
		return sig, false
	}
	if _, err := hex.Decode(sig[:], []byte(value)); err != nil {
		return sig, false
	}
	return sig, true
}
