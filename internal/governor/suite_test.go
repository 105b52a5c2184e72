package governor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/whguard/whguard/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// governor is what the suite tests; both implementations have it.
type governor interface {
	Acquire(ctx context.Context, a Ask) (Decision, error)
	AcquireBatch(ctx context.Context, asks []Ask) ([]Decision, error)
	Release(ctx context.Context, a Ask) error
	Finish(ctx context.Context, a Ask, o Outcome) error
	BreakerStates() map[string]BreakerState
	InFlight(ctx context.Context, backend string) (int, error)
	Limits(provider string) bool
	OnClose(fn func(backend string))
}

var (
	_ governor = (*Local)(nil)
	_ governor = (*Redis)(nil)
)

// redisURL is the test server: TEST_REDIS_URL, else the local one.
func redisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// newRedisClient connects to the test server, closed with the test.
func newRedisClient(t *testing.T) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s (is it running? use `make test`): %v", redisURL(), err)
	}
	return c
}

// testPrefix is a key prefix of the test's own.
func testPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "whguard_test_" + hex.EncodeToString(b[:]) + ":"
}

// implementations builds each implementation for a test.
var implementations = map[string]func(t *testing.T, cfg Config) governor{
	"local": func(t *testing.T, cfg Config) governor {
		g, err := NewLocal(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	},
	"redis": func(t *testing.T, cfg Config) governor {
		g, err := NewRedis(cfg, newRedisClient(t), RedisOptions{Prefix: testPrefix(), Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		return g
	},
}

// TestGovernor runs the same suite against both implementations.
func TestGovernor(t *testing.T) {
	for name, build := range implementations {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range suite {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, func(cfg Config) governor { return build(t, cfg) })
				})
			}
		})
	}
}

var suite = []struct {
	name string
	run  func(t *testing.T, build func(Config) governor)
}{
	{"no limits asks nothing", testNoLimits},
	{"rate grants the burst then holds until the interval", testRateBurst},
	{"provider rate applies on top of the backend's", testProviderRate},
	{"backends have separate limits", testSeparateBackends},
	{"in-flight bound, release and expiry", testInFlight},
	{"a full backend spends no rate", testInFlightSpendsNoRate},
	{"concurrent asks never pass the rate", testConcurrentRate},
	{"breaker opens, probes, closes", testBreakerOpensProbesCloses},
	{"a batch grants what singles would", testBatch},
	{"a probe held by a limit is given up", testProbeHeldByALimitIsGivenUp},
	{"an event's 500s do not open the breaker while others succeed", testEventFailuresBesideSuccesses},
}

var ctx = context.Background()

func ask(backend, provider string, token int) Ask {
	return Ask{Backend: backend, Provider: provider, Token: fmt.Sprint("tok-", token)}
}

func mustAcquire(t *testing.T, g governor, a Ask) Decision {
	t.Helper()
	d, err := g.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func testNoLimits(t *testing.T, build func(Config) governor) {
	g := build(Config{Providers: map[string]Limit{"stripe": {Rate: Rate{N: 1, Per: time.Second}}}})
	if g.Limits("github") {
		t.Error("github has no limit, yet Limits says to ask")
	}
	if !g.Limits("stripe") {
		t.Error("stripe has a limit, yet Limits says not to ask")
	}
	for i := range 100 {
		if d := mustAcquire(t, g, ask("http://b:80", "github", i)); !d.Allowed {
			t.Fatalf("ask %d held without a limit: %+v", i, d)
		}
	}
}

func testRateBurst(t *testing.T, build func(Config) governor) {
	g := build(Config{Backend: Limit{Rate: Rate{N: 10, Per: time.Second}, Burst: 3}})
	for i := range 3 {
		if d := mustAcquire(t, g, ask("http://b:80", "p", i)); !d.Allowed {
			t.Fatalf("ask %d within the burst held: %+v", i, d)
		}
	}
	d := mustAcquire(t, g, ask("http://b:80", "p", 3))
	if d.Allowed || d.Reason != HoldRate {
		t.Fatalf("ask past the burst: %+v, want held for rate", d)
	}
	if d.RetryAfter <= 0 || d.RetryAfter > 100*time.Millisecond {
		t.Fatalf("RetryAfter %v, want within one interval (100ms)", d.RetryAfter)
	}
	time.Sleep(d.RetryAfter + 5*time.Millisecond)
	if d := mustAcquire(t, g, ask("http://b:80", "p", 4)); !d.Allowed {
		t.Fatalf("ask after RetryAfter held: %+v", d)
	}
}

func testProviderRate(t *testing.T, build func(Config) governor) {
	g := build(Config{
		Backend:   Limit{Rate: Rate{N: 100, Per: time.Second}, Burst: 100},
		Providers: map[string]Limit{"stripe": {Rate: Rate{N: 1, Per: time.Minute}}},
	})
	if d := mustAcquire(t, g, ask("http://b:80", "stripe", 1)); !d.Allowed {
		t.Fatalf("first stripe delivery held: %+v", d)
	}
	d := mustAcquire(t, g, ask("http://b:80", "stripe", 2))
	if d.Allowed || d.Reason != HoldRate || d.RetryAfter < 50*time.Second {
		t.Fatalf("second stripe delivery within the minute: %+v, want held about a minute", d)
	}
	if d := mustAcquire(t, g, ask("http://b:80", "github", 3)); !d.Allowed {
		t.Fatalf("github held by stripe's limit: %+v", d)
	}
}

func testSeparateBackends(t *testing.T, build func(Config) governor) {
	g := build(Config{Backend: Limit{Rate: Rate{N: 1, Per: time.Hour}}, MaxInFlight: 1, SlotTTL: time.Minute})
	for i, b := range []string{"http://a:80", "http://b:80", "https://a:443"} {
		if d := mustAcquire(t, g, ask(b, "p", i)); !d.Allowed {
			t.Fatalf("first delivery to %s held: %+v", b, d)
		}
	}
	if d := mustAcquire(t, g, ask("http://a:80", "p", 9)); d.Allowed {
		t.Fatal("second delivery to http://a:80 within the hour allowed")
	}
}

func testInFlight(t *testing.T, build func(Config) governor) {
	g := build(Config{MaxInFlight: 2, SlotTTL: 300 * time.Millisecond})
	b := "http://b:80"
	for i := range 2 {
		if d := mustAcquire(t, g, ask(b, "p", i)); !d.Allowed {
			t.Fatalf("slot %d held: %+v", i, d)
		}
	}
	if n, _ := g.InFlight(ctx, b); n != 2 {
		t.Errorf("InFlight = %d, want 2", n)
	}
	d := mustAcquire(t, g, ask(b, "p", 2))
	if d.Allowed || d.Reason != HoldInFlight || d.RetryAfter <= 0 {
		t.Fatalf("third delivery: %+v, want held for in_flight", d)
	}
	// The same token asking again (a retry of the same lease) keeps its slot.
	if d := mustAcquire(t, g, ask(b, "p", 1)); !d.Allowed {
		t.Fatalf("a holder asking again held: %+v", d)
	}
	if err := g.Release(ctx, ask(b, "p", 0)); err != nil {
		t.Fatal(err)
	}
	if d := mustAcquire(t, g, ask(b, "p", 2)); !d.Allowed {
		t.Fatalf("delivery after a release held: %+v", d)
	}
	// Nobody releases now (a crashed replica): the slots expire.
	if !testwait.Until(2*time.Second, 50*time.Millisecond, func() bool { return mustAcquire(t, g, ask(b, "p", 3)).Allowed }) {
		t.Fatal("slots of a holder that never released did not expire")
	}
}

func testInFlightSpendsNoRate(t *testing.T, build func(Config) governor) {
	g := build(Config{Backend: Limit{Rate: Rate{N: 1, Per: time.Hour}, Burst: 2}, MaxInFlight: 1, SlotTTL: time.Minute})
	b := "http://b:80"
	if d := mustAcquire(t, g, ask(b, "p", 0)); !d.Allowed {
		t.Fatalf("first: %+v", d)
	}
	for i := range 5 {
		if d := mustAcquire(t, g, ask(b, "p", 1)); d.Reason != HoldInFlight {
			t.Fatalf("ask %d with the slot taken: %+v, want in_flight", i, d)
		}
	}
	if err := g.Release(ctx, ask(b, "p", 0)); err != nil {
		t.Fatal(err)
	}
	if d := mustAcquire(t, g, ask(b, "p", 1)); !d.Allowed {
		t.Fatalf("second of a burst of 2 held after refusals for in_flight: %+v", d)
	}
}

func testConcurrentRate(t *testing.T, build func(Config) governor) {
	g := build(Config{Backend: Limit{Rate: Rate{N: 20, Per: time.Second}, Burst: 5}})
	var granted atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < 500*time.Millisecond; i++ {
				d, err := g.Acquire(ctx, ask("http://b:80", "p", w*10000+i))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					granted.Add(1)
				} else {
					time.Sleep(min(d.RetryAfter, 10*time.Millisecond))
				}
			}
		}()
	}
	wg.Wait()
	// 5 at once, then 20/s over (a little more than) half a second.
	elapsed := time.Since(start)
	most := 5 + int32(20*elapsed.Seconds()) + 1
	if n := granted.Load(); n > most || n < 10 {
		t.Fatalf("granted %d in %v, want at most %d (and at least 10)", n, elapsed, most)
	}
}

// TestRedisOutage: a Redis that does not answer is an error to the caller
// (which holds the delivery), whguard_redis_up 0 and one warning however
// many calls fail; the first answer after it sets the gauge back.
func TestRedisOutage(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	reg := prometheus.NewRegistry()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer down.Close()
	g, err := NewRedis(Config{MaxInFlight: 1, SlotTTL: time.Second}, down, RedisOptions{Prefix: testPrefix(), Logger: zap.New(core), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if d, err := g.Acquire(ctx, ask("http://b:80", "p", i)); err == nil || d.Allowed {
			t.Fatalf("acquire with Redis down: %+v, %v; want an error", d, err)
		}
	}
	if g.Up() {
		t.Error("Up() with Redis down")
	}
	if v := testutil.ToFloat64(g.upG); v != 0 {
		t.Errorf("whguard_redis_up = %v during the outage", v)
	}
	if n := logs.FilterMessageSnippet("redis unreachable").Len(); n != 1 {
		t.Errorf("%d outage warnings for 3 failed calls, want 1", n)
	}
	// Redis answers again: the sync loop's ping finds it with no call
	// asking (no breaker here, no delivery).
	g.client = newRedisClient(t)
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(ctx)
	testwait.For(t, 5*time.Second, "the outage's end seen without a call", g.Up)
	if v := testutil.ToFloat64(g.upG); v != 1 {
		t.Errorf("whguard_redis_up = %v after Redis answered", v)
	}
	if d := mustAcquire(t, g, ask("http://b:80", "p", 9)); !d.Allowed {
		t.Fatalf("acquire once Redis answers: %+v", d)
	}
	if v := testutil.ToFloat64(g.upG); v != 1 || !g.Up() {
		t.Errorf("whguard_redis_up = %v after Redis answered", v)
	}
}

// settle makes outcomes counted so far reach the shared state (Redis
// sends them every breakerSync; the test does not wait for that).
func settle(t *testing.T, g governor) {
	t.Helper()
	if r, ok := g.(*Redis); ok {
		r.syncBreakers(ctx)
	}
}

func attempt(t *testing.T, g governor, a Ask, o Outcome) {
	t.Helper()
	if d := mustAcquire(t, g, a); !d.Allowed {
		t.Fatalf("attempt %s held: %+v", a.Token, d)
	}
	if err := g.Finish(ctx, a, o); err != nil {
		t.Fatal(err)
	}
}

var testBreaker = BreakerConfig{Enabled: true, Window: 10 * time.Second, MinAttempts: 4, FailureRatio: 0.5, Cooldown: 300 * time.Millisecond}

func testBreakerOpensProbesCloses(t *testing.T, build func(Config) governor) {
	b := "http://b:80"
	g := build(Config{Breaker: testBreaker, SlotTTL: 5 * time.Second, Backends: []string{b}})
	var closed []string // the recoveries OnClose was told of
	g.OnClose(func(backend string) { closed = append(closed, backend) })
	n := 0
	next := func() Ask { n++; return ask(b, "p", n) }
	for range 3 {
		attempt(t, g, next(), Succeeded)
	}
	attempt(t, g, next(), FailedTransiently)
	settle(t, g)
	if s := g.BreakerStates()[b]; s != BreakerClosed {
		t.Fatalf("1 failure in 4: breaker %s", s)
	}
	for range 2 {
		attempt(t, g, next(), FailedTransiently)
	}
	settle(t, g)
	if s := g.BreakerStates()[b]; s != BreakerOpen {
		t.Fatalf("3 failures in 6: breaker %s, want open", s)
	}
	d := mustAcquire(t, g, next())
	if d.Allowed || d.Reason != HoldBreaker || d.RetryAfter <= 0 || d.RetryAfter > 300*time.Millisecond {
		t.Fatalf("delivery with the breaker open: %+v", d)
	}
	time.Sleep(d.RetryAfter + 10*time.Millisecond)
	probe := next()
	if d := mustAcquire(t, g, probe); !d.Allowed {
		t.Fatalf("first delivery after the cooldown (the probe) held: %+v", d)
	}
	if d := mustAcquire(t, g, next()); d.Allowed || d.Reason != HoldBreaker {
		t.Fatalf("second delivery while the probe is out: %+v", d)
	}
	if s := g.BreakerStates()[b]; s != BreakerHalfOpen {
		t.Fatalf("probe out: breaker %s, want half-open", s)
	}
	if err := g.Finish(ctx, probe, FailedTransiently); err != nil {
		t.Fatal(err)
	}
	if len(closed) != 0 {
		t.Fatalf("told of a recovery %v before any probe succeeded", closed)
	}
	d = mustAcquire(t, g, next())
	if d.Allowed || d.RetryAfter <= 300*time.Millisecond || d.RetryAfter > 600*time.Millisecond {
		t.Fatalf("after a failed probe: %+v, want held for the doubled cooldown (600ms)", d)
	}
	time.Sleep(d.RetryAfter + 10*time.Millisecond)
	probe = next()
	attempt(t, g, probe, Succeeded)
	if s := g.BreakerStates()[b]; s != BreakerClosed {
		t.Fatalf("after a good probe: breaker %s, want closed", s)
	}
	attempt(t, g, next(), Succeeded)
	settle(t, g)
	if len(closed) != 1 || closed[0] != b {
		t.Fatalf("recoveries told: %v, want %s once (when the probe closed it)", closed, b)
	}
}

// A probe a limit holds is given up, so that the next delivery can probe
// (else the breaker would wait for the probe's expiry).
func testProbeHeldByALimitIsGivenUp(t *testing.T, build func(Config) governor) {
	b := "http://b:80"
	g := build(Config{Breaker: testBreaker, SlotTTL: time.Minute, Backends: []string{b},
		Providers: map[string]Limit{"slow": {Rate: Rate{N: 1, Per: time.Hour}}}})
	attempt(t, g, ask(b, "slow", 0), FailedTransiently) // spends slow's rate
	for i := range 3 {
		attempt(t, g, ask(b, "p", i+1), FailedTransiently)
	}
	settle(t, g)
	if s := g.BreakerStates()[b]; s != BreakerOpen {
		t.Fatalf("breaker %s, want open", s)
	}
	time.Sleep(testBreaker.Cooldown + 10*time.Millisecond)
	if d := mustAcquire(t, g, ask(b, "slow", 5)); d.Allowed || d.Reason != HoldRate {
		t.Fatalf("probe of a provider out of rate: %+v, want held for rate", d)
	}
	if d := mustAcquire(t, g, ask(b, "p", 6)); !d.Allowed {
		t.Fatalf("next delivery could not probe: %+v", d)
	}
}

// testEventFailuresBesideSuccesses: a 500 may be about one event (a
// backend handler that throws on it) rather than the backend: poison
// events that fail while other deliveries to the same backend succeed do
// not open its breaker; a real outage (connection errors, 502-504, 429)
// still does, and so do 500s when nothing succeeds. (Found: 30 GitHub
// events that made the app answer 500 opened the breaker, and 0 of 60
// Stripe events were delivered after 10 s.)
func testEventFailuresBesideSuccesses(t *testing.T, build func(Config) governor) {
	b := "http://b:80"
	g := build(Config{Breaker: testBreaker, SlotTTL: 5 * time.Second, Backends: []string{b}})
	n := 0
	next := func() Ask { n++; return ask(b, "p", n) }
	attempt(t, g, next(), Succeeded)
	settle(t, g)
	for i := range 30 {
		attempt(t, g, next(), FailedOnEvent)
		if i%10 == 9 {
			attempt(t, g, next(), Succeeded)
		}
		settle(t, g)
	}
	if s := g.BreakerStates()[b]; s != BreakerClosed {
		t.Fatalf("30 poison 500s beside successes: breaker %s, want closed", s)
	}
	for range 8 { // the backend goes down
		a := next()
		if d := mustAcquire(t, g, a); !d.Allowed {
			break // opened already (Local knows at once)
		}
		if err := g.Finish(ctx, a, FailedTransiently); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, g)
	if s := g.BreakerStates()[b]; s != BreakerOpen {
		t.Fatalf("an outage after the poison events: breaker %s, want open", s)
	}

	// 500s with nothing succeeding: the backend itself is failing.
	b2 := "http://b2:80"
	g2 := build(Config{Breaker: testBreaker, SlotTTL: 5 * time.Second, Backends: []string{b2}})
	for i := range 6 {
		a := ask(b2, "p", i)
		if d := mustAcquire(t, g2, a); !d.Allowed {
			break
		}
		if err := g2.Finish(ctx, a, FailedOnEvent); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, g2)
	if s := g2.BreakerStates()[b2]; s != BreakerOpen {
		t.Fatalf("only 500s: breaker %s, want open", s)
	}
}

func TestOutcomeOf(t *testing.T) {
	for status, want := range map[int]Outcome{0: FailedTransiently, 200: Succeeded, 204: Succeeded, 400: Succeeded, 404: Succeeded,
		401: FailedTransiently, 403: FailedTransiently, 409: Succeeded, 422: Succeeded,
		408: FailedTransiently, 425: FailedOnEvent, 429: FailedTransiently, 500: FailedOnEvent, 501: FailedOnEvent,
		502: FailedTransiently, 503: FailedTransiently, 504: FailedTransiently, 507: FailedOnEvent} {
		if got := OutcomeOf(status); got != want {
			t.Errorf("OutcomeOf(%d) = %v, want %v", status, got, want)
		}
	}
}

// Replicas share one breaker: opened by the outcomes of one, it holds the
// deliveries of the other, and only one of them sends the probe.
func TestRedisBreakerShared(t *testing.T) {
	b := "http://b:80"
	prefix := testPrefix()
	cfg := Config{Breaker: testBreaker, SlotTTL: 5 * time.Second, Backends: []string{b}}
	var gs [2]*Redis
	for i := range gs {
		g, err := NewRedis(cfg, newRedisClient(t), RedisOptions{Prefix: prefix, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	for i := range 4 {
		attempt(t, gs[0], ask(b, "p", i), FailedTransiently)
	}
	gs[0].syncBreakers(ctx)
	gs[1].syncBreakers(ctx)
	if d := mustAcquire(t, gs[1], ask(b, "p", 10)); d.Allowed || d.Reason != HoldBreaker {
		t.Fatalf("other replica with the breaker open: %+v", d)
	}
	time.Sleep(testBreaker.Cooldown + 10*time.Millisecond)
	d0 := mustAcquire(t, gs[0], ask(b, "p", 11))
	d1 := mustAcquire(t, gs[1], ask(b, "p", 12))
	if d0.Allowed == d1.Allowed {
		t.Fatalf("probes after the cooldown: %+v and %+v, want exactly one", d0, d1)
	}
	// The probe succeeds: its replica alone is told of the recovery, also
	// once the other has learnt that the breaker closed.
	var told [2]int
	for i, g := range gs {
		g.OnClose(func(string) { told[i]++ })
	}
	prober, probe := 0, ask(b, "p", 11)
	if d1.Allowed {
		prober, probe = 1, ask(b, "p", 12)
	}
	if err := gs[prober].Finish(ctx, probe, Succeeded); err != nil {
		t.Fatal(err)
	}
	other := 1 - prober
	gs[other].syncBreakers(ctx)
	if s := gs[other].BreakerStates()[b]; s != BreakerClosed {
		t.Fatalf("the other replica's breaker after the good probe: %s", s)
	}
	attempt(t, gs[other], ask(b, "p", 13), Succeeded)
	gs[other].syncBreakers(ctx)
	if told[prober] != 1 || told[other] != 0 {
		t.Fatalf("recoveries told: prober %d, other %d; want 1 and 0", told[prober], told[other])
	}
}

func testBatch(t *testing.T, build func(Config) governor) {
	b := "http://b:80"
	g := build(Config{Backend: Limit{Rate: Rate{N: 10, Per: time.Second}, Burst: 3}, MaxInFlight: 4, SlotTTL: time.Minute})
	asks := make([]Ask, 5)
	for i := range asks {
		asks[i] = ask(b, "p", i)
	}
	ds, err := g.AcquireBatch(ctx, asks)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		switch {
		case i < 3 && !d.Allowed:
			t.Fatalf("ask %d of a batch within the burst of 3 held: %+v", i, d)
		case i >= 3 && (d.Allowed || d.Reason != HoldRate || d.RetryAfter <= 0 || d.RetryAfter > 100*time.Millisecond):
			t.Fatalf("ask %d past the burst: %+v, want held for rate within one interval", i, d)
		}
	}
	if d := mustAcquire(t, g, ask(b, "p", 10)); d.Allowed {
		t.Fatal("a single ask allowed after a batch spent the burst")
	}
	if n, _ := g.InFlight(ctx, b); n != 3 {
		t.Fatalf("%d slots taken by a batch of 3 grants", n)
	}
	time.Sleep(350 * time.Millisecond) // 3 more tokens
	ds, err = g.AcquireBatch(ctx, []Ask{ask(b, "p", 20), ask(b, "p", 21), ask(b, "p", 22)})
	if err != nil {
		t.Fatal(err)
	}
	if !ds[0].Allowed || ds[1].Allowed || ds[1].Reason != HoldInFlight || ds[2].Reason != HoldInFlight {
		t.Fatalf("batch with one slot left: %+v", ds)
	}
	for _, i := range []int{0, 1, 2, 20} {
		if err := g.Finish(ctx, ask(b, "p", i), Succeeded); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := g.InFlight(ctx, b); n != 0 {
		t.Fatalf("%d slots left after every holder finished", n)
	}
}
