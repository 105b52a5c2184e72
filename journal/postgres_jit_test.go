package journal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// A backlog large enough that the lease's generic plan costs more than
// jit_above_cost (a generic plan reckons LIMIT $1 at a tenth of the rows)
// is still leased without JIT compilation on the hot pools. Compiled, each
// lease cost PostgreSQL tens of milliseconds, and draining 150 000 waiting
// events ran at 500 a second instead of 5 700.
//
// The control: the same statement, planned generically on a session with
// the server's own jit setting, is compiled; so the check below can fail.
func TestLargeBacklogLeaseIsNotCompiled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.CreateMigrated(ctx, "jit")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	s, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Pool().Exec(ctx, `
		INSERT INTO whguard_events (provider, event_id, content_hash, next_attempt_at)
		SELECT 'jit', 'e' || g, 'h', now() - interval '1 hour' FROM generate_series(1, 150000) g;
		INSERT INTO whguard_payloads (event_row_id, headers, body, path) SELECT id, '{}', '\x00', '/jit' FROM whguard_events;
		ANALYZE whguard_events;
		ANALYZE whguard_payloads`); err != nil {
		t.Fatal(err)
	}
	if ds, err := s.Lease(ctx, 64, time.Minute); err != nil || len(ds) != 64 {
		t.Fatalf("lease: %d rows, %v", len(ds), err)
	}

	explain := func(q interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}, sql string) string {
		t.Helper()
		rows, err := q.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}

	conns := journal.HotConns(ctx, s)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	var leaseSQL string
	for _, c := range conns {
		var name string
		err := c.QueryRow(ctx, `SELECT name, statement FROM pg_prepared_statements
			WHERE statement LIKE '%WITH leased AS%' AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&name, &leaseSQL)
		if err == pgx.ErrNoRows {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if plan := explain(c, "EXPLAIN EXECUTE "+name+"(64, 60)"); strings.Contains(plan, "JIT:") {
			t.Fatalf("the hot pool's lease plan is JIT-compiled:\n%s", plan)
		}
	}
	if leaseSQL == "" {
		t.Fatal("no hot connection holds the prepared lease")
	}

	// The control, on a connection of its own with the server's defaults.
	cc, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close(ctx)
	if _, err := cc.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Exec(ctx, "PREPARE control(int, float8) AS "+leaseSQL); err != nil {
		t.Fatal(err)
	}
	var jit string
	if err := cc.QueryRow(ctx, `SHOW jit`).Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "on" {
		t.Skipf("this server runs with jit=%s: the hot pools' setting cannot be told apart from it", jit)
	}
	if plan := explain(cc, "EXPLAIN EXECUTE control(64, 60)"); !strings.Contains(plan, "JIT:") {
		t.Fatalf("control: with jit on, the generic lease plan was expected to be compiled:\n%s", plan)
	}
}
