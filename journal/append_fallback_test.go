package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/journal"
)

// An append whose keys a concurrent transaction inserts and commits after
// the append's snapshot: its plain insert meets the unique constraint, and
// the batch runs again with ON CONFLICT. Each key comes back judged
// against the committed row (same hash: a duplicate; another: a conflict)
// and the batch's new key is inserted once.
func TestAppendFallsBackWhenTheConstraintRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO whguard_events (provider, event_id, content_hash)
		VALUES ('p', 'same', 'h'), ('p', 'other', 'h')`); err != nil {
		t.Fatal(err)
	}
	type appended struct {
		r   []journal.Result
		err error
	}
	done := make(chan appended, 1)
	go func() {
		r, err := s.Append(ctx, []journal.Event{ev("p", "new", "h"), ev("p", "other", "h2"), ev("p", "same", "h")})
		done <- appended{r, err}
	}()
	// The append waits on the uncommitted rows' index entries.
	waitForLockWait(t, s, "the append to wait for the concurrent insert")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatalf("append: %v", got.err)
	}
	want := []journal.Outcome{journal.Inserted, journal.Conflict, journal.Duplicate}
	for i, r := range got.r {
		if r.Outcome != want[i] || r.ID == 0 {
			t.Errorf("event %d: %v (id %d), want %v", i, r.Outcome, r.ID, want[i])
		}
	}
	var rows, payloads int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM whguard_events), (SELECT count(*) FROM whguard_payloads)`).Scan(&rows, &payloads); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || payloads != 1 {
		t.Fatalf("%d rows and %d payloads, want 3 and 1 (the new key's)", rows, payloads)
	}
}

// waitForLockWait waits until a session of s's database waits for a lock:
// the statement a test started is blocked on the transaction it holds.
func waitForLockWait(t *testing.T, s *journal.Postgres, what string) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, func() bool {
		var waiting int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
}
