package verify

import (
	"encoding/hex"
	"strings"
	"time"
)

// PagerDuty v3 webhook headers (PagerDuty developer docs, "Verifying
// Signatures" and "Webhook Headers"; go-pagerduty webhookv3).
const (
	pagerDutySignatureHeader = "X-PagerDuty-Signature"
	pagerDutyWebhookIDHeader = "X-Webhook-Id" // same on retries
	pagerDutySignaturePrefix = "v1="
)

// pagerDutyScheme verifies PagerDuty v3 webhooks:
// "X-PagerDuty-Signature: v1=<hex>[,v1=<hex>…]", each hex being
// HMAC-SHA256(secret, body) for one of the subscription's secrets (several
// while a secret rotates); any match passes. PagerDuty signs no timestamp.
type pagerDutyScheme struct {
	keys [][]byte
}

var _ Scheme = (*pagerDutyScheme)(nil)

func newPagerDutyScheme(cfg ProviderConfig) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &pagerDutyScheme{keys: keys}, nil
}

// Verify checks the signatures; the event id is the X-Webhook-Id header
// ("" if absent, so Check falls back to the content digest) and the type the
// body's event.event_type.
func (s *pagerDutyScheme) Verify(in Input, _ time.Time) (Verified, error) {
	header := in.Header.Get(pagerDutySignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(pagerDutySignatureHeader)
	}
	if err := checkHeaderLen(pagerDutySignatureHeader, header); err != nil {
		return Verified{}, err
	}
	sigs, err := parsePagerDutySignatures(header)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, pagerDutySignatureHeader, err)
	}
	if !anyKeyMatches(s.keys, sigs, nil, in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	return Verified{ID: in.Header.Get(pagerDutyWebhookIDHeader), Type: pagerDutyEventType(in.Body)}, nil
}

// parsePagerDutySignatures reads a comma-separated list of "v1=<64 hex>"
// entries. Like go-pagerduty's extractPayloadSignatures it skips entries of
// other versions and undecodable ones, and fails only when none is left; it
// also trims spaces around an entry (go-pagerduty does not; PagerDuty sends
// none) and looks at no more than maxSignatures entries.
func parsePagerDutySignatures(header string) ([]signature, error) {
	var sigs []signature
	rest := header
	for seen := 0; rest != "" && seen < maxSignatures; seen++ {
		var entry string
		entry, rest, _ = strings.Cut(rest, ",")
		value, ok := strings.CutPrefix(strings.Trim(entry, " \t"), pagerDutySignaturePrefix)
		var sig signature
		if !ok || len(value) != hex.EncodedLen(len(sig)) {
			continue
		}
		if _, err := hex.Decode(sig[:], []byte(value)); err != nil {
			continue
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return nil, errNoSignature
	}
	return sigs, nil
}

// pagerDutyEventType returns the body's event.event_type, or "".
func pagerDutyEventType(body []byte) string {
	v, err := parseJSON(body)
	if err != nil {
		return ""
	}
	event, ok := v.field("event")
	if !ok {
		return ""
	}
	typ, _ := event.stringField("event_type")
	return typ
}
