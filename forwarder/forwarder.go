// Package forwarder delivers journaled webhooks to the backend: it leases
// ready rows, POSTs each one outside any transaction with a stable
// Idempotency-Key, and records the outcome fenced by the lease token:
// done, retry after a jittered backoff, or dead (quarantine). A reaper
// returns expired leases; a graceful stop hands unfinished leases back.
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

	"github.com/whguard/whguard/internal/groupcommit"
	"github.com/whguard/whguard/journal"
)

// Store is the part of the journal the forwarder works from.
type Store interface {
	Lease(ctx context.Context, n int, leaseFor time.Duration) ([]journal.Delivery, error)
	Complete(ctx context.Context, fs []journal.Finish) ([]int64, error)
	Release(ctx context.Context, ids []int64, tokens []uuid.UUID) (int, error)
	Hold(ctx context.Context, hs []journal.Hold) (int, error)
	ReapExpired(ctx context.Context, maxAttempts int) (int, error)
	Stats(ctx context.Context) (journal.Stats, error)
	Cleanup(ctx context.Context, keysBefore, payloadsBefore time.Time) (journal.Cleaned, error)
}

var _ Store = (*journal.Postgres)(nil)

// Target says where one provider's events go.
type Target struct {
	// BackendURL is the backend's base URL (WHGUARD_<NAME>_BACKEND_URL or
	// WHGUARD_BACKEND_URL).
	BackendURL string
	// ForwardPath replaces the received path when set
	// (WHGUARD_<NAME>_FORWARD_PATH).
	ForwardPath string
}

// Defaults. The retry defaults ride out a backend outage of about eight
// hours on average (see README, "Delivery guarantees"): 25 attempts with
// full jitter from 5 s doubling to a 1 h cap.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultConcurrency  = 8
	DefaultBaseDelay    = 5 * time.Second
	DefaultMaxDelay     = time.Hour
	DefaultMaxAttempts  = 25
	DefaultPollInterval = time.Second
	DefaultReapInterval = 2 * time.Second
	DefaultLeaseMargin  = 10 * time.Second
	DefaultStatsEvery   = 10 * time.Second
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
	maxLeaseBatch        = 100
	completeTimeout      = 10 * time.Second
	// leaseStatementTimeout bounds one lease statement.
	leaseStatementTimeout = 10 * time.Second
	// releaseTimeout bounds handing leases back after the shutdown deadline.
	releaseTimeout = 2 * time.Second
	// outcomeLinger is how long an outcome batch waits for more outcomes
	// (measured on 2 cores: 2 ms gave +8 % acks under load with the drain
	// unchanged; 5 ms held too many outcomes and slowed the drain).
	outcomeLinger = 2 * time.Millisecond
)

// Config configures a Forwarder. Zero fields take the defaults above.
type Config struct {
	Store Store
	// Targets maps provider names to targets; a provider without an entry
	// is not delivered and its events wait.
	Targets map[string]Target
	// Timeout bounds one delivery (WHGUARD_FORWARD_TIMEOUT).
	Timeout time.Duration
	// Concurrency bounds the requests to the backends in flight; as many
	// finished deliveries may be waiting for their outcome to be written.
	Concurrency int
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
	c.KeyRetention = cmp.Or(c.KeyRetention, DefaultKeyRetention)
	c.PayloadRetention = min(cmp.Or(c.PayloadRetention, DefaultPayloadRetention), c.KeyRetention)
	c.CleanupInterval = cmp.Or(c.CleanupInterval, DefaultCleanupEvery)
	c.NoBackendHold = cmp.Or(c.NoBackendHold, DefaultNoBackendHold)
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

// Forwarder delivers leased events. Start it once; Stop it once or more.
type Forwarder struct {
	cfg  Config
	log  *zap.Logger
	wake chan struct{}

	// complete batches the outcomes of deliveries finishing together into
	// one fenced statement (River's batch completer, without its timer).
	complete *groupcommit.Group[journal.Finish, bool]

	// backlog is true while ready rows may be waiting for a free slot: the
	// last lease filled everything it asked for, or leasing stopped because
	// every slot was busy. Only then does a finished delivery wake the
	// fetcher; otherwise new rows announce themselves.
	backlog atomic.Bool
	// claims counts the claims not yet over (Claim to the end of the
	// attempt, or to Unclaim, or to handing the row back).
	claims atomic.Int32

	mu          sync.Mutex
	quitWorkers sync.Once
	started     bool
	stopped     bool
	stopping    chan struct{} // closed by Stop: no more leasing
	loops       sync.WaitGroup
	inflight    sync.WaitGroup
	// slots bounds the requests to the backends (Concurrency): one is
	// held from lease or claim until the attempt's answer is in. records
	// bounds the finished attempts whose outcome is still being written
	// (Concurrency too): a slot is handed over to a record, so the next
	// delivery starts while the outcome waits for its batch, and when
	// outcomes back up the slots stay held and leasing stops.
	slots   chan struct{}
	records chan struct{}
	// unslotted bounds the claims that hold no slot yet (Concurrency of
	// them): from Claim, through the commit, until a slot is free. A
	// claim does not take a slot while its event is being committed, so
	// under load new events keep the cheap path (measured with cmd/whguard-bench:
	// holding slots through the commit sent 43 % of new events to the
	// lease query; without, 7-12 % more acks on PostgreSQL and deliveries
	// keeping up with acks on the embedded journal).
	unslotted chan struct{}
	// deliverCtx is cancelled when the shutdown deadline passes, to
	// interrupt deliveries still running; their leases are released.
	deliverCtx    context.Context
	cancelDeliver context.CancelFunc
	cancelLoops   context.CancelFunc
	// stopGrace bounds Stop's wait for interrupted deliveries after its
	// deadline.
	stopGrace time.Duration
	// idle hands work to a delivery goroutine waiting for more (goDeliver);
	// workersQuit, closed at the end of Stop, ends those that wait.
	idle        chan func()
	workersQuit chan struct{}
	// workersStarted and workersLive count delivery goroutines (tests).
	workersStarted, workersLive atomic.Int32
}

// workerIdle is how long a delivery goroutine waits for more work before
// it ends.
const workerIdle = 10 * time.Second

// New checks the configuration and builds a stopped Forwarder.
func New(cfg Config) (*Forwarder, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	f := &Forwarder{
		cfg:       cfg,
		log:       cfg.Logger,
		wake:      make(chan struct{}, 1),
		stopping:  make(chan struct{}),
		slots:     make(chan struct{}, cfg.Concurrency),
		records:   make(chan struct{}, cfg.Concurrency),
		unslotted: make(chan struct{}, cfg.Concurrency),
		// A release; or an outcome statement already running, its retry
		// pause, and one more for a delivery that was waiting for a
		// place to record.
		stopGrace:   releaseTimeout + 2*(completeTimeout+2*time.Second),
		idle:        make(chan func()),
		workersQuit: make(chan struct{}),
	}
	cfg.Metrics.observe(func() occupancy {
		return occupancy{inFlight: len(f.slots), recording: len(f.records), claimsWaiting: len(f.unslotted)}
	})
	// Outcomes linger a little for larger batches: their latency is
	// nobody's (the slot is already free, the backend has answered), and
	// fewer, larger statements cost the database less per outcome.
	f.complete = groupcommit.New(groupcommit.Config{MaxBatch: 100, Timeout: completeTimeout, Linger: outcomeLinger}, f.writeOutcomes)
	return f, nil
}

// writeOutcomes records a batch of outcomes and says which took effect. A
// batch the store fails is written again row by row, so one bad row cannot
// fail the others (a reply excerpt the database refused once failed whole
// batches, and every event in them was delivered again and again). A row
// that fails alone is written once more without its texts (reply excerpt,
// error), logged and counted (whguard_outcomes_refused_total), so its event
// is not delivered again over a value the database will not take. When even
// that fails, the database itself is failing: the error goes back to the
// callers, which retry while their lease lasts.
func (f *Forwarder) writeOutcomes(ctx context.Context, fs []journal.Finish) ([]bool, error) {
	ids, err := f.cfg.Store.Complete(ctx, fs)
	if err == nil {
		return landedIn(fs, ids), nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	out := make([]bool, len(fs))
	for i, fin := range fs {
		if len(fs) > 1 {
			if ids, err = f.cfg.Store.Complete(ctx, fs[i:i+1]); err == nil {
				out[i] = len(ids) == 1
				continue
			}
		}
		bare := fin
		bare.Attempt.ResponseExcerpt, bare.Attempt.Error = "", "unrecordable"
		bare.LastError = "the journal refused this attempt's record; its reply excerpt was dropped"
		ids, err2 := f.cfg.Store.Complete(ctx, []journal.Finish{bare})
		if err2 != nil {
			return nil, fmt.Errorf("record outcome of event %d: %w", fin.ID, errors.Join(err, err2))
		}
		f.log.Error("journal refused an outcome; recorded it without its reply excerpt",
			zap.Int64("id", fin.ID), zap.String("status", string(fin.Status)), zap.Error(err))
		f.cfg.Metrics.outcomeRefused()
		out[i] = len(ids) == 1
	}
	return out, nil
}

// landedIn marks which outcomes of fs are among the recorded ids.
func landedIn(fs []journal.Finish, ids []int64) []bool {
	landed := make(map[int64]bool, len(ids))
	for _, id := range ids {
		landed[id] = true
	}
	out := make([]bool, len(fs))
	for i, f := range fs {
		out[i] = landed[f.ID]
	}
	return out
}

// Wake asks the fetcher to look for ready rows now (the in-process signal
// from the ingress after a commit). It never blocks.
func (f *Forwarder) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Start spawns the fetcher, reaper, stats and listen loops and returns.
func (f *Forwarder) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errors.New("forwarder: already started")
	}
	if f.stopped {
		return errors.New("forwarder: stopped before it started")
	}
	f.started = true
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancelLoops = cancel
	f.deliverCtx, f.cancelDeliver = context.WithCancel(context.WithoutCancel(ctx))
	f.goLoop(func() { f.fetchLoop(loopCtx) })
	f.goLoop(func() { f.tickLoop(loopCtx, f.cfg.ReapInterval, f.reapOnce) })
	f.goLoop(func() { f.tickLoop(loopCtx, f.cfg.StatsInterval, f.statsOnce) })
	f.goLoop(func() { f.tickLoop(loopCtx, f.cfg.CleanupInterval, f.cleanupOnce) })
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
// their attempt. It returns ctx.Err() if deliveries had to be interrupted.
func (f *Forwarder) Stop(ctx context.Context) error {
	f.mu.Lock()
	f.stopped = true
	if !f.started {
		f.mu.Unlock()
		return nil
	}
	select {
	case <-f.stopping:
	default:
		close(f.stopping)
	}
	f.mu.Unlock()

	// The fetcher stops at once; the reaper and stats loops too.
	f.cancelLoops()
	f.loops.Wait()

	done := make(chan struct{})
	go func() {
		f.inflight.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		f.log.Warn("shutdown deadline reached: interrupting deliveries and releasing their leases")
		f.cancelDeliver()
		// Interrupted deliveries hand their leases back and outcomes being
		// written give up within their statement timeouts. Anything still
		// running after that (outcome writes to a stalled database, or a
		// claim never dispatched nor given back) must not hang the
		// shutdown: its lease expires and the event is delivered again.
		select {
		case <-done:
		case <-time.After(f.stopGrace):
			f.log.Error("deliveries or outcome writes still unfinished well after the shutdown deadline; their leases expire and they are delivered again",
				zap.Int32("claims", f.claims.Load()), zap.Duration("waited", f.stopGrace))
		}
	}
	f.cancelDeliver()
	f.quitWorkers.Do(func() { close(f.workersQuit) })
	return err
}

// goDeliver runs fn on a delivery goroutine that is waiting for work, or
// on a new one. Reusing them keeps their grown stacks: a goroutine per
// delivery grew its stack from scratch every time (runtime.newstack was
// 6 % of whguard's CPU draining a backlog). Their number follows the
// deliveries in flight, which the slots bound.
func (f *Forwarder) goDeliver(fn func()) {
	select {
	case f.idle <- fn:
	default:
		go f.worker(fn)
	}
}

func (f *Forwarder) worker(fn func()) {
	f.workersStarted.Add(1)
	f.workersLive.Add(1)
	defer f.workersLive.Add(-1)
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		fn()
		fn = nil // let the delivery (its body) go while waiting
		t.Reset(workerIdle)
		select {
		case fn = <-f.idle:
		case <-t.C:
			return
		case <-f.workersQuit:
			return
		}
	}
}

// free is how many rows the fetcher may lease: the slots not in use.
func (f *Forwarder) free() int {
	return cap(f.slots) - len(f.slots)
}

// fetchLoop leases up to the number of free delivery slots whenever it is
// woken (a commit here, a NOTIFY from another replica, a finished delivery)
// or the poll interval passes.
func (f *Forwarder) fetchLoop(ctx context.Context) {
	poll := time.NewTicker(f.cfg.PollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-poll.C:
		}
		for ctx.Err() == nil {
			free := f.free()
			if free <= 0 {
				f.backlog.Store(true) // a finished delivery wakes us
				// Unless it finished just before the store and saw no
				// backlog: look again now that the flag is up.
				if free = f.free(); free <= 0 {
					break
				}
			}
			n := min(free, maxLeaseBatch)
			// Not cancelled by Stop: a lease statement interrupted after its
			// commit would strand rows as processing, their attempt spent.
			// Stop waits for it; it is one short statement.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseStatementTimeout)
			leasedAt := f.cfg.Now()
			leased, err := f.cfg.Store.Lease(lctx, n, f.cfg.Timeout+f.cfg.LeaseMargin)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					f.log.Warn("lease failed", zap.Error(err))
				}
				break
			}
			// Set before the deliveries start, for the claims they race with.
			f.backlog.Store(len(leased) == n)
			// Complete retries until shortly before the lease expires.
			recordBy := leasedAt.Add(f.cfg.Timeout + f.cfg.LeaseMargin - time.Second)
			for _, d := range leased {
				f.inflight.Add(1)
				select {
				case f.slots <- struct{}{}:
					f.goDeliver(func() { f.deliver(d, recordBy, false) })
				default:
					// A claim took the slot counted for this row.
					f.goDeliver(func() { f.deliverWhenSlot(d, recordBy, false) })
				}
			}
			if len(leased) < n {
				break
			}
		}
	}
}

func (f *Forwarder) tickLoop(ctx context.Context, every time.Duration, once func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (f *Forwarder) reapOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := f.cfg.Store.ReapExpired(ctx, f.cfg.Policy.MaxAttempts)
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("reap expired leases failed", zap.Error(err))
		}
		return
	}
	if n > 0 {
		f.log.Warn("expired leases returned to retry", zap.Int("count", n))
		f.cfg.Metrics.leaseExpired(n)
		f.Wake()
	}
}

// cleanupOnce applies retention (leader-only across PostgreSQL replicas).
func (f *Forwarder) cleanupOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	now := f.cfg.Now()
	c, err := f.cfg.Store.Cleanup(ctx, now.Add(-f.cfg.KeyRetention), now.Add(-f.cfg.PayloadRetention))
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("retention cleanup failed", zap.Error(err))
		}
		return
	}
	if c.Events > 0 || c.Payloads > 0 {
		f.log.Info("retention cleanup", zap.Int("events_deleted", c.Events), zap.Int("payloads_dropped", c.Payloads))
		f.cfg.Metrics.cleaned(c)
	}
}

func (f *Forwarder) statsOnce(ctx context.Context) {
	if f.cfg.Metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := f.cfg.Store.Stats(ctx)
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("refresh event gauges failed", zap.Error(err))
		}
		return
	}
	f.cfg.Metrics.setStats(s)
}

// Claim reserves a delivery for an event its receiver is about to journal,
// so the event can be inserted already leased for the returned duration
// (journal.Event.LeaseFor) and, once committed, delivered from memory by
// Dispatch: no lease statement, and one write of the row fewer per
// delivery. The claim holds no delivery slot until Dispatch finds one
// free (slots bound the requests to the backends, not the commits). It
// declines before Start and after Stop, when Concurrency claims are
// already waiting for slots, and while rows wait in the journal once
// claims are as many as half the slots: new events keep the cheap path
// without starving the backlog, which always has the other half. Every
// accepted claim must end in exactly one Dispatch or Unclaim.
func (f *Forwarder) Claim() (leaseFor time.Duration, ok bool) {
	if f.backlog.Load() && int(f.claims.Load()) >= cap(f.slots)/2 {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started || f.stopped {
		return 0, false
	}
	select {
	case f.unslotted <- struct{}{}:
	default:
		return 0, false
	}
	f.claims.Add(1)
	f.inflight.Add(1) // under mu: never after Stop's Wait has begun
	return f.cfg.Timeout + f.cfg.LeaseMargin, true
}

// Dispatch delivers a claimed event whose leased row is committed, as soon
// as a delivery slot is free. d carries the row's id, its first attempt
// and the claim's lease token; d.LeaseExpiresAt bounds how long it may
// wait for a slot and how long its outcome may be retried (measured from
// before the commit, so never past the row's real lease).
func (f *Forwarder) Dispatch(d journal.Delivery) {
	f.goDeliver(func() { f.deliverWhenSlot(d, d.LeaseExpiresAt.Add(-time.Second), true) })
}

// deliverWhenSlot delivers d as soon as a delivery slot is free; claimed
// says d came from Claim (else the fetcher leased it and a claim took its
// slot first). It waits while d's lease still leaves room for a whole
// attempt and half the lease margin (5 s by default): past that, or past
// the shutdown deadline, the row is handed back to the journal without
// spending its attempt, and whoever leases it next delivers it. recordBy
// is when d's outcome must be recorded by (a second before its lease ends).
func (f *Forwarder) deliverWhenSlot(d journal.Delivery, recordBy time.Time, claimed bool) {
	select {
	case f.slots <- struct{}{}:
		f.start(d, recordBy, claimed)
		return
	default:
	}
	// What the lease has left, less a whole attempt and half the margin
	// (a lease already over, or a zero expiry, waits not at all).
	wait := time.Duration(0)
	if left := recordBy.Add(time.Second).Sub(f.cfg.Now()); left > 0 {
		wait = left - f.cfg.Timeout - f.cfg.LeaseMargin/2
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case f.slots <- struct{}{}:
		f.start(d, recordBy, claimed)
		return
	case <-timer.C:
		f.log.Debug("no delivery slot in time; the event goes back to the journal",
			zap.Int64("id", d.ID), zap.String("provider", d.Provider))
	case <-f.deliverCtx.Done():
	}
	f.release(d) // before the counts below: Stop waits for it
	if claimed {
		f.Unclaim()
	} else {
		f.inflight.Done()
	}
	f.Wake() // the row is ready again; a slot freeing up wakes the fetcher for it
}

// start delivers d, which now holds a slot.
func (f *Forwarder) start(d journal.Delivery, recordBy time.Time, claimed bool) {
	if claimed {
		<-f.unslotted
		f.cfg.Metrics.claimed(d.Provider)
	}
	f.deliver(d, recordBy, claimed)
}

// Unclaim gives back a claim that holds no slot: its event was not
// inserted (a duplicate, a conflict, a failed commit), or its row is
// being handed back.
func (f *Forwarder) Unclaim() {
	<-f.unslotted
	f.claims.Add(-1)
	f.inflight.Done()
	if f.backlog.Load() {
		f.Wake() // the place it kept is free for the rows waiting
	}
}

// Reasons a delivery is held without being attempted (Summary.Held, and
// the reason label of whguard_deliveries_held_total).
const (
	// HoldNoBackend: no backend is configured for the event's provider.
	HoldNoBackend = "no_backend"
)

// hold hands d's lease back without spending its attempt, due again after
// wait, and counts why.
func (f *Forwarder) hold(d journal.Delivery, wait time.Duration, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	f.cfg.Metrics.held(d.Provider, reason)
	f.log.Debug("delivery held", zap.Int64("id", d.ID), zap.String("provider", d.Provider), zap.String("reason", reason))
	if _, err := f.cfg.Store.Hold(ctx, []journal.Hold{{ID: d.ID, LeaseToken: d.LeaseToken, For: wait, Reason: reason}}); err != nil {
		f.log.Warn("hold delivery failed; the reaper will return it", zap.Int64("id", d.ID), zap.Error(err))
	}
}

// release hands a leased row back to the journal without spending its
// attempt: it is leased again, here or by another replica. The reaper
// returns it if this fails.
func (f *Forwarder) release(d journal.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := f.cfg.Store.Release(ctx, []int64{d.ID}, []uuid.UUID{d.LeaseToken}); err != nil {
		f.log.Warn("release lease failed; the reaper will return it", zap.Int64("id", d.ID), zap.Error(err))
	}
}

// freeSlot ends a delivery that holds a slot and has no outcome to
// record (interrupted). claimed says it came from Claim.
func (f *Forwarder) freeSlot(claimed bool) {
	f.releaseSlot(claimed)
	f.inflight.Done()
}

// toRecord hands a delivery's slot over to the recording of its outcome,
// waiting while Concurrency outcomes are already being recorded.
func (f *Forwarder) toRecord(claimed bool) {
	f.records <- struct{}{}
	f.releaseSlot(claimed)
}

// recorded ends a delivery whose outcome is written (or given up).
func (f *Forwarder) recorded() {
	<-f.records
	f.inflight.Done()
}

func (f *Forwarder) releaseSlot(claimed bool) {
	if claimed {
		f.claims.Add(-1)
	}
	<-f.slots
	// With rows waiting, lease again once a quarter of the slots are
	// free rather than after every delivery: fewer, larger leases
	// (one statement per row leased stops scaling at a few thousand
	// per second on a 2-core machine).
	if f.backlog.Load() && cap(f.slots)-len(f.slots) >= max(1, cap(f.slots)/4) {
		f.Wake()
	}
}

// deliver runs one attempt and records its outcome by recordBy. claimed
// says the slot came from Claim.
func (f *Forwarder) deliver(d journal.Delivery, recordBy time.Time, claimed bool) {
	log := f.log.With(zap.Int64("id", d.ID), zap.String("provider", d.Provider),
		zap.String("event_id", d.EventID), zap.Int("attempt", d.Attempt))
	target, ok := f.cfg.Targets[d.Provider]
	if !ok {
		// Journaled before its provider was removed or renamed in the
		// configuration: not an attempt. The event waits in the journal,
		// shown as held, and goes out once a replica has a target for it.
		defer f.freeSlot(claimed)
		f.hold(d, f.cfg.NoBackendHold, HoldNoBackend)
		return
	}
	res := send(f.deliverCtx, f.cfg.Client, target, d, f.cfg.Timeout, f.cfg.Now)
	if f.deliverCtx.Err() != nil && res.status == 0 {
		// Interrupted by shutdown, not by the backend: hand the lease back
		// without spending the attempt.
		defer f.freeSlot(claimed)
		f.release(d)
		return
	}
	dec := f.cfg.Policy.Decide(d.BudgetAttempt, res.status, res.retryAfter, f.cfg.Now(), f.cfg.Rand)
	fin := journal.Finish{
		ID: d.ID, LeaseToken: d.LeaseToken, Status: journal.Status(dec.Outcome),
		Attempt: res.attempt(d.Attempt),
	}
	if dec.Outcome == OutcomeRetry {
		fin.RetryIn = dec.Delay
	}
	if dec.Outcome != OutcomeDone {
		fin.LastError = dec.Reason
		if res.errClass != "" {
			fin.LastError += " (" + res.errClass + ")"
		}
	}
	f.cfg.Metrics.delivery(d.Provider, dec.Outcome, res.duration)
	f.toRecord(claimed)
	defer f.recorded()
	switch dec.Outcome {
	case OutcomeDone:
		log.Debug("delivered", zap.Int("status", res.status), zap.Duration("took", res.duration))
	case OutcomeRetry:
		log.Info("delivery failed; will retry", zap.Int("status", res.status), zap.String("error", res.errClass), zap.Duration("in", dec.Delay))
	case OutcomeDead:
		log.Warn("delivery quarantined (dead)", zap.Int("status", res.status), zap.String("reason", dec.Reason))
	}
	f.finish(log, d, recordBy, fin)
	if dec.Outcome == OutcomeRetry && dec.Delay < f.cfg.PollInterval {
		// Due before the next poll: look for it when it is due, counted
		// from now that the due time (now + delay, database clock) is set.
		time.AfterFunc(dec.Delay, f.Wake)
	}
}

// finish records the outcome, retrying a failing database until recordBy
// (shortly before the lease expires): a recorded outcome avoids a repeat
// delivery of a done event and keeps a dead one quarantined.
func (f *Forwarder) finish(log *zap.Logger, d journal.Delivery, recordBy time.Time, fin journal.Finish) {
	fin.ID, fin.LeaseToken = d.ID, d.LeaseToken
	pause := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		landed, err := f.complete.Do(ctx, []journal.Finish{fin})
		cancel()
		switch {
		case err == nil && !landed[0]:
			log.Warn("lease lost before the outcome was recorded (expired and taken over)")
			return
		case err == nil:
			return
		case f.cfg.Now().Add(pause).After(recordBy), f.deliverCtx.Err() != nil:
			// Out of lease time, or past the shutdown deadline: stop trying.
			// The lease will expire and the reaper returns the row: a
			// repeat delivery, never a loss.
			log.Error("record outcome failed; the event will be delivered again", zap.Error(err))
			return
		}
		log.Warn("record outcome failed; retrying", zap.Error(err), zap.Duration("in", pause))
		time.Sleep(pause)
		pause = min(pause*2, 2*time.Second)
	}
}
