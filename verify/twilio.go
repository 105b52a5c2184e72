package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Twilio's webhook headers (Twilio docs, "Webhooks security": "Validating
// signatures from Twilio"; twilio-go client.RequestValidator).
const (
	twilioSignatureHeader = "X-Twilio-Signature"
	// twilioIdempotencyHeader is taken as Twilio's stable event id, but it
	// is unconfirmed: no Twilio page found (docs search, late 2026) documents
	// it; so it is used when present, and Check falls back to the digest of
	// the sorted form parameters otherwise.
	twilioIdempotencyHeader = "I-Twilio-Idempotency-Token"
	// twilioBodyHashParam carries the hex SHA-256 of a JSON body in the
	// query; only the URL is then signed.
	twilioBodyHashParam = "bodySHA256"
)

// twilioSignature is one decoded HMAC-SHA1 value.
type twilioSignature [sha1.Size]byte

// twilioScheme verifies Twilio: "X-Twilio-Signature: <base64>" where the
// base64 is HMAC-SHA1(auth token, URL + the POST parameters), the token used
// as raw bytes:
//
//   - URL is the configured public URL plus "?" and the received query
//     string, if any;
//   - without a bodySHA256 query parameter the body is a form post: its
//     parameters, sorted by name, are appended as name+value with no
//     delimiters. A name given several times contributes one name+value per
//     value, values sorted, as twilio-python (compute_signature) and
//     twilio-node (toFormUrlEncodedParam, after twilio-node#722) do to match
//     Twilio's servers. twilio-go signs only the first value of a repeated
//     name, which would leave later values unsigned: not followed;
//   - with bodySHA256 (JSON bodies) only the URL is signed, and the body's
//     hex SHA-256 must equal bodySHA256 (twilio-go ValidateBody).
//
// Like every official SDK, the URL is tried both with and without the
// default port (:443 for https, :80 for http), since Twilio's signing is
// inconsistent about it. twilio-go also strips a non-default port; that
// would accept a signature made for another endpoint (port) of the same
// host, so it is not done. Twilio signs no timestamp, so replays are bounded
// only by deduplication.
type twilioScheme struct {
	keys [][]byte
	// urls holds the configured public URL verbatim, then the same URL
	// with the default port added or removed when it has no port or the
	// default one.
	urls []string
}

var _ Scheme = (*twilioScheme)(nil)

func newTwilioScheme(cfg ProviderConfig) (Scheme, error) {
	keys, kerr := secretKeys(cfg.Secrets, rawSecret)
	urls, uerr := twilioURLVariants(cfg.PublicURL)
	if err := errors.Join(kerr, uerr); err != nil {
		return nil, err
	}
	return &twilioScheme{keys: keys, urls: urls}, nil
}

// twilioURLVariants checks the public URL (absolute http or https, a host,
// no credentials, query or fragment: the received query string is appended
// to it) and returns it with its default-port twin. The twin is made by
// editing the text, never by re-serializing the URL, so that the configured
// spelling (which Twilio signs) is kept. Errors do not quote the URL.
func twilioURLVariants(raw string) ([]string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fieldErrorf(FieldPublicURL, "public URL is not a valid URL; expected http(s)://host[:port]/path")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fieldErrorf(FieldPublicURL, "public URL must be an absolute http or https URL, http(s)://host[:port]/path")
	case u.Opaque != "" || u.Host == "":
		return nil, fieldErrorf(FieldPublicURL, "public URL must name a host, http(s)://host[:port]/path")
	case u.User != nil:
		return nil, fieldErrorf(FieldPublicURL, "public URL must not hold credentials")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fieldErrorf(FieldPublicURL, "public URL must not have a query (the received query string is appended)")
	case u.Fragment != "" || u.RawFragment != "" || strings.Contains(raw, "#"):
		return nil, fieldErrorf(FieldPublicURL, "public URL must not have a fragment")
	}
	// raw is scheme "://" authority path, the authority being u.Host.
	schemeEnd := strings.Index(raw, "://")
	if schemeEnd < 0 || !strings.HasPrefix(raw[schemeEnd+3:], u.Host) {
		return nil, fieldErrorf(FieldPublicURL, "public URL must be of the form http(s)://host[:port]/path")
	}
	prefix, path := raw[:schemeEnd+3], raw[schemeEnd+3+len(u.Host):]
	defaultPort := "443"
	if u.Scheme == "http" {
		defaultPort = "80"
	}
	urls := []string{raw}
	switch u.Port() {
	case "":
		if !strings.HasSuffix(u.Host, ":") { // "host:" has an empty port: leave it alone
			urls = append(urls, prefix+u.Host+":"+defaultPort+path)
		}
	case defaultPort:
		urls = append(urls, prefix+strings.TrimSuffix(u.Host, ":"+defaultPort)+path)
	}
	return urls, nil
}

// Verify checks the signature (and the body hash of a JSON body); the event
// id is I-Twilio-Idempotency-Token ("" when absent: Check then uses the
// digest). Twilio sends no event type.
func (s *twilioScheme) Verify(in Input, _ time.Time) (Verified, error) {
	header := in.Header.Get(twilioSignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(twilioSignatureHeader)
	}
	if err := checkHeaderLen(twilioSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	sig, ok := twilioDecodeSignature(header)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected the base64 of 20 bytes", ErrUnauthorized, twilioSignatureHeader)
	}

	// Like twilio-go, the first bodySHA256 value of the query decides the
	// mode (query parse errors are ignored there too: the whole query is
	// signed anyway).
	query, _ := url.ParseQuery(in.RawQuery)
	bodyHash := query.Get(twilioBodyHashParam)
	var params []byte
	if bodyHash == "" {
		var err error
		if params, err = twilioSortedParams(in.Body); err != nil {
			return Verified{}, err
		}
	}
	suffix := ""
	if in.RawQuery != "" {
		suffix = "?" + in.RawQuery
	}
	if !s.matches(sig, suffix, params) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	if bodyHash != "" {
		sum := sha256.Sum256(in.Body)
		// twilio-go compares with the lower-case hex, exactly.
		if !hmac.Equal(hex.AppendEncode(nil, sum[:]), []byte(bodyHash)) {
			return Verified{}, refusef(ReasonSignatureMismatch, "%w: body does not match the signed %s", ErrUnauthorized, twilioBodyHashParam)
		}
	}
	return Verified{ID: in.Header.Get(twilioIdempotencyHeader)}, nil
}

// matches tells whether HMAC-SHA1(key, url+suffix+params) equals sig for one
// of the URL variants and keys, comparing in constant time.
func (s *twilioScheme) matches(sig twilioSignature, suffix string, params []byte) bool {
	var sum twilioSignature
	for _, key := range s.keys {
		mac := hmac.New(sha1.New, key)
		for _, u := range s.urls {
			mac.Reset()
			mac.Write([]byte(u))
			mac.Write([]byte(suffix))
			mac.Write(params)
			if hmac.Equal(mac.Sum(sum[:0]), sig[:]) {
				return true
			}
		}
	}
	return false
}

// twilioSortedParams returns the form body's parameters as Twilio signs
// them: sorted by name (byte order, Twilio's "Unix-style case-sensitive
// sorting"), each value as name+value, a repeated name's values sorted. An
// unparseable form (bad escape, ';' separator) is refused with
// ErrBadRequest, as Digest refuses it.
func twilioSortedParams(body []byte) ([]byte, error) {
	if len(body) == 0 {
		return nil, nil // a GET webhook: the parameters are in the signed query
	}
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, refusef(ReasonMalformedBody, "%w: form body unparseable", ErrBadRequest)
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]byte, 0, len(body))
	for _, name := range names {
		vs := values[name]
		slices.Sort(vs)
		for _, v := range vs {
			out = append(append(out, name...), v...)
		}
	}
	return out, nil
}

// twilioDecodeSignature decodes a standard-alphabet, padded base64
// HMAC-SHA1 value (28 characters), refusing non-canonical encodings, so it
// accepts exactly the strings twilio-go's string comparison accepts.
func twilioDecodeSignature(value string) (twilioSignature, bool) {
	var sig twilioSignature
	if len(value) != base64.StdEncoding.EncodedLen(len(sig)) {
		return sig, false
	}
	// Decode needs room for DecodedLen (21) bytes.
	var buf [21]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(value))
	if err != nil || n != len(sig) {
		return sig, false
	}
	copy(sig[:], buf[:len(sig)])
	return sig, true
}
