package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SchemeHubSpot is HubSpot's webhooks, checked by their v3 signature.
const SchemeHubSpot = "hubspot"

// HubSpot's v3 request signature (HubSpot developer docs, "Validating
// requests":
// https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation;
// hubspot-api-python hubspot/utils/signature.py).
const (
	hubspotSignatureHeader = "X-HubSpot-Signature-v3"
	hubspotTimestampHeader = "X-HubSpot-Request-Timestamp"
	// hubspotDecoded are the characters whose percent-escapes HubSpot's
	// docs have the receiver decode in the URI before signing (%3A %2F %3F
	// %40 %21 %24 %27 %28 %29 %2A %2C %3B). The list was read through
	// copies of that page (the SDKs take the URI as given and decode
	// nothing); hex digits are matched in either case, as RFC 3986 makes
	// them equivalent.
	hubspotDecoded = ":/?@!$'()*,;"
)

// HubSpot's docs: reject a timestamp older than 5 minutes; hubspot-api-python
// checks 300 s in the past only. whguard bounds both directions with the
// usual 5 minutes (defaultTol).

// hubspotScheme verifies HubSpot's v3 signature:
//
//	X-HubSpot-Signature-v3: base64(HMAC-SHA256(client secret, METHOD + URI + body + timestamp))
//
// where the timestamp is X-HubSpot-Request-Timestamp (unix milliseconds) as
// received, and URI is the full URL HubSpot posted to: the configured public
// URL plus "?" and the received query, if any, with the escapes of
// hubspotDecoded decoded. The v1 and v2 signatures HubSpot sends alongside
// (X-HubSpot-Signature, X-HubSpot-Signature-Version) sign no time and are
// never accepted, even when v3 is missing. The body is a JSON array of up to
// 100 events with no id for the whole request, so Check keys it by its
// digest.
type hubspotScheme struct {
	keys      [][]byte
	tolerance time.Duration
	// publicURL is the target URL set in the HubSpot app, without query
	// (WHGUARD_<NAME>_PUBLIC_URL), used verbatim.
	publicURL string
}

var (
	_ Scheme   = (*hubspotScheme)(nil)
	_ resigner = (*hubspotScheme)(nil)
)

// newHubSpotScheme builds the hubspot scheme from the configured client
// secrets and public URL (absolute http(s), without query or fragment).
func newHubSpotScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, kerr := secretKeys(cfg.Secrets, rawSecret)
	if err := errors.Join(kerr, checkSquarePublicURL(cfg.PublicURL)); err != nil {
		return nil, err
	}
	return &hubspotScheme{keys: keys, tolerance: tolerance, publicURL: cfg.PublicURL}, nil
}

// Verify checks the v3 headers, the timestamp (±tolerance) and the
// signature, and only then reads the body: the type is the first event's
// "subscriptionType" (contact.creation, …). Events of one request may be of
// several types; the first stands for the request.
func (s *hubspotScheme) Verify(in Input, now time.Time) (Verified, error) {
	header := in.Header.Get(hubspotSignatureHeader)
	if header == "" {
		return Verified{}, refusef(ReasonMissingHeader, "%w: missing %s header (v1 and v2 signatures sign no time and are not accepted)",
			ErrBadRequest, hubspotSignatureHeader)
	}
	ts := in.Header.Get(hubspotTimestampHeader)
	if ts == "" {
		return Verified{}, missingHeader(hubspotTimestampHeader)
	}
	if err := checkHeaderLen(hubspotSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	ms, ok := parseUnixMillis(ts)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: malformed %s header, expected unix milliseconds", ErrUnauthorized, hubspotTimestampHeader)
	}
	if err := checkTimestampAt(time.UnixMilli(ms), now, s.tolerance); err != nil {
		return Verified{}, err
	}
	sig, ok := squareDecodeSignature(header)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected the base64 of 32 bytes", ErrUnauthorized, hubspotSignatureHeader)
	}
	method := in.Method
	if method == "" {
		method = http.MethodPost
	}
	uri := s.publicURL
	if in.RawQuery != "" {
		uri += "?" + in.RawQuery
	}
	if !hubspotMatches(s.keys, sig, method+hubspotDecodeURI(uri), in.Body, ts) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}

	v, err := parseJSON(in.Body)
	if err != nil || v.kind != kindArray || len(v.elems) == 0 {
		return Verified{}, nil // Check digests (or refuses) the body
	}
	typ, _ := v.elems[0].stringField("subscriptionType")
	return Verified{Type: typ}, nil
}

// hubspotMatches tells whether HMAC-SHA256(key, prefix+body+ts) equals sig
// for one of the keys, comparing in constant time.
func hubspotMatches(keys [][]byte, sig signature, prefix string, body []byte, ts string) bool {
	var sum signature
	for _, key := range keys {
		if hmac.Equal(hubspotMAC(sum[:0], key, prefix, body, ts), sig[:]) {
			return true
		}
	}
	return false
}

// hubspotMAC appends HMAC-SHA256(key, prefix+body+ts) to dst.
func hubspotMAC(dst, key []byte, prefix string, body []byte, ts string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(prefix))
	mac.Write(body)
	mac.Write([]byte(ts))
	return mac.Sum(dst)
}

// hubspotDecodeURI decodes the percent-escapes of hubspotDecoded in u and
// leaves every other byte, other escapes included, as it is.
func hubspotDecodeURI(u string) string {
	if !strings.Contains(u, "%") {
		return u
	}
	var b strings.Builder
	b.Grow(len(u))
	for i := 0; i < len(u); i++ {
		if u[i] == '%' && i+2 < len(u) {
			hi, lo := hubspotUnhex(u[i+1]), hubspotUnhex(u[i+2])
			if hi >= 0 && lo >= 0 && strings.IndexByte(hubspotDecoded, byte(hi<<4|lo)) >= 0 {
				b.WriteByte(byte(hi<<4 | lo))
				i += 2
				continue
			}
		}
		b.WriteByte(u[i])
	}
	return b.String()
}

// hubspotUnhex is the value of a hex digit, or -1.
func hubspotUnhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// resign writes a new X-HubSpot-Request-Timestamp (unix milliseconds) and
// the v3 signature of POST + the public URL + body + that timestamp under
// the current secret. resign sees the headers and body only, not the query
// HubSpot posted to, so the URI signed is the public URL alone: a backend
// checking the forwarded signature must validate against the public URL
// (WHGUARD_<NAME>_PUBLIC_URL, without query), not against the URL it was
// called at. The legacy v1/v2 headers pass as received.
func (s *hubspotScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := strconv.FormatInt(at.UnixMilli(), 10)
	sum := hubspotMAC(nil, s.keys[0], http.MethodPost+hubspotDecodeURI(s.publicURL), body, ts)
	h.Set(hubspotTimestampHeader, ts)
	h.Set(hubspotSignatureHeader, base64.StdEncoding.EncodeToString(sum))
}

// unsign removes the signature header resign writes.
func (s *hubspotScheme) unsign(h http.Header) { h.Del(hubspotSignatureHeader) }

// Volatile: HubSpot counts each item's redeliveries in attemptNumber
// (developers.hubspot.com/docs/api/webhooks, "Retries"); a batch has no id,
// so without this each retry would be keyed as a new event.
func (*hubspotScheme) Volatile() []string { return []string{"[].attemptNumber"} }
