package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

// BackendControl lists the backends and pauses or resumes deliveries (the
// forwarder, through a small adapter in cmd/whguard).
type BackendControl interface {
	// Backends returns the listing GET /api/backends shows.
	Backends(ctx context.Context) (forwarder.Backends, error)
	Pause(ctx context.Context, p journal.Pause) (journal.Pause, error)
	Resume(ctx context.Context, kind, name, reason string) (bool, error)
}

// pauseRequest is the body of POST /api/backends/pause and /resume: one
// of backend (an origin, scheme://host:port) or provider, and a reason.
type pauseRequest struct {
	Backend  string `json:"backend"`
	Provider string `json:"provider"`
	Reason   string `json:"reason"`
	// Force pauses a target that matches nothing configured (a backend
	// or provider about to be added).
	Force bool `json:"force"`
}

func (a *api) backends(w http.ResponseWriter, r *http.Request) {
	if a.control == nil {
		apiError(w, http.StatusNotFound, "no forwarder in this process")
		return
	}
	out, err := a.control.Backends(r.Context())
	if err != nil {
		a.unavailable(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// readPause reads a pause or resume request: exactly one target, and a
// reason (pauses are audited like replays).
func (a *api) readPause(w http.ResponseWriter, r *http.Request) (req pauseRequest, kind, name string, ok bool) {
	if a.control == nil {
		apiError(w, http.StatusNotFound, "no forwarder in this process")
		return req, "", "", false
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, `body must be JSON like {"backend":"http://app:3000","reason":"…"} or {"provider":"stripe","reason":"…"}`)
		return req, "", "", false
	}
	switch {
	case (req.Backend == "") == (req.Provider == ""):
		apiError(w, http.StatusBadRequest, "name exactly one of backend (scheme://host:port) or provider")
		return req, "", "", false
	case req.Reason == "":
		apiError(w, http.StatusBadRequest, "reason is required: pauses are audited")
		return req, "", "", false
	case len(req.Reason) > 1000 || len(req.Backend) > 1000 || len(req.Provider) > 1000:
		apiError(w, http.StatusBadRequest, "backend, provider and reason are limited to 1000 bytes")
		return req, "", "", false
	}
	for _, v := range []string{req.Backend, req.Provider, req.Reason} {
		if !cleanText(v) {
			apiError(w, http.StatusBadRequest, "backend, provider and reason must be UTF-8 text without control characters")
			return req, "", "", false
		}
	}
	if req.Backend != "" {
		return req, journal.PauseBackend, req.Backend, true
	}
	return req, journal.PauseProvider, req.Provider, true
}

// pause holds the deliveries of a configured backend or provider (or,
// forced, of one not configured yet).
func (a *api) pause(w http.ResponseWriter, r *http.Request) {
	req, kind, name, ok := a.readPause(w, r)
	if !ok {
		return
	}
	reason := req.Reason
	// A pause that names nothing configured would hold nothing while
	// saying "paused": refused, naming what is there, unless forced.
	target := resolvePauseTarget(kind, name, a.configured(kind))
	switch {
	case !target.configured && !req.Force:
		a.notConfigured(w, kind, target, true)
		return
	case target.noScheme:
		apiError(w, http.StatusBadRequest, fmt.Sprintf("backend %q has no scheme: a forced pause names the origin as scheme://host:port, or it would match no backend", target.name))
		return
	}
	p, err := a.control.Pause(r.Context(), journal.Pause{Kind: kind, Name: target.name, Reason: reason})
	if err != nil {
		a.unavailable(w, err)
		return
	}
	a.log.Info("deliveries paused", zap.String(kind, target.name), zap.String("reason", reason), zap.Bool("forced", !target.configured))
	writeJSON(w, http.StatusOK, map[string]any{"status": "paused", "pause": p})
}

// notConfigured answers 404 for a target that matches nothing
// configured, naming what is configured. For a resume (pausing false),
// nothing of that name is paused either.
func (a *api) notConfigured(w http.ResponseWriter, kind string, target pauseTarget, pausing bool) {
	known := a.configured(kind)
	what, state := "backend", "configured"
	if kind == journal.PauseProvider {
		what = "provider"
	}
	if !pausing {
		state = "configured or paused"
	}
	list := strings.Join(known, ", ")
	if len(known) == 0 {
		list = "none"
	}
	hint := ""
	switch {
	case target.noScheme:
		hint = "; name a backend as scheme://host:port, or as host:port when one origin has them"
	case pausing:
		hint = "; \"force\":true (the CLI's -force) pauses it anyway"
	}
	writeJSON(w, http.StatusNotFound, map[string]any{
		"error":      fmt.Sprintf("no %s %q is %s; configured: %s%s", what, target.name, state, list, hint),
		"configured": known,
	})
}

// configured lists the backends' origins, or the providers' names, of
// this configuration.
func (a *api) configured(kind string) []string {
	if kind == journal.PauseProvider {
		return a.providers
	}
	return a.origins
}

// resume ends a pause. The target is resolved as a pause's is; one that
// matches nothing configured still ends a pause stored under that name (a
// forced one, or one of a backend removed since), and answers 404 only
// when there is none.
func (a *api) resume(w http.ResponseWriter, r *http.Request) {
	req, kind, name, ok := a.readPause(w, r)
	if !ok {
		return
	}
	reason := req.Reason
	target := resolvePauseTarget(kind, name, a.configured(kind))
	found, err := a.control.Resume(r.Context(), kind, target.name, reason)
	if err != nil {
		a.unavailable(w, err)
		return
	}
	if !found && !target.configured {
		a.notConfigured(w, kind, target, false)
		return
	}
	a.log.Info("deliveries resumed", zap.String(kind, target.name), zap.String("reason", reason), zap.Bool("was_paused", found))
	status := "resumed"
	if !found {
		status = "not paused"
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": status, "kind": kind, "name": target.name})
}
