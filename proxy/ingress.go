// Package proxy is whguard's ingress: the handler that verifies webhooks,
// hands them to the intake and answers their senders (docs/ingress.md),
// the pass-through of the app's own traffic, and the listeners' bounds.
// The admin listener is proxy/admin.
package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/tracing"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/verify"
)

// Intake journals an event and hands it to delivery (a
// *forwarder.Intake): the ingress says what arrived, and answers what
// became of it.
type Intake interface {
	Accept(ctx context.Context, ev journal.Event, sync bool) (forwarder.Accepted, error)
}

var _ Intake = (*forwarder.Intake)(nil)

// ReplyReader reads the stored reply of a sync-mode event, for its
// duplicates (nil: none stored).
type ReplyReader interface {
	StoredReply(ctx context.Context, id int64) (*journal.Reply, error)
}

// Checker verifies a request and derives its event key (a *verify.Provider).
type Checker interface {
	Name() string
	// SchemeName is the provider's signature scheme, recorded with each
	// event as the scheme its content was verified with.
	SchemeName() string
	// Precheck refuses a request from its headers alone, before its body
	// is read (missing or malformed signature headers, a stale timestamp).
	Precheck(h http.Header, rawQuery, method string, now time.Time) error
	// Accepts tells whether requests of method may carry the provider's
	// webhooks or handshakes (POST always; GET for a GET handshake).
	Accepts(method string) bool
	Check(in verify.Input, now time.Time) (verify.Event, error)
	// Digest is the content hash Check would give body, for an event
	// that comes with no signature to check (catch-up's).
	Digest(h http.Header, body []byte) string
}

var _ Checker = (*verify.Provider)(nil)

// Ingress is the webhook receiving handler.
type Ingress struct {
	routes map[string]Route
	// peers are the routes' providers, by path: a refused request is
	// tried against them (explain).
	peers   []verify.Peer
	intake  Intake
	metrics *Metrics
	log     *zap.Logger
	now     func() time.Time
	timeout time.Duration
	budget  *bodyBudget
	pass    http.Handler
	guards  guardSet
	replies ReplyReader
	// receipts records what duplicates were answered (nil: nothing).
	receipts ReceiptRecorder
	// refusals keeps the refused requests (nil: none kept); gate rations
	// their diagnoses.
	refusals *Refusals
	gate     diagnosisGate
	// tracer makes a span of each request to a webhook path (nil: none).
	tracer trace.Tracer
	// propagator reads a sender's trace context (cfg.Propagator).
	propagator tracing.Propagator
	// public holds, per provider, how its last webhook reached whguard
	// (catchup.go); the map is built once, its values change.
	public map[string]*atomic.Pointer[publicFacts]
}

// NewIngress checks the configuration and builds the handler.
func NewIngress(cfg IngressConfig) (*Ingress, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	if cfg.Intake == nil {
		return nil, errors.New("ingress: no intake")
	}
	routes := make(map[string]Route, len(cfg.Routes))
	for _, r := range cfg.Routes {
		if r.Provider == nil {
			return nil, fmt.Errorf("ingress: route %q has no provider", r.Path)
		}
		routes[r.Path] = r
	}
	in := &Ingress{
		routes:     routes,
		intake:     cfg.Intake,
		metrics:    cfg.Metrics,
		log:        cfg.Logger,
		now:        cfg.Now,
		timeout:    cfg.CommitTimeout,
		budget:     newBodyBudget(cfg.MaxBufferedBytes),
		pass:       cfg.PassThrough,
		guards:     newGuardSet(cfg.Routes),
		replies:    cfg.Replies,
		refusals:   cfg.Refusals,
		peers:      peersOf(cfg.Routes),
		receipts:   cfg.Receipts,
		tracer:     cfg.Tracer,
		propagator: cfg.Propagator,
	}
	if in.log == nil {
		in.log = zap.NewNop()
	}
	if in.now == nil {
		in.now = time.Now
	}
	in.public = make(map[string]*atomic.Pointer[publicFacts], len(routes))
	for _, r := range routes {
		in.public[r.Provider.Name()] = new(atomic.Pointer[publicFacts])
	}
	return in, nil
}

// Results of ingress requests, the `result` label of
// whguard_ingress_requests_total.
const (
	ResultAccepted         = "accepted"
	ResultDuplicate        = "duplicate"
	ResultConflict         = "conflict"
	ResultReplay           = "replay"
	ResultUnauthorized     = "unauthorized"
	ResultTooLarge         = "too_large"
	ResultBadRequest       = "bad_request"
	ResultUnavailable      = "unavailable"
	ResultNotFound         = "not_found"
	ResultMethodNotAllowed = "method_not_allowed"
	ResultHandshake        = "handshake"
)

// acceptedReply is the 202 body. It is a pure function of the event, so a
// duplicate is answered with the very same bytes without storing them.
type acceptedReply struct {
	Status   string `json:"status"`
	Provider string `json:"provider"`
	EventID  string `json:"event_id"`
}

// ServeHTTP runs the ingress checks in order and stops at the first
// failure (docs/ingress.md, "The checks, in order"): route, method,
// signature headers, body, signature, event key, journal commit; then it
// answers what became of the event. Each step answers for itself when it
// stops the request.
func (in *Ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := in.now()
	if in.tracer != nil {
		if route, ok := in.routes[r.URL.Path]; ok {
			var end func()
			w, r, end = in.startSpan(w, r, route)
			defer end()
		}
	}
	route, ok := in.route(w, r, start)
	if !ok {
		return
	}
	name := route.Provider.Name()
	// Header checks come before the body is read: a request that can
	// never verify costs no buffering.
	if err := route.Provider.Precheck(r.Header, r.URL.RawQuery, r.Method, in.now()); err != nil {
		w.Header().Set("Connection", "close") // do not drain its body
		in.refuse(w, r, &route, err, nil, false, start)
		return
	}
	body, release, ok := in.readBody(w, r, route, start)
	if !ok {
		return
	}
	defer release()
	event, err := route.Provider.Check(verify.Input{Header: r.Header, Body: body, RawQuery: r.URL.RawQuery, Method: r.Method}, in.now())
	if err != nil {
		in.refuse(w, r, &route, err, body, true, start)
		return
	}
	noteEvent(w, event.ID, 0)
	if event.Handshake != nil {
		// A verified sender handshake: answered as the sender requires,
		// never journaled or forwarded.
		in.replyAs(w, name, ResultHandshake, http.StatusOK, event.Handshake, event.AnswerType, start)
		if event.Note != "" {
			in.log.Info(event.Note, zap.String("provider", name)) // e.g. an SNS subscription confirmed
		}
		return
	}
	headers, asReceived := withForwarded(r)
	in.notePublic(name, headers)
	ev := journal.Event{
		Provider:    name,
		EventID:     event.ID,
		EventType:   event.Type,
		ContentHash: event.ContentHash,
		Headers:     headers,
		AsReceived:  asReceived,
		Answer:      ackStatus(event),
		Body:        bytes.Clone(body), // kept: the journal and a delivery from memory hold it
		Path:        r.URL.Path,
		RawQuery:    r.URL.RawQuery,
		ReceivedAt:  start,
		BodyGuard:   route.BodyGuard,
		Ignored:     route.ignores(event.Type),
		OrderKey:    route.Order.Value(r.Header, body),
		OrderBlock:  route.Order.Block,
		Scheme:      route.Provider.SchemeName(),
		// Journaled as catch-up's when catch-up asked for it.
		CatchupAsked: route.CatchupAsked,
		TraceContext: traceContext(w),
	}
	sync := route.Sync && event.Reply == nil
	// The commit is bounded by its own deadline, not by the sender's
	// connection: the server ends the request's context when the sender
	// closes its side, which a sender that half-closes after its request
	// does while it still waits for the answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), in.timeout)
	defer cancel()
	acc, err := in.intake.Accept(ctx, ev, sync)
	if err != nil {
		in.log.Warn("journal commit failed", zap.String("provider", name), zap.String("event_id", event.ID), zap.Error(err))
		w.Header().Set("Retry-After", "5")
		in.reply(w, name, ResultUnavailable, http.StatusServiceUnavailable, errorBody("journal unavailable, retry later"), start)
		return
	}
	noteEvent(w, event.ID, acc.ID)
	if in.receipts == nil || (acc.Outcome != journal.Duplicate && !(acc.Outcome == journal.Inserted && sync)) {
		in.respond(ctx, w, route, event, ev.Ignored, sync, acc, start)
		if acc.Outcome == journal.Refused {
			in.explain(w, refused{r: r, provider: name, status: answers[journal.Refused].status, reason: RefusalJournalRefused, route: &route,
				body: body, read: true, start: start, detail: "verified, but the journal refused the event's data (nothing was written): resending it cannot succeed"})
		}
		return
	}
	// The answer is the receipt's: remember it, and record the receipt
	// once it is sent.
	aw := &answeredWriter{ResponseWriter: w}
	in.respond(ctx, aw, route, event, ev.Ignored, sync, acc, start)
	if rc, ok := receiptOf(acc.Outcome, acc.ID, start, aw.status, ev.Answer); ok {
		in.recordReceipt(w, name, rc)
	}
}

// ackStatus is the status a new event is acknowledged with: 202 with
// whguard's body, or 200 with the reply the sender requires.
func ackStatus(event verify.Event) int {
	if event.Reply != nil {
		return http.StatusOK
	}
	return http.StatusAccepted
}

// readBody reads the raw body within the route's limit and the budget of
// bodies in flight, or answers (413, 503, 400). release gives back its
// buffer and its share of the budget.
func (in *Ingress) readBody(w http.ResponseWriter, r *http.Request, route Route, start time.Time) (body []byte, release func(), ok bool) {
	name := route.Provider.Name()
	tooLarge := func() {
		// Do not let the server drain the rest of an oversize body.
		w.Header().Set("Connection", "close")
		in.reply(w, name, ResultTooLarge, http.StatusRequestEntityTooLarge,
			errorBody(fmt.Sprintf("body larger than %d bytes", route.MaxBodyBytes)), start)
		in.explain(w, refused{r: r, provider: name, status: http.StatusRequestEntityTooLarge, reason: RefusalTooLarge, route: &route, start: start,
			detail: fmt.Sprintf("the body is larger than the %d bytes this path takes (MAX_BODY_BYTES)", route.MaxBodyBytes)})
	}
	badRequest := func(reason, msg, detail string) {
		in.reply(w, name, ResultBadRequest, http.StatusBadRequest, errorBody(msg), start)
		in.explain(w, refused{r: r, provider: name, status: http.StatusBadRequest, reason: reason, route: &route, start: start, detail: detail})
	}
	if r.ContentLength > route.MaxBodyBytes {
		tooLarge()
		return nil, nil, false
	}
	reserve := route.MaxBodyBytes
	if r.ContentLength >= 0 {
		reserve = r.ContentLength
	}
	unreserve, ok := in.budget.reserve(reserve)
	if !ok {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		in.reply(w, name, ResultUnavailable, http.StatusServiceUnavailable,
			errorBody("too many request bodies in flight; retry shortly"), start)
		return nil, nil, false
	}
	body, buf, err := readLimited(r, route.MaxBodyBytes)
	release = func() { putBody(buf); unreserve() }
	switch {
	case errors.Is(err, errTooLarge):
		tooLarge()
	case err != nil:
		badRequest(RefusalUnreadableBody, "could not read the request body",
			"the body could not be read: the sender closed the connection, or sent a broken chunked body, before its end")
	case !utf8.ValidString(r.URL.RawQuery):
		// Stored as text and forwarded as received: an invalid query is
		// refused here rather than failing the commit it would share
		// with other requests.
		badRequest(RefusalInvalidQuery, "query string is not valid UTF-8", "the query string is not valid UTF-8")
	default:
		return body, release, true
	}
	release()
	return nil, nil, false
}

// answer is the sender's answer to what became of a verified event.
type answer struct {
	result string
	status int // 0: the acknowledgement's own (202 for a new event)
	error  string
}

// answers maps each journal outcome to the sender's answer: one table.
var answers = map[journal.Outcome]answer{
	journal.Inserted:  {result: ResultAccepted},
	journal.Duplicate: {result: ResultDuplicate, status: http.StatusOK},
	// Acknowledged like a duplicate (a 4xx would make a genuine sender
	// retry, and tells an attacker nothing more), recorded on the first
	// event, never forwarded.
	journal.Replayed: {result: ResultReplay, status: journal.CopyAnswer},
	journal.Conflict: {result: ResultConflict, status: journal.ConflictAnswer,
		error: "event id already received with different content; the first payload is kept"},
	// The journal refused this event's values (nothing was written):
	// resending the same request cannot succeed.
	journal.Refused: {result: ResultBadRequest, status: http.StatusBadRequest, error: "the journal refused this event's data"},
}

// respond answers a committed event: its acknowledgement (or, in sync
// mode, the backend's stored reply), or what the table says.
func (in *Ingress) respond(ctx context.Context, w http.ResponseWriter, route Route, event verify.Event, ignored, sync bool, acc forwarder.Accepted, start time.Time) {
	name := route.Provider.Name()
	ack, ackType := event.Reply, event.AnswerType
	if ack == nil {
		ackType = ""
		ack, _ = json.Marshal(acceptedReply{Status: "accepted", Provider: name, EventID: event.ID})
	}
	a := answers[acc.Outcome]
	switch acc.Outcome {
	case journal.Inserted:
		switch {
		case ignored:
			// Acknowledged like any new event (the sender must not retry
			// it); never forwarded.
			in.metrics.observeIgnored(name)
		case sync && acc.Reply == nil:
			// Not delivered from memory (no slot, or ordered behind its
			// key): its first attempt would not start at once, so its
			// sender gets the 202 now.
			in.metrics.observeSync(name, syncNotClaimed)
		case acc.Reply != nil:
			reply, outcome := in.awaitReply(acc.Reply, start.Add(route.SyncTimeout))
			in.metrics.observeSync(name, outcome)
			if outcome == syncReplied {
				in.replyStored(w, name, ResultAccepted, reply, start)
				return
			}
		}
		in.replyAs(w, name, a.result, ackStatus(event), ack, ackType, start)
	case journal.Duplicate:
		if sync && in.replies != nil {
			if in.replyStoredDuplicate(ctx, w, name, acc.ID, start) {
				return
			}
		}
		in.replyAs(w, name, a.result, a.status, ack, ackType, start)
	case journal.Replayed:
		in.log.Warn("same signed body as an earlier event under a fresh event id: recorded, not forwarded",
			zap.String("provider", name), zap.String("event_id", event.ID), zap.Int64("first", acc.ID))
		in.replyAs(w, name, a.result, a.status, ack, ackType, start)
	case journal.Conflict:
		in.log.Warn("event id reused with different content",
			zap.String("provider", name), zap.String("event_id", event.ID), zap.Int64("id", acc.ID))
		in.reply(w, name, a.result, a.status, errorBody(a.error), start)
	default:
		in.reply(w, name, a.result, a.status, errorBody(a.error), start)
	}
}
