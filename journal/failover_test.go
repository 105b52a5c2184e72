package journal_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/journal"
)

// This test server has no standby: the store reads 0, and warns once that
// acknowledged events would not survive the primary's disk; a service
// that replicates its storage (WHGUARD_JOURNAL_REPLICATION=storage) reads
// 0 without the warning.
func TestSynchronousStandbysReported(t *testing.T) {
	t.Parallel()
	for _, storage := range []bool{false, true} {
		u, drop, err := testdb.CreateMigrated(context.Background(), "standbys")
		if err != nil {
			t.Fatal(err)
		}
		defer drop()
		core, logs := observer.New(zap.WarnLevel)
		pg, err := journal.OpenPostgres(context.Background(), journal.PostgresConfig{URL: u, Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		defer pg.Close()
		if got := pg.SynchronousStandbys(); got != -1 {
			t.Fatalf("before any read: %d, want -1", got)
		}
		if err := pg.WatchStandbys(storage); err != nil {
			t.Fatal(err)
		}
		if err := pg.WatchStandbys(storage); err == nil {
			t.Fatal("a second watch started")
		}
		if !testwait.Until(10*time.Second, testwait.Poll, func() bool { return pg.SynchronousStandbys() == 0 }) {
			t.Fatalf("storage=%v: standbys %d, want 0", storage, pg.SynchronousStandbys())
		}
		st, err := pg.Stats(context.Background())
		if err != nil || st.SynchronousStandbys == nil || *st.SynchronousStandbys != 0 {
			t.Fatalf("stats: %v %v", st.SynchronousStandbys, err)
		}
		warned := logs.FilterMessageSnippet("no synchronous standby").Len()
		if want := map[bool]int{false: 1, true: 0}[storage]; warned != want {
			t.Fatalf("storage=%v: %d warnings, want %d", storage, warned, want)
		}
	}
}

// Sessions the server ends while it stays the primary (a restart, an
// administrator): the failure starts a check, which finds the same
// server still accepting writes and closes nothing else; the next
// statements run. (A primary that moved is TestE2EJournalFailover's.)
func TestConnectionFailureOnTheSamePrimaryClosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	for i := range 3 {
		if _, err := s.Append(ctx, []journal.Event{ev("p", "warm-"+string(rune('a'+i)), "h")}); err != nil {
			t.Fatal(err)
		}
	}
	var db string
	if err := s.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	admin := testdb.OpenStore(t, "postgres", false).(*journal.Postgres)
	if _, err := admin.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.ConnectionChecks() == 0 {
		_, _ = s.Append(ctx, []journal.Event{ev("p", "after-"+time.Now().String(), "h")})
		if time.Now().After(deadline) {
			t.Fatal("no check after the server ended every session")
		}
	}
	if _, err := s.Append(ctx, []journal.Event{ev("p", "after-check", "h")}); err != nil {
		t.Fatalf("append after the check: %v", err)
	}
	testwait.For(t, time.Until(deadline), "the check to end", func() bool { return journal.FailoverIdle(s) })
	if n := s.ConnectionResets(); n != 0 {
		t.Fatalf("%d resets: the primary did not move", n)
	}
}
