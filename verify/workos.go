package verify

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SchemeWorkOS is WorkOS's webhooks.
const SchemeWorkOS = "workos"

const (
	// workosSignatureHeader carries "t=<unix ms>, v1=<hex>" (WorkOS docs,
	// "Validating events are from WorkOS":
	// https://workos.com/docs/webhooks/securing-your-webhook-endpoint/validating-events-are-from-workos).
	// t is in milliseconds: workos-node compares it with Date.now(), and
	// workos-ruby's example timestamp is '1626125972272'. (workos-go v10's
	// VerifyPayload reads it as seconds, unlike its older pkg/webhooks,
	// which divides by 1000: whguard follows the milliseconds WorkOS sends.)
	workosSignatureHeader = "WorkOS-Signature"
	// workosTolerance: WorkOS's SDKs accept a timestamp up to 180 s old
	// (workos-node verifyHeader's tolerance 180000 ms, workos-go
	// NewWebhookVerifier's 180 * time.Second, in both directions there);
	// whguard bounds both directions.
	workosTolerance = 3 * time.Minute
)

// workosScheme verifies WorkOS: "WorkOS-Signature: t=<ms>, v1=<hex>" where the
// hex is HMAC-SHA256(endpoint secret, "{t}.{body}"), t being unix
// milliseconds signed as received and the secret used as raw bytes.
type workosScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var (
	_ Scheme   = (*workosScheme)(nil)
	_ resigner = (*workosScheme)(nil)
)

// newWorkOSScheme builds the workos scheme from the configured endpoint secrets.
func newWorkOSScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &workosScheme{keys: keys, tolerance: tolerance}, nil
}

// Verify checks the timestamp (±tolerance) and the v1 signatures, and only
// then reads the body: the event id is its "id" (event_…), the type its
// "event" (user.created, dsync.user.updated, …).
func (s *workosScheme) Verify(in Input, now time.Time) (Verified, error) {
	header := in.Header.Get(workosSignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(workosSignatureHeader)
	}
	if err := checkHeaderLen(workosSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	ts, ms, sigs, err := parseWorkOSHeader(header)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, workosSignatureHeader, err)
	}
	if err := checkTimestampAt(time.UnixMilli(ms), now, s.tolerance); err != nil {
		return Verified{}, err
	}
	if !anyKeyMatches(s.keys, sigs, []byte(ts+"."), in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, nil // Check digests (or refuses) a body it cannot read
	}
	id, _ := v.stringField("id")
	typ, _ := v.stringField("event")
	return Verified{ID: id, Type: typ}, nil
}

// parseWorkOSHeader reads "t=…, v1=…": pairs separated by commas, spaces
// around each allowed (WorkOS writes one after the comma), exactly one t of
// unix milliseconds, returned as written and as a number, and at least one
// well-formed v1 of 64 hex digits (at most maxSignatures kept). Like
// workos-go it refuses a pair without '=' and ignores other keys; a
// malformed v1 is skipped.
func parseWorkOSHeader(header string) (ts string, ms int64, sigs []signature, err error) {
	seenTS := false
	for pair := range strings.SplitSeq(header, ",") {
		key, value, ok := strings.Cut(strings.Trim(pair, " \t"), "=")
		if !ok {
			return "", 0, nil, errors.New("malformed pair, expected key=value")
		}
		switch key {
		case "t":
			if seenTS {
				return "", 0, nil, errors.New("more than one t=")
			}
			seenTS = true
			if ms, ok = parseUnixMillis(value); !ok {
				return "", 0, nil, errors.New("malformed t= timestamp, expected unix milliseconds")
			}
			ts = value
		case "v1":
			if sig, ok := slackDecodeHexSHA256(value); ok && len(sigs) < maxSignatures {
				sigs = append(sigs, sig)
			}
		}
	}
	if !seenTS {
		return "", 0, nil, errors.New("no t= timestamp")
	}
	if len(sigs) == 0 {
		return "", 0, nil, errNoSignature
	}
	return ts, ms, sigs, nil
}

// resign writes "t=<ms>, v1=<hex>" as WorkOS does, with one v1: the current
// secret's.
func (s *workosScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := strconv.FormatInt(at.UnixMilli(), 10)
	h.Set(workosSignatureHeader, "t="+ts+", v1="+hex.EncodeToString(macSHA256(s.keys[0], ts+".", body)))
}

// unsign removes the signature header resign writes.
func (s *workosScheme) unsign(h http.Header) { h.Del(workosSignatureHeader) }
