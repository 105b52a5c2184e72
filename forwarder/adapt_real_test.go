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

func (s *slowServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	time.Sleep(50 * time.Millisecond)
	s.served.Add(1)
	if s.failing.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// A backlog for a backend that takes 50 ms per webhook: the limit of
// deliveries in flight grows from its start (16) while the latency holds,
// far enough to serve it (the backend sees more than 60 at once), and
// halves when the backend starts failing.
func TestLimitAdaptsToARealSlowBackend(t *testing.T) {
	j := openJournal(t, "postgres")
	var evs []journal.Event
	for i := range 6000 {
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
	deadline := time.Now().Add(15 * time.Second)
	for s.peak.Load() <= 60 {
		if time.Now().After(deadline) {
			t.Fatalf("backend saw at most %d deliveries at once after 15 s (limit %v); want more than 60", s.peak.Load(), limit())
		}
		time.Sleep(20 * time.Millisecond)
	}
	grown := limit()
	if grown <= 60 || grown > 128 {
		t.Fatalf("limit %v after growing, want 61 to 128", grown)
	}
	if s.served.Load() >= int64(len(evs)) {
		t.Fatal("the backlog ran out before the failures began; make it larger")
	}
	s.failing.Store(true)
	deadline = time.Now().Add(10 * time.Second)
	for limit() > grown/2 {
		if time.Now().After(deadline) {
			t.Fatalf("limit %v 10 s after the backend began failing, want at most %v", limit(), grown/2)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.failing.Store(false)
}
