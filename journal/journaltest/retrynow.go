package journaltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// Retry now: an event waiting for its next attempt made due at once, by
// hand (one, or in bulk with the listing's filters) or for a backend's
// providers when it recovers; the transition itself is in transitions.go.

// failLater appends events id of provider and fails each one's first
// attempt with a backoff of an hour: in retry, not due. It returns their
// row ids in order.
func failLater(t *testing.T, s journal.Store, provider string, ids ...string) []int64 {
	t.Helper()
	var rows []int64
	for _, id := range ids {
		rows = append(rows, AppendOne(t, s, Event(provider, id, "h-"+id)).ID)
	}
	var fs []journal.Finish
	for _, d := range LeaseAll(t, s, time.Minute) {
		f := Finish(d, journal.StatusRetry, 503)
		f.RetryIn = time.Hour
		fs = append(fs, f)
	}
	if n, err := CompleteN(s, fs); err != nil || n != len(ids) {
		t.Fatalf("fail %d events: %d recorded, %v", len(ids), n, err)
	}
	return rows
}

// due reports whether row id is due now (by the test's clock, with room
// for the database's).
func due(t *testing.T, s journal.Store, id int64) bool {
	t.Helper()
	return !Get(t, s, id).NextAttemptAt.After(time.Now().Add(time.Second))
}

func testRetryNowRefusals(t *testing.T, s journal.Store) {
	ctx := context.Background()
	refused := func(id int64, want journal.Status, waitingFor int64) {
		t.Helper()
		err := s.RetryNow(ctx, id, "")
		var nr *journal.NotRetryable
		if !errors.Is(err, journal.ErrNotRetryable) || !errors.As(err, &nr) || nr.ID != id || nr.Status != want || nr.WaitingFor != waitingFor {
			t.Fatalf("retry now of a %s event: %v (%+v), want a refusal saying %s, waiting for %d", want, err, nr, want, waitingFor)
		}
	}
	done := AppendOne(t, s, Event("p", "done", "h1")).ID
	Complete(t, s, LeaseAll(t, s, time.Minute)[0], journal.StatusDone)
	refused(done, journal.StatusDone, 0)
	dead := AppendOne(t, s, Event("p", "dead", "h2")).ID
	Complete(t, s, LeaseAll(t, s, time.Minute)[0], journal.StatusDead)
	refused(dead, journal.StatusDead, 0)
	ignored := Event("p", "ignored", "h3")
	ignored.Ignored = true
	refused(AppendOne(t, s, ignored).ID, journal.StatusIgnored, 0)
	processing := AppendOne(t, s, Event("p", "processing", "h4")).ID
	LeaseAll(t, s, time.Minute)
	refused(processing, journal.StatusProcessing, 0)
	// The second event of a key waits for the first: retry now does not
	// jump the line (nor unpark it).
	first := AppendOne(t, s, Ordered("first", "k", false)).ID
	second := AppendOne(t, s, Ordered("second", "k", false)).ID
	refused(second, journal.StatusPending, first)
	if err := s.RetryNow(ctx, 1<<40, ""); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("retry now of a missing event: %v", err)
	}
	// Nothing refused was audited; the first of the key, waiting for
	// nobody, is retried and audited.
	for _, id := range []int64{done, dead, processing, second} {
		if rs := Get(t, s, id).Replays; len(rs) != 0 {
			t.Fatalf("event %d refused yet audited: %+v", id, rs)
		}
	}
	if err := s.RetryNow(ctx, first, "the backend is back"); err != nil {
		t.Fatal(err)
	}
	if rs := Get(t, s, first).Replays; len(rs) != 1 || rs[0].Action != journal.ActionRetry || rs[0].FromStatus != journal.StatusPending || rs[0].Reason != "the backend is back" {
		t.Fatalf("audit of a retry now: %+v", rs)
	}
}

func testBulkRetryNow(t *testing.T, s journal.Store) {
	ctx := context.Background()
	a := failLater(t, s, "a", "a1", "a2", "a3")
	b := failLater(t, s, "b", "b1")
	dead := AppendOne(t, s, Event("a", "a-dead", "h")).ID
	Complete(t, s, LeaseAll(t, s, time.Minute)[0], journal.StatusDead)
	pending := AppendOne(t, s, Event("a", "a-pending", "h")).ID

	f := journal.Filter{Provider: "a"}
	if n, err := s.CountRetryable(ctx, f); err != nil || n != 3 {
		t.Fatalf("dry run: %d, %v; want the 3 events of a in retry", n, err)
	}
	for _, id := range append(a, b...) {
		if due(t, s, id) {
			t.Fatalf("event %d due after a dry run", id)
		}
	}
	if n, err := s.BulkRetryNow(ctx, journal.Filter{Provider: "a", Limit: 2}, "limited"); err != nil || n != 2 {
		t.Fatalf("limited bulk retry: %d, %v", n, err)
	}
	if n, err := s.BulkRetryNow(ctx, f, "outage over"); err != nil || n != 3 {
		t.Fatalf("bulk retry: %d, %v", n, err)
	}
	for _, id := range a {
		if d := Get(t, s, id); !due(t, s, id) || d.Status != journal.StatusRetry || d.Attempts != 1 {
			t.Fatalf("event %d after bulk retry: %s, %d attempts, due %s", id, d.Status, d.Attempts, d.NextAttemptAt)
		}
	}
	if due(t, s, b[0]) {
		t.Fatal("another provider's event was made due")
	}
	if d := Get(t, s, dead); d.Status != journal.StatusDead || len(d.Replays) != 0 {
		t.Fatalf("dead event touched by a bulk retry: %s %+v", d.Status, d.Replays)
	}
	if rs := Get(t, s, pending).Replays; len(rs) != 0 {
		t.Fatalf("pending event audited by a bulk retry of retry events: %+v", rs)
	}
	if _, err := s.BulkRetryNow(ctx, journal.Filter{Status: journal.StatusDead}, "x"); !errors.Is(err, journal.ErrNotRetryable) {
		t.Fatalf("bulk retry of dead events: %v", err)
	}
	// The leases now take them, oldest due first.
	if got := len(LeaseAll(t, s, time.Minute)); got != 4 { // a1…a3 and the pending one
		t.Fatalf("leased %d after the bulk retry, want 4", got)
	}
}

func testRetryDueForProviders(t *testing.T, s journal.Store) {
	ctx := context.Background()
	a := failLater(t, s, "a", "a1", "a2")
	other := failLater(t, s, "other", "o1")
	// A parked event of a: the third of its key, behind a holder.
	AppendOne(t, s, Ordered("k1", "key", false))
	AppendOne(t, s, Ordered("k2", "key", false))
	parked := Ordered("k3", "key", false)
	parked.Provider = "p"
	parkedID := AppendOne(t, s, parked).ID
	parkedAt := Get(t, s, parkedID).NextAttemptAt

	if n, err := s.RetryDue(ctx, nil); err != nil || n != 0 {
		t.Fatalf("recovery of no provider: %d, %v", n, err)
	}
	n, err := s.RetryDue(ctx, []string{"a", "p"})
	if err != nil || n != 2 {
		t.Fatalf("recovery of a and p: %d, %v; want a's 2 events in retry", n, err)
	}
	for _, id := range a {
		if d := Get(t, s, id); !due(t, s, id) || d.Attempts != 1 || d.Status != journal.StatusRetry {
			t.Fatalf("event %d after recovery: %s, %d attempts, due %s", id, d.Status, d.Attempts, d.NextAttemptAt)
		}
	}
	if due(t, s, other[0]) {
		t.Fatal("another provider's retry was made due")
	}
	if d := Get(t, s, parkedID); !d.NextAttemptAt.Equal(parkedAt) {
		t.Fatalf("a parked event was moved from %s to %s", parkedAt, d.NextAttemptAt)
	}
	// Once due, a second recovery (another replica's) finds nothing.
	if n, err := s.RetryDue(ctx, []string{"a"}); err != nil || n != 0 {
		t.Fatalf("second recovery: %d, %v", n, err)
	}
	if rs := Get(t, s, a[0]).Replays; len(rs) != 0 {
		t.Fatalf("a recovery is not audited per event: %+v", rs)
	}
}
