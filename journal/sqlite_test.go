package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/whguard/whguard/journal"
)

// One process per file: a second open is refused with a clear message,
// and the file can be opened again once the first holder closes it, with
// everything committed still there.
func TestSQLiteOneProcessAndDurableAcrossReopen(t *testing.T) {
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
