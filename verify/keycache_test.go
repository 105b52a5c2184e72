package verify

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A burst of requests for one missing entry makes one fetch, and all of
// them get its value.
func TestKeyCacheSingleFlight(t *testing.T) {
	// In a bubble, so that synctest.Wait knows when the burst has joined
	// the flight.
	synctest.Test(t, func(t *testing.T) {
		c := newKeyCache[string](4)
		now := time.Unix(1700000000, 0)
		var fetches atomic.Int32
		release := make(chan struct{})
		const n = 20
		var started, done sync.WaitGroup
		started.Add(n)
		done.Add(n)
		got := make([]string, n)
		for i := range n {
			go func() {
				defer done.Done()
				started.Done()
				e, err := c.refresh("u", now, func() (string, time.Duration, error) {
					fetches.Add(1)
					<-release
					return "key", time.Hour, nil
				})
				if err == nil {
					got[i] = e.val
				}
			}()
		}
		started.Wait()
		synctest.Wait() // every caller blocked: one on the fetch, the rest on its flight
		close(release)
		done.Wait()
		// Goroutines scheduled after the flight ended fetch again; with every
		// one started before the release, a single fetch is the rule.
		if f := fetches.Load(); f != 1 {
			t.Errorf("%d fetches for one burst, want 1", f)
		}
		for i, v := range got {
			if v != "key" {
				t.Fatalf("goroutine %d got %q", i, v)
			}
		}
		if e, ok := c.get("u", now.Add(59*time.Minute)); !ok || e.val != "key" {
			t.Error("entry not kept for its TTL")
		}
		if _, ok := c.get("u", now.Add(time.Hour)); ok {
			t.Error("entry kept past its TTL")
		}
	})
}

// Errors are not cached; a full cache drops expired entries, then the
// oldest.
func TestKeyCacheErrorsAndLimit(t *testing.T) {
	c := newKeyCache[int](2)
	now := time.Unix(1700000000, 0)
	boom := errors.New("down")
	if _, err := c.refresh("a", now, func() (int, time.Duration, error) { return 0, 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, ok := c.get("a", now); ok {
		t.Fatal("an error was cached")
	}
	put := func(k string, at time.Time, ttl time.Duration) {
		if _, err := c.refresh(k, at, func() (int, time.Duration, error) { return len(k), ttl, nil }); err != nil {
			t.Fatal(err)
		}
	}
	put("a", now, time.Minute)
	put("b", now.Add(time.Second), time.Hour)
	put("c", now.Add(2*time.Minute), time.Hour) // "a" has expired: dropped
	if _, ok := c.get("b", now.Add(2*time.Minute)); !ok {
		t.Error("live entry b dropped while an expired one was there")
	}
	put("d", now.Add(3*time.Minute), time.Hour) // full of live ones: the oldest, b, goes
	if _, ok := c.get("b", now.Add(3*time.Minute)); ok {
		t.Error("oldest entry kept in a full cache")
	}
	for _, k := range []string{"c", "d"} {
		if _, ok := c.get(k, now.Add(3*time.Minute)); !ok {
			t.Errorf("entry %s dropped", k)
		}
	}
	if len(c.m) > c.limit {
		t.Errorf("%d entries, limit %d", len(c.m), c.limit)
	}
	put("z", now, 0) // a zero TTL still keeps the value a second
	if _, ok := c.get("z", now); !ok {
		t.Error(fmt.Sprint("zero TTL not kept"))
	}
}
