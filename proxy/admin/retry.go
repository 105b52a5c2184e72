package admin

import (
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

// Retry now (docs/inspecting.md): an event waiting for its next attempt
// made due at once, keeping its budget; one by {id}, or the events in
// retry matching the filters of POST /api/replay. The reason is optional
// (a retry changes nothing but when), audited when given.

// retryOne is POST /api/events/{id}/retry.
func (a *api) retryOne(w http.ResponseWriter, r *http.Request) {
	id, ok := a.resolve(w, r)
	if !ok {
		return
	}
	req, ok := readAction(w, r, false)
	if !ok {
		return
	}
	err := a.store.RetryNow(r.Context(), id, req.Reason)
	var nr *journal.NotRetryable
	switch {
	case errors.Is(err, journal.ErrNotFound):
		apiError(w, http.StatusNotFound, "no such event")
		return
	case errors.As(err, &nr):
		body := map[string]any{"error": retryRefusal(nr), "status": nr.Status}
		if nr.WaitingFor != 0 {
			body["waiting_for"] = nr.WaitingFor
		}
		writeJSON(w, http.StatusConflict, body)
		return
	case err != nil:
		a.unavailable(w, err)
		return
	}
	a.log.Info("event retried now", zap.Int64("id", id), zap.String("reason", req.Reason))
	a.onReplay() // due now: wake the fetcher
	writeJSON(w, http.StatusOK, map[string]any{"status": "due", "id": id})
}

// retryRefusal says, in a sentence for the 409, why an event was not made
// due and what to do instead.
func retryRefusal(nr *journal.NotRetryable) string {
	switch {
	case nr.WaitingFor != 0:
		return fmt.Sprintf("event %d waits for its turn: event %d holds its order key (it goes once that one is done, or dead and skipped)", nr.ID, nr.WaitingFor)
	case nr.Status == journal.StatusProcessing:
		return fmt.Sprintf("event %d is processing: it is being delivered now", nr.ID)
	case nr.Status == journal.StatusDone:
		return fmt.Sprintf("event %d is done: it was delivered; replay it to deliver it again", nr.ID)
	case nr.Status == journal.StatusDead:
		return fmt.Sprintf("event %d is dead: replay it (a fresh budget of attempts)", nr.ID)
	case nr.Status == journal.StatusIgnored:
		return fmt.Sprintf("event %d is ignored (its provider's event types leave it out): replay it to deliver it", nr.ID)
	}
	return nr.Error()
}

// retryBulk is POST /api/retry: the events in retry matching the filters
// made due, or with dry_run counted.
func (a *api) retryBulk(w http.ResponseWriter, r *http.Request) {
	req, ok := readAction(w, r, false)
	if !ok {
		return
	}
	f, err := req.filter(a.providers)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if f.Status != "" && f.Status != journal.StatusRetry {
		apiError(w, http.StatusBadRequest, "status must be retry: retry now takes the events waiting in retry (replay the dead, done or ignored ones)")
		return
	}
	f.Status = journal.StatusRetry
	a.runBulk(w, r, req, f, bulkAction{count: a.store.CountRetryable, run: a.store.BulkRetryNow,
		name: "bulk retry now", done: "retried", would: "would_retry"})
}
