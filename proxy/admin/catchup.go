package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/catchup"
	"github.com/whguard/whguard/journal"
)

// CatchupControl shows and runs catch-up (a *catchup.Catchup).
type CatchupControl interface {
	Status(ctx context.Context) ([]catchup.Status, error)
	Run(ctx context.Context, provider string, since time.Duration, dryRun bool) (journal.CatchupPass, error)
}

var _ CatchupControl = (*catchup.Catchup)(nil)

// catchupRequest is the optional body of POST /api/catchup/{provider}.
type catchupRequest struct {
	// Since replaces the window for this pass (a duration: "2h").
	Since  string `json:"since"`
	DryRun bool   `json:"dry_run"`
}

// catchupResult is what one pass did.
type catchupResult struct {
	Listed              int    `json:"listed"`
	Missing             int    `json:"missing"`
	Journaled           int    `json:"journaled"`
	RedeliveryRequested int    `json:"redelivery_requested"`
	Error               string `json:"error"`
}

// catchupStatus serves GET /api/catchup.
func (a *api) catchupStatus(w http.ResponseWriter, r *http.Request) {
	if a.catchup == nil {
		writeJSON(w, http.StatusOK, map[string]any{"providers": []catchup.Status{}})
		return
	}
	st, err := a.catchup.Status(r.Context())
	if err != nil {
		a.unavailable(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"providers": st})
}

// catchupRun serves POST /api/catchup/{provider}: a pass now, answered
// when it ends (after waiting up to 30 s for one that runs: else 409).
func (a *api) catchupRun(w http.ResponseWriter, r *http.Request) {
	provider := r.PathValue("provider")
	if a.catchup == nil {
		apiError(w, http.StatusNotFound, "catch-up is off for every provider")
		return
	}
	var req catchupRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err != nil {
		apiError(w, http.StatusBadRequest, "could not read the body")
		return
	}
	if len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			apiError(w, http.StatusBadRequest, `body must be JSON like {"since":"2h","dry_run":true} (both optional)`)
			return
		}
	}
	var since time.Duration
	if req.Since != "" {
		since, err = time.ParseDuration(req.Since)
		if err != nil || since <= 0 {
			apiError(w, http.StatusBadRequest, `since must be a positive duration like "2h" or "90m"`)
			return
		}
	}
	p, err := a.catchup.Run(r.Context(), provider, since, req.DryRun)
	switch {
	case errors.Is(err, catchup.ErrUnknownProvider):
		apiError(w, http.StatusNotFound, fmt.Sprintf("catch-up is not on for provider %q", provider))
		return
	case errors.Is(err, catchup.ErrSinceTooFar):
		apiError(w, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, catchup.ErrBusy):
		apiError(w, http.StatusConflict, "a pass is already running")
		return
	case err != nil:
		a.unavailable(w, err)
		return
	}
	a.log.Info("catch-up run", zap.String("provider", provider), zap.Bool("dry_run", req.DryRun), zap.String("since", req.Since))
	writeJSON(w, http.StatusOK, catchupResult{Listed: p.Listed, Missing: p.Missing, Journaled: p.Journaled,
		RedeliveryRequested: p.RedeliveryRequested, Error: p.Error})
}
