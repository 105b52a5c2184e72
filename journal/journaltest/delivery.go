package journaltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/whguard/whguard/journal"
)

func testLeaseCompleteAndAttempts(t *testing.T, s journal.Store) {
	id := AppendOne(t, s, Event("p", "a", "h")).ID
	ds := LeaseAll(t, s, time.Minute)
	if len(ds) != 1 {
		t.Fatalf("leased %d", len(ds))
	}
	d := ds[0]
	if d.ID != id || d.Attempt != 1 || d.BudgetAttempt != 1 || d.Provider != "p" || d.EventID != "a" ||
		string(d.Body) != `{"id":"a","h":"h"}` || d.Headers.Get("Webhook-Id") != "a" || d.Path != "/webhooks/p" || d.RawQuery != "q=1" {
		t.Fatalf("delivery %+v", d)
	}
	if Get(t, s, id).Status != journal.StatusProcessing {
		t.Fatal("leased row is not processing")
	}
	if more := LeaseAll(t, s, time.Minute); len(more) != 0 {
		t.Fatalf("a leased row was leased again: %+v", more)
	}
	n, err := CompleteN(s, []journal.Finish{Finish(d, journal.StatusDone, 204)})
	if err != nil || n != 1 {
		t.Fatalf("complete: %d %v", n, err)
	}
	got := Get(t, s, id)
	if got.Status != journal.StatusDone || got.Attempts != 1 || len(got.AttemptLog) != 1 {
		t.Fatalf("after complete: %+v", got)
	}
	a := got.AttemptLog[0]
	if a.Number != 1 || a.StatusCode != 204 || a.DurationMS != 7 || a.ResponseExcerpt != "excerpt" || a.StartedAt.IsZero() {
		t.Fatalf("attempt %+v", a)
	}
	// A finished row cannot be finished again with the same token.
	if n, _ := CompleteN(s, []journal.Finish{Finish(d, journal.StatusDead, 500)}); n != 0 {
		t.Fatal("completed twice")
	}
}

// Concurrent leasers never get the same row.
func testLeaseIsExclusive(t *testing.T, s journal.Store) {
	var batch []journal.Event
	for i := range 200 {
		batch = append(batch, Event("p", fmt.Sprintf("e%03d", i), "h"))
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
	id := AppendOne(t, s, Event("p", "late", "h")).ID
	first := LeaseAll(t, s, 50*time.Millisecond)
	waitFor(t, 5*time.Second, "the reaper to return the expired lease", func() bool {
		return ReapOne(t, s, 5)
	})
	if d := Get(t, s, id); d.Status != journal.StatusRetry || d.LastError == "" {
		t.Fatalf("after reap: %+v", d.Summary)
	}
	second := LeaseAll(t, s, time.Minute)
	if len(second) != 1 || second[0].LeaseToken == first[0].LeaseToken || second[0].Attempt != 2 {
		t.Fatalf("second lease %+v", second)
	}
	if n, err := CompleteN(s, []journal.Finish{Finish(first[0], journal.StatusDone, 200)}); err != nil || n != 0 {
		t.Fatalf("late complete took effect: %d %v", n, err)
	}
	if d := Get(t, s, id); d.Status != journal.StatusProcessing || len(d.AttemptLog) != 0 {
		t.Fatalf("late worker changed the row: %s, %d attempts logged", d.Status, len(d.AttemptLog))
	}
	if n, err := CompleteN(s, []journal.Finish{Finish(second[0], journal.StatusDone, 200)}); err != nil || n != 1 {
		t.Fatalf("current holder: %d %v", n, err)
	}
}

func testReapToDeadWhenBudgetSpent(t *testing.T, s journal.Store) {
	id := AppendOne(t, s, Event("p", "r", "h")).ID
	for i := range 2 {
		if ds := LeaseAll(t, s, 10*time.Millisecond); len(ds) != 1 {
			t.Fatalf("lease %d: %v", i, ds)
		}
		waitFor(t, 5*time.Second, "the reaper to return the expired lease", func() bool {
			return ReapOne(t, s, 2)
		})
	}
	if d := Get(t, s, id); d.Status != journal.StatusDead || d.Attempts != 2 {
		t.Fatalf("after two expired leases with a budget of 2: %+v", d.Summary)
	}
}

func testReleaseKeepsTheAttempt(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := AppendOne(t, s, Event("p", "rel", "h")).ID
	d := LeaseAll(t, s, time.Minute)[0]
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
	if got := Get(t, s, id); got.Status != journal.StatusPending || got.Attempts != 0 {
		t.Fatalf("after release: %+v, want pending with no attempt spent", got.Summary)
	}
	again := LeaseAll(t, s, time.Minute)
	if len(again) != 1 || again[0].Attempt != 1 {
		t.Fatalf("re-lease after release: %+v", again)
	}
}

func testRetryDueLater(t *testing.T, s journal.Store) {
	id := AppendOne(t, s, Event("p", "later", "h")).ID
	d := LeaseAll(t, s, time.Minute)[0]
	f := Finish(d, journal.StatusRetry, 503)
	// Long enough that the checks below run before it is due even on a
	// machine running the whole suite under -race (300 ms was once not).
	f.RetryIn = 2 * time.Second
	before := time.Now()
	if n, err := CompleteN(s, []journal.Finish{f}); err != nil || n != 1 {
		t.Fatalf("complete: %d %v", n, err)
	}
	got := Get(t, s, id)
	if got.Status != journal.StatusRetry || got.LastError != "answered 503" {
		t.Fatalf("after retry: %+v", got.Summary)
	}
	ds := LeaseAll(t, s, time.Minute)
	if len(ds) != 0 && time.Since(before) < f.RetryIn {
		t.Fatal("a retry was leased before it was due")
	}
	waitFor(t, 10*time.Second, "the retry to come due", func() bool {
		if len(ds) == 0 { // (leased above only if that was already late)
			ds = LeaseAll(t, s, time.Minute)
		}
		return len(ds) > 0
	})
	if len(ds) != 1 || ds[0].Attempt != 2 || ds[0].BudgetAttempt != 2 {
		t.Fatalf("due retry: %+v", ds)
	}
}

// testHoldSpendsNoAttempt: a held lease goes back without its attempt, due
// after its delay, showing why; its next outcome clears the reason.
func testHoldSpendsNoAttempt(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := AppendOne(t, s, Event("p", "held", "h")).ID
	d := LeaseAll(t, s, time.Minute)[0]
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
	got := Get(t, s, id)
	if got.Status != journal.StatusPending || got.Attempts != 0 || got.Held != "no_backend" {
		t.Fatalf("after hold: %+v", got.Summary)
	}
	again := LeaseAll(t, s, time.Minute)
	if len(again) != 0 && time.Since(before) < holdFor {
		t.Fatalf("a held event was leased before it was due")
	}
	for deadline := time.Now().Add(10 * time.Second); len(again) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the held event never came due")
		}
		time.Sleep(50 * time.Millisecond)
		again = LeaseAll(t, s, time.Minute)
	}
	if again[0].Attempt != 1 || again[0].BudgetAttempt != 1 {
		t.Fatalf("after the hold: attempt %d (budget %d), want 1", again[0].Attempt, again[0].BudgetAttempt)
	}
	if got := Get(t, s, id); got.Held != "" {
		t.Fatalf("leased again, still shown held: %q", got.Held)
	}
	if _, err := s.Complete(ctx, []journal.Finish{Finish(again[0], journal.StatusDone, 200)}); err != nil {
		t.Fatal(err)
	}
	if got := Get(t, s, id); got.Held != "" || got.Status != journal.StatusDone {
		t.Fatalf("after delivery: %+v", got.Summary)
	}
}

// testCompleteStoresAnyExcerpt: a backend's reply is arbitrary bytes. A NUL
// byte, invalid UTF-8 or a huge excerpt must neither fail the outcome nor
// the other outcomes of its batch (PostgreSQL refuses NUL in text with
// SQLSTATE 22021, which once failed whole batches and made every event in
// them be delivered again and again).
func testCompleteStoresAnyExcerpt(t *testing.T, s journal.Store) {
	excerpts := []string{"before\x00after", "bad \xff\xfe utf-8 \xc3", strings.Repeat("x", 1<<20), "plain"}
	for i := range excerpts {
		AppendOne(t, s, Event("p", fmt.Sprintf("ex%d", i), "h"))
	}
	ds := LeaseAll(t, s, time.Minute)
	if len(ds) != len(excerpts) {
		t.Fatalf("leased %d, want %d", len(ds), len(excerpts))
	}
	fs := make([]journal.Finish, len(ds))
	for i, d := range ds {
		fs[i] = Finish(d, journal.StatusDone, 200)
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
		got := Get(t, s, d.ID)
		if got.Status != journal.StatusDone || len(got.AttemptLog) != 1 {
			t.Fatalf("event %d: status %s, %d attempts", d.ID, got.Status, len(got.AttemptLog))
		}
		x := got.AttemptLog[0].ResponseExcerpt
		if strings.ContainsRune(x, 0) || !utf8.ValidString(x) || len(x) > journal.MaxExcerptBytes {
			t.Fatalf("excerpt %d stored unsafely: %d bytes, %q…", i, len(x), x[:min(len(x), 40)])
		}
	}
	if x := Get(t, s, ds[0].ID).AttemptLog[0].ResponseExcerpt; !strings.Contains(x, "before") || !strings.Contains(x, "after") {
		t.Fatalf("NUL excerpt lost its text: %q", x)
	}
	if x := Get(t, s, ds[3].ID).AttemptLog[0].ResponseExcerpt; x != "plain" {
		t.Fatalf("plain excerpt changed: %q", x)
	}
}

// A sync-mode reply is stored under the lease, once (the first stays),
// kept as bytes, and shown by Get.
func testSyncReplies(t *testing.T, s journal.Store) {
	ctx := context.Background()
	e := Event("p", "sync", "h")
	e.LeaseFor, e.LeaseToken = time.Minute, uuid.New()
	id := AppendOne(t, s, e).ID
	if r, err := s.StoredReply(ctx, id); err != nil || r != nil {
		t.Fatalf("before: %+v %v", r, err)
	}
	if d := Get(t, s, id); d.Reply != nil {
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
	d := Get(t, s, id)
	if d.Reply == nil || d.Reply.Status != 201 || d.Reply.BodyBytes != len(first.Body) || !utf8.ValidString(d.Reply.BodyExcerpt) {
		t.Fatalf("detail: %+v", d.Reply)
	}
	if _, err := s.StoredReply(ctx, id+1000); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("no such event: %v", err)
	}
	// An empty body is a reply too.
	e2 := Event("p", "empty", "h")
	e2.LeaseFor, e2.LeaseToken = time.Minute, uuid.New()
	id2 := AppendOne(t, s, e2).ID
	if ok, err := s.SaveReply(ctx, id2, e2.LeaseToken, journal.Reply{Status: 204}); err != nil || !ok {
		t.Fatalf("store empty: %v %v", ok, err)
	}
	if r, err := s.StoredReply(ctx, id2); err != nil || r == nil || r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("empty: %+v %v", r, err)
	}
}

func testStats(t *testing.T, s journal.Store) {
	ctx := context.Background()
	AppendOne(t, s, Event("alpha", "1", "h"))
	AppendOne(t, s, Event("beta", "2", "h"))
	d := LeaseAll(t, s, time.Minute)
	if _, err := CompleteN(s, []journal.Finish{Finish(d[0], journal.StatusDone, 200)}); err != nil {
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

// testMinuteFigures: each replica's row for a minute is replaced by its
// next write, rows of two replicas both stay (the overview adds them), and
// figures older than the retention are dropped.
func testMinuteFigures(t *testing.T, s journal.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute)
	m := func(at time.Time, provider string, delivered int64, lat time.Duration) journal.Minute {
		x := journal.Minute{Minute: at, Provider: provider, Delivered: delivered, Failed: 1}
		for range delivered {
			x.ObserveLatency(lat)
		}
		return x
	}
	if err := s.RecordMinutes(ctx, "a", []journal.Minute{m(now, "stripe", 1, time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	// a's second write for the same minute replaces its first.
	if err := s.RecordMinutes(ctx, "a", []journal.Minute{m(now, "stripe", 3, 30*time.Millisecond), m(now.Add(-time.Minute), "github", 2, time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordMinutes(ctx, "b", []journal.Minute{m(now, "stripe", 5, 30*time.Millisecond), m(now.Add(-26*time.Hour), "stripe", 9, time.Second)}); err != nil {
		t.Fatal(err)
	}
	// The next write drops what is past the retention (b's 26 h old row).
	if err := s.RecordMinutes(ctx, "b", nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Minutes(ctx, now.Add(-30*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("want 3 rows (github a, stripe a, stripe b), got %+v", got)
	}
	if got[0].Provider != "github" || !got[0].Minute.Equal(now.Add(-time.Minute)) || got[0].Delivered != 2 {
		t.Errorf("oldest row: %+v", got[0])
	}
	var sum journal.Minute
	for _, r := range got[1:] {
		if !r.Minute.Equal(now) || r.Provider != "stripe" {
			t.Errorf("row %+v", r)
		}
		sum.Add(r)
	}
	if sum.Delivered != 8 || sum.Failed != 2 {
		t.Errorf("stripe this minute, both replicas: %+v", sum)
	}
	if p50, ok := sum.Percentile(0.5); !ok || p50 <= 20*time.Millisecond || p50 > 50*time.Millisecond {
		t.Errorf("p50 %v %v, want within the 20-50 ms bucket", p50, ok)
	}
	if got, _ := s.Minutes(ctx, now); len(got) != 2 {
		t.Errorf("since this minute: %d rows, want 2", len(got))
	}
}
