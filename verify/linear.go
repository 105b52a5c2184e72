package verify

import (
	"strconv"
	"time"
)

// Linear's webhook headers and timestamp field (Linear developer docs,
// "Webhooks": "Securing webhooks"; @linear/sdk LinearWebhooks.verify).
const (
	linearSignatureHeader = "Linear-Signature"
	// linearDeliveryHeader is a UUID per payload, used as the stable id;
	// unconfirmed: Linear does not say whether a retry keeps it.
	linearDeliveryHeader = "Linear-Delivery"
	// linearEventHeader names the entity type ("Issue", "Comment", …;
	// unconfirmed).
	linearEventHeader = "Linear-Event"
	// linearTimestampField is the body's delivery time in unix
	// milliseconds, refreshed on every delivery.
	linearTimestampField = "webhookTimestamp"
	// linearMaxTimestampDigits bounds webhookTimestamp: milliseconds need
	// three more digits than parseUnixSeconds allows seconds.
	linearMaxTimestampDigits = maxTimestampDigits + 3
)

// linearScheme verifies Linear: "Linear-Signature: <hex>" (no prefix) where
// the hex is HMAC-SHA256(webhook secret, body), the secret used as raw
// bytes. The signed body carries "webhookTimestamp" (ms), which @linear/sdk
// checks within ±60 s (DefaultTolerance: 1 minute). It cannot be re-signed
// for a late delivery (ResignBodyTimestamp): a fresh webhookTimestamp would
// change the body, which is forwarded as received.
type linearScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var (
	_ Scheme           = (*linearScheme)(nil)
	_ volatileDeclarer = (*linearScheme)(nil)
)

func newLinearScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &linearScheme{keys: keys, tolerance: tolerance}, nil
}

// Volatile: webhookTimestamp is refreshed on every delivery of one event,
// so leaving it out keeps a resend's content hash (docs/ingress.md).
func (*linearScheme) Volatile() []string { return []string{linearTimestampField} }

// Verify checks the signature, then the signed body's webhookTimestamp
// (a body that is not a JSON object with a numeric webhookTimestamp is
// refused with ErrBadRequest); the event id is Linear-Delivery ("" when
// absent: Check then uses the digest) and the type Linear-Event, else the
// body's "type".
func (s *linearScheme) Verify(in Input, now time.Time) (Verified, error) {
	header := in.Header.Get(linearSignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(linearSignatureHeader)
	}
	if err := checkHeaderLen(linearSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	sig, ok := slackDecodeHexSHA256(header)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected 64 hex digits", ErrUnauthorized, linearSignatureHeader)
	}
	if !anyKeyMatches(s.keys, []signature{sig}, nil, in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}

	// Only a verified body is parsed.
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body unparseable: %w", ErrBadRequest, err)
	}
	f, ok := v.field(linearTimestampField)
	if !ok {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body has no %q", ErrBadRequest, linearTimestampField)
	}
	ms, ok := linearParseMillis(f)
	if !ok {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body %q is not a whole number of milliseconds", ErrBadRequest, linearTimestampField)
	}
	if err := linearCheckTimestamp(ms, now, s.tolerance); err != nil {
		return Verified{}, err
	}

	typ := in.Header.Get(linearEventHeader)
	if typ == "" {
		typ, _ = v.stringField("type")
	}
	return Verified{ID: in.Header.Get(linearDeliveryHeader), Type: typ}, nil
}

// linearParseMillis reads a non-negative integral JSON number. The parser
// gives numbers in canonical form, so 1.7e12 and 1700000000000.0 arrive as
// plain digits too; fractions, negatives and huge exponents do not.
func linearParseMillis(f jsonValue) (int64, bool) {
	if f.kind != kindNumber || f.text == "" || len(f.text) > linearMaxTimestampDigits {
		return 0, false
	}
	for i := 0; i < len(f.text); i++ {
		if !isDigit(f.text[i]) {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(f.text, 10, 64)
	return ms, err == nil
}

// linearCheckTimestamp is checkTimestamp for milliseconds: @linear/sdk
// compares in milliseconds, both directions.
func linearCheckTimestamp(ms int64, now time.Time, tolerance time.Duration) error {
	age := now.Sub(time.UnixMilli(ms))
	switch {
	case age > tolerance:
		return skewed(age, tolerance, "%w: %s older than the %v tolerance", ErrUnauthorized, linearTimestampField, tolerance)
	case age < -tolerance:
		return skewed(age, tolerance, "%w: %s further in the future than the %v tolerance", ErrUnauthorized, linearTimestampField, tolerance)
	}
	return nil
}
