// Package forwarder delivers journaled webhooks to the backend: it leases
// ready rows, POSTs each one outside any transaction with a stable
// Idempotency-Key, and records the outcome fenced by the lease token:
// done, retry after a jittered backoff, or dead (quarantine). A reaper
// returns expired leases; a graceful stop hands unfinished leases back.
//
// The package is split by job, each file owning its state:
//
//   - config.go: the configuration, its defaults and its rules;
//   - forwarder.go: New, Start and Stop (the lifecycle);
//   - admission.go: who may deliver and when: the slots, their queue,
//     the claims of new events, and the decisions as pure functions;
//   - fetch.go: wake-ups, the fetch loop that leases rows, and claims of
//     new events delivered from memory (Claim, Dispatch);
//   - pool.go: the goroutines that run deliveries;
//   - intake.go: the claim protocol of the ingress (Intake.Accept);
//   - attempt.go: one attempt of one event and the writing of its outcome;
//   - recover.go: a backend's recovery brings its waiting retries forward;
//   - maintain.go: the reaper, retention and the status gauges;
//   - send.go and policy.go: the HTTP request and the retry policy, both
//     free of state.
//
// docs/delivery.md describes the states, leases and guarantees.
package forwarder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/internal/groupcommit"
	"github.com/whguard/whguard/journal"
)

// Store is the part of the journal the forwarder works from.
type Store interface {
	Lease(ctx context.Context, n int, leaseFor time.Duration) ([]journal.Delivery, error)
	Complete(ctx context.Context, fs []journal.Finish) ([]int64, error)
	Release(ctx context.Context, ids []int64, tokens []uuid.UUID) (int, error)
	Hold(ctx context.Context, hs []journal.Hold) (int, error)
	ReapExpired(ctx context.Context, maxAttempts int) ([]journal.Reaped, error)
	Stats(ctx context.Context) (journal.Stats, error)
	Cleanup(ctx context.Context, keysBefore, payloadsBefore time.Time) (journal.Cleaned, error)
	Pause(ctx context.Context, p journal.Pause) (journal.Pause, error)
	Resume(ctx context.Context, kind, name string) (bool, error)
	Pauses(ctx context.Context) ([]journal.Pause, error)
	WakePaused(ctx context.Context) error
	RetryDue(ctx context.Context, providers []string) (int, error)
	RecordMinutes(ctx context.Context, replica string, ms []journal.Minute) error
}

var _ Store = (*journal.Postgres)(nil)

// Governor decides whether a delivery may start now (internal/governor:
// rate limits, in-flight bounds, shared through Redis or kept in process).
type Governor interface {
	// Acquire says whether the delivery may start, or why not and when
	// to ask again. An error means the shared state did not answer.
	Acquire(ctx context.Context, a governor.Ask) (governor.Decision, error)
	// Finish gives back what an allowed delivery took once its attempt
	// ended with o, and counts o for the backend's breaker.
	Finish(ctx context.Context, a governor.Ask, o governor.Outcome) error
	// Release gives back what an allowed delivery took when it was not
	// sent after all (interrupted by shutdown).
	Release(ctx context.Context, a governor.Ask) error
}

var (
	_ Governor = (*governor.Local)(nil)
	_ Governor = (*governor.Redis)(nil)
)

// ReplyStore stores the reply of a sync-mode event; the journal's stores
// implement it. A Store without it stores no replies: sync deliveries then
// answer nothing and their senders get the usual acknowledgement.
type ReplyStore interface {
	SaveReply(ctx context.Context, id int64, token uuid.UUID, r journal.Reply) (bool, error)
}

var _ ReplyStore = (*journal.Postgres)(nil)

// Internal bounds.
const (
	maxLeaseBatch   = 100
	completeTimeout = 10 * time.Second
	// leaseStatementTimeout bounds one lease statement.
	leaseStatementTimeout = 10 * time.Second
	// releaseTimeout bounds handing one lease back; after the shutdown
	// deadline, handBackTimeout does.
	releaseTimeout  = 2 * time.Second
	handBackTimeout = 500 * time.Millisecond
	// stopGrace bounds Stop's wait after its deadline, for the interrupted
	// work to hand its leases back: the whole stop fits its deadline plus
	// this.
	stopGrace = time.Second
	// outcomeLinger is how long an outcome batch waits for more outcomes
	// (measured on 2 cores: 2 ms gave +8 % acks under load with the drain
	// unchanged; 5 ms held too many outcomes and slowed the drain).
	outcomeLinger = 2 * time.Millisecond
)

// Forwarder delivers leased events. Start it once; Stop it once or more.
// Its state is split by owner: admission (fetch.go), pool (pool.go).
type Forwarder struct {
	cfg Config
	log *zap.Logger
	// replies stores sync replies (nil: the store cannot).
	replies ReplyStore
	// origins maps each provider with a target to its backend's origin
	// (scheme://host:port), for logs and the start-up probe.
	origins map[string]string
	// sending counts this process's requests in flight per origin.
	sending map[string]*atomic.Int32
	// refusing marks each provider whose backend's last answer to its
	// deliveries that said anything about whguard was a 401 or 403
	// (noteRefusal): per provider, since providers sharing a backend may
	// be re-signed with different secrets.
	refusing map[string]*atomic.Bool
	// pauses is the pauses in force as last read (pause.go); refreshing
	// holds pausesMu from the read to the swap, so a read that started
	// before a pause was stored never replaces one made after it.
	pauses   atomic.Pointer[pauseSet]
	pausesMu sync.Mutex
	// figures are this replica's per-minute delivery figures (figures.go).
	figures *figures
	// recovery follows the backends' recoveries (recover.go).
	recovery *recoveries

	// adm decides who delivers and when (admission.go); limit is the
	// adaptive in-flight limit it applies (adapt.go); wake is the
	// fetcher's wake-up (Wake and poke send, fetchLoop alone receives).
	adm   *admission
	limit *inFlightLimit
	wake  chan struct{}
	*pool

	// complete batches the outcomes of deliveries finishing together into
	// one fenced statement (attempt.go); asks batches their questions to
	// the governor, per provider (govern.go).
	complete *groupcommit.Group[journal.Finish, bool]
	asks     map[string]*groupcommit.Group[governor.Ask, governor.Decision]

	// aborted is cancelled when Stop's deadline passes: it interrupts the
	// deliveries still running (their leases are handed back), outcome
	// writes and a lease statement, so a stalled backend or journal cannot
	// hold the stop past its deadline.
	aborted context.Context
	abort   context.CancelFunc

	// mu guards the lifecycle flags; Claim reads them under it.
	mu      sync.Mutex
	started bool
	stopped bool
	// loops counts the background loops (fetch, maintenance, listen);
	// cancelLoops ends them.
	loops       sync.WaitGroup
	cancelLoops context.CancelFunc
	// stopGrace is stopGrace, shortened by tests.
	stopGrace time.Duration
}

// limitCeiling is the most the in-flight limit may grow to: Concurrency,
// and MaxInFlight (a bound per backend) when every provider goes to one
// backend, the usual sidecar. With several backends MaxInFlight stays the
// governor's bound of each, not a bound of the process.
func limitCeiling(cfg Config) int {
	origins := map[string]bool{}
	for _, t := range cfg.Targets {
		origins[Origin(t.BackendURL)] = true
	}
	if cfg.MaxInFlight > 0 && len(origins) <= 1 {
		return min(cfg.MaxInFlight, cfg.Concurrency)
	}
	return cfg.Concurrency
}

// New checks the configuration and builds a stopped Forwarder.
func New(cfg Config) (*Forwarder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	if cfg.Store == nil {
		return nil, errors.New("forwarder: no store")
	}
	if cfg.Replica == "" {
		cfg.Replica = uuid.NewString()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(cfg.Timeout, cfg.Concurrency)
	}
	f := &Forwarder{
		cfg:       cfg,
		log:       cfg.Logger,
		pool:      newPool(),
		wake:      make(chan struct{}, 1),
		stopGrace: stopGrace,
		origins:   make(map[string]string, len(cfg.Targets)),
		figures:   newFigures(),
	}
	f.limit = newInFlightLimit(limitCeiling(cfg), cfg.Now())
	f.adm = newAdmission(cfg.Concurrency, f.limit.current())
	f.replies, _ = cfg.Store.(ReplyStore)
	f.sending, f.refusing = map[string]*atomic.Int32{}, map[string]*atomic.Bool{}
	for name, t := range cfg.Targets {
		o := Origin(t.BackendURL)
		f.origins[name] = o
		if f.sending[o] == nil {
			f.sending[o] = new(atomic.Int32)
		}
		f.refusing[name] = new(atomic.Bool)
	}
	f.recovery = newRecoveries(f.origins)
	cfg.Metrics.zero(cfg.Targets, f.backendOrigins())
	f.aborted, f.abort = context.WithCancel(context.Background())
	if h, ok := cfg.Governor.(interface{ OnClose(func(string)) }); ok {
		h.OnClose(f.breakerClosed) // a closing breaker is a recovery
	}
	cfg.Metrics.observe(f.adm.snapshot)
	// Outcomes linger a little for larger batches: their latency is
	// nobody's (the slot is already free, the backend has answered), and
	// fewer, larger statements cost the database less per outcome.
	f.complete = groupcommit.New(groupcommit.Config{
		MaxBatch: 100, Timeout: completeTimeout, Linger: outcomeLinger, Context: f.aborted,
	}, f.writeOutcomes)
	f.asks = f.askGroups()
	return f, nil
}

// Start spawns the fetcher, reaper, retention, stats and listen loops and
// returns. Cancelling ctx stops them (no more leasing) as Stop does; Stop
// is still what waits for deliveries in flight. A second Start, or one
// after Stop, does nothing.
func (f *Forwarder) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("forwarder: start: %w", err)
	}
	// Pauses hold from the first moment: nothing is claimed or leased
	// before they are read (Claim and fetchOnce check). Read here, before
	// Start returns, so that claims start at once; should the journal not
	// answer, the fetcher reads them before its first lease.
	rctx, cancel := context.WithTimeout(ctx, f.cfg.PauseInterval+time.Second)
	if err := f.refreshPauses(rctx); err != nil {
		f.log.Warn("pauses not read at start; nothing is delivered until they are", zap.Error(err))
	}
	cancel()
	f.statsAtStart(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started || f.stopped {
		return nil // started already, or stopped for good
	}
	f.started = true
	loopCtx, cancel := context.WithCancel(ctx)
	f.cancelLoops = cancel
	f.goLoop(func() { f.fetchLoop(loopCtx) })
	for _, m := range f.maintainers() {
		f.goLoop(func() { m.run(loopCtx) })
	}
	f.goLoop(func() { f.probeBackends(loopCtx) })
	if f.cfg.Listen != nil {
		f.goLoop(func() {
			if err := f.cfg.Listen(loopCtx, f.Wake); err != nil && !errors.Is(err, context.Canceled) {
				f.log.Warn("listen loop ended", zap.Error(err))
			}
		})
	}
	f.Wake()
	return nil
}

func (f *Forwarder) goLoop(fn func()) {
	f.loops.Add(1)
	go func() {
		defer f.loops.Done()
		fn()
	}()
}

// Stop stops leasing, lets in-flight deliveries finish until ctx is done,
// then interrupts the rest and hands their leases back without spending
// their attempt. It returns within ctx's deadline plus about a second,
// whatever the backend or the journal do (work that cannot hand back its
// lease in that time leaves it to expire: the event is delivered again,
// never lost), and returns ctx.Err() if work had to be interrupted.
func (f *Forwarder) Stop(ctx context.Context) error {
	f.mu.Lock()
	f.stopped = true
	started := f.started
	f.mu.Unlock()
	if !started {
		f.abort()
		return nil
	}
	f.cancelLoops()
	finished := make(chan struct{})
	go func() {
		f.loops.Wait() // the fetcher adds to inflight until it ends
		f.inflight.Wait()
		close(finished)
	}()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		err = ctx.Err()
		f.log.Warn("shutdown deadline reached: interrupting deliveries and handing their leases back")
		f.abort()
		select {
		case <-finished:
		case <-time.After(f.stopGrace):
			f.log.Error("work still unfinished after the shutdown deadline; its leases expire and those events are delivered again",
				zap.Duration("waited", f.stopGrace))
		}
	}
	f.abort()
	f.stopRecoveries()
	f.quitWorkers()
	// The last figures of this replica, if the journal still answers.
	fctx, cancel := context.WithTimeout(context.Background(), handBackTimeout)
	defer cancel()
	if ferr := f.recordFigures(fctx); ferr != nil {
		f.log.Debug("last delivery figures not written", zap.Error(ferr))
	}
	return err
}
