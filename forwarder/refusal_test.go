package forwarder_test

import (
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

// refusingBackend answers 401 (a webhook secret that does not match
// whguard's) until it accepts.
type refusingBackend struct{ accepts atomic.Bool }

func (b *refusingBackend) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if !b.accepts.Load() {
		http.Error(w, `{"error":"invalid signature"}`, http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// refusalAlerts records what the forwarder tells the alerts.
type refusalAlerts struct {
	mu       sync.Mutex
	dead     int
	refusals int
	accepts  int
	last     string // backend provider status of the last report
}

func (a *refusalAlerts) Dead(string, string, string) { a.mu.Lock(); a.dead++; a.mu.Unlock() }

func (a *refusalAlerts) Refuses(backend, provider string, status int, refuses bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if refuses {
		a.refusals++
	} else {
		a.accepts++
	}
	a.last = backend + " " + provider + " " + http.StatusText(status)
}

func (a *refusalAlerts) counts() (dead, refusals, accepts int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead, a.refusals, a.accepts
}

// TestBackendRefusingWhguardHoldsEvents: a backend answering 401 refuses
// whguard, not the events: they are retried, its breaker opens and holds
// them (none goes dead, although the retry budget is far shorter than the
// refusal), the alerts hear of it and each event's last error says to
// check the webhook secret; once the backend accepts, every event is
// delivered and the alerts hear that it accepts again, once.
func TestBackendRefusingWhguardHoldsEvents(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := openJournal(t, store)
		be := &refusingBackend{}
		srv := httptest.NewServer(be)
		t.Cleanup(srv.Close)
		gov := newGrantLog(t, governor.Config{SlotTTL: 5 * time.Second, Breaker: governor.BreakerConfig{
			Enabled: true, Window: 10 * time.Second, MinAttempts: 5, FailureRatio: 0.5, Cooldown: 300 * time.Millisecond,
		}})
		alerts := &refusalAlerts{}
		var ids []int64
		for i := range 12 {
			ids = append(ids, appendEvent(t, j, "refused-"+string(rune('a'+i))))
		}
		startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
			c.Governor, c.Alerts = gov, alerts
			c.Policy.MaxAttempts = 4 // 20-100 ms apart: spent in well under a second
		})
		backend := forwarder.Origin(srv.URL)
		waitUntil(t, 10*time.Second, "the breaker to open", func() bool { return gov.BreakerStates()[backend] != governor.BreakerClosed })
		// Two of the breaker's probes refused after it opened: each is an
		// attempt of an event that would have gone dead had 401 been
		// permanent, and meanwhile the others would have spent their
		// budget (4 attempts, 20-100 ms apart) had the breaker not held them.
		_, atOpen, _ := alerts.counts()
		waitUntil(t, 10*time.Second, "two probes refused", func() bool { _, n, _ := alerts.counts(); return n >= atOpen+2 })
		checked := 0
		for _, id := range ids {
			d := get(t, j, id)
			if d.Status == journal.StatusDead {
				t.Fatalf("event %d dead while the backend refuses whguard: %q", id, d.LastError)
			}
			// A processing event's attempt is in flight (its count taken
			// with the lease, its outcome not written yet).
			if d.Attempts == 0 || d.Status == journal.StatusProcessing {
				continue
			}
			checked++
			if !strings.Contains(d.LastError, forwarder.RefusalHint) {
				t.Errorf("event %d (%s): last error %q does not say %q", id, d.Status, d.LastError, forwarder.RefusalHint)
			}
		}
		if checked == 0 {
			t.Fatal("no event had a recorded attempt to check")
		}
		if _, refusals, accepts := alerts.counts(); refusals == 0 || accepts != 0 {
			t.Fatalf("alerts heard %d refusals, %d accepts; want some refusals and no accept yet", refusals, accepts)
		}
		alerts.mu.Lock()
		last := alerts.last
		alerts.mu.Unlock()
		if last != backend+" acme Unauthorized" {
			t.Errorf("last refusal reported as %q", last)
		}

		be.accepts.Store(true)
		for _, id := range ids {
			waitStatus(t, j, id, journal.StatusDone, 15*time.Second)
		}
		if dead, _, accepts := alerts.counts(); dead != 0 || accepts != 1 {
			t.Errorf("alerts heard %d dead events and %d accepts, want 0 and 1", dead, accepts)
		}
	})
}
