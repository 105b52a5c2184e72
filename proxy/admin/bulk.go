package admin

import (
	"context"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

// bulkAction is an action on every event a filter matches (replay, retry
// now): count says how many a dry run would touch, run does it.
type bulkAction struct {
	count func(context.Context, journal.Filter) (int, error)
	run   func(context.Context, journal.Filter, string) (int, error)
	// name is the action in the log; done and would the answer's fields.
	name, done, would string
}

// runBulk runs (or, with dry_run, counts) b over f, at most req.Limit
// events (0: all), and answers: what it
// did, a 422 when one step of the walk could not be narrowed by an index
// in time (not the journal's fault; what was done stays done), a 503 when
// the journal failed part way.
func (a *api) runBulk(w http.ResponseWriter, r *http.Request, req replayRequest, f journal.Filter, b bulkAction) {
	if req.Limit < 0 {
		apiError(w, http.StatusBadRequest, "limit must not be negative")
		return
	}
	f.Limit = req.Limit
	if req.DryRun {
		n, err := b.count(r.Context(), f)
		if err != nil {
			a.unavailable(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{b.would: n})
		return
	}
	n, err := b.run(r.Context(), f, req.Reason)
	if n > 0 {
		a.onReplay()
	}
	switch {
	case errors.Is(err, journal.ErrSearchTooSlow):
		a.log.Info(b.name+" stopped: its filters need narrowing", zap.Int(b.done, n))
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": err.Error(), b.done: n})
		return
	case err != nil:
		a.log.Warn(b.name+" stopped", zap.Int(b.done, n), zap.Error(err))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "journal unavailable; " + b.name + " stopped", b.done: n})
		return
	}
	a.log.Info(b.name, zap.Int(b.done, n), zap.String("status", string(f.Status)),
		zap.String("provider", f.Provider), zap.String("type", req.Type), zap.Strings("match", req.Match), zap.String("reason", req.Reason))
	writeJSON(w, http.StatusOK, map[string]any{b.done: n})
}
