package forwarder_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

type deadAlerts struct {
	mu   sync.Mutex
	dead []string
}

func (a *deadAlerts) Dead(provider, backend, eventID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dead = append(a.dead, provider+" "+eventID)
}

func (a *deadAlerts) Refuses(string, string, int, bool) {}

// TestFiguresAndDeadAlerts: deliveries, failed attempts and dead events
// reach the journal's minute figures, and each dead event is told to the
// alerts.
func TestFiguresAndDeadAlerts(t *testing.T) {
	t.Parallel()
	forEachStore(t, testFiguresAndDeadAlerts)
}

func testFiguresAndDeadAlerts(t *testing.T, store string) {
	j := openJournal(t, store)
	// The first request gets a 503 (a failed attempt, retried); the event
	// "bad" a 400 (dead at once); the others a 200.
	var first sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		code := 400
		if !strings.Contains(string(b), `"bad"`) {
			code = 200
			first.Do(func() { code = 503 })
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	alerts := &deadAlerts{}
	ids := []int64{appendEvent(t, j, "a"), appendEvent(t, j, "b")}
	dead := appendEvent(t, j, "bad")
	startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
		c.FiguresInterval = 50 * time.Millisecond
		c.Alerts = alerts
		c.Replica = "r1"
	})
	for _, id := range ids {
		waitStatus(t, j, id, journal.StatusDone, 10*time.Second)
	}
	waitStatus(t, j, dead, journal.StatusDead, 10*time.Second)

	// The figures are written every 50 ms: wait for them.
	var sum journal.Minute
	if !eventually(10*time.Second, 20*time.Millisecond, func() bool {
		ms, err := j.Minutes(context.Background(), time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		sum = journal.Minute{}
		for _, m := range ms {
			if m.Provider != "acme" {
				t.Fatalf("figures of provider %q", m.Provider)
			}
			sum.Add(m)
		}
		return sum.Delivered == 2 && sum.Dead == 1 && sum.Failed >= 2
	}) {
		t.Fatalf("minute figures %+v, want 2 delivered, 1 dead, at least 2 failed attempts (the 503 and the 400)", sum)
	}
	if p99, ok := sum.Percentile(0.99); !ok || p99 <= 0 || p99 > time.Minute {
		t.Errorf("ack-to-delivery p99 %v %v", p99, ok)
	}
	alerts.mu.Lock()
	defer alerts.mu.Unlock()
	if len(alerts.dead) != 1 || alerts.dead[0] != "acme bad" {
		t.Errorf("dead alerts %v, want [acme bad]", alerts.dead)
	}
}

// TestReapedDeadIsToldAndCounted: an event whose last attempt's lease
// expired (its worker crashed) goes dead by the reaper, and the alerts and
// the minute figures hear of it like of any other death.
func TestReapedDeadIsToldAndCounted(t *testing.T) {
	t.Parallel()
	forEachStore(t, testReapedDeadIsToldAndCounted)
}

func testReapedDeadIsToldAndCounted(t *testing.T, store string) {
	j := openJournal(t, store)
	id := appendEvent(t, j, "crashed")
	// A replica leased it and died: its lease runs out with the one
	// attempt of the budget spent.
	if ds, err := j.Lease(context.Background(), 1, 10*time.Millisecond); err != nil || len(ds) != 1 {
		t.Fatalf("lease: %v %v", ds, err)
	}
	alerts := &deadAlerts{}
	_, srv := newRecorder(t)
	startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
		c.Policy.MaxAttempts = 1
		c.FiguresInterval = 50 * time.Millisecond
		c.Alerts = alerts
	})
	waitStatus(t, j, id, journal.StatusDead, 10*time.Second)
	// The figures are written every 50 ms, the alert told after the
	// reaper's statement: wait for both.
	var (
		sum  journal.Minute
		told []string
	)
	if !eventually(10*time.Second, 20*time.Millisecond, func() bool {
		ms, err := j.Minutes(context.Background(), time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		sum = journal.Minute{}
		for _, m := range ms {
			sum.Add(m)
		}
		alerts.mu.Lock()
		told = append([]string(nil), alerts.dead...)
		alerts.mu.Unlock()
		return sum.Dead == 1 && len(told) == 1 && told[0] == "acme crashed"
	}) {
		t.Fatalf("figures %+v, alerts %v: want one dead event, told", sum, told)
	}
}
