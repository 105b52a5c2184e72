package forwarder_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

// TestPauseReachesEveryForwarderAndResumeDelivers: a pause made through one
// forwarder stops deliveries of another on the same journal within 2 s;
// paused deliveries are held (no attempt) until resumed, then delivered at
// attempt 1 at once, though the hold was long.
func TestPauseReachesEveryForwarderAndResumeDelivers(t *testing.T) {
	forEachStore(t, func(t *testing.T, store string) {
		ctx := context.Background()
		j := openJournal(t, store)
		be := &switchable{}
		be.up.Store(true)
		srv := httptest.NewServer(be)
		t.Cleanup(srv.Close)
		mod := func(c *forwarder.Config) { c.PauseHold = time.Hour }
		a, _ := startForwarder(t, j, srv.URL, mod)
		_, regB := startForwarder(t, j, srv.URL, mod)
		backend := forwarder.Origin(srv.URL)
		if _, err := a.Pause(ctx, journal.Pause{Kind: journal.PauseBackend, Name: backend, Reason: "deploy"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // every replica reads pauses within this
		if v := metricValue(t, regB, "whguard_backend_paused", map[string]string{"backend": backend}); v != 1 {
			t.Errorf("whguard_backend_paused on the other forwarder = %v", v)
		}
		calls := be.calls.Load()
		var ids []int64
		for i := range 10 {
			ids = append(ids, appendEvent(t, j, "paused-"+string(rune('a'+i))))
		}
		for _, id := range ids {
			deadline := time.Now().Add(10 * time.Second)
			for d := get(t, j, id); d.Held != journal.HoldPaused; d = get(t, j, id) {
				if time.Now().After(deadline) {
					t.Fatalf("event %d not held for the pause: %+v", id, d.Summary)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if n := be.calls.Load() - calls; n != 0 {
			t.Fatalf("backend called %d times while paused", n)
		}
		bs, err := a.Backends(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs.Backends) != 1 || bs.Backends[0].Paused == nil || bs.Backends[0].Paused.Reason != "deploy" || bs.Backends[0].Waiting != 10 {
			t.Fatalf("backends while paused: %+v", bs)
		}
		if found, err := a.Resume(ctx, journal.PauseBackend, backend, "deployed"); err != nil || !found {
			t.Fatalf("resume: %v, %v", found, err)
		}
		for _, id := range ids {
			if d := waitStatus(t, j, id, journal.StatusDone, 5*time.Second); d.Attempts != 1 {
				t.Fatalf("event %d delivered after %d attempts", id, d.Attempts)
			}
		}
	})
}
