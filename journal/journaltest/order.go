package journaltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/whguard/whguard/journal"
)

func Ordered(id, key string, block bool) journal.Event {
	e := Event("p", id, "h-"+id)
	e.OrderKey, e.OrderBlock = key, block
	return e
}

// LeasedIDs leases everything ready and returns the leased event ids,
// sorted, with the deliveries by event id.
func LeasedIDs(t *testing.T, s journal.Store) ([]string, map[string]journal.Delivery) {
	t.Helper()
	ds := LeaseAll(t, s, time.Minute)
	ids, by := []string{}, map[string]journal.Delivery{}
	for _, d := range ds {
		ids = append(ids, d.EventID)
		by[d.EventID] = d
	}
	slices.Sort(ids)
	return ids, by
}

func WantLeased(t *testing.T, s journal.Store, want ...string) map[string]journal.Delivery {
	t.Helper()
	got, by := LeasedIDs(t, s)
	slices.Sort(want)
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("leased %v, want %v", got, want)
	}
	return by
}

func Complete(t *testing.T, s journal.Store, d journal.Delivery, st journal.Status) {
	t.Helper()
	if n, err := CompleteN(s, []journal.Finish{Finish(d, st, 500)}); err != nil || n != 1 {
		t.Fatalf("complete %s as %s: %d, %v", d.EventID, st, n, err)
	}
}

func testOrderOneAtATimePerKey(t *testing.T, s journal.Store) {
	a1 := AppendOne(t, s, Ordered("a1", "k1", false))
	a2 := AppendOne(t, s, Ordered("a2", "k1", false))
	AppendOne(t, s, Ordered("a3", "k1", false))
	AppendOne(t, s, Ordered("b1", "k2", false))
	AppendOne(t, s, Event("p", "u1", "h"))
	AppendOne(t, s, Event("p", "u2", "h"))
	// The same key value under another provider is another key.
	other := Ordered("c1", "k1", false)
	other.Provider = "q"
	AppendOne(t, s, other)

	if d := Get(t, s, a2.ID); d.Held != "order" || d.WaitingFor != a1.ID || d.OrderKey != "k1" || !d.HoldsKey {
		t.Fatalf("a2 before its turn: held %q waiting for %d (a1 is %d), key %q, holds %v", d.Held, d.WaitingFor, a1.ID, d.OrderKey, d.HoldsKey)
	}
	by := WantLeased(t, s, "a1", "b1", "u1", "u2", "c1")
	if by["a1"].OrderKey != "k1" || by["u1"].OrderKey != "" {
		t.Fatalf("leased order keys: a1 %q, u1 %q", by["a1"].OrderKey, by["u1"].OrderKey)
	}
	WantLeased(t, s) // a2 waits for a1, which is processing
	// a1 fails and retries (due at once): it keeps k1, and only it is
	// leased again; a2 has spent nothing while it waits.
	Complete(t, s, by["a1"], journal.StatusRetry)
	if d := Get(t, s, a2.ID); d.Attempts != 0 || d.Held != "order" {
		t.Fatalf("a2 waiting spent attempts or shows no hold: %+v", d.Summary)
	}
	by2 := WantLeased(t, s, "a1")
	Complete(t, s, by2["a1"], journal.StatusDone)
	if d := Get(t, s, a1.ID); d.HoldsKey {
		t.Fatal("a done event still holds its key")
	}
	by3 := WantLeased(t, s, "a2")
	Complete(t, s, by3["a2"], journal.StatusDone)
	WantLeased(t, s, "a3")
}

func testOrderClaimOnlyFirstInLine(t *testing.T, s journal.Store) {
	ctx := context.Background()
	claim := func(e journal.Event) journal.Event {
		e.LeaseFor, e.LeaseToken = time.Minute, uuid.New()
		return e
	}
	c1 := claim(Ordered("c1", "k", false))
	r1 := AppendOne(t, s, c1)
	if r1.Outcome != journal.Inserted || r1.Behind {
		t.Fatalf("first in line: %+v, want inserted and claimed", r1)
	}
	r2 := AppendOne(t, s, claim(Ordered("c2", "k", false)))
	if r2.Outcome != journal.Inserted || !r2.Behind {
		t.Fatalf("second of its key: %+v, want inserted behind the first", r2)
	}
	if d := Get(t, s, r2.ID); d.Status != journal.StatusPending || d.Attempts != 0 {
		t.Fatalf("an event behind its key was claimed anyway: %+v", d.Summary)
	}
	// In one batch: the first received of a new key is claimed, the next
	// of the same key waits, another key is claimed, whatever their ids.
	rs, err := s.Append(ctx, []journal.Event{
		claim(Ordered("z-first", "k2", false)), claim(Ordered("a-second", "k2", false)), claim(Ordered("m", "k3", false)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Behind || !rs[1].Behind || rs[2].Behind || rs[0].ID > rs[1].ID {
		t.Fatalf("batch: %+v; want the first received claimed and first in line, the second behind it, k3 claimed", rs)
	}
	WantLeased(t, s) // c2 and a-second wait for claimed rows
	// The claimed c1 finishes under its claim's token.
	Complete(t, s, journal.Delivery{ID: r1.ID, EventID: "c1", Attempt: 1, LeaseToken: c1.LeaseToken}, journal.StatusDone)
	WantLeased(t, s, "c2")
}

func testOrderDeadReleasesUnderSkip(t *testing.T, s journal.Store) {
	AppendOne(t, s, Ordered("x1", "k", false))
	AppendOne(t, s, Ordered("x2", "k", false))
	by := WantLeased(t, s, "x1")
	Complete(t, s, by["x1"], journal.StatusDead)
	WantLeased(t, s, "x2")
}

func testOrderDeadBlocksUntilSkipped(t *testing.T, s journal.Store) {
	ctx := context.Background()
	x1 := AppendOne(t, s, Ordered("x1", "k", true))
	x2 := AppendOne(t, s, Ordered("x2", "k", true))
	if err := s.Skip(ctx, x1.ID, "nothing held yet"); !errors.Is(err, journal.ErrNotSkippable) {
		t.Fatalf("skip of a pending event: %v, want ErrNotSkippable", err)
	}
	by := WantLeased(t, s, "x1")
	Complete(t, s, by["x1"], journal.StatusDead)
	WantLeased(t, s) // x1 is dead and blocks k
	if d := Get(t, s, x2.ID); d.Held != "order" || d.WaitingFor != x1.ID {
		t.Fatalf("x2 behind a dead blocker: held %q waiting for %d", d.Held, d.WaitingFor)
	}
	if err := s.Skip(ctx, x2.ID, "wrong one"); !errors.Is(err, journal.ErrNotSkippable) {
		t.Fatalf("skip of a waiting event: %v, want ErrNotSkippable", err)
	}
	if err := s.Skip(ctx, 1<<40, "x"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("skip of a missing event: %v", err)
	}
	if err := s.Skip(ctx, x1.ID, "customer deleted upstream"); err != nil {
		t.Fatal(err)
	}
	d := Get(t, s, x1.ID)
	if d.Status != journal.StatusDead || d.HoldsKey || len(d.Replays) != 1 || d.Replays[0].Action != "skip" ||
		d.Replays[0].Reason != "customer deleted upstream" || d.Replays[0].FromStatus != journal.StatusDead {
		t.Fatalf("after skip: %+v holds %v replays %+v", d.Summary, d.HoldsKey, d.Replays)
	}
	if err := s.Skip(ctx, x1.ID, "again"); !errors.Is(err, journal.ErrNotSkippable) {
		t.Fatalf("second skip: %v, want ErrNotSkippable", err)
	}
	WantLeased(t, s, "x2")
}

func testOrderReplayTakesItsTurnBack(t *testing.T, s journal.Store) {
	ctx := context.Background()
	y1 := AppendOne(t, s, Ordered("y1", "k", true))
	AppendOne(t, s, Ordered("y2", "k", true))
	by := WantLeased(t, s, "y1")
	Complete(t, s, by["y1"], journal.StatusDead)
	WantLeased(t, s)
	if err := s.Replay(ctx, y1.ID, "backend fixed"); err != nil {
		t.Fatal(err)
	}
	by = WantLeased(t, s, "y1") // its turn again, before y2
	Complete(t, s, by["y1"], journal.StatusDone)
	by = WantLeased(t, s, "y2")
	// A replay of an earlier, done event while a later one is being
	// delivered waits for that delivery: one at a time per key.
	if err := s.Replay(ctx, y1.ID, "again"); err != nil {
		t.Fatal(err)
	}
	WantLeased(t, s)
	Complete(t, s, by["y2"], journal.StatusDone)
	WantLeased(t, s, "y1")
}

func testOrderReapedDeadKeepsBlocking(t *testing.T, s journal.Store) {
	AppendOne(t, s, Ordered("r1", "k", true))
	AppendOne(t, s, Ordered("r2", "k", true))
	AppendOne(t, s, Ordered("s1", "j", false))
	AppendOne(t, s, Ordered("s2", "j", false))
	ds, err := s.Lease(context.Background(), 10, time.Millisecond)
	if err != nil || len(ds) != 2 {
		t.Fatalf("lease: %d, %v", len(ds), err)
	}
	// Reap until both leases have expired and come back (1 ms leases).
	reaped, deadline := 0, time.Now().Add(5*time.Second)
	for reaped < 2 && time.Now().Before(deadline) {
		r, err := s.ReapExpired(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		reaped += len(r)
	}
	if reaped != 2 {
		t.Fatalf("reaped %d expired leases, want 2", reaped)
	}
	// r1 is dead and blocks k; s1 is dead and released j.
	WantLeased(t, s, "s2")
}

// testOrderIgnoredHoldsNoKey: an event left out by the event-type filter
// takes no place in its key's line, alone or earlier in the same batch:
// the next event of the key is claimed, and leased, as if it were not
// there (otherwise one ignored event would block its key for good).
func testOrderIgnoredHoldsNoKey(t *testing.T, s journal.Store) {
	ctx := context.Background()
	ign := Ordered("i1", "k", true)
	ign.Ignored = true
	AppendOne(t, s, ign)
	next := Ordered("n1", "k", false)
	next.LeaseFor, next.LeaseToken = time.Minute, uuid.New()
	if r := AppendOne(t, s, next); r.Outcome != journal.Inserted || r.Behind {
		t.Fatalf("after an ignored event of its key: %+v, want claimed", r)
	}
	ign2 := Ordered("i2", "k2", false)
	ign2.Ignored = true
	rs, err := s.Append(ctx, []journal.Event{ign2, Ordered("n2", "k2", false)})
	if err != nil {
		t.Fatal(err)
	}
	if rs[1].Behind {
		t.Fatalf("batch: %+v; an ignored event put the next of its key behind it", rs)
	}
	WantLeased(t, s, "n2")
	if d := Get(t, s, rs[0].ID); d.Status != journal.StatusIgnored || d.HoldsKey {
		t.Fatalf("ignored event: %+v holds %v", d.Summary, d.HoldsKey)
	}
}

// testOrderConcurrentClaimsOfOneKey: appends of one key committing at the
// same time (several commits in flight, several replicas) must see each
// other: exactly one of them is claimed, the others go in behind it.
func testOrderConcurrentClaimsOfOneKey(t *testing.T, s journal.Store) {
	const n = 40
	var wg sync.WaitGroup
	results := make([]journal.Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := Ordered(fmt.Sprintf("cc%02d", i), "k", false)
			e.LeaseFor, e.LeaseToken = time.Minute, uuid.New()
			<-start
			rs, err := s.Append(context.Background(), []journal.Event{e})
			if err == nil {
				results[i] = rs[0]
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	claimed := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
		if r.Outcome == journal.Inserted && !r.Behind {
			claimed++
		}
	}
	if claimed != 1 {
		t.Fatalf("%d of %d concurrent appends of one key were claimed, want exactly 1", claimed, n)
	}
}
