package journal_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// One process per file: a second open is refused with a clear message,
// and the file can be opened again once the first holder closes it, with
// everything committed still there.
func TestSQLiteOneProcessAndDurableAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "whguard.db")
	a, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, []journal.Event{ev("p", "kept", "h")}); err != nil {
		t.Fatal(err)
	}
	_, err = journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
	if !errors.Is(err, journal.ErrLocked) || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("second open: %v, want ErrLocked pointing at PostgreSQL", err)
	}
	a.Close()
	b, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	defer b.Close()
	if err := b.Ready(ctx); err != nil {
		t.Fatalf("ready after reopen: %v", err)
	}
	evs, _, err := b.List(ctx, journal.Filter{})
	if err != nil || len(evs) != 1 || evs[0].EventID != "kept" {
		t.Fatalf("after reopen: %+v %v", evs, err)
	}
}

// Appends are synced at commit (synchronous=FULL) even right after a
// delivery-state change, which runs at synchronous=NORMAL.
func TestSQLiteAppendsStayDurableBetweenStateChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: filepath.Join(t.TempDir(), "whguard.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	want := func(step string, mode int) {
		t.Helper()
		got, err := journal.WriterSynchronous(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if got != mode {
			t.Fatalf("after %s: synchronous=%d, want %d", step, got, mode)
		}
	}
	if _, err := s.Append(ctx, []journal.Event{ev("sync", "e1", "h")}); err != nil {
		t.Fatal(err)
	}
	want("append", 2)
	ds, err := s.Lease(ctx, 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("lease: %d %v", len(ds), err)
	}
	want("lease", 1)
	if _, err := s.Append(ctx, []journal.Event{ev("sync", "e2", "h")}); err != nil {
		t.Fatal(err)
	}
	want("append after a lease", 2)
	if _, err := s.Complete(ctx, []journal.Finish{finish(ds[0], journal.StatusDone, 200)}); err != nil {
		t.Fatal(err)
	}
	want("complete", 1)
	if err := s.Replay(ctx, ds[0].ID, "test"); err != nil {
		t.Fatal(err)
	}
	want("replay", 2)
}

// The reaper finds processing rows through an index, not by reading every
// event (it runs every two seconds holding the single writer).
func TestSQLiteReapUsesAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "whguard.db")
	s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+journal.SQLiteReap, time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "USING INDEX whguard_events_undone") || strings.Contains(text, "SCAN whguard_events") {
		t.Fatalf("reap plan:\n%s", text)
	}
}
