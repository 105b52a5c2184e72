package forwarder

import (
	"context"
	"net/http"
	"time"

	"github.com/whguard/whguard/journal"
)

// SetStopGrace shortens Stop's wait after its deadline, for tests.
func SetStopGrace(f *Forwarder, d time.Duration) { f.stopGrace = d }

// Workers reports how many delivery goroutines were started and how many
// are alive.
func Workers(f *Forwarder) (started, live int32) {
	return f.workersStarted.Load(), f.workersLive.Load()
}

// WaitLoops waits until the forwarder's background loops have ended (after
// Start's context is cancelled, or Stop).
func WaitLoops(f *Forwarder) { f.loops.Wait() }

// Queued reports the deliveries waiting in admission's queue for a slot:
// committed claims and leased rows.
func Queued(f *Forwarder) (claims, rows int) {
	o := f.adm.snapshot()
	return o.queuedClaims, o.queuedRows
}

// FetcherWaitsForSlot reports whether the fetcher's last plan found every
// slot busy (it then waits for a freed one). The fetcher plans only once
// its previous lease statement has returned.
func FetcherWaitsForSlot(f *Forwarder) bool {
	f.adm.mu.Lock()
	defer f.adm.mu.Unlock()
	return f.adm.slotWait
}

// BuildWithSent is BuildRequest, also returning what signing changed.
func BuildWithSent(ctx context.Context, t Target, d journal.Delivery, at time.Time) (*http.Request, journal.HeaderDelta, error) {
	return buildRequest(ctx, t, d, at)
}

// AttemptOnce makes one attempt of d to t and returns its record.
func AttemptOnce(ctx context.Context, t Target, d journal.Delivery) journal.Attempt {
	return send(ctx, http.DefaultClient, t, d, 5*time.Second, time.Now, false).attempt(d.Attempt)
}
