package journal_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/whguard/whguard/journal"
)

// blockCommits holds the journal's write lock (PostgreSQL: an exclusive
// lock on the readiness table; SQLite: a write transaction of another
// connection) until the returned function is called.
func blockCommits(t *testing.T, s journal.Store) (release func()) {
	t.Helper()
	ctx := context.Background()
	switch st := s.(type) {
	case *journal.Postgres:
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE whguard_ready_probe IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback(ctx) }
	case *journal.SQLite:
		db, err := sql.Open("sqlite", "file:"+st.Path()+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
			t.Fatal(err)
		}
		return func() {
			_, _ = conn.ExecContext(ctx, `ROLLBACK`)
			conn.Close()
			db.Close()
		}
	}
	t.Fatalf("no way to block commits of %T", s)
	return nil
}
