package main

import (
	"strings"
	"testing"
	"time"
)

// TestE2ERedisDownAtStartAndDeploymentsApart: whguard starts while its
// Redis is down (found: it refused to start): it becomes ready and
// acknowledges webhooks, whguard_redis_up is 0, and nothing is sent past
// the limit it cannot check; once Redis answers, everything is delivered.
// Then a second deployment, with a journal of its own, shares that Redis
// and the same backend origin: it has a budget of its own (found: both
// deployments shared one budget and one breaker), so its events are
// delivered while the first's budget is spent.
func TestE2ERedisDownAtStartAndDeploymentsApart(t *testing.T) {
	t.Parallel()
	rd := &throwawayRedis{t: t, addr: freePort(t)} // not started yet
	b := newProbeBackend(t, 0)
	// The breaker is off: its sync would talk to Redis on its own, and
	// what must find Redis back here is the deliveries' own asks.
	limit := []string{"WHGUARD_REDIS_URL=" + rd.url(), "WHGUARD_BACKEND_RATE_LIMIT=1/h", "WHGUARD_BACKEND_RATE_BURST=5", "WHGUARD_BREAKER=off"}
	a := newProtectedSet(t, 1, b, limit...) // waits for /readyz
	a.sendMany("a", 5)
	if v := a.metric(0, "whguard_redis_up"); v != 0 {
		t.Errorf("whguard_redis_up = %v with Redis down", v)
	}
	if !strings.Contains(a.replicas[0].p.out.String(), "redis does not answer at start-up") {
		t.Error("no warning that Redis did not answer at start-up")
	}
	time.Sleep(time.Second) // nothing may go out meanwhile
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("%d deliveries sent while the limit could not be checked", n)
	}
	rd.start()
	a.waitAllDelivered(5, 30*time.Second, 0) // the burst of 5
	waitFor(t, 10*time.Second, "whguard_redis_up back to 1", func() bool { return a.metric(0, "whguard_redis_up") == 1 })
	a.sendMany("a-more", 2) // past the budget of 1/h
	time.Sleep(2 * time.Second)
	if n, _ := b.delivered(); n != 5 {
		t.Fatalf("%d events delivered with a budget of 5", n)
	}

	// Another deployment on the same Redis and backend origin.
	other := newProtectedSet(t, 1, b, limit...)
	other.sendMany("b", 5)
	waitFor(t, 30*time.Second, "the other deployment's events delivered with a budget of their own", func() bool {
		n, _ := b.delivered()
		return n == 10
	})
}
