package admin

import (
	"net/http"

	"github.com/whguard/whguard/proxy"
)

// RefusalSource lists the refused requests this replica kept, newest
// first (a *proxy.Refusals).
type RefusalSource interface {
	List(provider, reason string) []proxy.Refusal
}

var _ RefusalSource = (*proxy.Refusals)(nil)

// maxRefusalFilter bounds a filter value: provider names and reason codes
// are short.
const maxRefusalFilter = 200

// refusals serves GET /api/refusals: the refused requests this replica
// kept, newest first, of ?provider= and with ?reason= when given. They
// hold no header value, secret or body (proxy.Refusal), so nothing here
// is redacted.
func (a *api) refusals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	provider, reason := q.Get("provider"), q.Get("reason")
	if len(provider) > maxRefusalFilter || len(reason) > maxRefusalFilter {
		apiError(w, http.StatusBadRequest, "provider and reason are names of at most 200 bytes")
		return
	}
	list := []proxy.Refusal{}
	if a.refusalSrc != nil {
		list = a.refusalSrc.List(provider, reason)
	}
	writeJSON(w, http.StatusOK, map[string]any{"refusals": list})
}
