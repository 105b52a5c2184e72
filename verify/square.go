package verify

import (
	"encoding/base64"
	"errors"
	"net/url"
	"time"
)

// squareSignatureHeader carries Square's HMAC-SHA256 signature (Square
// developer docs, "Validate webhook notifications"; square-go-sdk
// VerifySignature). The legacy HMAC-SHA1 x-square-signature header is not
// accepted.
const squareSignatureHeader = "X-Square-Hmacsha256-Signature"

// squareScheme verifies Square: "x-square-hmacsha256-signature:
// base64(HMAC-SHA256(signature key, notification URL + body))". The
// signature key is used as raw bytes (square-go-sdk's test vector only
// verifies that way). Square signs no timestamp, so replays are bounded only
// by deduplication.
type squareScheme struct {
	keys [][]byte
	// publicURL is the notification URL exactly as configured in the Square
	// subscription (WHGUARD_<NAME>_PUBLIC_URL): Square signs that string
	// byte for byte, so it is used verbatim, never re-serialized.
	publicURL string
}

var _ Scheme = (*squareScheme)(nil)

func newSquareScheme(cfg ProviderConfig) (Scheme, error) {
	keys, kerr := secretKeys(cfg.Secrets, rawSecret)
	if err := errors.Join(kerr, checkSquarePublicURL(cfg.PublicURL)); err != nil {
		return nil, err
	}
	return &squareScheme{keys: keys, publicURL: cfg.PublicURL}, nil
}

// checkSquarePublicURL requires an absolute http(s) URL with a host and
// without query or fragment (the received query string is appended to
// it). The error does not quote the URL.
func checkSquarePublicURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fieldErrorf(FieldPublicURL, "public URL is not a valid URL; expected http(s)://host[:port]/path")
	case u.Scheme != "http" && u.Scheme != "https":
		return fieldErrorf(FieldPublicURL, "public URL must be an absolute http or https URL, http(s)://host[:port]/path")
	case u.Host == "" || u.Opaque != "":
		return fieldErrorf(FieldPublicURL, "public URL must name a host, http(s)://host[:port]/path")
	case u.RawQuery != "" || u.ForceQuery:
		return fieldErrorf(FieldPublicURL, "public URL must not have a query (the received query string is appended)")
	case u.Fragment != "" || u.RawFragment != "":
		return fieldErrorf(FieldPublicURL, "public URL must not have a fragment")
	}
	return nil
}

// Verify checks the signature over the notification URL (plus "?" and the
// received query, if any) and the body; the event id is the body's
// "event_id" and the type its "type" ("" when absent: Check then keys the
// event by its content digest).
func (s *squareScheme) Verify(in Input, _ time.Time) (Verified, error) {
	header := in.Header.Get(squareSignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(squareSignatureHeader)
	}
	if err := checkHeaderLen(squareSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	sig, ok := squareDecodeSignature(header)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected the base64 of 32 bytes", ErrUnauthorized, squareSignatureHeader)
	}
	notificationURL := s.publicURL
	if in.RawQuery != "" {
		notificationURL += "?" + in.RawQuery
	}
	if !anyKeyMatches(s.keys, []signature{sig}, []byte(notificationURL), in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, nil
	}
	id, _ := v.stringField("event_id")
	typ, _ := v.stringField("type")
	return Verified{ID: id, Type: typ}, nil
}

// squareDecodeSignature decodes a standard-alphabet, padded base64
// HMAC-SHA256 value (44 characters) without allocating.
func squareDecodeSignature(value string) (signature, bool) {
	var sig signature
	if len(value) != base64.StdEncoding.EncodedLen(len(sig)) {
		return sig, false
	}
	// Decode needs room for DecodedLen (33) bytes.
	var buf [33]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(value))
	if err != nil || n != len(sig) {
		return sig, false
	}
	copy(sig[:], buf[:32])
	return sig, true
}
