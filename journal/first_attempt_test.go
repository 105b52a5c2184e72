package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// An event delivered at its first attempt costs no attempt row: the
// attempt is kept on the event's row. Retries, failures and replays go to
// the attempts table. Get shows every attempt, in order, as before.
func TestFirstDeliveredAttemptLivesOnTheEventRow(t *testing.T) {
	t.Parallel()
	testdb.ForEachStoreParallel(t, func(t *testing.T, store string) {
		ctx := context.Background()
		s := testdb.OpenStore(t, store, true)
		happy := appendOne(t, s, ev("first", "happy", "h"))
		flaky := appendOne(t, s, ev("first", "flaky", "h"))
		rows := func(id int64) int64 {
			t.Helper()
			n, err := journal.AttemptRows(ctx, s, id)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		for _, d := range leaseAll(t, s, time.Minute) {
			f := finish(d, journal.StatusDone, 204)
			if d.ID == flaky.ID {
				f = finish(d, journal.StatusRetry, 503)
			}
			if _, err := s.Complete(ctx, []journal.Finish{f}); err != nil {
				t.Fatal(err)
			}
		}
		if n := rows(happy.ID); n != 0 {
			t.Errorf("a first attempt that delivered wrote %d attempt rows, want 0", n)
		}
		if n := rows(flaky.ID); n != 1 {
			t.Errorf("a failed first attempt wrote %d attempt rows, want 1", n)
		}
		d := get(t, s, happy.ID)
		if len(d.AttemptLog) != 1 || d.AttemptLog[0].Number != 1 || d.AttemptLog[0].StatusCode != 204 ||
			d.AttemptLog[0].DurationMS != 7 || d.AttemptLog[0].ResponseExcerpt != "excerpt" || d.AttemptLog[0].StartedAt.IsZero() {
			t.Fatalf("attempts of the delivered event: %+v", d.AttemptLog)
		}

		// The retry (due at once) succeeds at attempt 2: a row of its own.
		for _, d := range leaseAll(t, s, time.Minute) {
			if _, err := s.Complete(ctx, []journal.Finish{finish(d, journal.StatusDone, 200)}); err != nil {
				t.Fatal(err)
			}
		}
		if n := rows(flaky.ID); n != 2 {
			t.Errorf("after its retry succeeded the flaky event has %d attempt rows, want 2", n)
		}
		if d := get(t, s, flaky.ID); len(d.AttemptLog) != 2 || d.AttemptLog[0].StatusCode != 503 || d.AttemptLog[1].StatusCode != 200 || d.AttemptLog[1].Number != 2 {
			t.Fatalf("attempts of the retried event: %+v", d.AttemptLog)
		}

		// A replay of the delivered event: its second attempt is a row,
		// and the first stays where it was.
		if err := s.Replay(ctx, happy.ID, "test"); err != nil {
			t.Fatal(err)
		}
		for _, d := range leaseAll(t, s, time.Minute) {
			if _, err := s.Complete(ctx, []journal.Finish{finish(d, journal.StatusDone, 201)}); err != nil {
				t.Fatal(err)
			}
		}
		d = get(t, s, happy.ID)
		if len(d.AttemptLog) != 2 || d.AttemptLog[0].StatusCode != 204 || d.AttemptLog[1].StatusCode != 201 || d.AttemptLog[1].Number != 2 {
			t.Fatalf("attempts of the replayed event: %+v", d.AttemptLog)
		}
		if n := rows(happy.ID); n != 1 {
			t.Errorf("the replayed event has %d attempt rows, want 1 (its replay)", n)
		}
	})
}
