package testdb

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// Stores names the journal implementations every store-level test runs on.
var Stores = []string{"postgres", "sqlite"}

// ForEachStore runs fn once per journal store, as subtests named after the
// store: the same test functions, a matrix, never copies.
func ForEachStore(t *testing.T, fn func(t *testing.T, store string)) {
	for _, store := range Stores {
		t.Run(store, func(t *testing.T) { fn(t, store) })
	}
}

// ForEachStoreParallel is ForEachStore with the subtests run in parallel
// with each other, for tests whose every subtest opens a journal of its own
// (OpenStore) and holds no other shared resource.
func ForEachStoreParallel(t *testing.T, fn func(t *testing.T, store string)) {
	ForEachStore(t, func(t *testing.T, store string) {
		t.Parallel()
		fn(t, store)
	})
}

// OpenStore returns a journal of the test's own on the named store (a
// fresh PostgreSQL database, or a SQLite file in a temporary directory),
// migrated unless migrate is false, and closed when the test ends. A
// migrated journal is a copy of a migrated template (template.go): the
// migrations themselves run only in tests that ask for an unmigrated one.
func OpenStore(t testing.TB, store string, migrate bool) journal.Store {
	t.Helper()
	ctx := context.Background()
	var j journal.Store
	switch store {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "journal.db")
		if migrate {
			tpl, err := migratedSQLite()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tpl, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		j = s
	case "postgres":
		create := Create
		if migrate {
			create = CreateMigrated
		}
		u, drop, err := create(ctx, "st")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(drop)
		pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		j = pg
	default:
		t.Fatalf("unknown store %q", store)
	}
	t.Cleanup(j.Close)
	return j
}

// WaitDone waits until n events of the journal are done, failing the test
// after within.
func WaitDone(t testing.TB, j journal.Store, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := j.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.ByStatus[journal.StatusDone] == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events done after %s, want %d: %v", st.ByStatus[journal.StatusDone], within, n, st.ByStatus)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
