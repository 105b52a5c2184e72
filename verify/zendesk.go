package verify

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"
)

// SchemeZendesk is Zendesk's webhooks (event subscriptions, triggers and
// automations).
const SchemeZendesk = "zendesk"

// Zendesk's signing headers (Zendesk developer docs, "Verifying webhook
// authenticity": https://developer.zendesk.com/documentation/webhooks/verifying/).
const (
	zendeskSignatureHeader = "X-Zendesk-Webhook-Signature"
	zendeskTimestampHeader = "X-Zendesk-Webhook-Signature-Timestamp"
	// zendeskEventTypePrefix starts the type of an event-subscription
	// webhook ("zen:event-type:ticket.created"), whose body Zendesk writes;
	// a trigger or automation webhook posts a body the admin wrote.
	zendeskEventTypePrefix = "zen:event-type:"
)

// Zendesk documents no freshness window for its signed timestamp, nor
// whether a retry is signed afresh. Its retries are short-lived (Zendesk's
// webhooks reference, "Webhook retries": a few retries for 409, 429 and 503
// answers and for timeouts, with a circuit breaker beyond;
// https://developer.zendesk.com/api-reference/webhooks/introduction/#webhook-retries,
// read only in part), so the usual 5 minutes (defaultTol) cover a retry
// even if it carries its first signature.

// zendeskScheme verifies Zendesk: "X-Zendesk-Webhook-Signature: <base64>"
// where the base64 is HMAC-SHA256(signing secret, timestamp + body), the
// X-Zendesk-Webhook-Signature-Timestamp header as received (RFC 3339,
// "2021-03-25T05:09:27Z") and the body possibly empty. The signing secret is
// used verbatim although it looks like base64 (Zendesk's samples key the
// HMAC with the string).
type zendeskScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var (
	_ Scheme   = (*zendeskScheme)(nil)
	_ resigner = (*zendeskScheme)(nil)
)

// newZendeskScheme builds the zendesk scheme from the configured signing secrets.
func newZendeskScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &zendeskScheme{keys: keys, tolerance: tolerance}, nil
}

// Verify checks both headers, the timestamp (±tolerance) and the signature,
// and only then reads the body. An event-subscription webhook (a JSON object
// whose "type" starts with zen:event-type:) has its "id" as event id and
// that type; a trigger or automation webhook carries a body of the admin's
// making: no id (Check uses the digest) and no type of the scheme's own.
func (s *zendeskScheme) Verify(in Input, now time.Time) (Verified, error) {
	header := in.Header.Get(zendeskSignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(zendeskSignatureHeader)
	}
	ts := in.Header.Get(zendeskTimestampHeader)
	if ts == "" {
		return Verified{}, missingHeader(zendeskTimestampHeader)
	}
	if err := checkHeaderLen(zendeskSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	at, ok := parseRFC3339(ts)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: malformed %s header, expected an RFC 3339 time", ErrUnauthorized, zendeskTimestampHeader)
	}
	if err := checkTimestampAt(at, now, s.tolerance); err != nil {
		return Verified{}, err
	}
	sig, ok := squareDecodeSignature(header)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected the base64 of 32 bytes", ErrUnauthorized, zendeskSignatureHeader)
	}
	if !anyKeyMatches(s.keys, []signature{sig}, []byte(ts), in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}

	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, nil // Check digests (or refuses) a body it cannot read
	}
	typ, _ := v.stringField("type")
	if !strings.HasPrefix(typ, zendeskEventTypePrefix) {
		return Verified{}, nil
	}
	id, _ := v.stringField("id")
	return Verified{ID: id, Type: typ}, nil
}

// resign writes a new timestamp in Zendesk's form (RFC 3339, UTC, whole
// seconds) and its signature under the current secret.
func (s *zendeskScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := at.UTC().Format(time.RFC3339)
	h.Set(zendeskTimestampHeader, ts)
	h.Set(zendeskSignatureHeader, base64.StdEncoding.EncodeToString(macSHA256(s.keys[0], ts, body)))
}

// unsign removes the signature header resign writes.
func (s *zendeskScheme) unsign(h http.Header) { h.Del(zendeskSignatureHeader) }
