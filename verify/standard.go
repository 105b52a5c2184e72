package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// standardSecretPrefix starts Standard Webhooks and Svix secrets.
const standardSecretPrefix = "whsec_"

// standardHeaders names the three headers of one Standard Webhooks style
// request.
type standardHeaders struct {
	id, timestamp, signature string
	// keys are the three names in canonical form, the keys of an
	// http.Header: reading them directly spares Header.Get canonicalizing
	// (and allocating) each name on every request and every re-signing.
	keys [3]string
}

// newStandardHeaders names a set of headers as the scheme's documents
// write them (the form refusals quote).
func newStandardHeaders(id, timestamp, signature string) standardHeaders {
	return standardHeaders{id: id, timestamp: timestamp, signature: signature, keys: [3]string{
		http.CanonicalHeaderKey(id), http.CanonicalHeaderKey(timestamp), http.CanonicalHeaderKey(signature)}}
}

// get returns the first value of h's header set.keys[i].
func (set standardHeaders) get(h http.Header, i int) string {
	if v := h[set.keys[i]]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// standardScheme verifies Standard Webhooks (https://www.standardwebhooks.com)
// and Svix, which signs the same way under svix-* header names:
// base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")) listed as "v1,<sig>"
// in a space-separated signature header.
type standardScheme struct {
	// macs holds HMAC states keyed with the decoded secrets, in order;
	// signing with those re-signing signs with (signingKeys).
	macs, signing []*macPool
	tolerance     time.Duration
	// headerSets lists the header names to read, preferred first: Svix's
	// own library falls back to the webhook-* names when the svix-* ones
	// are absent.
	headerSets []standardHeaders
}

var _ Scheme = (*standardScheme)(nil)

// newStandardScheme returns the standard scheme, or with svix set the Svix
// one, which reads the svix-* headers and falls back to the webhook-* ones.
func newStandardScheme(keys [][]byte, tolerance time.Duration, svix bool) *standardScheme {
	webhook := newStandardHeaders("webhook-id", "webhook-timestamp", "webhook-signature")
	s := &standardScheme{macs: newMACPools(keys), signing: newMACPools(signingKeys(keys)),
		tolerance: tolerance, headerSets: []standardHeaders{webhook}}
	if svix {
		s.headerSets = []standardHeaders{newStandardHeaders("svix-id", "svix-timestamp", "svix-signature"), webhook}
	}
	return s
}

// decodeStandardSecret turns a "whsec_<base64>" secret into its key. Like the
// official Go library it also takes a bare base64 secret without the prefix.
// The error never contains the secret.
func decodeStandardSecret(secret string) ([]byte, error) {
	const expected = "expected " + standardSecretPrefix + " followed by the base64 key, as the sender shows it, or the base64 key alone"
	rest, prefixed := strings.CutPrefix(secret, standardSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		where := ""
		var corrupt base64.CorruptInputError
		if errors.As(err, &corrupt) {
			where = fmt.Sprintf(" (bad byte at offset %d)", int64(corrupt)+int64(len(secret)-len(rest)))
		}
		if prefixed {
			return nil, fmt.Errorf("not base64 after the %q prefix%s; %s", standardSecretPrefix, where, expected)
		}
		return nil, fmt.Errorf("not base64%s; %s", where, expected)
	}
	if len(key) == 0 {
		return nil, errors.New("empty key after the " + strconv.Quote(standardSecretPrefix) + " prefix; " + expected)
	}
	return key, nil
}

// Verify checks the timestamp and the signatures; the event id is the id
// header and the type the body's top-level "type" string, if any.
func (s *standardScheme) Verify(in Input, now time.Time) (Verified, error) {
	names, id, ts, sig := s.readHeaders(in.Header)
	switch {
	case sig == "":
		return Verified{}, missingHeader(names.signature)
	case id == "":
		return Verified{}, missingHeader(names.id)
	case ts == "":
		return Verified{}, missingHeader(names.timestamp)
	}
	if err := checkHeaderLen(names.signature, sig); err != nil {
		return Verified{}, err
	}
	unix, ok := parseUnixSeconds(ts)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: malformed %s header", ErrUnauthorized, names.timestamp)
	}
	if err := checkTimestamp(unix, now, s.tolerance); err != nil {
		return Verified{}, err
	}
	sigs, err := parseStandardSignatures(sig)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, names.signature, err)
	}
	// The official libraries sign the timestamp as re-formatted from its
	// parsed value; so do we.
	prefix := id + "." + strconv.FormatInt(unix, 10) + "."
	if !anyMatches(s.macs, sigs, prefix, in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	// The type is the body's "type": Provider.Check reads it from the one
	// parse it makes anyway.
	return Verified{ID: id}, nil
}

// readHeaders picks the first header set present in full; failing that, the
// first set with any of its headers present (so the error names the
// missing one), else the preferred set.
func (s *standardScheme) readHeaders(h http.Header) (names standardHeaders, id, ts, sig string) {
	chosen := -1
	for i, set := range s.headerSets {
		id, ts, sig = set.get(h, 0), set.get(h, 1), set.get(h, 2)
		if id != "" && ts != "" && sig != "" {
			return set, id, ts, sig
		}
		if chosen < 0 && (id != "" || ts != "" || sig != "") {
			chosen = i
		}
	}
	set := s.headerSets[max(chosen, 0)]
	return set, set.get(h, 0), set.get(h, 1), set.get(h, 2)
}

// errNoSignature: a signature header held no usable signature.
var errNoSignature = errors.New("no well-formed v1 signature")

// parseStandardSignatures reads a space-separated list of "version,base64"
// entries and returns the decoded v1 ones (at most maxSignatures entries are
// looked at). Other versions (such as the asymmetric "v1a,") and malformed
// v1 entries are skipped; a list with no well-formed v1 entry is an error.
func parseStandardSignatures(header string) ([]signature, error) {
	var sigs []signature
	rest := header
	for seen := 0; rest != "" && seen < maxSignatures; {
		var entry string
		entry, rest, _ = strings.Cut(rest, " ")
		if entry == "" {
			continue // repeated spaces
		}
		seen++
		version, value, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		// A base64 HMAC-SHA256 is 44 characters with padding.
		if len(value) != base64.StdEncoding.EncodedLen(len(signature{})) {
			continue
		}
		// Decode needs room for DecodedLen (33) bytes: 44 characters
		// without padding would decode to 33.
		var buf [33]byte
		if n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(value)); err != nil || n != len(signature{}) {
			continue
		}
		sigs = append(sigs, signature(buf[:32]))
	}
	if len(sigs) == 0 {
		return nil, errNoSignature
	}
	return sigs, nil
}

// anyKeyMatches tells whether HMAC-SHA256(key, prefix+body) equals one of
// sigs for one of keys, comparing in constant time.
func anyKeyMatches(keys [][]byte, sigs []signature, prefix, body []byte) bool {
	var sum signature
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write(prefix)
		mac.Write(body)
		mac.Sum(sum[:0])
		for i := range sigs {
			if hmac.Equal(sum[:], sigs[i][:]) {
				return true
			}
		}
	}
	return false
}
