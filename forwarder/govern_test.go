package forwarder_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/journal"
)

// gauge is a backend that counts the requests it gets and the most in
// flight at once, answering after delay.
type gauge struct {
	delay time.Duration
	calls atomic.Int32
	now   atomic.Int32
	most  atomic.Int32
}

func (g *gauge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.calls.Add(1)
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	slowFor(r.Context(), g.delay)
	w.WriteHeader(200)
}

// grantLog is a Local governor that records, by the governor's own
// clock, when it allowed each delivery, and checks that every outcome it
// is told of is of a delivery it allowed. Its calls are serialized, so
// that the clock it read last is the one of the decision at hand.
type grantLog struct {
	*governor.Local
	mu       sync.Mutex
	read     time.Time // the governor's clock at its last reading
	granted  map[string]bool
	times    []time.Time
	finished int
	unknown  int // outcomes of deliveries never allowed
}

// newGrantLog builds a Local governor with cfg, logging its grants.
func newGrantLog(t *testing.T, cfg governor.Config) *grantLog {
	t.Helper()
	g := &grantLog{granted: map[string]bool{}}
	l, err := governor.NewLocal(cfg, func() time.Time { g.read = time.Now(); return g.read })
	if err != nil {
		t.Fatal(err)
	}
	g.Local = l
	return g
}

func (g *grantLog) Acquire(ctx context.Context, a governor.Ask) (governor.Decision, error) {
	ds, err := g.AcquireBatch(ctx, []governor.Ask{a})
	if err != nil {
		return governor.Decision{}, err
	}
	return ds[0], nil
}

func (g *grantLog) AcquireBatch(ctx context.Context, asks []governor.Ask) ([]governor.Decision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ds := make([]governor.Decision, len(asks))
	for i, a := range asks {
		d, err := g.Local.Acquire(ctx, a)
		if err != nil {
			return nil, err
		}
		if d.Allowed {
			g.granted[a.Token] = true
			g.times = append(g.times, g.read)
		}
		ds[i] = d
	}
	return ds, nil
}

func (g *grantLog) Finish(ctx context.Context, a governor.Ask, o governor.Outcome) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.finished++
	if !g.granted[a.Token] {
		g.unknown++
	}
	return g.Local.Finish(ctx, a, o)
}

func (g *grantLog) Release(ctx context.Context, a governor.Ask) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Local.Release(ctx, a)
}

// grants is how many deliveries the governor has allowed.
func (g *grantLog) grants() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.times)
}

// mostInWindow is the largest number of deliveries allowed within any
// window of length w of the governor's clock.
func (g *grantLog) mostInWindow(w time.Duration) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	most := 0
	for i, s := range g.times {
		n := 0
		for _, o := range g.times[i:] {
			if o.Sub(s) < w {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// TestGovernedDeliveries: with a rate and an in-flight bound, every request
// the backend sees was allowed by the governor, which allows no more than
// the burst plus the rate in a window, and the backend never sees more
// requests at once than the bound; every event is delivered at its first
// attempt (a delivery held by the governor spends none). The rate is
// measured where it is decided, on the governor's clock: a loaded machine
// may delay requests after their grant, and bunch them at the backend.
func TestGovernedDeliveries(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := openJournal(t, store)
		g := &gauge{delay: 30 * time.Millisecond}
		srv := httptest.NewServer(g)
		t.Cleanup(srv.Close)
		gov := newGrantLog(t, governor.Config{
			Backend: governor.Limit{Rate: governor.Rate{N: 20, Per: time.Second}, Burst: 2},
			// One more slot than the burst: once the burst is spent, a
			// third delivery finds a free slot and is held for rate,
			// however slowly the store lets deliveries through.
			MaxInFlight: 3, SlotTTL: 5 * time.Second,
		})
		var ids []int64
		for i := range 30 {
			ids = append(ids, appendEvent(t, j, "gov-"+string(rune('a'+i))))
		}
		f, reg := startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
			c.Governor = gov
			c.Concurrency = 8
		})
		for _, id := range ids {
			if d := waitStatus(t, j, id, journal.StatusDone, 15*time.Second); d.Attempts != 1 {
				t.Fatalf("event %d delivered after %d attempts, want 1", id, d.Attempts)
			}
		}
		if m := g.most.Load(); m > 3 {
			t.Errorf("%d requests in flight at once, bound 3", m)
		}
		// Stopped, the forwarder has told the governor every outcome.
		stopForwarder(t, f)
		gov.mu.Lock()
		finished, unknown := gov.finished, gov.unknown
		gov.mu.Unlock()
		if calls := g.calls.Load(); unknown != 0 || int(calls) != finished {
			t.Errorf("backend got %d requests; governor told %d outcomes, %d of deliveries it never allowed", calls, finished, unknown)
		}
		if m := gov.mostInWindow(time.Second); m > 22 {
			t.Errorf("%d deliveries allowed within one second, limit 20/s with a burst of 2", m)
		}
		if metricValue(t, reg, "whguard_deliveries_held_total", map[string]string{"provider": "acme", "reason": "rate"}) == 0 {
			t.Error("no delivery counted as held for rate")
		}
	})
}

// scriptedGovernor answers from a function the test changes.
type scriptedGovernor struct {
	mu     sync.Mutex
	answer func() (governor.Decision, error)
	asked  atomic.Int32
}

func (s *scriptedGovernor) Acquire(context.Context, governor.Ask) (governor.Decision, error) {
	s.asked.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answer()
}
func (s *scriptedGovernor) Release(context.Context, governor.Ask) error { return nil }
func (s *scriptedGovernor) Finish(context.Context, governor.Ask, governor.Outcome) error {
	return nil
}
func (s *scriptedGovernor) set(f func() (governor.Decision, error)) {
	s.mu.Lock()
	s.answer = f
	s.mu.Unlock()
}

// TestGovernorHoldsAreNotAttempts: a governor that cannot answer (Redis
// down) or holds for longer than a moment keeps the event in the journal,
// held with its reason and no attempt spent, however many times; once it
// allows, the event goes out at attempt 1.
func TestGovernorHoldsAreNotAttempts(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := openJournal(t, store)
		rec, srv := newRecorder(t)
		gov := &scriptedGovernor{}
		gov.set(func() (governor.Decision, error) { return governor.Decision{}, errors.New("redis: connection refused") })
		id := appendEvent(t, j, "held")
		_, reg := startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
			c.Governor = gov
			c.UnavailableHold = 50 * time.Millisecond
			c.Policy.MaxAttempts = 2
		})
		waitHeld := func(reason string, times float64) {
			t.Helper()
			waitUntil(t, 10*time.Second, fmt.Sprintf("held %v times for %s", times, reason), func() bool {
				return metricValue(t, reg, "whguard_deliveries_held_total", map[string]string{"provider": "acme", "reason": reason}) >= times
			})
		}
		waitHeld(governor.HoldUnavailable, 3)
		// Between holds the row is leased again (processing, its attempt
		// counted until the hold gives it back): what must hold is that no
		// attempt was made or recorded and the event never went dead.
		if d := get(t, j, id); len(d.AttemptLog) != 0 || d.Status == journal.StatusDead || len(rec.requests()) != 0 {
			t.Fatalf("held event: %+v, %d attempts logged", d.Summary, len(d.AttemptLog))
		}
		gov.set(func() (governor.Decision, error) {
			return governor.Decision{Reason: governor.HoldBreaker, RetryAfter: 1100 * time.Millisecond}, nil
		})
		waitHeld(governor.HoldBreaker, 1)
		var d *journal.Detail
		if !eventually(10*time.Second, 20*time.Millisecond, func() bool { d = get(t, j, id); return d.Held == governor.HoldBreaker }) {
			t.Fatalf("event not shown held for breaker: %+v", d.Summary)
		}
		if n := len(rec.requests()); n != 0 {
			t.Fatalf("backend called %d times while held", n)
		}
		gov.set(func() (governor.Decision, error) { return governor.Decision{Allowed: true}, nil })
		if d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second); d.Attempts != 1 {
			t.Fatalf("delivered after %d attempts, want 1", d.Attempts)
		}
	})
}

// switchable is a backend that answers 503 until up is set.
type switchable struct {
	up    atomic.Bool
	calls atomic.Int32
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.calls.Add(1)
	if !s.up.Load() {
		w.WriteHeader(503)
		return
	}
	w.WriteHeader(200)
}

// TestBreakerDuringAnOutage: with the backend down, the breaker opens
// after MinAttempts failures and the attempts fall to about one probe per
// cooldown; held deliveries spend no attempt, so no event goes dead over
// an outage longer than its retry schedule; once up, one probe closes the
// breaker and everything is delivered. Attempts are counted where they are
// allowed, by the governor: on a loaded machine, attempts allowed before
// the breaker opened may reach the backend after.
func TestBreakerDuringAnOutage(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := openJournal(t, store)
		be := &switchable{}
		srv := httptest.NewServer(be)
		t.Cleanup(srv.Close)
		gov := newGrantLog(t, governor.Config{SlotTTL: 5 * time.Second, Breaker: governor.BreakerConfig{
			Enabled: true, Window: 10 * time.Second, MinAttempts: 5, FailureRatio: 0.5, Cooldown: 300 * time.Millisecond,
		}})
		var ids []int64
		for i := range 20 {
			ids = append(ids, appendEvent(t, j, "outage-"+string(rune('a'+i))))
		}
		_, reg := startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
			c.Governor = gov
			// The whole retry schedule (4 attempts, 20-100 ms apart) is far
			// shorter than the outage.
			c.Policy.MaxAttempts = 4
		})
		backend := forwarder.Origin(srv.URL)
		waitUntil(t, 10*time.Second, "the breaker to open", func() bool { return gov.BreakerStates()[backend] != governor.BreakerClosed })
		// The governor's calls are serialized: every attempt allowed
		// before the breaker opened is counted by now.
		opened := gov.grants()
		// A fixed window in which no more than the probes may be allowed:
		// cooldowns of 300, 600 ms, two probes in 1.5 s (a third at most).
		time.Sleep(1500 * time.Millisecond)
		if during := gov.grants() - opened; during > 3 {
			t.Errorf("%d attempts allowed in 1.5 s with the breaker open, want about one per cooldown", during)
		}
		if v := metricValue(t, reg, "whguard_deliveries_held_total", map[string]string{"provider": "acme", "reason": "breaker"}); v == 0 {
			t.Error("no delivery counted as held for breaker")
		}
		for _, id := range ids {
			if d := get(t, j, id); d.Status == journal.StatusDead {
				t.Fatalf("event %d dead during the outage: %+v", id, d.Summary)
			}
		}
		be.up.Store(true)
		for _, id := range ids {
			waitStatus(t, j, id, journal.StatusDone, 15*time.Second)
		}
		if s := gov.BreakerStates()[backend]; s != governor.BreakerClosed {
			t.Errorf("breaker %s after delivery, want closed", s)
		}
	})
}

// slowProvider holds provider "slow" for 900 ms at every ask, forever,
// and allows the others.
type slowProvider struct{ scriptedGovernor }

func (s *slowProvider) Acquire(_ context.Context, a governor.Ask) (governor.Decision, error) {
	if a.Provider == "slow" {
		return governor.Decision{Reason: governor.HoldRate, RetryAfter: 900 * time.Millisecond}, nil
	}
	return governor.Decision{Allowed: true}, nil
}

// TestALimitedProviderCannotTakeEverySlot: deliveries a limit keeps
// holding wait in memory at most a second in all, and in at most half the
// slots; the rest go to the journal. Another provider's events, behind a
// backlog of the limited one, are delivered at once (they waited as long
// as the lease allowed, holding every slot, before).
func TestALimitedProviderCannotTakeEverySlot(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := openJournal(t, store)
		rec, srv := newRecorder(t)
		ctx := context.Background()
		for i := range 8 {
			if _, err := j.Append(ctx, []journal.Event{{Provider: "slow", EventID: "s" + string(rune('a'+i)), ContentHash: "h",
				Headers: http.Header{}, Body: []byte("{}"), Path: "/webhooks/slow"}}); err != nil {
				t.Fatal(err)
			}
		}
		var ids []int64
		for i := range 3 {
			ids = append(ids, appendEvent(t, j, "fast-"+string(rune('a'+i))))
		}
		// Leases of 32 s (the longest margin): deliveries kept in memory
		// as long as their lease allowed would hold both slots about half
		// a minute, which a bound of 10 s tells apart on any machine.
		start := time.Now()
		startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
			c.Governor = &slowProvider{}
			c.Concurrency = 2
			c.LeaseMargin = forwarder.MaxLeaseMargin
			c.Targets = map[string]forwarder.Target{"acme": {BackendURL: srv.URL}, "slow": {BackendURL: srv.URL}}
		})
		for _, id := range ids {
			waitStatus(t, j, id, journal.StatusDone, 20*time.Second)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("the other provider's 3 events took %s behind a held backlog", took)
		}
		for _, r := range rec.requests() {
			if strings.Contains(r.uri, "slow") {
				t.Fatalf("a held delivery reached the backend: %s", r.uri)
			}
		}
	})
}
