package forwarder

import (
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/whguard/whguard/journal"
)

// The headers of a delivery request: the journaled ones that go on, the
// provider's signature as the target signs it, and whguard's own. What a
// request sent is kept in the journal as only what signing changed
// (journal.HeaderDelta); SentHeaders rebuilds the rest.

// hopHeaders are dropped before forwarding (RFC 9110 7.6.1), with the
// headers the transport sets itself.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Content-Length", "Host", "Accept-Encoding",
	// A journaled "Expect: 100-continue" would make every delivery wait
	// for an interim answer the body no longer needs.
	"Expect",
}

// dropped is hopHeaders as a set of canonical names.
var dropped = func() map[string]bool {
	m := make(map[string]bool, len(hopHeaders))
	for _, h := range hopHeaders {
		m[textproto.CanonicalMIMEHeaderKey(h)] = true
	}
	return m
}()

// ownHeaderCount is how many headers setOwnHeaders sets.
const ownHeaderCount = 5

// forwardedHeaders copies the journaled headers that go on, in one pass:
// the hop-by-hop ones, those the Connection header names, and whguard's
// own (a sender cannot spoof them) stay behind. The values share one
// backing array, as Header.Clone's do, with room for extra more, returned
// as sv. (A clone followed by a deletion per hop-by-hop name canonicalised
// each name again for every delivery.)
func forwardedHeaders(stored http.Header, extra int) (h http.Header, sv []string) {
	named := connectionNamed(stored)
	nv := extra
	for _, vs := range stored {
		nv += len(vs)
	}
	sv = make([]string, nv)
	h = make(http.Header, len(stored)+extra)
	for name, vs := range stored {
		if !goesOn(name, named) {
			continue
		}
		n := copy(sv, vs)
		h[name], sv = sv[:n:n], sv[n:]
	}
	return h, sv
}

// connectionNamed is the set of (canonical) names the Connection header
// lists, nil when none.
func connectionNamed(h http.Header) map[string]bool {
	var named map[string]bool
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[textproto.CanonicalMIMEHeaderKey(name)] = true
			}
		}
	}
	return named
}

// goesOn reports whether a journaled header is forwarded.
func goesOn(name string, named map[string]bool) bool {
	c := textproto.CanonicalMIMEHeaderKey(name)
	return !dropped[c] && !named[c] && !strings.HasPrefix(c, "X-Whguard-")
}

// setOwnHeaders sets whguard's headers, a pure function of the event and
// the attempt, with the ownHeaderCount values of sv. The names are
// canonical already: set without canonicalising them.
func setOwnHeaders(h http.Header, sv []string, provider, eventID string, id int64, attempt int) {
	sv = sv[:ownHeaderCount:ownHeaderCount]
	sv[0], sv[1], sv[2] = IdempotencyKey(provider, eventID), strconv.FormatInt(id, 10), eventID
	sv[3], sv[4] = strconv.Itoa(attempt), provider
	h[HeaderIdempotencyKey], h[HeaderEventID], h[HeaderSourceEventID] = sv[0:1:1], sv[1:2:2], sv[2:3:3]
	h[HeaderAttempt], h[HeaderProvider] = sv[3:4:4], sv[4:5:5]
}

// signingDelta is how signing changed h, the journaled headers that go
// on: the headers it set or changed, and those it removed.
func signingDelta(stored, h http.Header) journal.HeaderDelta {
	var d journal.HeaderDelta
	for name, vs := range h {
		if old, ok := stored[name]; !ok || !slices.Equal(old, vs) {
			if d.Set == nil {
				d.Set = http.Header{}
			}
			d.Set[name] = slices.Clone(vs)
		}
	}
	named := connectionNamed(stored)
	for name := range stored {
		if _, ok := h[name]; !ok && goesOn(name, named) {
			d.Del = append(d.Del, name)
		}
	}
	slices.Sort(d.Del)
	return d
}

// traceDelta adds to d what injecting the attempt's trace context changed
// in h under the names traced (tracing.Propagator.Inject's: the received
// traceparent and tracestate, or another format's headers, replaced or
// removed), so SentHeaders shows what the backend got. Without traces h
// keeps them.
func traceDelta(d journal.HeaderDelta, stored, h http.Header, traced []string) journal.HeaderDelta {
	for _, name := range traced {
		vs, ok := h[name]
		switch old, had := stored[name]; {
		case ok && !slices.Equal(old, vs):
			if d.Set == nil {
				d.Set = http.Header{}
			}
			d.Set[name] = slices.Clone(vs)
		case !ok && had && !slices.Contains(d.Del, name):
			d.Del = append(d.Del, name)
			slices.Sort(d.Del)
		}
	}
	return d
}

// SentHeaders are the headers attempt number attempt of event id (its
// provider's event id eventID) sent, rebuilt from its journaled headers
// and what signing changed in them (journal.Attempt.Sent), as
// BuildRequest made them. Hop-by-hop headers the transport sets (Host,
// Content-Length) are not among them.
func SentHeaders(stored http.Header, provider, eventID string, id int64, attempt int, sent journal.HeaderDelta) http.Header {
	h, sv := forwardedHeaders(stored, ownHeaderCount)
	for _, name := range sent.Del {
		delete(h, name)
	}
	for name, vs := range sent.Set {
		h[name] = vs
	}
	setOwnHeaders(h, sv, provider, eventID, id, attempt)
	return h
}
