package forwarder_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

// slowServer answers after 50 ms, 200 or (once failing is set) 503, and
// counts the requests it holds at once.
type slowServer struct {
	now, peak atomic.Int32
	served    atomic.Int64
	failing   atomic.Bool
}

func (s *slowServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	slowFor(r.Context(), 50*time.Millisecond)
	s.served.Add(1)
	if s.failing.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// A backlog for a backend that takes 50 ms per webhook: the limit of
// deliveries in flight grows from its start (16), and the backend then
// sees more deliveries at once than that start; once the backend fails,
// the limit falls to half of what it had grown to or less.
//
// How far and how fast the limit grows depends on the machine (on a
// loaded one the latency measured includes the wait for a CPU, and growth
// stops early): that is table-tested with a fake clock and modelled
// backends in adapt_test.go (TestLimitGrowsToServeASlowBackend,
// TestLimitHalvesOnFailures, …). This test checks only what holds on any
// machine: the real pool, client and journal feed the limit, and the
// limit it sets is the one applied. The deadlines are bounds for a hang,
// not measures.
func TestLimitAdaptsToARealSlowBackend(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	var evs []journal.Event
	for i := range 3000 {
		id := fmt.Sprintf("slow-%d", i)
		evs = append(evs, journal.Event{Provider: "acme", EventID: id, ContentHash: "h-" + id,
			Headers: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{}`), Path: "/webhooks/acme"})
	}
	for i := 0; i < len(evs); i += 500 {
		if _, err := j.Append(context.Background(), evs[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	s := &slowServer{}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	_, reg := startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
		c.Concurrency = 128
		c.Policy.MaxAttempts = 100
	})
	limit := func() float64 { return metricValue(t, reg, "whguard_deliveries_limit", nil) }
	if l := limit(); l != 16 {
		t.Fatalf("limit at start %v, want 16", l)
	}
	// The first window in which the limit binds (the backlog keeps it in
	// use) grows it, whatever the latency; the pool then fills the new
	// slots from the backlog. The growth may be taken back later, on a
	// machine too busy for it to pay: keep the highest seen.
	var grown float64
	waitUntil(t, 60*time.Second, "the limit to grow above 16 and the backend to see more than 16 at once", func() bool {
		grown = max(grown, limit())
		return grown > 16 && s.peak.Load() > 16
	})
	if grown > 128 {
		t.Fatalf("limit %v, above its ceiling 128", grown)
	}
	if p := s.peak.Load(); p > 128 {
		t.Fatalf("backend saw %d deliveries at once, above the ceiling 128", p)
	}
	if s.served.Load() >= int64(len(evs)) {
		t.Fatal("the backlog ran out before the failures began; make it larger")
	}
	// Every attempt fails now: each window halves the limit.
	s.failing.Store(true)
	waitUntil(t, 60*time.Second, fmt.Sprintf("the limit to fall to %v or less once the backend fails", grown/2), func() bool {
		return limit() <= grown/2
	})
	s.failing.Store(false)
}
