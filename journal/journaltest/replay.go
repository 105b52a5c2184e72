package journaltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

func testReplayFreshBudget(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := AppendOne(t, s, Event("p", "rp", "h")).ID
	if err := s.Replay(ctx, id, "too early"); !errors.Is(err, journal.ErrNotReplayable) {
		t.Fatalf("replay of a pending event: %v", err)
	}
	for range 3 { // three attempts, the last one dead
		d := LeaseAll(t, s, time.Minute)[0]
		status := journal.StatusRetry
		if d.Attempt == 3 {
			status = journal.StatusDead
		}
		if _, err := CompleteN(s, []journal.Finish{Finish(d, status, 500)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replay(ctx, id, "backend fixed"); err != nil {
		t.Fatal(err)
	}
	got := Get(t, s, id)
	if got.Status != journal.StatusRetry || len(got.Replays) != 1 || got.Replays[0].Reason != "backend fixed" ||
		got.Replays[0].FromStatus != journal.StatusDead || got.Replays[0].ReplayedAt.IsZero() {
		t.Fatalf("after replay: %+v %+v", got.Summary, got.Replays)
	}
	d := LeaseAll(t, s, time.Minute)
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
	id := AppendOne(t, s, Event("p", "rb", "h")).ID
	expire := func() {
		t.Helper()
		if ds := LeaseAll(t, s, 10*time.Millisecond); len(ds) != 1 {
			t.Fatalf("lease: %v", ds)
		}
		time.Sleep(30 * time.Millisecond)
		if r, err := s.ReapExpired(ctx, 2); err != nil || len(r) != 1 {
			t.Fatalf("reaped %+v, %v", r, err)
		}
	}
	expire()
	expire()
	if d := Get(t, s, id); d.Status != journal.StatusDead || d.Attempts != 2 {
		t.Fatalf("after spending the first budget: %+v", d.Summary)
	}
	if err := s.Replay(ctx, id, "again"); err != nil {
		t.Fatal(err)
	}
	expire()
	if d := Get(t, s, id); d.Status != journal.StatusRetry || d.Attempts != 3 {
		t.Fatalf("first expiry of the fresh budget: %+v", d.Summary)
	}
	expire()
	if d := Get(t, s, id); d.Status != journal.StatusDead || d.Attempts != 4 {
		t.Fatalf("after spending the fresh budget: %+v", d.Summary)
	}
}

// Bulk replay walks ids forward: rows that die again while it runs are not
// picked twice, and it ends.
func testBulkReplayTerminates(t *testing.T, s journal.Store) {
	ctx := context.Background()
	var batch []journal.Event
	for i := range 250 {
		batch = append(batch, Event("p", fmt.Sprintf("d%03d", i), "h"))
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
				fs = append(fs, Finish(d, journal.StatusDead, 422))
			}
			CompleteN(s, fs)
		}
	}
	killAll()
	if n := Count(t, s, journal.Filter{Status: journal.StatusDead}); n != 250 {
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
		if r := len(Get(t, s, e.ID).Replays); r != 1 {
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

// testSearchAndFilteredReplay: types with wildcards, a time range, body
// matches and the event id select events for listing and for a bulk
// replay, whose dry run counts the same events.
func testSearchAndFilteredReplay(t *testing.T, s journal.Store) {
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	mk := func(id, typ, customer string, at time.Duration) journal.Event {
		e := Event("stripe", id, "h")
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
	for _, d := range LeaseAll(t, s, time.Minute) {
		fs = append(fs, Finish(d, journal.StatusDead, 500))
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
	if got := Count(t, s, journal.Filter{Status: journal.StatusDead}); got != 5 {
		t.Fatalf("the dry run replayed something: %d dead", got)
	}
	if n, err := s.BulkReplay(ctx, f, "customer fixed"); err != nil || n != 2 {
		t.Fatalf("filtered replay: %d %v, want 2", n, err)
	}
	if got := ids(journal.Filter{Status: journal.StatusRetry}); got != "e2,e1" {
		t.Fatalf("replayed %q, want e2,e1", got)
	}
}
