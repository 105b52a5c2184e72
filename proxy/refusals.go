package proxy

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Refused requests, kept for people to see why (docs/inspecting.md,
// "Refused requests"): the last ones of this replica, in memory, each
// with its diagnosis. A record holds what the request was (method, path,
// header names, body length) and why it was refused, never a header
// value, a secret or the body.

// DefaultRefusalsKept is how many refused requests a replica keeps.
const DefaultRefusalsKept = 1000

// Reasons of refusals that verification did not decide (verify's reason
// codes name the others).
const (
	// RefusalNotFound: a POST to a path that routes to no provider (404).
	RefusalNotFound = "not_found"
	// RefusalTooLarge: a body over the path's limit (413).
	RefusalTooLarge = "too_large"
	// RefusalUnreadableBody: the body could not be read (400).
	RefusalUnreadableBody = "unreadable_body"
	// RefusalInvalidQuery: a query string that is not valid UTF-8 (400).
	RefusalInvalidQuery = "invalid_query"
	// RefusalJournalRefused: a verified event whose data the journal
	// refused (400).
	RefusalJournalRefused = "journal_refused"
)

// Bounds on one record: a refused request's path and header names are
// the sender's to choose.
const (
	maxRecordedHeaders    = 32
	maxRecordedHeaderName = 64
	maxRecordedMethod     = 16
)

// Refusal is one refused request, as GET /api/refusals shows it.
type Refusal struct {
	At       time.Time `json:"at"`
	Method   string    `json:"method"`
	Path     string    `json:"path"`
	Provider string    `json:"provider"`
	Status   int       `json:"status"`
	// Reason is a verify reason code (signature_mismatch, …) or one of the
	// Refusal* reasons above.
	Reason string `json:"reason"`
	// Diagnosis is a verify diagnosis code (wrong_path, …, none).
	Diagnosis string `json:"diagnosis"`
	// Detail is a sentence for people; never a value from the request.
	Detail string `json:"detail"`
	// BodyBytes is the body's length when it was read; else its declared
	// length (0 when none was declared), or for a body refused as too
	// large without one, the limit plus one.
	BodyBytes int64 `json:"body_bytes"`
	// Headers are the request's header names, canonical, sorted, at most
	// 32, never their values.
	Headers []string `json:"headers"`
}

// Refusals keeps the last refused requests of a replica in a ring of
// fixed size. It is safe for concurrent use; a nil *Refusals keeps
// nothing.
type Refusals struct {
	mu   sync.Mutex
	ring []Refusal
	next int // where the next record goes
	full bool
}

// NewRefusals returns a ring keeping the last n refusals (n ≤ 0:
// DefaultRefusalsKept).
func NewRefusals(n int) *Refusals {
	if n <= 0 {
		n = DefaultRefusalsKept
	}
	return &Refusals{ring: make([]Refusal, n)}
}

// add records one refusal, replacing the oldest when the ring is full.
func (r *Refusals) add(rec Refusal) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = rec
	r.next++
	if r.next == len(r.ring) {
		r.next, r.full = 0, true
	}
}

// List returns the kept refusals, newest first (by arrival), of provider
// and with reason when they are not "" (a copy: the caller may keep it).
func (r *Refusals) List(provider, reason string) []Refusal {
	out := []Refusal{}
	if r == nil {
		return out
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.ring)
	}
	for i := range n {
		rec := r.ring[(r.next-1-i+len(r.ring))%len(r.ring)]
		if (provider == "" || rec.Provider == provider) && (reason == "" || rec.Reason == reason) {
			out = append(out, rec) // Headers is never changed once recorded
		}
	}
	// A record is added once its diagnosis ran, after the answer: one
	// diagnosed at length may come after a later request's. Newest first
	// is by arrival.
	slices.SortStableFunc(out, func(a, b Refusal) int { return b.At.Compare(a.At) })
	return out
}

// headerNames returns h's names, sorted, bounded in number and length,
// each a copy, in a slice of its own: a name cut from a long one would
// keep the whole alive, and so would the names past the bound left in a
// shared backing array.
func headerNames(h http.Header) []string {
	all := make([]string, 0, len(h))
	for name := range h {
		all = append(all, name)
	}
	slices.Sort(all)
	names := make([]string, min(len(all), maxRecordedHeaders))
	for i := range names {
		// A header name is ASCII: cut anywhere.
		names[i] = strings.Clone(all[i][:min(len(all[i]), maxRecordedHeaderName)])
	}
	return names
}

// boundedMethod returns the method, cut to maxRecordedMethod bytes (a
// method is an ASCII token), in a copy: net/http cuts the method out of the
// request line, which the record would otherwise keep whole.
func boundedMethod(m string) string {
	return strings.Clone(m[:min(len(m), maxRecordedMethod)])
}

// recordedPath returns the path cut as a log line cuts it, in a copy: a
// path without escapes is a part of the request line, query included.
func recordedPath(path string) string {
	return strings.Clone(boundedPath(path))
}
