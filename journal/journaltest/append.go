package journaltest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/whguard/whguard/journal"
)

func testMigrateTwiceAndReady(t *testing.T, s journal.Store) {
	ctx := context.Background()
	if err := s.Ready(ctx); !errors.Is(err, journal.ErrNotMigrated) {
		t.Fatalf("ready before migrate = %v, want ErrNotMigrated", err)
	}
	applied, err := s.Migrate(ctx)
	if err != nil || len(applied) == 0 {
		t.Fatalf("first migrate: %v %v", applied, err)
	}
	applied, err = s.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, err %v", applied, err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("ready after migrate: %v", err)
	}
}

func testAppendOutcomes(t *testing.T, s journal.Store) {
	r := AppendOne(t, s, Event("p", "a", "h1"))
	if r.Outcome != journal.Inserted || r.ID == 0 {
		t.Fatalf("first append: %+v", r)
	}
	first := r.ID
	if r := AppendOne(t, s, Event("p", "a", "h1")); r.Outcome != journal.Duplicate || r.ID != first {
		t.Fatalf("same content: %+v, want duplicate of %d", r, first)
	}
	if r := AppendOne(t, s, Event("p", "a", "h2")); r.Outcome != journal.Conflict || r.ID != first {
		t.Fatalf("other content: %+v, want conflict on %d", r, first)
	}
	if r := AppendOne(t, s, Event("q", "a", "h2")); r.Outcome != journal.Inserted || r.ID == first {
		t.Fatalf("same id, other provider: %+v", r)
	}
	if n := Count(t, s, journal.Filter{}); n != 2 {
		t.Fatalf("events = %d, want 2", n)
	}
	d := Get(t, s, first)
	if d.Conflicts != 1 {
		t.Fatalf("conflicts = %d, want 1", d.Conflicts)
	}
	if d.Body != `{"id":"a","h":"h1"}` || d.Headers.Get("Webhook-Id") != "a" || d.Path != "/webhooks/p" || d.RawQuery != "q=1" {
		t.Fatalf("first payload not kept exactly: %+v", d)
	}
	if d.Status != journal.StatusPending || d.EventType != "t" || d.Attempts != 0 {
		t.Fatalf("new event state: %+v", d.Summary)
	}
	if _, err := s.Get(context.Background(), 1<<40); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

func testAppendBatch(t *testing.T, s journal.Store) {
	AppendOne(t, s, Event("p", "old", "h"))
	batch := []journal.Event{
		Event("p", "z", "h"),   // new
		Event("p", "old", "h"), // duplicate of a stored row
		Event("p", "z", "h"),   // in-batch duplicate
		Event("p", "z", "X"),   // in-batch conflict
		Event("p", "old", "Y"), // conflict with a stored row
		Event("p", "b", "h"),   // new
	}
	r, err := s.Append(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []journal.Outcome{journal.Inserted, journal.Duplicate, journal.Duplicate, journal.Conflict, journal.Conflict, journal.Inserted}
	for i, w := range want {
		if r[i].Outcome != w {
			t.Errorf("batch[%d] = %v, want %v", i, r[i].Outcome, w)
		}
	}
	if r[0].ID != r[2].ID || r[0].ID != r[3].ID || r[1].ID != r[4].ID {
		t.Errorf("ids do not line up: %+v", r)
	}
	if n := Count(t, s, journal.Filter{}); n != 3 {
		t.Fatalf("events = %d, want 3", n)
	}
	if b := Get(t, s, r[5].ID).Body; b != `{"id":"b","h":"h"}` {
		t.Fatalf("payload of a batch row: %q", b)
	}
	if c := Get(t, s, r[0].ID).Conflicts; c != 1 {
		t.Fatalf("in-batch conflict recorded %d times", c)
	}
}

// Many concurrent appends of one key: exactly one is inserted.
func testAppendConcurrentSameKey(t *testing.T, s journal.Store) {
	const n = 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[journal.Outcome]int{}
		ids      = map[int64]bool{}
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := s.Append(context.Background(), []journal.Event{Event("p", "same", "h")})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			outcomes[r[0].Outcome]++
			ids[r[0].ID] = true
		}()
	}
	close(start)
	wg.Wait()
	if outcomes[journal.Inserted] != 1 || outcomes[journal.Duplicate] != n-1 || len(ids) != 1 {
		t.Fatalf("outcomes %v ids %v", outcomes, ids)
	}
	if c := Count(t, s, journal.Filter{}); c != 1 {
		t.Fatalf("rows = %d", c)
	}
}

// Overlapping batches in opposite orders: no deadlock, no "database is
// locked", every key once.
func testAppendConcurrentBatches(t *testing.T, s journal.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []journal.Event
			for i := range 50 {
				k := i
				if g%2 == 1 {
					k = 49 - i
				}
				batch = append(batch, Event("p", fmt.Sprintf("k%02d", k), "h"))
			}
			if _, err := s.Append(ctx, batch); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if c := Count(t, s, journal.Filter{}); c != 50 {
		t.Fatalf("rows = %d", c)
	}
}

// A claimed event is inserted leased to its receiver: not leasable by
// anyone else, finished with its own token, returned by the reaper when
// the receiver never finishes it; a duplicate claims nothing.
func testAppendClaimed(t *testing.T, s journal.Store) {
	ctx := context.Background()
	claim := func(e journal.Event, leaseFor time.Duration) journal.Event {
		e.LeaseFor, e.LeaseToken = leaseFor, uuid.New()
		return e
	}
	a, b := claim(Event("p", "a", "h"), time.Minute), claim(Event("p", "b", "h"), 20*time.Millisecond)
	dupA := claim(Event("p", "a", "h"), time.Minute)
	rs, err := s.Append(ctx, []journal.Event{a, b, dupA, Event("p", "c", "h")})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != journal.Inserted || rs[1].Outcome != journal.Inserted || rs[2].Outcome != journal.Duplicate || rs[3].Outcome != journal.Inserted {
		t.Fatalf("outcomes %+v", rs)
	}
	for _, id := range []int64{rs[0].ID, rs[1].ID} {
		if d := Get(t, s, id); d.Status != journal.StatusProcessing || d.Attempts != 1 {
			t.Fatalf("claimed row %d: %+v", id, d.Summary)
		}
	}
	// Only the unclaimed event is leasable.
	if ds := LeaseAll(t, s, time.Minute); len(ds) != 1 || ds[0].EventID != "c" {
		t.Fatalf("leased %+v", ds)
	}
	// The claim's token finishes it; the duplicate's token does not.
	da := journal.Delivery{ID: rs[0].ID, Attempt: 1, LeaseToken: dupA.LeaseToken}
	if n, err := CompleteN(s, []journal.Finish{Finish(da, journal.StatusDone, 200)}); err != nil || n != 0 {
		t.Fatalf("finished with a duplicate's token: %d %v", n, err)
	}
	da.LeaseToken = a.LeaseToken
	if n, err := CompleteN(s, []journal.Finish{Finish(da, journal.StatusDone, 200)}); err != nil || n != 1 {
		t.Fatalf("finish with the claim's token: %d %v", n, err)
	}
	if d := Get(t, s, rs[0].ID); d.Status != journal.StatusDone || len(d.AttemptLog) != 1 || d.AttemptLog[0].Number != 1 {
		t.Fatalf("after finish: %+v", d)
	}
	// b's receiver never finishes: its lease expires and the reaper
	// returns it, and a leaser then gets it as its second attempt.
	waitFor(t, 5*time.Second, "the reaper to return the expired claim", func() bool {
		return ReapOne(t, s, 5)
	})
	ds := LeaseAll(t, s, time.Minute)
	if len(ds) != 1 || ds[0].ID != rs[1].ID || ds[0].Attempt != 2 || string(ds[0].Body) != string(b.Body) {
		t.Fatalf("after the reaper: %+v", ds)
	}
}

// countingStore counts Append calls reaching the store.
type countingStore struct {
	journal.Store
	calls atomic.Int32
}

func (c *countingStore) Append(ctx context.Context, events []journal.Event) ([]journal.Result, error) {
	c.calls.Add(1)
	return c.Store.Append(ctx, events)
}

// Concurrent requests through the group committer: each caller learns its
// own outcome (one insert per key, the rest duplicates or conflicts), and
// the store sees far fewer transactions than requests.
func testGroupCommit(t *testing.T, s journal.Store) {
	cs := &countingStore{Store: s}
	gc := journal.NewGroupCommitter(cs, 2, nil)
	const keys, copies = 100, 4
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[string]map[journal.Outcome]int{}
		ids      = map[string]map[int64]bool{}
	)
	start := make(chan struct{})
	for k := range keys {
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				id := fmt.Sprintf("gc%03d", k)
				hash := "h"
				if c == copies-1 && k%10 == 0 {
					hash = "other" // a conflicting resend
				}
				r, err := gc.Append(context.Background(), []journal.Event{Event("p", id, hash)})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if outcomes[id] == nil {
					outcomes[id], ids[id] = map[journal.Outcome]int{}, map[int64]bool{}
				}
				outcomes[id][r[0].Outcome]++
				ids[id][r[0].ID] = true
			}()
		}
	}
	close(start)
	wg.Wait()
	for id, o := range outcomes {
		if o[journal.Inserted] != 1 || len(ids[id]) != 1 || o[journal.Inserted]+o[journal.Duplicate]+o[journal.Conflict] != copies {
			t.Fatalf("%s: outcomes %v ids %v", id, o, ids[id])
		}
	}
	if n := Count(t, s, journal.Filter{}); n != keys {
		t.Fatalf("%d rows, want %d", n, keys)
	}
	if calls := cs.calls.Load(); calls >= keys*copies/2 {
		t.Fatalf("%d transactions for %d requests: no group commit", calls, keys*copies)
	}
	t.Logf("%d requests in %d transactions", keys*copies, cs.calls.Load())
}

// testHeadersKeepTheirBytes: a header value that is not UTF-8 is stored,
// leased and shown with its exact bytes (JSON once turned them into U+FFFD,
// and that is what was forwarded).
func testHeadersKeepTheirBytes(t *testing.T, s journal.Store) {
	e := Event("p", "raw", "h")
	e.Headers = http.Header{"X-Legacy": {"caf\xe9", "ok"}, "X-Plain": {"fine"}}
	id := AppendOne(t, s, e).ID
	if got := Get(t, s, id).Headers; got.Values("X-Legacy")[0] != "caf\xe9" || got.Values("X-Legacy")[1] != "ok" || got.Get("X-Plain") != "fine" || len(got) != 2 {
		t.Fatalf("stored headers %q", got)
	}
	d := LeaseAll(t, s, time.Minute)[0]
	if d.Headers.Get("X-Legacy") != "caf\xe9" || len(d.Headers) != 2 {
		t.Fatalf("leased headers %q", d.Headers)
	}
}

// testBodyGuardCatchesReplays: for a body-guarded provider (its event id is
// not signed), the same content under a fresh id is Replayed: not a new
// event, recorded on the first one; other content, or an unguarded
// provider, goes in as usual. In one batch too.
func testBodyGuardCatchesReplays(t *testing.T, s journal.Store) {
	ctx := context.Background()
	guarded := func(provider, id, hash string) journal.Event {
		e := Event(provider, id, hash)
		e.BodyGuard = true
		return e
	}
	first := AppendOne(t, s, guarded("gh", "delivery-1", "H"))
	if first.Outcome != journal.Inserted {
		t.Fatalf("first: %v", first.Outcome)
	}
	if r := AppendOne(t, s, guarded("gh", "delivery-2", "H")); r.Outcome != journal.Replayed || r.ID != first.ID {
		t.Fatalf("same body, fresh id: %+v", r)
	}
	if r := AppendOne(t, s, guarded("gh", "delivery-1", "H")); r.Outcome != journal.Duplicate {
		t.Fatalf("same key: %v", r.Outcome)
	}
	if r := AppendOne(t, s, guarded("gh", "delivery-3", "H2")); r.Outcome != journal.Inserted {
		t.Fatalf("other body: %v", r.Outcome)
	}
	if r := AppendOne(t, s, Event("gh", "delivery-4", "H")); r.Outcome != journal.Inserted {
		t.Fatalf("unguarded: %v", r.Outcome)
	}
	// One body under another type is another event (Shopify sends an
	// order under orders/create and orders/paid).
	other := guarded("gh", "delivery-5", "H")
	other.EventType = "orders/paid"
	if r := AppendOne(t, s, other); r.Outcome != journal.Inserted {
		t.Fatalf("same body, another type: %v", r.Outcome)
	}
	if r := AppendOne(t, s, guarded("other", "delivery-2", "H")); r.Outcome != journal.Inserted {
		t.Fatalf("another provider: %v", r.Outcome)
	}
	res, err := s.Append(ctx, []journal.Event{guarded("q", "a", "X"), guarded("q", "b", "X")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != journal.Inserted || res[1].Outcome != journal.Replayed || res[1].ID != res[0].ID {
		t.Fatalf("one batch: %+v", res)
	}
	cs, err := s.Conflicts(ctx, first.ID)
	if err != nil || len(cs) != 1 || cs[0].Headers.Get("Webhook-Id") != "delivery-2" {
		t.Fatalf("recorded copies: %+v %v", cs, err)
	}
	if n := Count(t, s, journal.Filter{Provider: "gh"}); n != 4 {
		t.Fatalf("%d gh events, want 4", n)
	}
	// Copies are kept up to a bound, however often one body comes back.
	for i := range 15 {
		if r := AppendOne(t, s, guarded("gh", fmt.Sprintf("again-%d", i), "H")); r.Outcome != journal.Replayed {
			t.Fatalf("copy %d: %v", i, r.Outcome)
		}
	}
	if cs, err := s.Conflicts(ctx, first.ID); err != nil || len(cs) != 10 {
		t.Fatalf("%d copies kept (%v), want the first 10", len(cs), err)
	}
}

// testReadyFollowsCommits: readiness commits a write, so it fails while
// the journal cannot commit (a lock held by the test here; a full or
// read-only disk in production), and comes back after.
func testReadyFollowsCommits(t *testing.T, s journal.Store, h Harness) {
	ctx := context.Background()
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	release := h.BlockCommits(t, s)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := s.Ready(short)
	cancel()
	if err == nil || errors.Is(err, journal.ErrNotMigrated) {
		t.Fatalf("ready while commits are blocked: %v", err)
	}
	release()
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("ready after: %v", err)
	}
}
