package journal_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// TestIdentity: every process that opens one journal reads one identity;
// another journal reads another (Redis keys are namespaced by it, so that
// deployments sharing a Redis never share state).
func TestIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ids := map[string]bool{}
	read := func(j journal.Store) string {
		t.Helper()
		id, err := j.Identity(ctx)
		if err != nil || id == "" {
			t.Fatalf("identity %q, %v", id, err)
		}
		return id
	}
	// PostgreSQL: two databases, and a second process on the first.
	u, drop, err := testdb.Create(ctx, "ident")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	a1, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a1.Close)
	a2, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a2.Close)
	if read(a1) != read(a2) {
		t.Error("two processes on one PostgreSQL journal read different identities")
	}
	ids[read(a1)] = true
	ids[read(testdb.OpenStore(t, "postgres", false))] = true
	// SQLite: two files; the same file again after a restart.
	dir := t.TempDir()
	for _, name := range []string{"a.db", "b.db"} {
		s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: filepath.Join(dir, name)})
		if err != nil {
			t.Fatal(err)
		}
		id := read(s)
		s.Close()
		again, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: filepath.Join(dir, name)})
		if err != nil {
			t.Fatal(err)
		}
		if read(again) != id {
			t.Errorf("%s read another identity after a restart", name)
		}
		again.Close()
		ids[id] = true
	}
	if len(ids) != 4 {
		t.Errorf("four journals read %d distinct identities: %v", len(ids), ids)
	}
}
