// Package proxy is whguard's HTTP surface: the ingress handler that
// verifies, journals and acknowledges webhooks (docs/ingress.md), and the
// admin listener with health, readiness, metrics and the inspection API
// (docs/operations.md).
package proxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/verify"
)

// Appender is the part of the journal the ingress needs: commit a batch and
// say, per event, whether it was new, a duplicate or a conflict.
type Appender interface {
	Append(ctx context.Context, events []journal.Event) ([]journal.Result, error)
}

// Dispatcher hands new events straight to delivery (a *forwarder.Forwarder):
// a claimed event is journaled already leased and, once committed, is
// delivered from memory without a lease statement.
type Dispatcher interface {
	// Claim reserves a delivery from memory, or declines.
	Claim() (leaseFor time.Duration, ok bool)
	// Dispatch delivers a claimed event whose row is committed.
	Dispatch(d journal.Delivery)
	// Unclaim gives back a claim whose event was not inserted.
	Unclaim()
}

// SyncDispatcher is a Dispatcher that can also hand back the backend's
// answer to a claimed event (sync mode): the channel gets the reply once
// it is stored with the event, or nil when there is none to give.
type SyncDispatcher interface {
	DispatchSync(d journal.Delivery) <-chan *journal.Reply
}

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
	Precheck(h http.Header, rawQuery string, now time.Time) error
	Check(in verify.Input, now time.Time) (verify.Event, error)
}

var _ Checker = (*verify.Provider)(nil)

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
	// MaxBodyBytes bounds the body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyGuard takes the same signed body under a fresh event id as a
	// replay of the first event, not a new one (for providers whose event
	// id is not signed; WHGUARD_<NAME>_BODY_GUARD): it is acknowledged like
	// a duplicate, recorded on the first event, and never forwarded.
	BodyGuard bool
	// Order says where the provider's events carry their order key; the
	// zero value orders nothing.
	Order OrderKey
	// SyncTimeout, when positive, puts the route in sync mode
	// (WHGUARD_<NAME>_MODE=sync, WHGUARD_<NAME>_SYNC_TIMEOUT): a new
	// event's sender waits, counted from the request's arrival, for the
	// backend's 2xx answer to its first attempt, and gets it instead of
	// the 202; its duplicates get the stored answer too. 0 is async.
	SyncTimeout time.Duration
	// EventTypes is the provider's event-type filter
	// (WHGUARD_<NAME>_EVENT_TYPES): patterns with * wildcards, matched as
	// journal.TypeMatches does. A new event whose type matches none is
	// acknowledged as usual but journaled as ignored, never forwarded
	// unless replayed. An event without a type is never ignored: whguard
	// cannot tell what it is, and holding back what may be wanted is
	// worse than delivering one more event. Empty: nothing is ignored.
	EventTypes []string
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

// DefaultMaxBodyBytes is the body limit when none is configured: 1 MiB,
// above the documented maximum of the common senders (GitHub caps payloads
// at 25 MB but sends almost all under 1 MB; Stripe events are a few KB).
const DefaultMaxBodyBytes = 1 << 20

// DefaultCommitTimeout bounds one journal commit on the request path.
const DefaultCommitTimeout = 5 * time.Second

// IngressConfig configures the ingress handler.
type IngressConfig struct {
	Routes  []Route
	Journal Appender
	// Metrics records ingress counters; nil means not recorded.
	Metrics *Metrics
	// Logger receives request logs; nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CommitTimeout bounds one journal commit; 0 means DefaultCommitTimeout.
	CommitTimeout time.Duration
	// OnCommit, when set, is called after a commit that inserted new rows
	// (the in-process wake-up of the forwarder).
	OnCommit func()
	// Dispatcher, when set, is offered every new event before its commit
	// (see Dispatcher); events it declines are leased from the journal.
	Dispatcher Dispatcher
	// MaxBufferedBytes bounds the bodies being read at once, all requests
	// together (WHGUARD_MAX_BUFFERED_BYTES); 0 means
	// DefaultMaxBufferedBytes.
	MaxBufferedBytes int64
	// PassThrough, when set, serves every request whose path is no
	// provider's (WHGUARD_PASS_THROUGH): whguard then stands in front of
	// all of the app's traffic, passing the rest on unchanged. Nil answers
	// 404 there.
	PassThrough http.Handler
	// Replies reads the stored replies of sync-mode events for their
	// duplicates; nil answers them with the 202 body. It is asked only on
	// a sync route: async duplicates cost no extra query.
	Replies ReplyReader
}

// Ingress is the webhook receiving handler.
type Ingress struct {
	routes   map[string]Route
	journal  Appender
	metrics  *Metrics
	log      *zap.Logger
	now      func() time.Time
	timeout  time.Duration
	commit   func()
	dispatch Dispatcher
	budget   *bodyBudget
	pass     http.Handler
	guards   guardSet
	replies  ReplyReader
}

// NewIngress checks the configuration and builds the handler.
func NewIngress(cfg IngressConfig) (*Ingress, error) {
	if cfg.Journal == nil {
		return nil, errors.New("ingress: no journal")
	}
	routes := make(map[string]Route, len(cfg.Routes))
	for _, r := range cfg.Routes {
		if r.Provider == nil {
			return nil, fmt.Errorf("ingress: route %q has no provider", r.Path)
		}
		if prev, dup := routes[r.Path]; dup {
			return nil, fmt.Errorf("ingress: providers %s and %s share the path %q", prev.Provider.Name(), r.Provider.Name(), r.Path)
		}
		r.MaxBodyBytes = cmp.Or(r.MaxBodyBytes, DefaultMaxBodyBytes)
		routes[r.Path] = r
	}
	in := &Ingress{
		routes:   routes,
		journal:  cfg.Journal,
		metrics:  cfg.Metrics,
		log:      cfg.Logger,
		now:      cfg.Now,
		timeout:  cmp.Or(cfg.CommitTimeout, DefaultCommitTimeout),
		commit:   cfg.OnCommit,
		dispatch: cfg.Dispatcher,
		budget:   newBodyBudget(cmp.Or(cfg.MaxBufferedBytes, DefaultMaxBufferedBytes)),
		pass:     cfg.PassThrough,
		guards:   newGuardSet(cfg.Routes),
		replies:  cfg.Replies,
	}
	if in.log == nil {
		in.log = zap.NewNop()
	}
	if in.now == nil {
		in.now = time.Now
	}
	if in.commit == nil {
		in.commit = func() {}
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
// failure: route, method, body size, signature, event key, journal commit
// (docs/ingress.md, "The checks, in order").
func (in *Ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := in.now()
	route, ok := in.routes[r.URL.Path]
	if !ok && in.pass != nil && !in.guards.covers(r.URL.EscapedPath()) {
		in.pass.ServeHTTP(w, r) // not a webhook: the app's own traffic
		return
	}
	if !ok {
		// The path says which sender is misconfigured (or who is probing).
		// With pass-through, another spelling of a webhook path (or of a
		// FORWARD_PATH) ends here too: the app's router might take it to
		// its webhook handler, unverified.
		in.reply(w, "", ResultNotFound, http.StatusNotFound, errorBody("no webhook provider on this path"), start,
			zap.String("path", boundedPath(r.URL.Path)))
		return
	}
	name := route.Provider.Name()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		in.reply(w, name, ResultMethodNotAllowed, http.StatusMethodNotAllowed, errorBody("method not allowed: use POST"), start)
		return
	}

	// Header checks come before the body is read: a request that can
	// never verify costs no buffering.
	if err := route.Provider.Precheck(r.Header, r.URL.RawQuery, in.now()); err != nil {
		w.Header().Set("Connection", "close") // do not drain its body
		in.refuse(w, name, err, start)
		return
	}
	if r.ContentLength > route.MaxBodyBytes {
		w.Header().Set("Connection", "close") // do not drain it
		in.reply(w, name, ResultTooLarge, http.StatusRequestEntityTooLarge,
			errorBody(fmt.Sprintf("body larger than %d bytes", route.MaxBodyBytes)), start)
		return
	}
	reserve := route.MaxBodyBytes
	if r.ContentLength >= 0 {
		reserve = r.ContentLength
	}
	release, ok := in.budget.reserve(reserve)
	if !ok {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		in.reply(w, name, ResultUnavailable, http.StatusServiceUnavailable,
			errorBody("too many request bodies in flight; retry shortly"), start)
		return
	}
	defer release()
	body, buf, err := readLimited(r, route.MaxBodyBytes)
	defer putBody(buf)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			// Do not let the server drain the rest of an oversize body.
			w.Header().Set("Connection", "close")
			in.reply(w, name, ResultTooLarge, http.StatusRequestEntityTooLarge,
				errorBody(fmt.Sprintf("body larger than %d bytes", route.MaxBodyBytes)), start)
			return
		}
		in.reply(w, name, ResultBadRequest, http.StatusBadRequest, errorBody("could not read the request body"), start)
		return
	}

	if !utf8.ValidString(r.URL.RawQuery) {
		// Stored as text and forwarded as received: an invalid query is
		// refused here rather than failing the commit it would share with
		// other requests.
		in.reply(w, name, ResultBadRequest, http.StatusBadRequest, errorBody("query string is not valid UTF-8"), start)
		return
	}

	event, err := route.Provider.Check(verify.Input{Header: r.Header, Body: body, RawQuery: r.URL.RawQuery}, in.now())
	if err != nil {
		in.refuse(w, name, err, start)
		return
	}
	if event.Handshake != nil {
		// A verified sender handshake: answered as the sender requires,
		// never journaled or forwarded.
		in.reply(w, name, ResultHandshake, http.StatusOK, event.Handshake, start)
		return
	}

	ev := journal.Event{
		Provider:    name,
		EventID:     event.ID,
		EventType:   event.Type,
		ContentHash: event.ContentHash,
		Headers:     withForwarded(r),
		Body:        bytes.Clone(body), // kept: the journal and a delivery from memory hold it
		Path:        r.URL.Path,
		RawQuery:    r.URL.RawQuery,
		ReceivedAt:  start,
		BodyGuard:   route.BodyGuard,
		Ignored:     route.ignores(event.Type),
		OrderKey:    route.Order.Value(r.Header, body),
		OrderBlock:  route.Order.Block,
		Scheme:      route.Provider.SchemeName(),
	}
	claimed := false
	var claimedAt time.Time // the claim's lease counts from here, before the commit
	// An ignored event is never delivered, so never claimed for delivery
	// from memory.
	if in.dispatch != nil && !ev.Ignored {
		claimedAt = in.now()
		if ev.LeaseFor, claimed = in.dispatch.Claim(); claimed {
			ev.LeaseToken = uuid.New()
			defer func() {
				if claimed { // not handed over: the event was not inserted
					in.dispatch.Unclaim()
				}
			}()
		}
	}
	// The commit is bounded by its own deadline, not by the sender's
	// connection: the server ends the request's context when the sender
	// closes its side, which a sender that half-closes after its request
	// does while it still waits for the answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), in.timeout)
	defer cancel()
	results, err := in.journal.Append(ctx, []journal.Event{ev})
	if err == nil && results[0].Outcome == journal.Unrecorded {
		err = errors.New("recording the conflicting copy failed")
	}
	if err != nil {
		in.log.Warn("journal commit failed", zap.String("provider", name), zap.String("event_id", event.ID), zap.Error(err))
		w.Header().Set("Retry-After", "5")
		in.reply(w, name, ResultUnavailable, http.StatusServiceUnavailable, errorBody("journal unavailable, retry later"), start)
		return
	}
	ack, ackStatus := event.Reply, http.StatusOK
	if ack == nil {
		ack, _ = json.Marshal(acceptedReply{Status: "accepted", Provider: name, EventID: event.ID})
		ackStatus = http.StatusAccepted
	}
	switch results[0].Outcome {
	case journal.Inserted:
		if ev.Ignored {
			// Acknowledged like any new event (the sender must not retry
			// it); nothing to deliver, so the forwarder is not woken.
			in.metrics.observeIgnored(name)
			in.reply(w, name, ResultAccepted, ackStatus, ack, start)
			return
		}
		var answer <-chan *journal.Reply
		// An ordered event behind its key's holder was inserted pending,
		// not claimed: its claim is given back (deferred) and it is leased
		// in its turn (a sync sender gets the 202). The wake covers a
		// holder that finished while this commit was under way.
		if claimed && !results[0].Behind {
			claimed = false
			d := journal.Delivery{
				ID: results[0].ID, Provider: name, EventID: ev.EventID, EventType: ev.EventType,
				Attempt: 1, BudgetAttempt: 1, Headers: ev.Headers, Body: ev.Body,
				Path: ev.Path, RawQuery: ev.RawQuery, ReceivedAt: start, OrderKey: ev.OrderKey, Scheme: ev.Scheme,
				LeaseToken: ev.LeaseToken, LeaseExpiresAt: claimedAt.Add(ev.LeaseFor),
			}
			if sd, ok := in.dispatch.(SyncDispatcher); ok && route.SyncTimeout > 0 && event.Reply == nil {
				answer = sd.DispatchSync(d)
			} else {
				in.dispatch.Dispatch(d)
			}
		} else {
			// Not claimed (the forwarder is busy or stopping): a sync
			// event's first attempt would not start at once, so its sender
			// gets the 202 now and the event is leased like any other.
			in.commit()
			if route.SyncTimeout > 0 && event.Reply == nil {
				in.metrics.observeSync(name, syncNotClaimed)
			}
		}
		if answer != nil {
			reply, outcome := in.awaitReply(answer, start.Add(route.SyncTimeout))
			in.metrics.observeSync(name, outcome)
			if outcome == syncReplied {
				in.replyStored(w, name, ResultAccepted, reply, start)
				return
			}
		}
		in.reply(w, name, ResultAccepted, ackStatus, ack, start)
	case journal.Duplicate:
		if route.SyncTimeout > 0 && in.replies != nil && event.Reply == nil {
			// A stored reply is what the first sender got (or would have,
			// had it waited): give the duplicate the same.
			stored, err := in.replies.StoredReply(ctx, results[0].ID)
			if err != nil {
				in.log.Warn("read stored reply failed", zap.String("provider", name), zap.Int64("id", results[0].ID), zap.Error(err))
				w.Header().Set("Retry-After", "5")
				in.reply(w, name, ResultUnavailable, http.StatusServiceUnavailable, errorBody("journal unavailable, retry later"), start)
				return
			}
			if stored != nil {
				in.metrics.observeSync(name, syncStored)
				in.replyStored(w, name, ResultDuplicate, stored, start)
				return
			}
			// None (yet): the first delivery is still running, failed, or
			// answered too much to store.
		}
		in.reply(w, name, ResultDuplicate, http.StatusOK, ack, start)
	case journal.Replayed:
		// Acknowledged like a duplicate (a 4xx would make a genuine
		// sender retry, and tells an attacker nothing more), recorded on
		// the first event, never forwarded.
		in.log.Warn("same signed body as an earlier event under a fresh event id: recorded, not forwarded",
			zap.String("provider", name), zap.String("event_id", event.ID), zap.Int64("first", results[0].ID))
		in.reply(w, name, ResultReplay, http.StatusOK, ack, start)
	case journal.Refused:
		// The journal refused this event's values (nothing was written):
		// resending the same request cannot succeed.
		in.reply(w, name, ResultBadRequest, http.StatusBadRequest, errorBody("the journal refused this event's data"), start)
	default:
		in.log.Warn("event id reused with different content",
			zap.String("provider", name), zap.String("event_id", event.ID), zap.Int64("id", results[0].ID))
		in.reply(w, name, ResultConflict, http.StatusConflict,
			errorBody("event id already received with different content; the first payload is kept"), start)
	}
}

// awaitReply waits until deadline for the stored reply of a sync event
// and says how the wait ended (syncReplied with the reply, or syncTimeout,
// syncNoReply). Not waiting longer never stops the delivery. It does not
// stop when the request's context ends: the server ends it when the
// sender closes its side of the connection, which a sender that
// half-closes after its request does while it still waits for the
// answer; a sender that is gone costs a wait of at most the sync timeout.
func (in *Ingress) awaitReply(answer <-chan *journal.Reply, deadline time.Time) (*journal.Reply, string) {
	timer := time.NewTimer(deadline.Sub(in.now()))
	defer timer.Stop()
	select {
	case reply := <-answer:
		if reply == nil {
			return nil, syncNoReply
		}
		return reply, syncReplied
	case <-timer.C:
		return nil, syncTimeout
	}
}

// replyStored answers with a stored sync reply: its status, Content-Type
// and body, nothing else of the backend's answer.
func (in *Ingress) replyStored(w http.ResponseWriter, provider, result string, r *journal.Reply, start time.Time) {
	if r.ContentType != "" {
		w.Header().Set("Content-Type", r.ContentType)
	} else {
		w.Header()["Content-Type"] = nil // none, as the backend sent: no sniffing
	}
	if r.Status == http.StatusNoContent || r.Status == http.StatusResetContent {
		// No body allowed (RFC 9110 15.3.5, 15.3.6).
		w.WriteHeader(r.Status)
	} else {
		w.Header().Set("Content-Length", fmt.Sprint(len(r.Body)))
		w.WriteHeader(r.Status)
		_, _ = w.Write(r.Body)
	}
	in.metrics.observeIngress(provider, result, in.now().Sub(start))
}

// reply answers and records the request; fields are added to the log line
// of a refusal.
// refuse answers a request verify refused: 401 or 400 with verify's
// message, which is written to be shown (it never carries a secret or a
// signature value); the reason code says why in a word, for the log and
// the refusals counter.
func (in *Ingress) refuse(w http.ResponseWriter, name string, err error, start time.Time) {
	reason := verify.Reason(err)
	in.metrics.observeRefusal(name, reason)
	if errors.Is(err, verify.ErrUnauthorized) {
		in.reply(w, name, ResultUnauthorized, http.StatusUnauthorized, errorBody(err.Error()), start, zap.String("reason", reason))
		return
	}
	in.reply(w, name, ResultBadRequest, http.StatusBadRequest, errorBody(err.Error()), start, zap.String("reason", reason))
}

func (in *Ingress) reply(w http.ResponseWriter, provider, result string, status int, body []byte, start time.Time, fields ...zap.Field) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	in.metrics.observeIngress(provider, result, in.now().Sub(start))
	if status >= 400 && status != http.StatusConflict {
		in.log.Info("webhook refused", append([]zap.Field{zap.String("provider", provider), zap.String("result", result), zap.Int("status", status)}, fields...)...)
	}
}

// maxLoggedPath bounds the request path in a log line: a path is chosen by
// whoever sends the request.
const maxLoggedPath = 200

// boundedPath returns path cut to maxLoggedPath bytes, never inside a
// UTF-8 sequence.
func boundedPath(path string) string {
	if len(path) <= maxLoggedPath {
		return path
	}
	cut := maxLoggedPath
	for cut > 0 && !utf8.RuneStart(path[cut]) {
		cut--
	}
	return path[:cut]
}

func errorBody(msg string) []byte {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return b
}
