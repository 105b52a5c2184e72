package admin

import (
	"encoding/json"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"could not encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// found answers a failed read of one event (404 when there is no such
// event, else 503) and reports whether err was nil.
func (a *api) found(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, journal.ErrNotFound):
		apiError(w, http.StatusNotFound, "no such event")
	default:
		a.unavailable(w, err)
	}
	return false
}

func (a *api) unavailable(w http.ResponseWriter, err error) {
	if errors.Is(err, journal.ErrSearchTooSlow) {
		// Not the journal's fault: the search needs narrowing.
		apiError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	a.log.Warn("admin API: journal error", zap.Error(err))
	apiError(w, http.StatusServiceUnavailable, "journal unavailable")
}

func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
