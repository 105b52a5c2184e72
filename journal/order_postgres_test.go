package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// TestOrderSeesRowsLockedByAnotherLease: while another replica's lease
// transaction has locked the first event of a key (FOR UPDATE SKIP LOCKED
// passes over it), a lease must not take the second: the order check
// reads the locked row, it does not skip it.
func TestOrderSeesRowsLockedByAnotherLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.CreateMigrated(ctx, "ordlock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	s, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	first := appendOne(t, s, ordered("l1", "k", false))
	appendOne(t, s, ordered("l2", "k", false))
	appendOne(t, s, ordered("other", "j", false))

	// The other replica: a lease transaction holding l1's row lock, not
	// yet committed (its row still reads pending).
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var locked int64
	if err := tx.QueryRow(ctx, `SELECT id FROM whguard_events WHERE id = $1 FOR UPDATE`, first.ID).Scan(&locked); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ds, err := s.Lease(lctx, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].EventID != "other" {
		ids := []string{}
		for _, d := range ds {
			ids = append(ids, d.EventID)
		}
		t.Fatalf("leased %v while l1 was locked by another lease; want only the other key's event", ids)
	}
}

// TestOrderParkedHeadIsUnparkedByTheReaper: a row appended behind its
// key's holder is parked (no lease walks it) and made due when the holder
// releases the key; should that release miss it (a race between the two
// commits, simulated here by releasing the holder behind the journal's
// back), the reaper's pass makes it due.
func TestOrderParkedHeadIsUnparkedByTheReaper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.CreateMigrated(ctx, "ordpark")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	s, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	holder := appendOne(t, s, ordered("h1", "k", false))
	next := appendOne(t, s, ordered("n1", "k", false))
	follower := appendOne(t, s, ordered("f1", "k", false))
	if d := get(t, s, next.ID); d.NextAttemptAt.Year() > 2900 {
		t.Fatalf("the next in line is parked (due %s): only those further back are", d.NextAttemptAt)
	}
	if d := get(t, s, follower.ID); d.NextAttemptAt.Year() < 2900 {
		t.Fatalf("a row two behind its key's holder is due at %s, want parked", d.NextAttemptAt)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE whguard_events SET status = 'done', order_holds = false WHERE id = ANY($1)`, []int64{holder.ID, next.ID}); err != nil {
		t.Fatal(err)
	}
	wantLeased(t, s) // f1 is first in line, but parked
	if _, err := s.ReapExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	wantLeased(t, s, "f1")
}
