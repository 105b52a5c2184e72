package governor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestRedisNamespacesKeepDeploymentsApart: two deployments with journals
// of their own share one Redis and the usual backend origin
// (http://127.0.0.1:8080): each keeps its own budget and breaker. Two
// replicas of one deployment (the same journal) share them. (Found: keys
// were namespaced only by origin, so two deployments shared one breaker
// and one budget.)
func TestRedisNamespacesKeepDeploymentsApart(t *testing.T) {
	t.Parallel()
	client := newRedisClient(t)
	base := testPrefix()
	cfg := Config{Backend: Limit{Rate: Rate{N: 1, Per: time.Hour}, Burst: 1}, SlotTTL: time.Second,
		Breaker: testBreaker, Backends: []string{"http://127.0.0.1:8080"}}
	build := func(journal string) *Redis {
		g, err := NewRedis(cfg, client, RedisOptions{Prefix: base, Registerer: prometheus.NewRegistry(),
			Namespace: func(context.Context) (string, error) { return NamespaceOf(journal), nil }})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a, a2, b := build("postgres 7714729223590267014 shop"), build("postgres 7714729223590267014 shop"), build("postgres 7714729223590267014 billing")
	be := "http://127.0.0.1:8080"
	if d := mustAcquire(t, a, ask(be, "p", 1)); !d.Allowed {
		t.Fatalf("first delivery of deployment A: %+v", d)
	}
	if d := mustAcquire(t, a2, ask(be, "p", 2)); d.Allowed || d.Reason != HoldRate {
		t.Fatalf("a replica of A (same journal) did not share A's budget: %+v", d)
	}
	if d := mustAcquire(t, b, ask(be, "p", 3)); !d.Allowed {
		t.Fatalf("deployment B (another journal) was held by A's budget: %+v", d)
	}
	// A's breaker opens; B's stays closed.
	a.bmu.Lock()
	kb := a.known(be)
	kb.attempts, kb.failures = 6, 6 // as Finish counts them
	a.bmu.Unlock()
	a.syncBreakers(ctx)
	b.syncBreakers(ctx)
	if s := a.BreakerStates()[be]; s != BreakerOpen {
		t.Fatalf("A's breaker %s, want open", s)
	}
	if s := b.BreakerStates()[be]; s != BreakerClosed {
		t.Fatalf("B's breaker %s after A's opened, want closed", s)
	}
	// The namespace is in every key, and is not the journal's identity
	// itself (a system identifier is not a secret, but need not be shown).
	keys, err := client.Keys(ctx, base+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	nsA, nsB := NamespaceOf("postgres 7714729223590267014 shop"), NamespaceOf("postgres 7714729223590267014 billing")
	for _, k := range keys {
		if !strings.HasPrefix(k, base+nsA+":") && !strings.HasPrefix(k, base+nsB+":") {
			t.Errorf("key %q is in no deployment's namespace", k)
		}
		if strings.Contains(k, "7714729223590267014") {
			t.Errorf("key %q shows the journal's identity", k)
		}
	}
	if len(keys) < 3 {
		t.Errorf("keys %v: want each deployment's rate and A's breaker", keys)
	}
}

// hostileRedis is a Redis governor whose warnings are observed.
func hostileRedis(t *testing.T, cfg Config) (*Redis, *prometheus.Registry, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.WarnLevel)
	reg := prometheus.NewRegistry()
	g, err := NewRedis(cfg, newRedisClient(t), RedisOptions{Prefix: testPrefix(), Logger: zap.New(core), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return g, reg, logs
}

func redisErrors(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "whguard_redis_errors_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestRedisValuesAreChecked: what whguard reads back from its own keys is
// checked, not trusted. A far-future or garbage rate value, a key of the
// wrong type, an in-flight slot that never expires and a breaker open for
// years are each a Redis error: the call fails (the delivery is held,
// briefly), whguard_redis_errors_total counts it, a warning is logged and
// whguard_redis_up is 0 while it lasts; once the key is fixed, deliveries
// go on. A wait Redis returns is capped at a minute before asking again.
// (Found: a bad rate-key value parked deliveries until 2286, and they
// stayed parked after Redis was fixed; a wrong-typed key stalled
// deliveries with whguard_redis_up 1 and no warning.)
func TestRedisValuesAreChecked(t *testing.T) {
	t.Parallel()
	be := "http://b:80"
	cfg := Config{Backend: Limit{Rate: Rate{N: 10, Per: time.Second}, Burst: 5}, MaxInFlight: 10, SlotTTL: 5 * time.Second,
		Breaker: testBreaker, Backends: []string{be}}
	rateKey := func(g *Redis) string { return g.key(be, rateKeys(g.cfg, ask(be, "p", 0))[0].key) }
	for _, tc := range []struct {
		name   string
		poison func(g *Redis) error
	}{
		{"far-future rate value", func(g *Redis) error {
			return g.client.(*redis.Client).Set(ctx, rateKey(g), "9999999999999999", 0).Err()
		}},
		{"garbage rate value", func(g *Redis) error {
			return g.client.(*redis.Client).Set(ctx, rateKey(g), "not a number", 0).Err()
		}},
		{"wrong-typed rate key", func(g *Redis) error {
			return g.client.(*redis.Client).HSet(ctx, rateKey(g), "x", "1").Err()
		}},
		{"wrong-typed in-flight key", func(g *Redis) error {
			return g.client.(*redis.Client).Set(ctx, g.key(be, "inflight"), "x", 0).Err()
		}},
		{"slot that never expires", func(g *Redis) error {
			return g.client.(*redis.Client).ZAdd(ctx, g.key(be, "inflight"), redis.Z{Score: 9e18, Member: "stuck"}).Err()
		}},
		{"breaker open for years", func(g *Redis) error {
			return g.client.(*redis.Client).HSet(ctx, g.key(be, "breaker"), "st", "1", "until", "9999999999999999999", "cd", "1").Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, reg, logs := hostileRedis(t, cfg)
			if err := g.ready(ctx); err != nil {
				t.Fatal(err)
			}
			if err := tc.poison(g); err != nil {
				t.Fatal(err)
			}
			g.syncBreakers(ctx) // reads the breaker's hash back
			d, err := g.Acquire(ctx, ask(be, "p", 1))
			if err == nil {
				t.Fatalf("acquire over a poisoned key: %+v, no error", d)
			}
			if n := redisErrors(t, reg); n < 1 {
				t.Errorf("whguard_redis_errors_total = %v", n)
			}
			if v := testutil.ToFloat64(g.upG); v != 0 {
				t.Errorf("whguard_redis_up = %v while whguard's keys hold bad values", v)
			}
			if logs.FilterMessageSnippet("redis").Len() == 0 {
				t.Error("no warning")
			}
			// Fixed by hand (an operator deletes the key): deliveries go on.
			if err := g.client.(*redis.Client).Del(ctx, rateKey(g), g.key(be, "inflight"), g.key(be, "breaker")).Err(); err != nil {
				t.Fatal(err)
			}
			g.syncBreakers(ctx)
			if d := mustAcquire(t, g, ask(be, "p", 2)); !d.Allowed {
				t.Fatalf("after the key was fixed: %+v", d)
			}
			if v := testutil.ToFloat64(g.upG); v != 1 {
				t.Errorf("whguard_redis_up = %v after the key was fixed", v)
			}
		})
	}
}

// TestRedisWaitIsCapped: a limit whose honest wait is long (1/h) is asked
// again within a minute, never parked for the whole wait on one answer.
func TestRedisWaitIsCapped(t *testing.T) {
	t.Parallel()
	be := "http://b:80"
	g, _, _ := hostileRedis(t, Config{Backend: Limit{Rate: Rate{N: 1, Per: time.Hour}, Burst: 1}, SlotTTL: time.Second})
	if d := mustAcquire(t, g, ask(be, "p", 1)); !d.Allowed {
		t.Fatalf("first: %+v", d)
	}
	for i, acquire := range []func() (Decision, error){
		func() (Decision, error) { return g.Acquire(ctx, ask(be, "p", 2)) },
		func() (Decision, error) {
			ds, err := g.AcquireBatch(ctx, []Ask{ask(be, "p", 3), ask(be, "p", 4)})
			if err != nil {
				return Decision{}, err
			}
			return ds[0], nil
		},
	} {
		d, err := acquire()
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || d.Reason != HoldRate || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
			t.Errorf("call %d: %+v; want held for at most a minute", i, d)
		}
	}
}

// failToken fails every command that carries token, as a Redis that stops
// answering in the middle of a batch would.
type failToken struct{ token string }

func (h failToken) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h failToken) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h failToken) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for _, a := range cmd.Args() {
			if a == any(h.token) {
				err := errors.New("injected: connection reset by peer")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// TestRedisFailedBatchGivesBackItsGrants: a batch decided one ask at a
// time (the breaker known open, due for a probe) fails at its second ask;
// the slot its first ask was granted is given back, since its asker only
// learns of the error (found: it was held until it expired). And a
// breaker known bad fails a batch.
func TestRedisFailedBatchGivesBackItsGrants(t *testing.T) {
	c := newRedisClient(t)
	c.AddHook(failToken{"tok-2"})
	b := "http://b:80"
	g, err := NewRedis(Config{MaxInFlight: 5, SlotTTL: time.Minute, Breaker: testBreaker, Backends: []string{b}}, c, RedisOptions{Prefix: testPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	g.bmu.Lock()
	kb := g.known(b)
	kb.state, kb.until = BreakerOpen, time.Now().Add(-time.Second)
	g.bmu.Unlock()
	if _, err := g.AcquireBatch(ctx, []Ask{ask(b, "p", 1), ask(b, "p", 2), ask(b, "p", 3)}); err == nil {
		t.Fatal("a batch whose second ask failed succeeded")
	}
	if n, err := g.InFlight(ctx, b); err != nil || n != 0 {
		t.Fatalf("%d slots held after the failed batch (%v), want 0", n, err)
	}
	// The breaker is not left waiting on a probe nobody runs.
	if d := mustAcquire(t, g, ask(b, "p", 4)); !d.Allowed {
		t.Fatalf("after the failed batch: %+v", d)
	}
	// A breaker Redis holds a bad value for stops a batch as it stops a
	// single ask (found: a batch looked only at the state known closed).
	g.bmu.Lock()
	g.known(b).bad = true
	g.bmu.Unlock()
	if ds, err := g.AcquireBatch(ctx, []Ask{ask(b, "p", 5), ask(b, "p", 6)}); err == nil {
		t.Fatalf("a batch decided %+v while Redis holds a bad breaker value", ds)
	}
}
