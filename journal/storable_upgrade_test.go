package journal_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// Order keys are stored as digests since PostgreSQL migration 0016 and
// SQLite migration 0013. A journal left by the version before holds short
// keys as they were: its events still in line are re-keyed, so that an
// event of the same key received after the upgrade waits behind them; a
// key an earlier version already stored as its digest stays as it is.
func TestOrderKeysRekeyedOnUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := journal.OrderKeyDigest("a key longer than 200 bytes") // how earlier versions stored those
	for _, store := range testdb.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			// Rows as the version before left them: one in line under a
			// plain key, one under a key it already stored as a digest.
			j := journalBefore(t, store, 16, func(exec func(string, ...any)) {
				if store == "postgres" {
					exec(`INSERT INTO whguard_events (provider, event_id, content_hash, status, order_key, order_holds)
						VALUES ('p', 'old-plain', 'h', 'pending', 'sub_1', TRUE), ('p', 'old-long', 'h', 'pending', '` + long + `', TRUE)`)
					return
				}
				exec(`INSERT INTO whguard_events (provider, event_id, content_hash, status, next_attempt_at, received_at, updated_at, order_key, order_holds)
					VALUES ('p', 'old-plain', 'h', 'pending', 0, 0, 0, 'sub_1', 1), ('p', 'old-long', 'h', 'pending', 0, 0, 0, '` + long + `', 1)`)
			})
			if _, err := j.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct{ id, key string }{
				{"new-plain", journal.OrderKeyDigest("sub_1")},
				{"new-long", long},
			} {
				e := ev("p", tc.id, "h")
				e.OrderKey = tc.key
				if r := appendOne(t, j, e); r.Outcome != journal.Inserted || !r.Behind {
					t.Errorf("%s after the upgrade: %+v; want inserted behind the event of its key journaled before", tc.id, r)
				}
			}
		})
	}
}

// journalBefore makes a journal of store as the version before migration
// version left it (the migration files below it applied by hand and
// recorded), lets seed write rows into it, and opens it unmigrated.
func journalBefore(t *testing.T, store string, version int, seed func(exec func(q string, args ...any))) journal.Store {
	t.Helper()
	ctx := context.Background()
	switch store {
	case "postgres":
		u, drop, err := testdb.Create(ctx, "before")
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
		applyBefore(t, "migrations/postgres", version, func(v int, name, sql string) {
			exec(sql)
			exec(`INSERT INTO whguard_schema_migrations (version, name) VALUES ($1, $2)`, v, name)
		})
		seed(exec)
		pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pg.Close)
		return pg
	default:
		path := filepath.Join(t.TempDir(), "whguard.db")
		raw, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := raw.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("%.60s: %v", q, err)
			}
		}
		exec(`CREATE TABLE whguard_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
		applyBefore(t, "migrations/sqlite", version, func(v int, name, sql string) {
			exec(sql)
			exec(`INSERT INTO whguard_schema_migrations VALUES (?, ?, 0)`, v, name)
		})
		seed(exec)
		raw.Close()
		s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
}

// applyBefore applies, in order, the migration files of dir numbered
// below version.
func applyBefore(t *testing.T, dir string, version int, apply func(v int, name, sql string)) {
	t.Helper()
	files, err := filepath.Glob(dir + "/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for _, f := range files {
		v, err := strconv.Atoi(filepath.Base(f)[:4])
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if v >= version {
			break
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		apply(v, filepath.Base(f), string(b))
	}
}
