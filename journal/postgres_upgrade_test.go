package journal_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// Migration 0010 on a journal left by migrations 1-9, with rows: the
// status CHECK accepts ignored and still refuses other words, the rows
// stay, and the cleaner's index is the one covering done and ignored.
func TestPostgresIgnoredMigrationUpgrades(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.Create(ctx, "upgrade")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE whguard_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	files, err := filepath.Glob("migrations/postgres/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for i, f := range files[:9] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exec(string(b))
		exec(`INSERT INTO whguard_schema_migrations (version, name) VALUES ($1, $2)`, i+1, filepath.Base(f))
	}
	exec(`INSERT INTO whguard_events (provider, event_id, content_hash, status, updated_at) VALUES
		('p', 'old-done', 'h', 'done', now() - interval '2 hours'), ('p', 'old-dead', 'h', 'dead', now() - interval '2 hours')`)
	if _, err := conn.Exec(ctx, `UPDATE whguard_events SET status = 'ignored' WHERE event_id = 'old-dead'`); err == nil {
		t.Fatal("schema 9 accepted status ignored: the test does not start from the old constraint")
	}

	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	applied, err := pg.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0] != 10 {
		t.Fatalf("applied %v, want 10 first", applied)
	}
	exec(`UPDATE whguard_events SET status = 'ignored' WHERE event_id = 'old-dead'`)
	if _, err := conn.Exec(ctx, `UPDATE whguard_events SET status = 'skipped' WHERE event_id = 'old-dead'`); err == nil {
		t.Fatal("the new constraint accepts any status")
	}
	var indexes []string
	rows, err := conn.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = 'whguard_events' AND indexname LIKE '%age'`)
	if err != nil {
		t.Fatal(err)
	}
	if indexes, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(indexes) != 1 || indexes[0] != "whguard_events_finished_age" {
		t.Fatalf("age indexes %v, want whguard_events_finished_age alone", indexes)
	}
	// Both old rows (the done one, and the one now ignored) age out.
	c, err := pg.Cleanup(ctx, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
	if err != nil || c.Events != 2 {
		t.Fatalf("cleanup after the upgrade: %+v %v", c, err)
	}
}
