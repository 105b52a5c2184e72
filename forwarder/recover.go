package forwarder

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/governor"
)

// Recovery: when a backend recovers, its providers' events waiting in
// retry are made due at once, by one journal statement (RetryDue), and
// the fetcher is woken. They are then leased and admitted like any other
// row, so the backend's limits and in-flight bound pace them; nothing is
// delivered from here. A backend recovers when:
//   - its breaker closes on a probe this process sent (the governor's
//     OnClose: with Redis, one replica hears of it);
//   - it is resumed through this process (Resume);
//   - it answers 2xx after recoveryRun transient failures in a row seen
//     here (each replica counts its own; at most one such recovery per
//     backend every recoveryGap on a replica).
// The statement touches only rows due later than now, so a second run
// (another replica's) finds little or nothing to do.

const (
	// recoveryRun is how many transient failures in a row (what
	// governor.OutcomeOf calls transient: no answer, 401, 403, 408, 502,
	// 503, 504; not 429) make the next 2xx a recovery.
	recoveryRun = 3
	// recoveryGap is the least time between two recoveries of a backend
	// told by its answers on one replica: a backend that flaps brings its
	// retries forward at most this often.
	recoveryGap = 5 * time.Second
	// recoveryTimeout bounds a recovery's statement.
	recoveryTimeout = 10 * time.Second
)

// Causes of a recovery, the cause label of
// whguard_backend_recoveries_total.
const (
	RecoveryBreakerClosed = "breaker_closed"
	RecoveryResumed       = "resumed"
	RecoveryAnswered      = "answered"
)

// afterAnswer is the run of transient failures in a row after an attempt
// answered status (0: no answer), given the run before it, and whether
// the answer is a recovery: a 2xx after at least recoveryRun of them.
// Other answers (a 4xx, a 500 about one event) neither lengthen nor end
// the run, nor does a 429: a backend that asked for time (Retry-After) and
// then takes one request has not come back from an outage, and bringing
// every retry forward would override what it asked.
func afterAnswer(run, status int) (int, bool) {
	switch {
	case status == http.StatusTooManyRequests:
		return run, false
	case governor.OutcomeOf(status) == governor.FailedTransiently:
		return run + 1, false
	case status >= 200 && status < 300:
		return 0, run >= recoveryRun
	}
	return run, false
}

// recoveries is the forwarder's recovery state per backend origin.
type recoveries struct {
	// backends is fixed by newRecoveries; the states change under mu.
	backends map[string]*backendRun
	mu       sync.Mutex
	// stopped refuses new recoveries once Stop waits for running ones.
	stopped bool
	running sync.WaitGroup
}

// backendRun is one backend's run of transient failures.
type backendRun struct {
	// run counts its transient failures in a row; last is when its
	// answers last told a recovery (both under recoveries.mu).
	run  int
	last time.Time
	// failing is run > 0, read without the lock: while it is false, an
	// answer that is no transient failure changes nothing (most answers).
	failing atomic.Bool
}

func newRecoveries(origins map[string]string) *recoveries {
	r := &recoveries{backends: map[string]*backendRun{}}
	for _, o := range origins {
		r.backends[o] = &backendRun{}
	}
	return r
}

// answered counts an attempt's answer (0: none) from origin, and
// recovers the backend when it is a 2xx after a run of transient failures.
func (f *Forwarder) answered(origin string, status int) {
	r := f.recovery
	b := r.backends[origin]
	if b == nil || !b.failing.Load() && governor.OutcomeOf(status) != governor.FailedTransiently {
		return
	}
	now := f.cfg.Now()
	r.mu.Lock()
	run, recovered := afterAnswer(b.run, status)
	b.run = run
	b.failing.Store(run > 0)
	if recovered && now.Sub(b.last) < recoveryGap {
		recovered = false
	}
	if recovered {
		b.last = now
	}
	r.mu.Unlock()
	if recovered {
		f.recoverAsync(origin, RecoveryAnswered)
	}
}

// forget ends origin's run of failures, under mu, and returns its state
// (nil for a backend not configured).
func (r *recoveries) forget(origin string) *backendRun {
	b := r.backends[origin]
	if b != nil {
		b.run = 0
		b.failing.Store(false)
	}
	return b
}

// breakerHolds forgets origin's run of failures: its breaker opened, and
// its closing is the recovery (on whichever replica sends the probe).
func (f *Forwarder) breakerHolds(origin string) {
	f.recovery.mu.Lock()
	f.recovery.forget(origin)
	f.recovery.mu.Unlock()
}

// breakerClosed is the governor's OnClose: origin's breaker closed on a
// probe this process sent.
func (f *Forwarder) breakerClosed(origin string) {
	r := f.recovery
	r.mu.Lock()
	if b := r.forget(origin); b != nil { // the probe's own 2xx is no second recovery
		b.last = f.cfg.Now()
	}
	r.mu.Unlock()
	f.recoverAsync(origin, RecoveryBreakerClosed)
}

// recoverAsync runs origin's recovery in the background: it is told on a
// delivery's way out, which must not wait for a journal statement.
func (f *Forwarder) recoverAsync(origin, cause string) {
	r := f.recovery
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.running.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.running.Done()
		ctx, cancel := context.WithTimeout(f.aborted, recoveryTimeout)
		defer cancel()
		f.recoverProviders(ctx, origin, cause, f.providersOf(origin))
	}()
}

// recoverProviders makes the waiting retries of providers (of backend
// origin) due now, counts the recovery and wakes the fetcher.
func (f *Forwarder) recoverProviders(ctx context.Context, origin, cause string, providers []string) {
	if len(providers) == 0 {
		return
	}
	f.cfg.Metrics.recovered(origin, cause)
	n, err := f.cfg.Store.RetryDue(ctx, providers)
	if err != nil {
		f.log.Warn("backend recovered, but its retries could not be made due; they wait for their backoff",
			zap.String("backend", origin), zap.String("cause", cause), zap.Error(err))
		return
	}
	f.log.Info("backend recovered: its events waiting in retry are due now", zap.String("backend", origin),
		zap.String("cause", cause), zap.Strings("providers", providers), zap.Int("events", n))
	if n > 0 {
		f.Wake()
	}
}

// providersOf lists the providers delivered to origin that no pause
// holds (their retries would only be held again).
func (f *Forwarder) providersOf(origin string) []string {
	var out []string
	for p, o := range f.origins {
		if _, paused := f.pausedFor(p); o == origin && !paused {
			out = append(out, p)
		}
	}
	return out
}

// stopRecoveries waits for the recoveries running (their statements end
// with the shutdown deadline) and refuses new ones.
func (f *Forwarder) stopRecoveries() {
	f.recovery.mu.Lock()
	f.recovery.stopped = true
	f.recovery.mu.Unlock()
	f.recovery.running.Wait()
}
