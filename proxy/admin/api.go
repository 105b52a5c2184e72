package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/fields"
	"github.com/whguard/whguard/journal"
)

// Inspector is the part of the journal the admin API reads and replays.
type Inspector interface {
	List(ctx context.Context, f journal.Filter) ([]journal.Summary, int64, error)
	Get(ctx context.Context, id int64) (*journal.Detail, error)
	Conflicts(ctx context.Context, id int64) ([]journal.ConflictCopy, error)
	Replay(ctx context.Context, id int64, reason string) error
	Skip(ctx context.Context, id int64, reason string) error
	BulkReplay(ctx context.Context, f journal.Filter, reason string) (int, error)
	CountReplayable(ctx context.Context, f journal.Filter) (int, error)
	RetryNow(ctx context.Context, id int64, reason string) error
	BulkRetryNow(ctx context.Context, f journal.Filter, reason string) (int, error)
	CountRetryable(ctx context.Context, f journal.Filter) (int, error)
}

var _ Inspector = (*journal.Postgres)(nil)

// APIConfig configures the admin API.
type APIConfig struct {
	Store Inspector
	// OnReplay, when set, is called after a replay moved events back to
	// retry, or a retry now made events due (the forwarder's wake-up).
	OnReplay func()
	// Logger receives the audit log of replays; nil means none.
	Logger *zap.Logger
	// RedactHeaders adds header names to DefaultRedactedHeaders, whose
	// values the API never shows (WHGUARD_REDACT_HEADERS).
	RedactHeaders []string
	// Providers are the configured provider names: a lookup by the
	// provider's event id searches them through the journal's unique key.
	Providers []string
	// Backends, when set, serves /api/backends (list, pause, resume).
	Backends BackendControl
	// Overview, when set, serves GET /api/overview.
	Overview OverviewSource
	// Origins are the configured backends' origins (scheme://host:port):
	// a pause must name one of them, or a provider, unless forced.
	Origins []string
	// Schemes maps each configured provider to its signature scheme: an
	// event journaled under another one (or under none) is shown as
	// forwarded without a provider signature.
	Schemes map[string]string
	// Catchup, when set, serves /api/catchup (status, and a pass now).
	Catchup CatchupControl
	// Refusals, when set, lists this replica's refused requests at GET
	// /api/refusals (else the list is empty).
	Refusals RefusalSource
}

// Validate checks the settings, returning one fields.Error per bad one:
// each of RedactHeaders must be a header name.
func (c APIConfig) Validate() error {
	var errs []error
	for i, name := range c.RedactHeaders {
		if !fields.HeaderName(name) {
			errs = append(errs, &fields.Error{Field: "RedactHeaders", Index: i,
				Err: fmt.Errorf("%q is not a header name (%s)", name, fields.HeaderNameHint)})
		}
	}
	return errors.Join(errs...)
}

// NewAPI serves the admin API's /api/ routes (docs/inspecting.md, "Inspecting and
// replaying"). Mount it behind the bearer check (NewAdmin does).
func NewAPI(cfg APIConfig) http.Handler {
	a := &api{store: cfg.Store, onReplay: cfg.OnReplay, log: cfg.Logger, redact: newRedactor(cfg.RedactHeaders), providers: cfg.Providers,
		control: cfg.Backends, overviewSrc: cfg.Overview, schemes: cfg.Schemes, origins: cfg.Origins, catchup: cfg.Catchup,
		refusalSrc: cfg.Refusals}
	if a.onReplay == nil {
		a.onReplay = func() {}
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/events", a.list)
	mux.HandleFunc("GET /api/events/{id}", a.show)
	mux.HandleFunc("GET /api/events/{id}/conflicts", a.conflicts)
	mux.HandleFunc("POST /api/events/{id}/replay", a.replayOne)
	mux.HandleFunc("POST /api/events/{id}/skip", a.skipOne)
	mux.HandleFunc("POST /api/replay", a.replayBulk)
	mux.HandleFunc("POST /api/events/{id}/retry", a.retryOne)
	mux.HandleFunc("POST /api/retry", a.retryBulk)
	mux.HandleFunc("GET /api/overview", a.overview)
	mux.HandleFunc("GET /api/backends", a.backends)
	mux.HandleFunc("POST /api/backends/pause", a.pause)
	mux.HandleFunc("POST /api/backends/resume", a.resume)
	mux.HandleFunc("GET /api/catchup", a.catchupStatus)
	mux.HandleFunc("POST /api/catchup/{provider}", a.catchupRun)
	mux.HandleFunc("GET /api/refusals", a.refusals)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such API route"})
	})
	return mux
}

type api struct {
	store     Inspector
	onReplay  func()
	log       *zap.Logger
	redact    redactor
	providers []string
	control   BackendControl
	// overviewSrc serves GET /api/overview (overview.go).
	overviewSrc OverviewSource
	schemes     map[string]string
	origins     []string
	catchup     CatchupControl
	refusalSrc  RefusalSource
}

var validStatus = map[journal.Status]bool{
	"": true, journal.StatusPending: true, journal.StatusProcessing: true,
	journal.StatusDone: true, journal.StatusRetry: true, journal.StatusDead: true, journal.StatusIgnored: true,
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := queryFilter(q).filter(a.providers)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if f.Limit, err = intParam(q.Get("limit"), 1, 500); err != nil {
		apiError(w, http.StatusBadRequest, "limit must be an integer from 1 to 500")
		return
	}
	before, err := intParam(q.Get("before"), 1, 1<<62)
	if err != nil {
		apiError(w, http.StatusBadRequest, "before must be an event id")
		return
	}
	f.Before = int64(before)
	events, next, err := a.store.List(r.Context(), f)
	if err == nil && len(events) == 0 && f.Providers != nil && f.Before == 0 {
		// Not among the configured providers: perhaps one removed since.
		f.Providers = nil
		events, next, err = a.store.List(r.Context(), f)
	}
	if err != nil {
		a.unavailable(w, err)
		return
	}
	if events == nil {
		events = []journal.Summary{}
	}
	resp := struct {
		Events []journal.Summary `json:"events"`
		Next   *int64            `json:"next"`
	}{Events: events}
	if next != 0 {
		resp.Next = &next
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *api) show(w http.ResponseWriter, r *http.Request) {
	id, ok := a.resolve(w, r)
	if !ok {
		return
	}
	d, err := a.store.Get(r.Context(), id)
	if !a.found(w, err) {
		return
	}
	a.showTimeline(d)
	d.Headers = a.redact.headers(d.Headers)
	d.ReceivedHeaders = a.redact.headers(d.ReceivedHeaders)
	a.redactDetail(d)
	writeJSON(w, http.StatusOK, struct {
		*journal.Detail
		// Unsigned says why whguard does not sign this event for the
		// backend, when it does not ("" when it signs or forwards the
		// provider's signature as usual).
		Unsigned string `json:"unsigned,omitempty"`
	}{d, unsignedReason(d.Scheme, a.schemes[d.Provider])})
}

// showTimeline fills in the headers each attempt of d sent, rebuilt from
// its journaled headers (before they are redacted) and what the attempt
// recorded of signing, credentials redacted. An event whose payload
// retention dropped shows whguard's own headers and the signature only.
func (a *api) showTimeline(d *journal.Detail) {
	for i, e := range d.Timeline {
		if e.Kind == journal.TimelineAttempt {
			sent := forwarder.SentHeaders(d.Headers, d.Provider, d.EventID, d.ID, e.Number, e.Sent)
			d.Timeline[i].Headers = a.redact.headers(sent)
		}
	}
}

// unsignedReason says why an event journaled under scheme is forwarded
// without a provider signature while its provider uses current, or ""
// (the rule is forwarder.Target's).
func unsignedReason(scheme, current string) string {
	switch {
	case scheme == "none":
		return "journaled unverified (scheme none): forwarded without a provider signature"
	case scheme != "" && current != "" && scheme != current:
		return "verified under scheme " + scheme + ", while the provider now uses " + current + ": forwarded without a provider signature"
	}
	return ""
}

func (a *api) conflicts(w http.ResponseWriter, r *http.Request) {
	id, ok := a.resolve(w, r)
	if !ok {
		return
	}
	cs, err := a.store.Conflicts(r.Context(), id)
	if !a.found(w, err) {
		return
	}
	for i := range cs {
		cs[i].Headers = a.redact.headers(cs[i].Headers)
	}
	if len(cs) > 0 && !a.copiesShowable(w, r, id, cs) {
		return
	}
	if cs == nil {
		cs = []journal.ConflictCopy{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "conflicts": cs})
}

// resolve reads the {id} of a path: the journal's row id (a positive
// integer), or the provider's event id (evt_…, a webhook-id, a delivery
// GUID). With ?provider=, {id} is always the provider's event id of that
// provider; with ?row=true always a row id. An event id that several
// providers used, or a number that is both a row id and another event's
// id, answers 409 saying which parameter to add.
func (a *api) resolve(w http.ResponseWriter, r *http.Request) (int64, bool) {
	q := r.URL.Query()
	raw, provider := r.PathValue("id"), q.Get("provider")
	if raw == "" || len(raw) > 512 || !cleanText(raw) || !cleanText(provider) {
		apiError(w, http.StatusBadRequest, "event id must be a positive integer or a provider's event id")
		return 0, false
	}
	rowID, err := strconv.ParseInt(raw, 10, 64)
	isRow := err == nil && rowID > 0 && provider == ""
	if isRow && q.Get("row") == "true" {
		return rowID, true
	}
	evs, err := a.byEventID(r.Context(), raw, provider)
	if err != nil {
		a.unavailable(w, err)
		return 0, false
	}
	switch {
	case len(evs) > 1:
		apiError(w, http.StatusConflict, "several providers have an event with this id: add ?provider=")
		return 0, false
	case isRow && len(evs) == 1 && evs[0].ID != rowID:
		apiError(w, http.StatusConflict, "this number is both a row id and the event id of another event: add ?row=true for the row, or ?provider= for the event")
		return 0, false
	case isRow:
		return rowID, true
	case len(evs) == 0:
		apiError(w, http.StatusNotFound, "no such event")
		return 0, false
	}
	return evs[0].ID, true
}

// byEventID finds the events with a provider's event id (at most two: one
// more than an unambiguous answer needs), among the configured providers
// first (through the unique key), then among all, for events of providers
// removed since (those waiting as held are what an operator looks for).
func (a *api) byEventID(ctx context.Context, id, provider string) ([]journal.Summary, error) {
	f := journal.Filter{EventID: id, Provider: provider, Providers: a.providers, Limit: 2}
	evs, _, err := a.store.List(ctx, f)
	if err == nil && len(evs) == 0 && provider == "" && len(a.providers) > 0 {
		f.Providers = nil
		evs, _, err = a.store.List(ctx, f)
	}
	return evs, err
}

type replayRequest struct {
	Reason string `json:"reason"`
	filterFields
	Limit  int  `json:"limit"`
	DryRun bool `json:"dry_run"`
}

// eventAction is an audited action on one event ({id}, with a reason in
// the body): replay or skip.
type eventAction struct {
	run func(ctx context.Context, id int64, reason string) error
	// refused is the store's error for an event not in a state for it,
	// answered 409 with refusedMsg.
	refused    error
	refusedMsg string
	// logMsg is the audit log line; status the answer's "status".
	logMsg, status string
}

func (a *api) actOn(w http.ResponseWriter, r *http.Request, act eventAction) {
	id, ok := a.resolve(w, r)
	if !ok {
		return
	}
	req, ok := readAction(w, r, true)
	if !ok {
		return
	}
	err := act.run(r.Context(), id, req.Reason)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		apiError(w, http.StatusNotFound, "no such event")
		return
	case errors.Is(err, act.refused):
		apiError(w, http.StatusConflict, act.refusedMsg)
		return
	case err != nil:
		a.unavailable(w, err)
		return
	}
	a.log.Info(act.logMsg, zap.Int64("id", id), zap.String("reason", req.Reason))
	a.onReplay() // the event (or the events behind it) are ready
	writeJSON(w, http.StatusOK, map[string]any{"status": act.status, "id": id})
}

func (a *api) replayOne(w http.ResponseWriter, r *http.Request) {
	a.actOn(w, r, eventAction{run: a.store.Replay, refused: journal.ErrNotReplayable,
		refusedMsg: "only dead, done or ignored events can be replayed; one waiting for its next attempt can be retried now (POST /api/events/{id}/retry)",
		logMsg:     "event replayed", status: "replayed"})
}

// skipOne releases the order key a dead event holds (ORDER_ON_DEAD=block),
// so the events of its key behind it go on; the event stays dead.
func (a *api) skipOne(w http.ResponseWriter, r *http.Request) {
	a.actOn(w, r, eventAction{run: a.store.Skip, refused: journal.ErrNotSkippable,
		refusedMsg: "only a dead event that still holds its order key can be skipped",
		logMsg:     "event skipped: its order key is released", status: "skipped"})
}

func (a *api) replayBulk(w http.ResponseWriter, r *http.Request) {
	req, ok := readAction(w, r, true)
	if !ok {
		return
	}
	f, err := req.filter(a.providers)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if f.Status == "" {
		f.Status = journal.StatusDead
	}
	if f.Status != journal.StatusDead && f.Status != journal.StatusDone && f.Status != journal.StatusIgnored {
		apiError(w, http.StatusBadRequest, "status must be dead, done or ignored")
		return
	}
	a.runBulk(w, r, req, f, bulkAction{count: a.store.CountReplayable, run: a.store.BulkReplay,
		name: "bulk replay", done: "replayed", would: "would_replay"})
}

// readAction reads the body of an action on events (replay, skip, retry;
// one or in bulk). With needReason the reason is required unless it is a
// dry run (the action is audited with it); without, an empty body is
// taken as {}.
func readAction(w http.ResponseWriter, r *http.Request, needReason bool) (replayRequest, bool) {
	var req replayRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && (needReason || !errors.Is(err, io.EOF)) {
		apiError(w, http.StatusBadRequest, "body must be JSON like {\"reason\":\"…\"}")
		return req, false
	}
	if needReason && req.Reason == "" && !req.DryRun {
		apiError(w, http.StatusBadRequest, "reason is required: replays are audited")
		return req, false
	}
	if len(req.Reason) > 1000 {
		apiError(w, http.StatusBadRequest, "reason is limited to 1000 bytes")
		return req, false
	}
	if !cleanText(req.Reason) {
		apiError(w, http.StatusBadRequest, "reason must be UTF-8 text without control characters")
		return req, false
	}
	return req, true
}

// cleanText reports text the journal can store and a person can read:
// valid UTF-8 without NUL or other control characters but tab. (PostgreSQL
// refuses NUL in text; such input is the caller's mistake, a 400, not a
// journal outage.)
func cleanText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func intParam(s string, lo, hi int) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, errors.New("out of range")
	}
	return n, nil
}
