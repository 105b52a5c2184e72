package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Zoom's webhook headers (Zoom developer docs, "Using webhooks": "Verify
// webhook events"). The deprecated verification token (authorization
// header) is not accepted.
const (
	zoomSignatureHeader = "x-zm-signature"
	zoomTimestampHeader = "x-zm-request-timestamp"
	// zoomURLValidation is the challenge-response check Zoom sends when an
	// endpoint is set and every 72 hours ("Validate your webhook endpoint").
	zoomURLValidation = "endpoint.url_validation"
)

// zoomScheme verifies Zoom: "x-zm-signature: v0=<hex>" where the hex is
// HMAC-SHA256(secret token, "v0:{x-zm-request-timestamp}:{body}"), the
// secret used as raw bytes: Slack's scheme under other header names.
type zoomScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var _ Scheme = (*zoomScheme)(nil)

func newZoomScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &zoomScheme{keys: keys, tolerance: tolerance}, nil
}

// Verify checks the timestamp (Zoom's samples enforce no bound; the
// provider's tolerance applies, 5 minutes by default) and the signature,
// and only then reads the body. An endpoint.url_validation is answered (a
// handshake); any other event has the type "event" and no id: Zoom
// documents no event id (event_ts is the event's time, not unique), so
// Check keys it by the body digest.
func (s *zoomScheme) Verify(in Input, now time.Time) (Verified, error) {
	header, ts, err := timestampedHeaders(in, zoomSignatureHeader, zoomTimestampHeader, now, s.tolerance)
	if err != nil {
		return Verified{}, err
	}
	sig, err := slackParseV0Signature(header)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, zoomSignatureHeader, err)
	}
	// Zoom's sample verifier signs the header text as received.
	if !anyKeyMatches(s.keys, []signature{sig}, []byte("v0:"+ts+":"), in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}

	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, nil // Zoom posts JSON; Check digests (or refuses) the rest
	}
	event, _ := v.stringField("event")
	if event != zoomURLValidation {
		return Verified{Type: event}, nil
	}
	payload, _ := v.field("payload")
	plain, ok := payload.stringField("plainToken")
	if !ok || plain == "" {
		return Verified{}, refusef(ReasonMalformedBody, "%w: url_validation without a string payload.plainToken", ErrBadRequest)
	}
	// Zoom expects {"plainToken": p, "encryptedToken": hex(HMAC-SHA256(secret
	// token, p))}. It is computed with the current (first) secret: the one
	// configured in the Zoom app.
	mac := hmac.New(sha256.New, s.keys[0])
	mac.Write([]byte(plain))
	reply := append([]byte(`{"plainToken":`), appendString(nil, plain)...)
	reply = append(reply, `,"encryptedToken":"`...)
	reply = hex.AppendEncode(reply, mac.Sum(nil))
	return Verified{Handshake: append(reply, `"}`...)}, nil
}
