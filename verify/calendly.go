package verify

import (
	"encoding/hex"
	"net/http"
	"time"
)

// SchemeCalendly is Calendly's webhook subscriptions.
const SchemeCalendly = "calendly"

const (
	// calendlySignatureHeader carries "t=<unix>,v1=<hex>" (Calendly
	// developer docs, "Webhook signatures":
	// https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures).
	calendlySignatureHeader = "Calendly-Webhook-Signature"
	// calendlyTolerance: the sample verifier of Calendly's "Webhook
	// signatures" page rejects a t= older than three minutes (as read
	// through copies of that page; the page itself was not readable here).
	// Calendly documents no re-signing of its retries; a late retry carrying
	// its first signature would be refused, as by Calendly's own sample:
	// raise WHGUARD_<NAME>_TOLERANCE if that happens.
	calendlyTolerance = 3 * time.Minute
)

// calendlyScheme verifies Calendly: "Calendly-Webhook-Signature:
// t=<unix>,v1=<hex>" where the hex is HMAC-SHA256(signing key, "{t}.{body}"),
// the key (chosen with a personal access token, generated for an OAuth app)
// used as raw bytes. The header has Stripe's shape and is parsed the same
// way. Calendly sends no delivery or event id: Check keys events by the
// body digest.
type calendlyScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var (
	_ Scheme   = (*calendlyScheme)(nil)
	_ resigner = (*calendlyScheme)(nil)
)

// newCalendlyScheme builds the calendly scheme from the configured signing keys.
func newCalendlyScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &calendlyScheme{keys: keys, tolerance: tolerance}, nil
}

// Verify checks the timestamp (±tolerance) and every v1 signature, and only
// then reads the body: the type is its "event" (invitee.created, …), and
// there is no id.
func (s *calendlyScheme) Verify(in Input, now time.Time) (Verified, error) {
	if err := checkTimestampedPairs(in, calendlySignatureHeader, s.keys, now, s.tolerance); err != nil {
		return Verified{}, err
	}
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, nil // Check digests (or refuses) a body it cannot read
	}
	typ, _ := v.stringField("event")
	return Verified{Type: typ}, nil
}

// resign writes "t=<at>,v1=<hex>" with one v1, the current secret's.
func (s *calendlyScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := unixText(at)
	h.Set(calendlySignatureHeader, "t="+ts+",v1="+hex.EncodeToString(macSHA256(s.keys[0], ts+".", body)))
}

// unsign removes the signature header resign writes.
func (s *calendlyScheme) unsign(h http.Header) { h.Del(calendlySignatureHeader) }
