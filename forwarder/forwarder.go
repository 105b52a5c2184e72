// Package forwarder delivers journaled webhooks to the backend: it leases
// ready rows, POSTs each one outside any transaction with a stable
// Idempotency-Key, and records the outcome fenced by the lease token:
// done, retry after a jittered backoff, or dead (quarantine). A reaper
// returns expired leases; a graceful stop hands unfinished leases back.
//
// The package is split by job, each file owning its state:
//
//   - forwarder.go: configuration, New, Start and Stop (the lifecycle);
//   - fetch.go: admission: wake-ups, the fetch loop that leases rows, and
//     claims of new events delivered from memory (Claim, Dispatch);
//   - pool.go: the delivery slots and the goroutines that run deliveries;
//   - attempt.go: one attempt of one event and the writing of its outcome;
//   - maintain.go: the reaper, retention and the status gauges;
//   - send.go and policy.go: the HTTP request and the retry policy, both
//     free of state.
//
// docs/delivery.md describes the states, leases and guarantees.
package forwarder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
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

// Target says where one provider's events go.
type Target struct {
	// BackendURL is the backend's base URL (WHGUARD_<NAME>_BACKEND_URL or
	// WHGUARD_BACKEND_URL).
	BackendURL string
	// ForwardPath replaces the received path when set
	// (WHGUARD_<NAME>_FORWARD_PATH).
	ForwardPath string
	// PreserveHost sends the Host the sender used (as received, recorded
	// in X-Forwarded-Host) instead of the backend's own
	// (WHGUARD_<NAME>_PRESERVE_HOST).
	PreserveHost bool
	// Resign, when set, replaces the provider's signature headers in h
	// with a fresh signature of body made at the given time, so that a
	// backend verifying them with the provider's library accepts a late
	// delivery (WHGUARD_<NAME>_RESIGN). Nil forwards them as received.
	Resign func(h http.Header, body []byte, at time.Time)
	// Scheme is the provider's signature scheme now (verify's name). An
	// event verified under another scheme, or under none, is not signed
	// for the backend: Resign is skipped and Unsign applied (whguard signs
	// only content it verified with this scheme). Empty: not checked.
	Scheme string
	// Unsign, when set, removes the provider's signature headers from h
	// (a delivery whguard must not sign). Nil leaves them as received.
	Unsign func(h http.Header)
	// Sync stores the first 2xx answer (status, Content-Type, body of at
	// most journal.MaxReplyBytes) with the event, for the sender waiting
	// on DispatchSync and for later duplicates (WHGUARD_<NAME>_MODE=sync).
	Sync bool
}

// ReplyStore stores the reply of a sync-mode event; the journal's stores
// implement it. A Store without it stores no replies: sync deliveries then
// answer nothing and their senders get the usual acknowledgement.
type ReplyStore interface {
	SaveReply(ctx context.Context, id int64, token uuid.UUID, r journal.Reply) (bool, error)
}

var _ ReplyStore = (*journal.Postgres)(nil)

// Defaults. The retry defaults ride out a backend outage of about eight
// hours on average (docs/guarantees.md, "Retries"): 25 attempts with
// full jitter from 5 s doubling to a 1 h cap.
//
// DefaultConcurrency is the ceiling of deliveries in flight per process;
// the adaptive limit (adapt.go) finds how many of them the backend needs.
// Measured with cmd/whguard-bench on 2 cores: at the old fixed default of 8
// a backlog drained at 0.27× naive-pg's ack rate to a fast backend, and at
// 148/s to one answering in 50 ms (8 / 54 ms). 256 lets such a backend take
// 5 000 deliveries a second, and costs nothing while the limit stays low.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultConcurrency  = 256 // the ceiling; see above
	DefaultBaseDelay    = 5 * time.Second
	DefaultMaxDelay     = time.Hour
	DefaultMaxAttempts  = 25
	DefaultPollInterval = time.Second
	DefaultReapInterval = 2 * time.Second
	DefaultLeaseMargin  = 10 * time.Second
	DefaultStatsEvery   = 10 * time.Second
	// DefaultFiguresEvery: see Config.FiguresInterval.
	DefaultFiguresEvery = 5 * time.Second
	// DefaultKeyRetention keeps the keys of done events 35 days: longer
	// than any common sender's redelivery horizon (Stripe resends events
	// up to 30 days old on request; automatic retries end within 3 days).
	DefaultKeyRetention = 35 * 24 * time.Hour
	// DefaultPayloadRetention keeps done payloads a week, for inspection
	// and replay.
	DefaultPayloadRetention = 7 * 24 * time.Hour
	DefaultCleanupEvery     = time.Minute
	// DefaultNoBackendHold: see Config.NoBackendHold.
	DefaultNoBackendHold = time.Minute
	// DefaultUnavailableHold: see Config.UnavailableHold.
	DefaultUnavailableHold = time.Second
)

// Config configures a Forwarder. Zero fields take the defaults above.
type Config struct {
	Store Store
	// Targets maps provider names to targets; an event whose provider has
	// no entry is held (not attempted) and waits.
	Targets map[string]Target
	// Timeout bounds one delivery (WHGUARD_FORWARD_TIMEOUT).
	Timeout time.Duration
	// Concurrency bounds the requests to the backends in flight; as many
	// finished deliveries may be waiting for their outcome to be written.
	// Within it, the number in flight adapts to the backend (adapt.go).
	Concurrency int
	// MaxInFlight, when set, is the most the adaptive limit grows to
	// (WHGUARD_BACKEND_MAX_IN_FLIGHT: the governor enforces it across
	// replicas; growing past it would only make deliveries to hold).
	MaxInFlight int
	// Policy is the retry policy; zero fields take the defaults.
	Policy Policy
	// PollInterval is the fallback poll when no wake-up arrives.
	PollInterval time.Duration
	// ReapInterval is how often expired leases are looked for.
	ReapInterval time.Duration
	// LeaseMargin is added to Timeout for the lease (at most 30 s).
	LeaseMargin time.Duration
	// StatsInterval is how often the status gauges are refreshed.
	StatsInterval time.Duration
	// KeyRetention is how long a done event's key (and the event) is kept
	// after it was delivered (WHGUARD_DEDUP_RETENTION).
	KeyRetention time.Duration
	// PayloadRetention is how long a done event's payload is kept
	// (WHGUARD_PAYLOAD_RETENTION); at most KeyRetention.
	PayloadRetention time.Duration
	// CleanupInterval is how often retention runs.
	CleanupInterval time.Duration
	// NoBackendHold is how long an event whose provider has no target
	// waits before it is looked at again (a replica with a target for it
	// may be running by then).
	NoBackendHold time.Duration
	// Governor, when set, is asked before each attempt of a provider it
	// limits; a delivery it turns down is held, not attempted. Nil means
	// no limits.
	Governor Governor
	// UnavailableHold is how long a delivery waits when the governor's
	// shared state does not answer.
	UnavailableHold time.Duration
	// PauseInterval is how often the pauses are read from the journal.
	PauseInterval time.Duration
	// PauseHold is how long a paused delivery is held (a resume makes it
	// due at once).
	PauseHold time.Duration
	// FiguresInterval is how often this replica's per-minute delivery
	// figures are written to the journal (for the overview).
	FiguresInterval time.Duration
	// Replica names this process in the per-minute figures; empty means a
	// random name chosen by New.
	Replica string
	// Alerts, when set, hears of every event that goes dead.
	Alerts Alerts
	// Listen, when set, runs until ctx ends and calls wake on every
	// cross-process notification of new rows (LISTEN/NOTIFY).
	Listen func(ctx context.Context, wake func()) error
	// Client sends the deliveries; nil means a tuned client of our own.
	Client *http.Client
	// Metrics records delivery metrics; nil means none.
	Metrics *Metrics
	// Logger receives the forwarder's logs; nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand returns floats in [0, 1) for jitter; nil means math/rand/v2.
	Rand func() float64
}

func (c *Config) withDefaults() error {
	if c.Store == nil {
		return errors.New("forwarder: no store")
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Policy.BaseDelay = cmp.Or(c.Policy.BaseDelay, DefaultBaseDelay)
	c.Policy.MaxDelay = cmp.Or(c.Policy.MaxDelay, DefaultMaxDelay)
	c.Policy.MaxAttempts = cmp.Or(c.Policy.MaxAttempts, DefaultMaxAttempts)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.ReapInterval = cmp.Or(c.ReapInterval, DefaultReapInterval)
	c.LeaseMargin = min(cmp.Or(c.LeaseMargin, DefaultLeaseMargin), 30*time.Second)
	c.StatsInterval = cmp.Or(c.StatsInterval, DefaultStatsEvery)
	c.FiguresInterval = cmp.Or(c.FiguresInterval, DefaultFiguresEvery)
	if c.Replica == "" {
		c.Replica = uuid.NewString()
	}
	c.KeyRetention = cmp.Or(c.KeyRetention, DefaultKeyRetention)
	c.PayloadRetention = min(cmp.Or(c.PayloadRetention, DefaultPayloadRetention), c.KeyRetention)
	c.CleanupInterval = cmp.Or(c.CleanupInterval, DefaultCleanupEvery)
	c.NoBackendHold = cmp.Or(c.NoBackendHold, DefaultNoBackendHold)
	c.UnavailableHold = cmp.Or(c.UnavailableHold, DefaultUnavailableHold)
	c.PauseInterval = cmp.Or(c.PauseInterval, DefaultPauseInterval)
	c.PauseHold = cmp.Or(c.PauseHold, DefaultPauseHold)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Client == nil {
		c.Client = NewClient(c.Timeout, c.Concurrency)
	}
	for name, t := range c.Targets {
		if t.BackendURL == "" {
			return fmt.Errorf("forwarder: provider %s has no backend URL", name)
		}
	}
	return nil
}

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
	// pauses is the pauses in force as last read (pause.go).
	pauses atomic.Pointer[pauseSet]
	// figures are this replica's per-minute delivery figures (figures.go).
	figures *figures

	// adm decides who delivers and when (admission.go); limit is the
	// adaptive in-flight limit it applies (adapt.go); wake is the
	// fetcher's wake-up (Wake and poke send, fetchLoop alone receives).
	adm   *admission
	limit *inFlightLimit
	wake  chan struct{}
	*pool

	// complete batches the outcomes of deliveries finishing together into
	// one fenced statement (attempt.go).
	complete *groupcommit.Group[journal.Finish, bool]

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
	if err := cfg.withDefaults(); err != nil {
		return nil, err
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
	f.sending = map[string]*atomic.Int32{}
	for name, t := range cfg.Targets {
		o := Origin(t.BackendURL)
		f.origins[name] = o
		if f.sending[o] == nil {
			f.sending[o] = new(atomic.Int32)
		}
	}
	f.aborted, f.abort = context.WithCancel(context.Background())
	cfg.Metrics.observe(f.adm.snapshot)
	// Outcomes linger a little for larger batches: their latency is
	// nobody's (the slot is already free, the backend has answered), and
	// fewer, larger statements cost the database less per outcome.
	f.complete = groupcommit.New(groupcommit.Config{
		MaxBatch: 100, Timeout: completeTimeout, Linger: outcomeLinger, Context: f.aborted,
	}, f.writeOutcomes)
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
	f.quitWorkers()
	// The last figures of this replica, if the journal still answers.
	fctx, cancel := context.WithTimeout(context.Background(), handBackTimeout)
	defer cancel()
	if ferr := f.recordFigures(fctx); ferr != nil {
		f.log.Debug("last delivery figures not written", zap.Error(ferr))
	}
	return err
}
