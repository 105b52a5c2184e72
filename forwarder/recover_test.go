package forwarder_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/journal"
)

// outage starts a forwarder in front of a backend that is down, whose
// retries wait an hour (the jitter drawn at its largest), and fails the
// first attempt of n events: they wait in retry. It returns the backend
// and its origin, the events, and the forwarder with its metrics.
func outage(t *testing.T, j journal.Store, n int, mod func(*forwarder.Config)) (*switchable, string, []int64, *forwarder.Forwarder, *prometheus.Registry) {
	t.Helper()
	be := &switchable{}
	srv := httptest.NewServer(be)
	t.Cleanup(srv.Close)
	f, reg := startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
		c.Policy = forwarder.Policy{BaseDelay: time.Hour, MaxDelay: time.Hour, MaxAttempts: 5}
		c.Rand = func() float64 { return 0.999 }
		if mod != nil {
			mod(c)
		}
	})
	var ids []int64
	for i := range n {
		id := appendEvent(t, j, fmt.Sprintf("outage-%d", i))
		ids = append(ids, id)
		waitStatus(t, j, id, journal.StatusRetry, 10*time.Second)
	}
	for _, id := range ids {
		if d := get(t, j, id); d.NextAttemptAt.Before(time.Now().Add(30*time.Minute)) || d.Attempts != 1 {
			t.Fatalf("event %d after the failure: %d attempts, due %s; want one, due in about an hour", id, d.Attempts, d.NextAttemptAt)
		}
	}
	return be, forwarder.Origin(srv.URL), ids, f, reg
}

// deliveredSoon waits for every event of ids to be done (at their second
// attempt: brought forward, not replayed) within seconds.
func deliveredSoon(t *testing.T, j journal.Store, ids []int64) {
	t.Helper()
	for _, id := range ids {
		if d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second); d.Attempts != 2 || len(d.Replays) != 0 {
			t.Fatalf("event %d delivered after %d attempts, %d replays; want 2 and none", id, d.Attempts, len(d.Replays))
		}
	}
}

func recoveries(t *testing.T, reg *prometheus.Registry, backend, cause string) float64 {
	t.Helper()
	return metricValue(t, reg, "whguard_backend_recoveries_total", map[string]string{"backend": backend, "cause": cause})
}

// TestRecoveryBringsRetriesForward: events left in retry with an hour's
// backoff by an outage are delivered within seconds once their backend
// recovers: it answers a 2xx after a run of transient failures, it is
// resumed, or its breaker closes on a probe.
func TestRecoveryBringsRetriesForward(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		t.Run("answered", func(t *testing.T) {
			t.Parallel()
			j := openJournal(t, store)
			be, backend, ids, _, reg := outage(t, j, 3, nil)
			be.up.Store(true)
			// Nothing is attempted before an hour: a new event's 2xx is
			// what tells the recovery.
			fresh := appendEvent(t, j, "after-the-outage")
			waitStatus(t, j, fresh, journal.StatusDone, 10*time.Second)
			deliveredSoon(t, j, ids)
			if got := recoveries(t, reg, backend, forwarder.RecoveryAnswered); got != 1 {
				t.Fatalf("recoveries by answer: %v, want 1", got)
			}
		})
		t.Run("resumed", func(t *testing.T) {
			t.Parallel()
			j := openJournal(t, store)
			be, backend, ids, f, reg := outage(t, j, 3, nil)
			ctx := context.Background()
			if _, err := f.Pause(ctx, journal.Pause{Kind: journal.PauseBackend, Name: backend, Reason: "outage"}); err != nil {
				t.Fatal(err)
			}
			be.up.Store(true)
			if found, err := f.Resume(ctx, journal.PauseBackend, backend, "back"); err != nil || !found {
				t.Fatalf("resume: %v %v", found, err)
			}
			deliveredSoon(t, j, ids)
			if got := recoveries(t, reg, backend, forwarder.RecoveryResumed); got != 1 {
				t.Fatalf("recoveries by resume: %v, want 1", got)
			}
		})
		t.Run("breaker closed", func(t *testing.T) {
			t.Parallel()
			j := openJournal(t, store)
			gov, err := governor.NewLocal(governor.Config{SlotTTL: 5 * time.Second, Breaker: governor.BreakerConfig{
				Enabled: true, Window: time.Minute, MinAttempts: 3, FailureRatio: 0.5, Cooldown: 300 * time.Millisecond,
			}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			be, backend, ids, _, reg := outage(t, j, 3, func(c *forwarder.Config) { c.Governor = gov })
			waitUntil(t, 5*time.Second, "the breaker to open", func() bool { return gov.BreakerStates()[backend] == governor.BreakerOpen })
			be.up.Store(true)
			// A new event is held by the open breaker, then sent as its
			// probe: its 2xx closes the breaker.
			fresh := appendEvent(t, j, "the-probe")
			waitStatus(t, j, fresh, journal.StatusDone, 10*time.Second)
			deliveredSoon(t, j, ids)
			if got := recoveries(t, reg, backend, forwarder.RecoveryBreakerClosed); got != 1 {
				t.Fatalf("recoveries by the breaker: %v, want 1", got)
			}
			if got := recoveries(t, reg, backend, forwarder.RecoveryAnswered); got > 0 {
				t.Fatalf("the probe's 2xx told a second recovery (%v)", got)
			}
		})
	})
}

// TestResumeLeavesWhatAnotherPauseHolds: resuming a backend brings forward
// the retries of its providers that no pause of their own holds.
func TestResumeLeavesWhatAnotherPauseHolds(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "sqlite")
	be, backend, ids, f, _ := outage(t, j, 2, nil)
	ctx := context.Background()
	for _, p := range []journal.Pause{{Kind: journal.PauseBackend, Name: backend, Reason: "outage"}, {Kind: journal.PauseProvider, Name: "acme", Reason: "hold it"}} {
		if _, err := f.Pause(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	be.up.Store(true)
	if _, err := f.Resume(ctx, journal.PauseBackend, backend, "back"); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if d := get(t, j, id); d.NextAttemptAt.Before(time.Now().Add(30 * time.Minute)) {
			t.Fatalf("event %d of a paused provider brought forward by its backend's resume (due %s)", id, d.NextAttemptAt)
		}
	}
	if _, err := f.Resume(ctx, journal.PauseProvider, "acme", "go"); err != nil {
		t.Fatal(err)
	}
	deliveredSoon(t, j, ids)
}
