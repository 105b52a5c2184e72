package verify

import (
	"hash"
	"net/http"
	"time"
)

// bodyHMACSpec describes a sender that signs the exact received body alone
// with an HMAC, and no timestamp (typeform, razorpay, vercel, bitbucket,
// atlassian, meta, sentry, paystack, twitter):
//
//	header: prefix + encode(HMAC-<hash>(secret, body))
//
// the secret used as raw bytes, the encoding hex (either case) or standard
// padded base64. Exactly one signature per header; during a rotation every
// configured secret is tried. With no timestamp signed, a captured request
// can be replayed at any time: only deduplication bounds it, and nothing
// needs re-signing on delivery (ResignNotNeeded).
type bodyHMACSpec struct {
	header  string
	prefix  string
	newHash func() hash.Hash
	base64  bool
	// event derives the id and type of a request whose signature verified
	// ("" for either when the sender has none: Check then uses the body
	// digest, or the body's top-level "type"). An error refuses the
	// request; it wraps ErrBadRequest and carries a reason.
	event func(in Input) (id, typ string, err error)
}

// bodyHMACScheme is the Scheme of a bodyHMACSpec. The MAC itself is checked
// by the generic hmac scheme's code, configured with the template {body}
// and no timestamp, so the two cannot drift apart.
type bodyHMACScheme struct {
	mac   hmacScheme
	event func(in Input) (id, typ string, err error)
}

var _ Scheme = (*bodyHMACScheme)(nil)

// build returns the registry constructor of the scheme: the secrets are
// raw (each non-empty), there is no tolerance to take.
func (spec bodyHMACSpec) build(cfg ProviderConfig, _ time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &bodyHMACScheme{
		mac: hmacScheme{keys: keys, newHash: spec.newHash, size: spec.newHash().Size(), base64: spec.base64,
			prefix: spec.prefix, sigHeader: spec.header, template: []hmacSegment{{part: hmacPartBody}}},
		event: spec.event,
	}, nil
}

// Verify checks the signature header (required, bounded in length, one
// well-formed signature) against every configured secret, then derives the
// event's id and type.
func (s *bodyHMACScheme) Verify(in Input, now time.Time) (Verified, error) {
	if _, err := s.mac.Verify(in, now); err != nil {
		return Verified{}, err
	}
	id, typ, err := s.event(in)
	if err != nil {
		return Verified{}, err
	}
	return Verified{ID: id, Type: typ}, nil
}

// jsonObject parses body and returns it when it is a JSON object (ok false
// otherwise: not JSON, another kind of value, a duplicate key, too deep).
func jsonObject(body []byte) (jsonValue, bool) {
	v, err := parseJSON(body)
	if err != nil || v.kind != kindObject {
		return jsonValue{}, false
	}
	return v, true
}

// bodyFields returns an event func reading the id and the type from the
// body's top-level string members idKey and typeKey ("" skips one): both
// are covered by the signature.
func bodyFields(idKey, typeKey string) func(Input) (string, string, error) {
	return func(in Input) (id, typ string, err error) {
		v, ok := jsonObject(in.Body)
		if !ok {
			return "", "", nil // Check digests (or refuses) what is not a JSON object
		}
		if idKey != "" {
			id, _ = v.stringField(idKey)
		}
		if typeKey != "" {
			typ, _ = v.stringField(typeKey)
		}
		return id, typ, nil
	}
}

// firstHeader returns the first of names present in h ("" if none).
func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}
