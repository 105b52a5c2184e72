// Package verify checks webhook signatures and timestamps over the exact
// received bytes, and derives the event key and content hash that the
// journal deduplicates on (docs/ingress.md).
//
// A Provider bundles one configured sender: its scheme, its secrets
// (several during a rotation), its timestamp tolerance and how its event id
// is found. Provider.Check is the only call the ingress path needs.
package verify

import (
	"errors"
	"net/http"
	"time"
)

// Sentinel errors. Every error returned by Check wraps exactly one of them
// and carries a reason code (Reason: missing_header, signature_mismatch,
// …); the text after the sentinel is safe to show to the sender (it never
// names or echoes a secret or a signature value).
var (
	// ErrUnauthorized: bad signature, no configured secret matched,
	// malformed signature header, or a timestamp outside the tolerance. → 401
	ErrUnauthorized = errors.New("unauthorized")
	// ErrBadRequest: a required header is missing (id header, signature
	// header), or the body cannot be parsed where the key needs it. → 400
	ErrBadRequest = errors.New("bad request")
	// ErrForbidden: a sender handshake whose proof does not match (Meta's
	// verify token). → 403
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable: the keys that verify the request could not be
	// fetched from the provider's key host; the sender retries. → 503,
	// never an unverified 2xx.
	ErrUnavailable = errors.New("verification keys unavailable")
)

// Input is what a provider sees of one request.
type Input struct {
	// Header holds the received headers.
	Header http.Header
	// Body holds the exact received bytes.
	Body []byte
	// RawQuery is the received query string, without "?" (schemes that sign
	// the sender's URL append it to the configured public URL).
	RawQuery string
	// Method is the request's method; "" means POST. Only a handshake the
	// scheme declares (Provider.Accepts) comes with another.
	Method string
	// precheck marks Provider.Precheck's call (headers only, no body):
	// a scheme that would fetch keys checks only the headers' shape.
	precheck bool
}

// Event is what Check derives from a verified request.
type Event struct {
	// ID is the event id (docs/ingress.md): the ID header, else the
	// scheme's own id, else "sha256:" + hex digest of the canonical body.
	ID string
	// Type is the event type when the scheme exposes one ("" otherwise).
	Type string
	// ContentHash is "sha256:" + hex of the canonical content with the
	// scheme's volatile fields removed; used to tell duplicates from conflicts.
	ContentHash string
	// Handshake, when non-nil, marks a verified sender handshake (Zoom URL
	// validation, Slack url_verification, Discord PING): answer 200 with
	// these bytes at once, and never journal or forward the request.
	Handshake []byte
	// Reply, when non-nil, is the body to answer with 200 instead of the
	// 202 accepted body, for the new event and its duplicates alike (a
	// Discord interaction needs an interaction response).
	Reply []byte
	// AnswerType is the Content-Type of Handshake or Reply; "" means
	// application/json.
	AnswerType string
	// Note, set with a Handshake only, is a short line for the log about
	// what whguard did to answer it ("sns subscription confirmed: topic
	// arn:…"); it never holds a secret or a token.
	Note string
}

// Verified is what a scheme learns from a request it verified.
type Verified struct {
	// ID is the scheme's own event id ("" when it has none).
	ID string
	// Type is the event type ("" when unknown).
	Type string
	// Handshake and Reply are copied to Event; see there.
	Handshake  []byte
	Reply      []byte
	AnswerType string
	// Note is copied to Event with a Handshake; see there.
	Note string
}

// Scheme verifies one signature scheme. Implementations are safe for
// concurrent use.
type Scheme interface {
	// Verify checks the request's signature (and timestamp where the scheme
	// has one) against every secret and returns what it learned: the
	// scheme's own event id and type, and any handshake or reply.
	Verify(in Input, now time.Time) (Verified, error)
}
