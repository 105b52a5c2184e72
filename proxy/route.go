package proxy

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/verify"
)

// Route is one configured provider on one path.
type Route struct {
	// Path is the exact ingress path (WHGUARD_<NAME>_PATH).
	Path string
	// ForwardPath is where the backend's handler of these events lives
	// when it is not Path (WHGUARD_<NAME>_FORWARD_PATH). With pass-through
	// no spelling of it (nor of Path) is passed on: only deliveries reach
	// it.
	ForwardPath string
	// Provider verifies and keys the requests on Path.
	Provider Checker
	// AppPaths are more paths, as pass-through requests spell them, that
	// reach this provider's webhook handler at the app: its delivery path
	// seen from the pass-through's target when the provider has a backend
	// URL of its own on the same app under another base path. Guarded
	// like Path and ForwardPath.
	AppPaths []string
	// MaxBodyBytes bounds the body (WHGUARD_<NAME>_MAX_BODY_BYTES); 0
	// means the IngressConfig's.
	MaxBodyBytes int64
	// BodyGuard takes the same signed body under a fresh event id as a
	// replay of the first event, not a new one (for providers whose event
	// id is not signed; WHGUARD_<NAME>_BODY_GUARD): it is acknowledged like
	// a duplicate, recorded on the first event, and never forwarded.
	BodyGuard bool
	// Order says where the provider's events carry their order key; the
	// zero value orders nothing.
	Order OrderKey
	// Sync puts the route in sync mode (WHGUARD_<NAME>_MODE=sync): a new
	// event's sender waits up to SyncTimeout, counted from the request's
	// arrival, for the backend's 2xx answer to its first attempt, and gets
	// it instead of the 202; its duplicates get the stored answer too.
	Sync bool
	// SyncTimeout is the sync-mode wait (WHGUARD_<NAME>_SYNC_TIMEOUT);
	// 0 means DefaultSyncTimeout. It must be 0 on an async route.
	SyncTimeout time.Duration
	// EventTypes is the provider's event-type filter
	// (WHGUARD_<NAME>_EVENT_TYPES): patterns with * wildcards, matched as
	// journal.TypeMatches does. A new event whose type matches none is
	// acknowledged as usual but journaled as ignored, never forwarded
	// unless replayed. An event without a type is never ignored: whguard
	// cannot tell what it is, and holding back what may be wanted is
	// worse than delivering one more event. Empty: nothing is ignored.
	EventTypes []string
	// CatchupAsked: catch-up asks this provider to redeliver what it
	// missed (GitHub); an event whose redelivery it asked for is
	// journaled as catch-up's.
	CatchupAsked bool
}

// ignores reports whether the route's filter leaves out an event of type
// typ (decided once, as the event arrives: changing the filter later does
// not touch events already journaled).
func (r Route) ignores(typ string) bool {
	if len(r.EventTypes) == 0 || typ == "" {
		return false
	}
	for _, p := range r.EventTypes {
		if journal.TypeMatches(p, typ) {
			return false
		}
	}
	return true
}

// route finds the request's provider, or answers: another path goes to
// the app with pass-through (unless it is a spelling of a webhook path),
// else 404; a method the provider does not take (POST, and GET for a
// GET handshake) is 405.
func (in *Ingress) route(w http.ResponseWriter, r *http.Request, start time.Time) (Route, bool) {
	route, ok := in.routes[r.URL.Path]
	if !ok && in.pass != nil && !in.guards.covers(r.URL.EscapedPath()) {
		in.pass.ServeHTTP(w, r) // not a webhook: the app's own traffic
		return route, false
	}
	if !ok {
		// The path says which sender is misconfigured (or who is probing).
		// With pass-through, another spelling of a webhook path (or of a
		// FORWARD_PATH) ends here too: the app's router might take it to
		// its webhook handler, unverified.
		in.reply(w, "", ResultNotFound, http.StatusNotFound, errorBody("no webhook provider on this path"), start,
			zap.String("path", boundedPath(r.URL.Path)))
		if r.Method == http.MethodPost {
			// Webhooks come by POST: other methods are browsers and
			// scanners, not senders worth explaining.
			in.explain(w, refused{r: r, status: http.StatusNotFound, reason: RefusalNotFound, start: start})
		}
		return route, false
	}
	if !route.Provider.Accepts(r.Method) {
		allow := http.MethodPost
		if route.Provider.Accepts(http.MethodGet) {
			allow = "GET, POST" // a GET handshake
		}
		w.Header().Set("Allow", allow)
		in.reply(w, route.Provider.Name(), ResultMethodNotAllowed, http.StatusMethodNotAllowed, errorBody("method not allowed: use POST"), start)
		return route, false
	}
	return route, true
}

// peersOf returns the routes' verify providers with their paths, sorted by
// path: what a refused request is diagnosed against.
func peersOf(routes []Route) []verify.Peer {
	var peers []verify.Peer
	for _, r := range routes {
		if p, ok := r.Provider.(*verify.Provider); ok {
			peers = append(peers, verify.Peer{Path: r.Path, Provider: p})
		}
	}
	slices.SortFunc(peers, func(a, b verify.Peer) int { return strings.Compare(a.Path, b.Path) })
	return peers
}
