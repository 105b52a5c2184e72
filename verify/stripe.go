package verify

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// stripeSignatureHeader carries Stripe's timestamp and signatures.
const stripeSignatureHeader = "Stripe-Signature"

// stripeVolatile lists the top-level fields of a Stripe event that change
// between redeliveries of the same event (pending_webhooks counts the
// endpoints still to be notified, so a resend carries a smaller number than
// the first delivery).
func stripeVolatile() []string { return []string{"pending_webhooks"} }

// Volatile: see stripeVolatile.
func (*stripeScheme) Volatile() []string { return stripeVolatile() }

// stripeAPIKeyPrefixes start Stripe's API keys (secret, restricted,
// publishable), which are not webhook signing secrets: configured by
// mistake, every signature would fail.
var stripeAPIKeyPrefixes = []string{"sk_", "rk_", "pk_"}

// decodeStripeSecret is the key of a Stripe signing secret: its raw bytes. An
// API key is refused; the error names its kind, never the secret.
func decodeStripeSecret(s string) ([]byte, error) {
	for _, p := range stripeAPIKeyPrefixes {
		if strings.HasPrefix(s, p) {
			return nil, fmt.Errorf("this is a Stripe API key (%s…), not a webhook signing secret: "+
				"expected the endpoint's signing secret, whsec_…, shown with the endpoint in the Dashboard or by `stripe listen`", p)
		}
	}
	return []byte(s), nil
}

// stripeScheme verifies Stripe: "Stripe-Signature: t=<unix>,v1=<hex>[,v1=…]"
// where each v1 is hex(HMAC-SHA256(secret, "{t}.{body}")). The key is the
// whole "whsec_…" string, not decoded (stripe-go webhook.ComputeSignature).
type stripeScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var _ Scheme = (*stripeScheme)(nil)

// Verify checks the timestamp and the v1 signatures; the event id and type
// are the body's top-level "id" and "type" strings.
func (s *stripeScheme) Verify(in Input, now time.Time) (Verified, error) {
	if err := checkTimestampedPairs(in, stripeSignatureHeader, s.keys, now, s.tolerance); err != nil {
		return Verified{}, err
	}
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body unparseable: %w", ErrBadRequest, err)
	}
	id, ok := v.stringField("id")
	if !ok || id == "" {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body has no string \"id\"", ErrBadRequest)
	}
	typ, _ := v.stringField("type")
	return Verified{ID: id, Type: typ}, nil
}

// parseStripeHeader reads "t=…,v1=…,…": exactly one t (unix seconds) and at
// least one well-formed v1 (64 hex digits; at most maxSignatures are kept).
// Like stripe-go it ignores v0 and unknown keys, skips malformed v1 values
// and refuses a pair without '='.
func parseStripeHeader(header string) (int64, []signature, error) {
	var (
		ts     int64
		seenTS bool
		sigs   []signature
	)
	for pair := range strings.SplitSeq(header, ",") {
		key, value, ok := strings.Cut(pair, "=")
		if !ok {
			return 0, nil, errors.New("malformed pair, expected key=value")
		}
		switch key {
		case "t":
			if seenTS {
				return 0, nil, errors.New("more than one t=")
			}
			seenTS = true
			if ts, ok = parseUnixSeconds(value); !ok {
				return 0, nil, errors.New("malformed t= timestamp")
			}
		case "v1":
			var sig signature
			if len(sigs) == maxSignatures || len(value) != hex.EncodedLen(len(sig)) {
				continue
			}
			if _, err := hex.Decode(sig[:], []byte(value)); err != nil {
				continue
			}
			sigs = append(sigs, sig)
		}
	}
	if !seenTS {
		return 0, nil, errors.New("no t= timestamp")
	}
	if len(sigs) == 0 {
		return 0, nil, errNoSignature
	}
	return ts, sigs, nil
}

// checkTimestampedPairs verifies a header of Stripe's shape
// ("t=<unix seconds>,v1=<hex>[,v1=…]", also Calendly's): present, bounded,
// its timestamp within tolerance of now in either direction (stripe-go
// refuses only stale ones; a timestamp from the future is as suspect), and
// some v1 the HMAC-SHA256 of "{t}.{body}" under some key.
func checkTimestampedPairs(in Input, name string, keys [][]byte, now time.Time, tolerance time.Duration) error {
	header := in.Header.Get(name)
	if header == "" {
		return missingHeader(name)
	}
	if err := checkHeaderLen(name, header); err != nil {
		return err
	}
	ts, sigs, err := parseStripeHeader(header)
	if err != nil {
		return refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, name, err)
	}
	if err := checkTimestamp(ts, now, tolerance); err != nil {
		return err
	}
	if !anyKeyMatches(keys, sigs, []byte(strconv.FormatInt(ts, 10)+"."), in.Body) {
		return refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	return nil
}
