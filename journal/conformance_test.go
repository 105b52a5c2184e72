package journal_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// TestConformance runs every behaviour test against every store.
func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s journal.Store)
	}{
		{"MigrateTwiceAndReady", testMigrateTwiceAndReady},
		{"AppendOutcomes", testAppendOutcomes},
		{"AppendBatch", testAppendBatch},
		{"AppendConcurrentSameKey", testAppendConcurrentSameKey},
		{"AppendConcurrentBatches", testAppendConcurrentBatches},
		{"LeaseCompleteAndAttempts", testLeaseCompleteAndAttempts},
		{"AppendClaimed", testAppendClaimed},
		{"LeaseIsExclusive", testLeaseIsExclusive},
		{"LateWorkerCannotFinish", testLateWorkerCannotFinish},
		{"ReapToDeadWhenBudgetSpent", testReapToDeadWhenBudgetSpent},
		{"ReleaseKeepsTheAttempt", testReleaseKeepsTheAttempt},
		{"RetryDueLater", testRetryDueLater},
		{"ReplayFreshBudget", testReplayFreshBudget},
		{"ReapCountsTheReplayBudget", testReapCountsTheReplayBudget},
		{"BulkReplayTerminates", testBulkReplayTerminates},
		{"ListFiltersAndCursor", testListFiltersAndCursor},
		{"Stats", testStats},
		{"RetentionCleanup", testRetentionCleanup},
		{"GroupCommit", testGroupCommit},
		{"CompleteStoresAnyExcerpt", testCompleteStoresAnyExcerpt},
		{"HoldSpendsNoAttempt", testHoldSpendsNoAttempt},
		{"FindByEventIDAndConflicts", testFindByEventIDAndConflicts},
		{"ReadyFollowsCommits", testReadyFollowsCommits},
		{"HeadersKeepTheirBytes", testHeadersKeepTheirBytes},
		{"BodyGuardCatchesReplays", testBodyGuardCatchesReplays},
		{"SearchAndFilteredReplay", testSearchAndFilteredReplay},
		{"Pauses", testPauses},
		{"MinuteFigures", testMinuteFigures},
		{"SearchStopsAtItsBound", testSearchStopsAtItsBound},
		{"IgnoredEvents", testIgnoredEvents},
		{"IgnoredRetention", testIgnoredRetention},
		{"TypeMatchesLikeTheListFilter", testTypeMatchesLikeTheListFilter},
		{"SyncReplies", testSyncReplies},
	}
	t.Parallel()
	testdb.ForEachStore(t, func(t *testing.T, store string) {
		t.Parallel()
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel() // each on a journal of its own
				tc.fn(t, testdb.OpenStore(t, store, tc.name != "MigrateTwiceAndReady"))
			})
		}
	})
}

func ev(provider, id, hash string) journal.Event {
	return journal.Event{
		Provider: provider, EventID: id, EventType: "t", ContentHash: hash,
		Headers: http.Header{"Webhook-Id": {id}}, Body: []byte(`{"id":"` + id + `","h":"` + hash + `"}`),
		Path: "/webhooks/" + provider, RawQuery: "q=1",
	}
}

func appendOne(t *testing.T, s journal.Store, e journal.Event) journal.Result {
	t.Helper()
	r, err := s.Append(context.Background(), []journal.Event{e})
	if err != nil {
		t.Fatal(err)
	}
	return r[0]
}

// count lists every event matching f (paging through).
func count(t *testing.T, s journal.Store, f journal.Filter) int {
	t.Helper()
	n := 0
	f.Limit = 500
	for {
		evs, next, err := s.List(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(evs)
		if next == 0 {
			return n
		}
		f.Before = next
	}
}

func get(t *testing.T, s journal.Store, id int64) *journal.Detail {
	t.Helper()
	d, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func leaseAll(t *testing.T, s journal.Store, leaseFor time.Duration) []journal.Delivery {
	t.Helper()
	ds, err := s.Lease(context.Background(), 100, leaseFor)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func finish(d journal.Delivery, status journal.Status, code int) journal.Finish {
	return journal.Finish{ID: d.ID, LeaseToken: d.LeaseToken, Status: status, LastError: fmt.Sprintf("answered %d", code),
		Attempt: journal.Attempt{Number: d.Attempt, StartedAt: time.Now(), DurationMS: 7, StatusCode: code, ResponseExcerpt: "excerpt"}}
}

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
	r := appendOne(t, s, ev("p", "a", "h1"))
	if r.Outcome != journal.Inserted || r.ID == 0 {
		t.Fatalf("first append: %+v", r)
	}
	first := r.ID
	if r := appendOne(t, s, ev("p", "a", "h1")); r.Outcome != journal.Duplicate || r.ID != first {
		t.Fatalf("same content: %+v, want duplicate of %d", r, first)
	}
	if r := appendOne(t, s, ev("p", "a", "h2")); r.Outcome != journal.Conflict || r.ID != first {
		t.Fatalf("other content: %+v, want conflict on %d", r, first)
	}
	if r := appendOne(t, s, ev("q", "a", "h2")); r.Outcome != journal.Inserted || r.ID == first {
		t.Fatalf("same id, other provider: %+v", r)
	}
	if n := count(t, s, journal.Filter{}); n != 2 {
		t.Fatalf("events = %d, want 2", n)
	}
	d := get(t, s, first)
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
	appendOne(t, s, ev("p", "old", "h"))
	batch := []journal.Event{
		ev("p", "z", "h"),   // new
		ev("p", "old", "h"), // duplicate of a stored row
		ev("p", "z", "h"),   // in-batch duplicate
		ev("p", "z", "X"),   // in-batch conflict
		ev("p", "old", "Y"), // conflict with a stored row
		ev("p", "b", "h"),   // new
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
	if n := count(t, s, journal.Filter{}); n != 3 {
		t.Fatalf("events = %d, want 3", n)
	}
	if b := get(t, s, r[5].ID).Body; b != `{"id":"b","h":"h"}` {
		t.Fatalf("payload of a batch row: %q", b)
	}
	if c := get(t, s, r[0].ID).Conflicts; c != 1 {
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
			r, err := s.Append(context.Background(), []journal.Event{ev("p", "same", "h")})
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
	if c := count(t, s, journal.Filter{}); c != 1 {
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
				batch = append(batch, ev("p", fmt.Sprintf("k%02d", k), "h"))
			}
			if _, err := s.Append(ctx, batch); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if c := count(t, s, journal.Filter{}); c != 50 {
		t.Fatalf("rows = %d", c)
	}
}

func testLeaseCompleteAndAttempts(t *testing.T, s journal.Store) {
	id := appendOne(t, s, ev("p", "a", "h")).ID
	ds := leaseAll(t, s, time.Minute)
	if len(ds) != 1 {
		t.Fatalf("leased %d", len(ds))
	}
	d := ds[0]
	if d.ID != id || d.Attempt != 1 || d.BudgetAttempt != 1 || d.Provider != "p" || d.EventID != "a" ||
		string(d.Body) != `{"id":"a","h":"h"}` || d.Headers.Get("Webhook-Id") != "a" || d.Path != "/webhooks/p" || d.RawQuery != "q=1" {
		t.Fatalf("delivery %+v", d)
	}
	if get(t, s, id).Status != journal.StatusProcessing {
		t.Fatal("leased row is not processing")
	}
	if more := leaseAll(t, s, time.Minute); len(more) != 0 {
		t.Fatalf("a leased row was leased again: %+v", more)
	}
	n, err := completeN(s, []journal.Finish{finish(d, journal.StatusDone, 204)})
	if err != nil || n != 1 {
		t.Fatalf("complete: %d %v", n, err)
	}
	got := get(t, s, id)
	if got.Status != journal.StatusDone || got.Attempts != 1 || len(got.AttemptLog) != 1 {
		t.Fatalf("after complete: %+v", got)
	}
	a := got.AttemptLog[0]
	if a.Number != 1 || a.StatusCode != 204 || a.DurationMS != 7 || a.ResponseExcerpt != "excerpt" || a.StartedAt.IsZero() {
		t.Fatalf("attempt %+v", a)
	}
	// A finished row cannot be finished again with the same token.
	if n, _ := completeN(s, []journal.Finish{finish(d, journal.StatusDead, 500)}); n != 0 {
		t.Fatal("completed twice")
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
	a, b := claim(ev("p", "a", "h"), time.Minute), claim(ev("p", "b", "h"), 20*time.Millisecond)
	dupA := claim(ev("p", "a", "h"), time.Minute)
	rs, err := s.Append(ctx, []journal.Event{a, b, dupA, ev("p", "c", "h")})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != journal.Inserted || rs[1].Outcome != journal.Inserted || rs[2].Outcome != journal.Duplicate || rs[3].Outcome != journal.Inserted {
		t.Fatalf("outcomes %+v", rs)
	}
	for _, id := range []int64{rs[0].ID, rs[1].ID} {
		if d := get(t, s, id); d.Status != journal.StatusProcessing || d.Attempts != 1 {
			t.Fatalf("claimed row %d: %+v", id, d.Summary)
		}
	}
	// Only the unclaimed event is leasable.
	if ds := leaseAll(t, s, time.Minute); len(ds) != 1 || ds[0].EventID != "c" {
		t.Fatalf("leased %+v", ds)
	}
	// The claim's token finishes it; the duplicate's token does not.
	da := journal.Delivery{ID: rs[0].ID, Attempt: 1, LeaseToken: dupA.LeaseToken}
	if n, err := completeN(s, []journal.Finish{finish(da, journal.StatusDone, 200)}); err != nil || n != 0 {
		t.Fatalf("finished with a duplicate's token: %d %v", n, err)
	}
	da.LeaseToken = a.LeaseToken
	if n, err := completeN(s, []journal.Finish{finish(da, journal.StatusDone, 200)}); err != nil || n != 1 {
		t.Fatalf("finish with the claim's token: %d %v", n, err)
	}
	if d := get(t, s, rs[0].ID); d.Status != journal.StatusDone || len(d.AttemptLog) != 1 || d.AttemptLog[0].Number != 1 {
		t.Fatalf("after finish: %+v", d)
	}
	// b's receiver never finishes: its lease expires and the reaper
	// returns it, and a leaser then gets it as its second attempt.
	waitFor(t, 5*time.Second, "the reaper to return the expired claim", func() bool {
		return reapOne(t, s, 5)
	})
	ds := leaseAll(t, s, time.Minute)
	if len(ds) != 1 || ds[0].ID != rs[1].ID || ds[0].Attempt != 2 || string(ds[0].Body) != string(b.Body) {
		t.Fatalf("after the reaper: %+v", ds)
	}
}

// Concurrent leasers never get the same row.
func testLeaseIsExclusive(t *testing.T, s journal.Store) {
	var batch []journal.Event
	for i := range 200 {
		batch = append(batch, ev("p", fmt.Sprintf("e%03d", i), "h"))
	}
	if _, err := s.Append(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[int64]int{}
	)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := s.Lease(context.Background(), 7, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, d := range ds {
					seen[d.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("leased %d distinct rows, want 200", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %d leased %d times", id, n)
		}
	}
}

// A worker whose lease expired and was taken over cannot record an outcome.
func testLateWorkerCannotFinish(t *testing.T, s journal.Store) {
	id := appendOne(t, s, ev("p", "late", "h")).ID
	first := leaseAll(t, s, 50*time.Millisecond)
	waitFor(t, 5*time.Second, "the reaper to return the expired lease", func() bool {
		return reapOne(t, s, 5)
	})
	if d := get(t, s, id); d.Status != journal.StatusRetry || d.LastError == "" {
		t.Fatalf("after reap: %+v", d.Summary)
	}
	second := leaseAll(t, s, time.Minute)
	if len(second) != 1 || second[0].LeaseToken == first[0].LeaseToken || second[0].Attempt != 2 {
		t.Fatalf("second lease %+v", second)
	}
	if n, err := completeN(s, []journal.Finish{finish(first[0], journal.StatusDone, 200)}); err != nil || n != 0 {
		t.Fatalf("late complete took effect: %d %v", n, err)
	}
	if d := get(t, s, id); d.Status != journal.StatusProcessing || len(d.AttemptLog) != 0 {
		t.Fatalf("late worker changed the row: %s, %d attempts logged", d.Status, len(d.AttemptLog))
	}
	if n, err := completeN(s, []journal.Finish{finish(second[0], journal.StatusDone, 200)}); err != nil || n != 1 {
		t.Fatalf("current holder: %d %v", n, err)
	}
}

func testReapToDeadWhenBudgetSpent(t *testing.T, s journal.Store) {
	id := appendOne(t, s, ev("p", "r", "h")).ID
	for i := range 2 {
		if ds := leaseAll(t, s, 10*time.Millisecond); len(ds) != 1 {
			t.Fatalf("lease %d: %v", i, ds)
		}
		waitFor(t, 5*time.Second, "the reaper to return the expired lease", func() bool {
			return reapOne(t, s, 2)
		})
	}
	if d := get(t, s, id); d.Status != journal.StatusDead || d.Attempts != 2 {
		t.Fatalf("after two expired leases with a budget of 2: %+v", d.Summary)
	}
}

func testReleaseKeepsTheAttempt(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := appendOne(t, s, ev("p", "rel", "h")).ID
	d := leaseAll(t, s, time.Minute)[0]
	wrong := d.LeaseToken
	wrong[0] ^= 0xff
	n, err := s.Release(ctx, []int64{d.ID}, []uuid.UUID{wrong})
	if err != nil || n != 0 {
		t.Fatalf("release with a wrong token: %d %v", n, err)
	}
	n, err = s.Release(ctx, []int64{d.ID}, []uuid.UUID{d.LeaseToken})
	if err != nil || n != 1 {
		t.Fatalf("release: %d %v", n, err)
	}
	if got := get(t, s, id); got.Status != journal.StatusPending || got.Attempts != 0 {
		t.Fatalf("after release: %+v, want pending with no attempt spent", got.Summary)
	}
	again := leaseAll(t, s, time.Minute)
	if len(again) != 1 || again[0].Attempt != 1 {
		t.Fatalf("re-lease after release: %+v", again)
	}
}

func testRetryDueLater(t *testing.T, s journal.Store) {
	id := appendOne(t, s, ev("p", "later", "h")).ID
	d := leaseAll(t, s, time.Minute)[0]
	f := finish(d, journal.StatusRetry, 503)
	// Long enough that the checks below run before it is due even on a
	// machine running the whole suite under -race (300 ms was once not).
	f.RetryIn = 2 * time.Second
	before := time.Now()
	if n, err := completeN(s, []journal.Finish{f}); err != nil || n != 1 {
		t.Fatalf("complete: %d %v", n, err)
	}
	got := get(t, s, id)
	if got.Status != journal.StatusRetry || got.LastError != "answered 503" {
		t.Fatalf("after retry: %+v", got.Summary)
	}
	ds := leaseAll(t, s, time.Minute)
	if len(ds) != 0 && time.Since(before) < f.RetryIn {
		t.Fatal("a retry was leased before it was due")
	}
	waitFor(t, 10*time.Second, "the retry to come due", func() bool {
		if len(ds) == 0 { // (leased above only if that was already late)
			ds = leaseAll(t, s, time.Minute)
		}
		return len(ds) > 0
	})
	if len(ds) != 1 || ds[0].Attempt != 2 || ds[0].BudgetAttempt != 2 {
		t.Fatalf("due retry: %+v", ds)
	}
}

func testReplayFreshBudget(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := appendOne(t, s, ev("p", "rp", "h")).ID
	if err := s.Replay(ctx, id, "too early"); !errors.Is(err, journal.ErrNotReplayable) {
		t.Fatalf("replay of a pending event: %v", err)
	}
	for range 3 { // three attempts, the last one dead
		d := leaseAll(t, s, time.Minute)[0]
		status := journal.StatusRetry
		if d.Attempt == 3 {
			status = journal.StatusDead
		}
		if _, err := completeN(s, []journal.Finish{finish(d, status, 500)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replay(ctx, id, "backend fixed"); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, id)
	if got.Status != journal.StatusRetry || len(got.Replays) != 1 || got.Replays[0].Reason != "backend fixed" ||
		got.Replays[0].FromStatus != journal.StatusDead || got.Replays[0].ReplayedAt.IsZero() {
		t.Fatalf("after replay: %+v %+v", got.Summary, got.Replays)
	}
	d := leaseAll(t, s, time.Minute)
	if len(d) != 1 || d[0].Attempt != 4 || d[0].BudgetAttempt != 1 || string(d[0].Body) != `{"id":"rp","h":"h"}` {
		t.Fatalf("replayed delivery %+v: want attempt 4, the first of a fresh budget, same body", d)
	}
	if err := s.Replay(ctx, 1<<40, "x"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("replay of a missing event: %v", err)
	}
}

// The reaper's dead-or-retry decision counts attempts within the current
// budget: after a replay, an expired lease goes back to retry until the
// fresh budget is spent, however many attempts came before it.
func testReapCountsTheReplayBudget(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := appendOne(t, s, ev("p", "rb", "h")).ID
	expire := func() {
		t.Helper()
		if ds := leaseAll(t, s, 10*time.Millisecond); len(ds) != 1 {
			t.Fatalf("lease: %v", ds)
		}
		time.Sleep(30 * time.Millisecond)
		if r, err := s.ReapExpired(ctx, 2); err != nil || len(r) != 1 {
			t.Fatalf("reaped %+v, %v", r, err)
		}
	}
	expire()
	expire()
	if d := get(t, s, id); d.Status != journal.StatusDead || d.Attempts != 2 {
		t.Fatalf("after spending the first budget: %+v", d.Summary)
	}
	if err := s.Replay(ctx, id, "again"); err != nil {
		t.Fatal(err)
	}
	expire()
	if d := get(t, s, id); d.Status != journal.StatusRetry || d.Attempts != 3 {
		t.Fatalf("first expiry of the fresh budget: %+v", d.Summary)
	}
	expire()
	if d := get(t, s, id); d.Status != journal.StatusDead || d.Attempts != 4 {
		t.Fatalf("after spending the fresh budget: %+v", d.Summary)
	}
}

// Bulk replay walks ids forward: rows that die again while it runs are not
// picked twice, and it ends.
func testBulkReplayTerminates(t *testing.T, s journal.Store) {
	ctx := context.Background()
	var batch []journal.Event
	for i := range 250 {
		batch = append(batch, ev("p", fmt.Sprintf("d%03d", i), "h"))
	}
	if _, err := s.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	killAll := func() {
		for {
			ds, err := s.Lease(ctx, 100, time.Minute)
			if err != nil || len(ds) == 0 {
				return
			}
			var fs []journal.Finish
			for _, d := range ds {
				fs = append(fs, finish(d, journal.StatusDead, 422))
			}
			completeN(s, fs)
		}
	}
	killAll()
	if n := count(t, s, journal.Filter{Status: journal.StatusDead}); n != 250 {
		t.Fatalf("%d dead, want 250", n)
	}
	// A forwarder whose backend refuses everything at once, running while
	// the bulk replay does.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				killAll()
			}
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := s.BulkReplay(cctx, journal.Filter{Status: journal.StatusDead}, "storm")
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if n != 250 {
		t.Fatalf("replayed %d, want each of the 250 once", n)
	}
	evs, _, err := s.List(ctx, journal.Filter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if r := len(get(t, s, e.ID).Replays); r != 1 {
			t.Fatalf("event %d audited %d times, want 1", e.ID, r)
		}
	}
	// Limits and filters.
	killAll()
	if n, err := s.BulkReplay(ctx, journal.Filter{Status: journal.StatusDead, Limit: 30}, "some"); err != nil || n != 30 {
		t.Fatalf("limited bulk replay: %d %v", n, err)
	}
	if n, err := s.BulkReplay(ctx, journal.Filter{Status: journal.StatusDead, Provider: "other"}, "none"); err != nil || n != 0 {
		t.Fatalf("bulk replay of another provider: %d %v", n, err)
	}
	if _, err := s.BulkReplay(ctx, journal.Filter{Status: journal.StatusPending}, "x"); !errors.Is(err, journal.ErrNotReplayable) {
		t.Fatalf("bulk replay of pending: %v", err)
	}
}

func testListFiltersAndCursor(t *testing.T, s journal.Store) {
	ctx := context.Background()
	for i := range 7 {
		p := "alpha"
		if i%2 == 1 {
			p = "beta"
		}
		appendOne(t, s, ev(p, fmt.Sprintf("e%d", i), "h"))
	}
	page, next, err := s.List(ctx, journal.Filter{Limit: 3})
	if err != nil || len(page) != 3 || next == 0 {
		t.Fatalf("page 1: %d %d %v", len(page), next, err)
	}
	if page[0].ID <= page[1].ID {
		t.Fatal("not newest first")
	}
	if n := count(t, s, journal.Filter{}); n != 7 {
		t.Fatalf("paged %d, want 7", n)
	}
	if n := count(t, s, journal.Filter{Provider: "beta"}); n != 3 {
		t.Fatalf("beta %d", n)
	}
	if n := count(t, s, journal.Filter{Status: journal.StatusDone}); n != 0 {
		t.Fatalf("done %d", n)
	}
	if n := count(t, s, journal.Filter{Since: time.Now().Add(time.Hour)}); n != 0 {
		t.Fatalf("since the future: %d", n)
	}
	evs, _, err := s.List(ctx, journal.Filter{Before: 3_000_000_000})
	if err != nil || len(evs) != 7 {
		t.Fatalf("cursor beyond int32: %d %v", len(evs), err)
	}
}

func testStats(t *testing.T, s journal.Store) {
	ctx := context.Background()
	appendOne(t, s, ev("alpha", "1", "h"))
	appendOne(t, s, ev("beta", "2", "h"))
	d := leaseAll(t, s, time.Minute)
	if _, err := completeN(s, []journal.Finish{finish(d[0], journal.StatusDone, 200)}); err != nil {
		t.Fatal(err)
	}
	var st journal.Stats
	waitFor(t, 5*time.Second, "the pending event to be 10 ms old", func() bool {
		var err error
		if st, err = s.Stats(ctx); err != nil {
			t.Fatal(err)
		}
		return st.OldestUndelivered[d[1].Provider] >= 10*time.Millisecond
	})
	if st.ByStatus[journal.StatusDone] != 1 || st.ByStatus[journal.StatusProcessing] != 1 {
		t.Fatalf("by status %v", st.ByStatus)
	}
	if len(st.OldestUndelivered) != 1 || st.OldestUndelivered[d[1].Provider] < 10*time.Millisecond {
		t.Fatalf("oldest undelivered %v", st.OldestUndelivered)
	}
}

// Retention deletes old done events (their keys are forgotten), drops old
// done payloads earlier, never touches dead or undelivered events, and a
// done event without its payload cannot be replayed.
func testRetentionCleanup(t *testing.T, s journal.Store) {
	ctx := context.Background()
	for _, id := range []string{"done-old", "dead", "pending"} {
		appendOne(t, s, ev("p", id, "h"))
	}
	ds := leaseAll(t, s, time.Minute)
	byID := map[string]journal.Delivery{}
	for _, d := range ds {
		byID[d.EventID] = d
	}
	if _, err := completeN(s, []journal.Finish{finish(byID["done-old"], journal.StatusDone, 200), finish(byID["dead"], journal.StatusDead, 422)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, []int64{byID["pending"].ID}, []uuid.UUID{byID["pending"].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)

	// Nothing is old enough yet.
	c, err := s.Cleanup(ctx, past, past)
	if err != nil || c != (journal.Cleaned{}) {
		t.Fatalf("cleanup with nothing old: %+v %v", c, err)
	}
	// Payloads first: the done event keeps its key, loses its body.
	c, err = s.Cleanup(ctx, past, future)
	if err != nil || c.Events != 0 || c.Payloads != 1 {
		t.Fatalf("payload cleanup: %+v %v", c, err)
	}
	doneID := byID["done-old"].ID
	if d := get(t, s, doneID); d.Status != journal.StatusDone || d.Body != "" {
		t.Fatalf("after payload cleanup: %+v body %q", d.Summary, d.Body)
	}
	if r := appendOne(t, s, ev("p", "done-old", "h")); r.Outcome != journal.Duplicate {
		t.Fatalf("resend while the key is kept: %v, want duplicate", r.Outcome)
	}
	if err := s.Replay(ctx, doneID, "x"); !errors.Is(err, journal.ErrNotReplayable) {
		t.Fatalf("replay without payload: %v", err)
	}
	if n, err := s.BulkReplay(ctx, journal.Filter{Status: journal.StatusDone}, "x"); err != nil || n != 0 {
		t.Fatalf("bulk replay of payload-less done events: %d %v", n, err)
	}
	// Then keys: the done event goes, dead and pending stay.
	c, err = s.Cleanup(ctx, future, future)
	if err != nil || c.Events != 1 {
		t.Fatalf("key cleanup: %+v %v", c, err)
	}
	if _, err := s.Get(ctx, doneID); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("done event after key cleanup: %v", err)
	}
	if n := count(t, s, journal.Filter{}); n != 2 {
		t.Fatalf("%d events left, want dead and pending", n)
	}
	if d := get(t, s, byID["dead"].ID); d.Status != journal.StatusDead || d.Body == "" {
		t.Fatalf("dead event touched by retention: %+v", d.Summary)
	}
	if r := appendOne(t, s, ev("p", "done-old", "h")); r.Outcome != journal.Inserted {
		t.Fatalf("resend after the key expired: %v, want a new event", r.Outcome)
	}
}

// reapOne runs the reaper (with a budget of maxAttempts) and says whether
// it returned the one expired lease the test holds.
func reapOne(t *testing.T, s journal.Store, maxAttempts int) bool {
	t.Helper()
	r, err := s.ReapExpired(context.Background(), maxAttempts)
	if err != nil || len(r) > 1 {
		t.Fatalf("reap: %+v %v", r, err)
	}
	if len(r) == 1 {
		// What the reaper says it did is what the row shows.
		d := get(t, s, r[0].ID)
		if r[0].Dead != (d.Status == journal.StatusDead) || r[0].EventID != d.EventID || r[0].Provider != d.Provider {
			t.Fatalf("reaped %+v, row %+v", r[0], d.Summary)
		}
	}
	return len(r) == 1
}

// completeN records outcomes and says how many took effect.
func completeN(s journal.Store, fs []journal.Finish) (int, error) {
	ids, err := s.Complete(context.Background(), fs)
	return len(ids), err
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
				r, err := gc.Append(context.Background(), []journal.Event{ev("p", id, hash)})
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
	if n := count(t, s, journal.Filter{}); n != keys {
		t.Fatalf("%d rows, want %d", n, keys)
	}
	if calls := cs.calls.Load(); calls >= keys*copies/2 {
		t.Fatalf("%d transactions for %d requests: no group commit", calls, keys*copies)
	}
	t.Logf("%d requests in %d transactions", keys*copies, cs.calls.Load())
}

// testCompleteStoresAnyExcerpt: a backend's reply is arbitrary bytes. A NUL
// byte, invalid UTF-8 or a huge excerpt must neither fail the outcome nor
// the other outcomes of its batch (PostgreSQL refuses NUL in text with
// SQLSTATE 22021, which once failed whole batches and made every event in
// them be delivered again and again).
func testCompleteStoresAnyExcerpt(t *testing.T, s journal.Store) {
	excerpts := []string{"before\x00after", "bad \xff\xfe utf-8 \xc3", strings.Repeat("x", 1<<20), "plain"}
	for i := range excerpts {
		appendOne(t, s, ev("p", fmt.Sprintf("ex%d", i), "h"))
	}
	ds := leaseAll(t, s, time.Minute)
	if len(ds) != len(excerpts) {
		t.Fatalf("leased %d, want %d", len(ds), len(excerpts))
	}
	fs := make([]journal.Finish, len(ds))
	for i, d := range ds {
		fs[i] = finish(d, journal.StatusDone, 200)
		fs[i].Attempt.ResponseExcerpt = excerpts[i]
		fs[i].LastError = excerpts[i]
	}
	done, err := s.Complete(context.Background(), fs)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	if len(done) != len(ds) {
		t.Fatalf("recorded %d outcomes, want %d", len(done), len(ds))
	}
	for i, d := range ds {
		got := get(t, s, d.ID)
		if got.Status != journal.StatusDone || len(got.AttemptLog) != 1 {
			t.Fatalf("event %d: status %s, %d attempts", d.ID, got.Status, len(got.AttemptLog))
		}
		x := got.AttemptLog[0].ResponseExcerpt
		if strings.ContainsRune(x, 0) || !utf8.ValidString(x) || len(x) > journal.MaxExcerptBytes {
			t.Fatalf("excerpt %d stored unsafely: %d bytes, %q…", i, len(x), x[:min(len(x), 40)])
		}
	}
	if x := get(t, s, ds[0].ID).AttemptLog[0].ResponseExcerpt; !strings.Contains(x, "before") || !strings.Contains(x, "after") {
		t.Fatalf("NUL excerpt lost its text: %q", x)
	}
	if x := get(t, s, ds[3].ID).AttemptLog[0].ResponseExcerpt; x != "plain" {
		t.Fatalf("plain excerpt changed: %q", x)
	}
}

// testHoldSpendsNoAttempt: a held lease goes back without its attempt, due
// after its delay, showing why; its next outcome clears the reason.
func testHoldSpendsNoAttempt(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := appendOne(t, s, ev("p", "held", "h")).ID
	d := leaseAll(t, s, time.Minute)[0]
	n, err := s.Hold(ctx, []journal.Hold{{ID: d.ID, LeaseToken: uuid.New(), For: time.Hour, Reason: "no_backend"}})
	if err != nil || n != 0 {
		t.Fatalf("hold with a wrong token: %d %v", n, err)
	}
	// 2 s: the checks below run before it is due even on a machine running
	// the whole suite under -race (300 ms was once not enough).
	const holdFor = 2 * time.Second
	before := time.Now()
	if n, err = s.Hold(ctx, []journal.Hold{{ID: d.ID, LeaseToken: d.LeaseToken, For: holdFor, Reason: "no_backend"}}); err != nil || n != 1 {
		t.Fatalf("hold: %d %v", n, err)
	}
	got := get(t, s, id)
	if got.Status != journal.StatusPending || got.Attempts != 0 || got.Held != "no_backend" {
		t.Fatalf("after hold: %+v", got.Summary)
	}
	again := leaseAll(t, s, time.Minute)
	if len(again) != 0 && time.Since(before) < holdFor {
		t.Fatalf("a held event was leased before it was due")
	}
	for deadline := time.Now().Add(10 * time.Second); len(again) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the held event never came due")
		}
		time.Sleep(50 * time.Millisecond)
		again = leaseAll(t, s, time.Minute)
	}
	if again[0].Attempt != 1 || again[0].BudgetAttempt != 1 {
		t.Fatalf("after the hold: attempt %d (budget %d), want 1", again[0].Attempt, again[0].BudgetAttempt)
	}
	if got := get(t, s, id); got.Held != "" {
		t.Fatalf("leased again, still shown held: %q", got.Held)
	}
	if _, err := s.Complete(ctx, []journal.Finish{finish(again[0], journal.StatusDone, 200)}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, id); got.Held != "" || got.Status != journal.StatusDone {
		t.Fatalf("after delivery: %+v", got.Summary)
	}
}

// testFindByEventIDAndConflicts: events are found by the provider's id,
// exactly or by prefix, within a provider or a set of them; conflicting
// copies are listed with their payloads.
func testFindByEventIDAndConflicts(t *testing.T, s journal.Store) {
	ctx := context.Background()
	a := appendOne(t, s, ev("stripe", "evt_123", "h1")).ID
	appendOne(t, s, ev("stripe", "evt_1234", "h"))
	appendOne(t, s, ev("github", "evt_123", "h"))
	ids := func(f journal.Filter) []string {
		evs, _, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.Provider+"/"+e.EventID)
		}
		return out
	}
	if got := ids(journal.Filter{EventID: "evt_123"}); len(got) != 2 {
		t.Fatalf("exact evt_123: %v", got)
	}
	if got := ids(journal.Filter{EventID: "evt_123", Provider: "stripe"}); len(got) != 1 || got[0] != "stripe/evt_123" {
		t.Fatalf("exact within stripe: %v", got)
	}
	if got := ids(journal.Filter{EventID: "evt_123", Providers: []string{"stripe", "shopify"}}); len(got) != 1 || got[0] != "stripe/evt_123" {
		t.Fatalf("exact within a provider set: %v", got)
	}
	if got := ids(journal.Filter{EventID: "evt_12", EventIDPrefix: true, Provider: "stripe"}); len(got) != 2 {
		t.Fatalf("prefix evt_12 within stripe: %v", got)
	}
	if got := ids(journal.Filter{EventID: "evt_12"}); len(got) != 0 {
		t.Fatalf("exact evt_12 matched: %v", got)
	}
	if got := ids(journal.Filter{EventID: "%", EventIDPrefix: true}); len(got) != 0 {
		t.Fatalf("prefix %% matched: %v", got)
	}

	if r := appendOne(t, s, ev("stripe", "evt_123", "h2")); r.Outcome != journal.Conflict {
		t.Fatalf("outcome %v", r.Outcome)
	}
	cs, err := s.Conflicts(ctx, a)
	if err != nil || len(cs) != 1 {
		t.Fatalf("conflicts: %v %v", cs, err)
	}
	if cs[0].ContentHash != "h2" || cs[0].Body != `{"id":"evt_123","h":"h2"}` || cs[0].Headers.Get("Webhook-Id") != "evt_123" || cs[0].ReceivedAt.IsZero() {
		t.Fatalf("conflict %+v", cs[0])
	}
	if _, err := s.Conflicts(ctx, 999999); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("conflicts of no event: %v", err)
	}
}

// testReadyFollowsCommits: readiness commits a write, so it fails while
// the journal cannot commit (a lock held by the test here; a full or
// read-only disk in production), and comes back after.
func testReadyFollowsCommits(t *testing.T, s journal.Store) {
	ctx := context.Background()
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	release := blockCommits(t, s)
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

// testHeadersKeepTheirBytes: a header value that is not UTF-8 is stored,
// leased and shown with its exact bytes (JSON once turned them into U+FFFD,
// and that is what was forwarded).
func testHeadersKeepTheirBytes(t *testing.T, s journal.Store) {
	e := ev("p", "raw", "h")
	e.Headers = http.Header{"X-Legacy": {"caf\xe9", "ok"}, "X-Plain": {"fine"}}
	id := appendOne(t, s, e).ID
	if got := get(t, s, id).Headers; got.Values("X-Legacy")[0] != "caf\xe9" || got.Values("X-Legacy")[1] != "ok" || got.Get("X-Plain") != "fine" || len(got) != 2 {
		t.Fatalf("stored headers %q", got)
	}
	d := leaseAll(t, s, time.Minute)[0]
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
		e := ev(provider, id, hash)
		e.BodyGuard = true
		return e
	}
	first := appendOne(t, s, guarded("gh", "delivery-1", "H"))
	if first.Outcome != journal.Inserted {
		t.Fatalf("first: %v", first.Outcome)
	}
	if r := appendOne(t, s, guarded("gh", "delivery-2", "H")); r.Outcome != journal.Replayed || r.ID != first.ID {
		t.Fatalf("same body, fresh id: %+v", r)
	}
	if r := appendOne(t, s, guarded("gh", "delivery-1", "H")); r.Outcome != journal.Duplicate {
		t.Fatalf("same key: %v", r.Outcome)
	}
	if r := appendOne(t, s, guarded("gh", "delivery-3", "H2")); r.Outcome != journal.Inserted {
		t.Fatalf("other body: %v", r.Outcome)
	}
	if r := appendOne(t, s, ev("gh", "delivery-4", "H")); r.Outcome != journal.Inserted {
		t.Fatalf("unguarded: %v", r.Outcome)
	}
	// One body under another type is another event (Shopify sends an
	// order under orders/create and orders/paid).
	other := guarded("gh", "delivery-5", "H")
	other.EventType = "orders/paid"
	if r := appendOne(t, s, other); r.Outcome != journal.Inserted {
		t.Fatalf("same body, another type: %v", r.Outcome)
	}
	if r := appendOne(t, s, guarded("other", "delivery-2", "H")); r.Outcome != journal.Inserted {
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
	if n := count(t, s, journal.Filter{Provider: "gh"}); n != 4 {
		t.Fatalf("%d gh events, want 4", n)
	}
	// Copies are kept up to a bound, however often one body comes back.
	for i := range 15 {
		if r := appendOne(t, s, guarded("gh", fmt.Sprintf("again-%d", i), "H")); r.Outcome != journal.Replayed {
			t.Fatalf("copy %d: %v", i, r.Outcome)
		}
	}
	if cs, err := s.Conflicts(ctx, first.ID); err != nil || len(cs) != 10 {
		t.Fatalf("%d copies kept (%v), want the first 10", len(cs), err)
	}
}

// testSearchAndFilteredReplay: types with wildcards, a time range, body
// matches and the event id select events for listing and for a bulk
// replay, whose dry run counts the same events.
func testSearchAndFilteredReplay(t *testing.T, s journal.Store) {
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	mk := func(id, typ, customer string, at time.Duration) journal.Event {
		e := ev("stripe", id, "h")
		e.EventType, e.ReceivedAt = typ, base.Add(at)
		e.Body = []byte(`{"id":"` + id + `","data":{"object":{"customer":"` + customer + `"}}}`)
		return e
	}
	events := []journal.Event{
		mk("e1", "invoice.paid", "cus_123", 0), mk("e2", "invoice.payment_failed", "cus_123", time.Minute),
		mk("e3", "customer.updated", "cus_123", 2*time.Minute), mk("e4", "invoice.paid", "cus_999", 3*time.Minute),
		mk("e5", "invoice_paid", "cus_123", 4*time.Minute),
	}
	if _, err := s.Append(ctx, events); err != nil {
		t.Fatal(err)
	}
	// All of them dead.
	var fs []journal.Finish
	for _, d := range leaseAll(t, s, time.Minute) {
		fs = append(fs, finish(d, journal.StatusDead, 500))
	}
	if _, err := s.Complete(ctx, fs); err != nil {
		t.Fatal(err)
	}
	ids := func(f journal.Filter) string {
		evs, _, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.EventID)
		}
		return strings.Join(out, ",")
	}
	cus := []journal.Match{{Pointer: "/data/object/customer", Value: "cus_123"}}
	for _, c := range []struct {
		f    journal.Filter
		want string
	}{
		{journal.Filter{Types: []string{"invoice.*"}}, "e4,e2,e1"},
		{journal.Filter{Types: []string{"invoice.*", "customer.*"}}, "e4,e3,e2,e1"},
		{journal.Filter{Types: []string{"*.paid"}}, "e4,e1"},
		{journal.Filter{Types: []string{"INVOICE.*"}}, ""},
		{journal.Filter{Since: base.Add(time.Minute), Until: base.Add(3 * time.Minute)}, "e3,e2"},
		{journal.Filter{Since: base.Add(time.Minute), Until: base.Add(3 * time.Minute), Types: []string{"customer.*"}}, "e3"},
		{journal.Filter{Since: base.Add(time.Minute), Until: base.Add(3 * time.Minute), Before: 0, Limit: 1}, "e3"},
		{journal.Filter{Since: base.Add(-time.Hour), Until: base.Add(-time.Minute)}, ""},
		{journal.Filter{Since: base.Add(-72 * time.Hour), Until: base.Add(90 * time.Second)}, "e2,e1"}, // a wide window: no id-range look-up
		{journal.Filter{Match: cus}, "e5,e3,e2,e1"},
		{journal.Filter{Match: cus, Types: []string{"invoice.*"}}, "e2,e1"},
		{journal.Filter{EventID: "e", EventIDPrefix: true, Match: cus, Limit: 2}, "e5,e3"},
	} {
		if got := ids(c.f); got != c.want {
			t.Errorf("%+v: %q, want %q", c.f, got, c.want)
		}
	}
	f := journal.Filter{Status: journal.StatusDead, Types: []string{"invoice.*"}, Match: cus}
	if n, err := s.CountReplayable(ctx, f); err != nil || n != 2 {
		t.Fatalf("dry run: %d %v, want 2", n, err)
	}
	if got := count(t, s, journal.Filter{Status: journal.StatusDead}); got != 5 {
		t.Fatalf("the dry run replayed something: %d dead", got)
	}
	if n, err := s.BulkReplay(ctx, f, "customer fixed"); err != nil || n != 2 {
		t.Fatalf("filtered replay: %d %v, want 2", n, err)
	}
	if got := ids(journal.Filter{Status: journal.StatusRetry}); got != "e2,e1" {
		t.Fatalf("replayed %q, want e2,e1", got)
	}
}

// Pauses are stored (surviving restarts: they are rows), a second pause of
// the same target keeps its since and takes the new reason, and resume
// removes it and makes the deliveries a pause held due at once.
func testPauses(t *testing.T, s journal.Store) {
	ctx := context.Background()
	if ps, err := s.Pauses(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("pauses of a new journal: %v, %v", ps, err)
	}
	if _, err := s.Pause(ctx, journal.Pause{Kind: "host", Name: "x"}); err == nil {
		t.Fatal("a pause of kind host accepted")
	}
	first, err := s.Pause(ctx, journal.Pause{Kind: journal.PauseBackend, Name: "http://b:80", Reason: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Since.IsZero() || time.Since(first.Since) > time.Minute {
		t.Fatalf("since %v", first.Since)
	}
	again, err := s.Pause(ctx, journal.Pause{Kind: journal.PauseBackend, Name: "http://b:80", Reason: "longer deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Since.Equal(first.Since) || again.Reason != "longer deploy" {
		t.Fatalf("paused again: %+v, first %+v", again, first)
	}
	if _, err := s.Pause(ctx, journal.Pause{Kind: journal.PauseProvider, Name: "acme", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Pauses(ctx)
	if err != nil || len(ps) != 2 || ps[0].Name != "http://b:80" || ps[0].Reason != "longer deploy" || ps[1].Kind != journal.PauseProvider {
		t.Fatalf("pauses: %+v, %v", ps, err)
	}

	r := appendOne(t, s, ev("acme", "held-by-pause", "h"))
	ds, err := s.Lease(ctx, 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("lease: %v, %v", ds, err)
	}
	if n, err := s.Hold(ctx, []journal.Hold{{ID: r.ID, LeaseToken: ds[0].LeaseToken, For: time.Hour, Reason: journal.HoldPaused}}); err != nil || n != 1 {
		t.Fatalf("hold: %d, %v", n, err)
	}
	if ds, _ := s.Lease(ctx, 1, time.Minute); len(ds) != 0 {
		t.Fatal("a delivery held for an hour leased at once")
	}
	found, err := s.Resume(ctx, journal.PauseProvider, "acme")
	if err != nil || !found {
		t.Fatalf("resume: %v, %v", found, err)
	}
	if found, err := s.Resume(ctx, journal.PauseProvider, "acme"); err != nil || found {
		t.Fatalf("second resume: %v, %v", found, err)
	}
	ds, err = s.Lease(ctx, 1, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].ID != r.ID || ds[0].Attempt != 1 {
		t.Fatalf("lease after resume: %+v, %v (want the held event, attempt 1)", ds, err)
	}
	if ps, _ := s.Pauses(ctx); len(ps) != 1 {
		t.Fatalf("pauses after one resume: %+v", ps)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Undelivered["acme"] != 1 {
		t.Fatalf("stats: %+v, %v (want 1 undelivered acme event)", st, err)
	}
}

// An ignored event is journaled, answered like any other on a resend,
// listed and counted, but never leased nor counted as undelivered; it is
// replayed only on purpose (one by one, or in bulk when status ignored is
// asked for), and then delivered like any replayed event.
func testIgnoredEvents(t *testing.T, s journal.Store) {
	ctx := context.Background()
	ign := ev("q", "ign-1", "h")
	ign.Ignored = true
	// Ignored wins over a claim: the receiver must not deliver it.
	ign.LeaseFor, ign.LeaseToken = time.Minute, uuid.New()
	r := appendOne(t, s, ign)
	if r.Outcome != journal.Inserted {
		t.Fatalf("ignored event: %v", r.Outcome)
	}
	ign2 := ev("q", "ign-2", "h")
	ign2.Ignored = true
	r2 := appendOne(t, s, ign2)
	appendOne(t, s, ev("p", "kept", "h"))

	if d := get(t, s, r.ID); d.Status != journal.StatusIgnored || d.Attempts != 0 || d.Body == "" {
		t.Fatalf("ignored event stored as %+v body %q", d.Summary, d.Body)
	}
	// A resend is judged against the stored row, whatever it says now.
	if dup := appendOne(t, s, ev("q", "ign-1", "h")); dup.Outcome != journal.Duplicate || dup.ID != r.ID {
		t.Fatalf("resend of an ignored event: %+v", dup)
	}
	if c := appendOne(t, s, ev("q", "ign-1", "other")); c.Outcome != journal.Conflict || c.ID != r.ID {
		t.Fatalf("conflicting resend of an ignored event: %+v", c)
	}
	if d := get(t, s, r.ID); d.Status != journal.StatusIgnored {
		t.Fatalf("resends changed the ignored event: %+v", d.Summary)
	}

	ds := leaseAll(t, s, time.Minute)
	if len(ds) != 1 || ds[0].EventID != "kept" {
		t.Fatalf("leased %+v, want only the kept event", ds)
	}
	if r, err := s.ReapExpired(ctx, 3); err != nil || len(r) != 0 {
		t.Fatalf("reap: %+v %v", r, err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[journal.StatusIgnored] != 2 {
		t.Fatalf("by status %v, want 2 ignored", st.ByStatus)
	}
	if _, ok := st.OldestUndelivered["q"]; ok || st.Undelivered["q"] != 0 {
		t.Fatalf("ignored events counted as undelivered: %v %v", st.OldestUndelivered, st.Undelivered)
	}
	if n := count(t, s, journal.Filter{Status: journal.StatusIgnored}); n != 2 {
		t.Fatalf("listed %d ignored events, want 2", n)
	}

	// Bulk replay leaves ignored events alone unless they are asked for.
	if n, err := s.BulkReplay(ctx, journal.Filter{}, "dead ones"); err != nil || n != 0 {
		t.Fatalf("bulk replay of dead events: %d %v", n, err)
	}
	if n, err := s.CountReplayable(ctx, journal.Filter{Status: journal.StatusIgnored, Provider: "q"}); err != nil || n != 2 {
		t.Fatalf("would replay %d ignored events (%v), want 2", n, err)
	}

	if err := s.Replay(ctx, r.ID, "we want this one after all"); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, r.ID)
	if got.Status != journal.StatusRetry || len(got.Replays) != 1 || got.Replays[0].FromStatus != journal.StatusIgnored {
		t.Fatalf("after replay: %+v %+v", got.Summary, got.Replays)
	}
	d := leaseAll(t, s, time.Minute)
	if len(d) != 1 || d[0].ID != r.ID || d[0].Attempt != 1 || string(d[0].Body) != `{"id":"ign-1","h":"h"}` {
		t.Fatalf("replayed ignored event leased as %+v", d)
	}

	if n, err := s.BulkReplay(ctx, journal.Filter{Status: journal.StatusIgnored}, "all of them"); err != nil || n != 1 {
		t.Fatalf("bulk replay of ignored events: %d %v", n, err)
	}
	if got := get(t, s, r2.ID); got.Status != journal.StatusRetry || len(got.Replays) != 1 ||
		got.Replays[0].FromStatus != journal.StatusIgnored || got.Replays[0].Reason != "all of them" {
		t.Fatalf("after bulk replay: %+v %+v", got.Summary, got.Replays)
	}
}

// Retention treats ignored events like done ones: payloads go first, then
// the keys.
func testIgnoredRetention(t *testing.T, s journal.Store) {
	ctx := context.Background()
	e := ev("q", "ign-old", "h")
	e.Ignored = true
	id := appendOne(t, s, e).ID
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	c, err := s.Cleanup(ctx, past, future)
	if err != nil || c.Payloads != 1 || c.Events != 0 {
		t.Fatalf("payload cleanup: %+v %v", c, err)
	}
	if err := s.Replay(ctx, id, "x"); !errors.Is(err, journal.ErrNotReplayable) {
		t.Fatalf("replay of an ignored event without payload: %v", err)
	}
	c, err = s.Cleanup(ctx, future, future)
	if err != nil || c.Events != 1 {
		t.Fatalf("key cleanup: %+v %v", c, err)
	}
	if _, err := s.Get(ctx, id); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("ignored event after key cleanup: %v", err)
	}
}

// journal.TypeMatches, which the ingress filters with, agrees with the
// store's type= listing on every pattern, LIKE and GLOB metacharacters
// included.
func testTypeMatchesLikeTheListFilter(t *testing.T, s journal.Store) {
	types := []string{"invoice.paid", "invoice.payment_failed", "customer.subscription.created", "customer.created",
		"a_b", "axb", "a%b", `a\b`, "x[1]", "x1", "q?", "qq", "Push Hook", "INVOICE.paid", "invoice."}
	for i, typ := range types {
		e := ev("p", fmt.Sprint("t", i), "h")
		e.EventType = typ
		appendOne(t, s, e)
	}
	patterns := []string{"invoice.*", "*.created", "customer.*.created", "a_b", "a%b", `a\b`, "x[1]", "q?",
		"*", "Push*", "*Hook", "invoice.paid", "in*ce*", "*i*i*", "invoice.*.*"}
	for _, pat := range patterns {
		listed, _, err := s.List(context.Background(), journal.Filter{Types: []string{pat}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, sm := range listed {
			got[sm.EventType] = true
		}
		for _, typ := range types {
			if journal.TypeMatches(pat, typ) != got[typ] {
				t.Errorf("pattern %q, type %q: TypeMatches %v, listed %v", pat, typ, !got[typ], got[typ])
			}
		}
	}
}

// A sync-mode reply is stored under the lease, once (the first stays),
// kept as bytes, and shown by Get.
func testSyncReplies(t *testing.T, s journal.Store) {
	ctx := context.Background()
	e := ev("p", "sync", "h")
	e.LeaseFor, e.LeaseToken = time.Minute, uuid.New()
	id := appendOne(t, s, e).ID
	if r, err := s.StoredReply(ctx, id); err != nil || r != nil {
		t.Fatalf("before: %+v %v", r, err)
	}
	if d := get(t, s, id); d.Reply != nil {
		t.Fatalf("detail before: %+v", d.Reply)
	}
	first := journal.Reply{Status: 201, ContentType: "text/xml", Body: []byte("<Response>\x00\xff</Response>")}
	if ok, err := s.SaveReply(ctx, id, uuid.New(), first); err != nil || ok {
		t.Fatalf("stored under another lease: %v %v", ok, err)
	}
	if ok, err := s.SaveReply(ctx, id, e.LeaseToken, first); err != nil || !ok {
		t.Fatalf("store: %v %v", ok, err)
	}
	if ok, err := s.SaveReply(ctx, id, e.LeaseToken, journal.Reply{Status: 200, Body: []byte("later")}); err != nil || ok {
		t.Fatalf("a second reply replaced the first: %v %v", ok, err)
	}
	r, err := s.StoredReply(ctx, id)
	if err != nil || r == nil || r.Status != 201 || r.ContentType != "text/xml" || string(r.Body) != string(first.Body) || r.StoredAt.IsZero() {
		t.Fatalf("stored: %+v %v", r, err)
	}
	d := get(t, s, id)
	if d.Reply == nil || d.Reply.Status != 201 || d.Reply.BodyBytes != len(first.Body) || !utf8.ValidString(d.Reply.BodyExcerpt) {
		t.Fatalf("detail: %+v", d.Reply)
	}
	if _, err := s.StoredReply(ctx, id+1000); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("no such event: %v", err)
	}
	// An empty body is a reply too.
	e2 := ev("p", "empty", "h")
	e2.LeaseFor, e2.LeaseToken = time.Minute, uuid.New()
	id2 := appendOne(t, s, e2).ID
	if ok, err := s.SaveReply(ctx, id2, e2.LeaseToken, journal.Reply{Status: 204}); err != nil || !ok {
		t.Fatalf("store empty: %v %v", ok, err)
	}
	if r, err := s.StoredReply(ctx, id2); err != nil || r == nil || r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("empty: %+v %v", r, err)
	}
}
