package forwarder_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

// TestPauseReachesEveryForwarderAndResumeDelivers: a pause made through one
// forwarder reaches another on the same journal (by its reading of the
// pauses every PauseInterval, 1 s) and stops its deliveries; paused
// deliveries are held (no attempt) until resumed, then delivered at
// attempt 1 at once, though the hold was long.
func TestPauseReachesEveryForwarderAndResumeDelivers(t *testing.T) {
	t.Parallel()
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
		// B learns of the pause only by reading the journal (every
		// second); its gauge is set once it holds the pause.
		waitUntil(t, 10*time.Second, "whguard_backend_paused = 1 on the other forwarder", func() bool {
			return metricValue(t, regB, "whguard_backend_paused", map[string]string{"backend": backend}) == 1
		})
		calls := be.calls.Load()
		var ids []int64
		for i := range 10 {
			ids = append(ids, appendEvent(t, j, "paused-"+string(rune('a'+i))))
		}
		for _, id := range ids {
			var d *journal.Detail
			if !eventually(10*time.Second, 20*time.Millisecond, func() bool { d = get(t, j, id); return d.Held == journal.HoldPaused }) {
				t.Fatalf("event %d not held for the pause: %+v", id, d.Summary)
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
			if d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second); d.Attempts != 1 {
				t.Fatalf("event %d delivered after %d attempts", id, d.Attempts)
			}
		}
	})
}

// TestPauseHoldsFromTheFirstMoment: a pause stored in the journal holds
// from the first moment of every start, also for events claimed while the
// forwarder starts (the ingress claims as soon as it listens): ten
// restarts with traffic arriving during each start send nothing to the
// paused backend. (Found: 164 deliveries reached a paused backend over 10
// restarts, made before the first read of the pauses.)
func TestPauseHoldsFromTheFirstMoment(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		ctx := context.Background()
		j := openJournal(t, store)
		be := &switchable{}
		be.up.Store(true)
		srv := httptest.NewServer(be)
		t.Cleanup(srv.Close)
		if _, err := j.Pause(ctx, journal.Pause{Kind: journal.PauseBackend, Name: forwarder.Origin(srv.URL), Reason: "maintenance"}); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			appendEvent(t, j, fmt.Sprintf("pending-%d", i))
			f, err := forwarder.New(forwarder.Config{
				Store: j, Targets: map[string]forwarder.Target{"acme": {BackendURL: srv.URL}},
				PollInterval: 20 * time.Millisecond, PauseInterval: 50 * time.Millisecond, PauseHold: time.Hour,
			})
			if err != nil {
				t.Fatal(err)
			}
			// Traffic as the ingress sends it, from before Start until
			// after it: a claim tried every millisecond, and each one
			// accepted dispatched at once.
			var wg sync.WaitGroup
			var tries atomic.Int32
			stop := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					tries.Add(1)
					leaseFor, ok := f.Claim()
					if !ok {
						select { // declined: try again at the next tick
						case <-stop:
							return
						case <-tick.C:
						}
						continue
					}
					f.Dispatch(appendClaimed(t, j, fmt.Sprintf("claimed-%d-%d", i, n), leaseFor))
				}
			}()
			// Claims declined before Start: the traffic was there first.
			waitUntil(t, 10*time.Second, "claims tried before Start", func() bool { return tries.Load() >= 3 })
			if err := f.Start(ctx); err != nil {
				t.Fatal(err)
			}
			// A fixed window in which nothing may be sent to the paused
			// backend, with claims coming in throughout.
			time.Sleep(150 * time.Millisecond)
			close(stop)
			wg.Wait()
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = f.Stop(sctx)
			cancel()
		}
		if n := be.calls.Load(); n != 0 {
			t.Fatalf("the paused backend got %d deliveries over 10 starts", n)
		}
	})
}
