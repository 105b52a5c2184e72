package testdb

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/journal"
)

// OpenStore's journals: migrated ones ready at once (copies of the
// template), unmigrated ones not migrated, each store its own.
func TestOpenStore(t *testing.T) {
	t.Parallel()
	ForEachStore(t, func(t *testing.T, store string) {
		ctx := context.Background()
		a, b := OpenStore(t, store, true), OpenStore(t, store, true)
		for _, s := range []journal.Store{a, b} {
			if err := s.Ready(ctx); err != nil {
				t.Fatalf("migrated store: %v", err)
			}
			if applied, err := s.Migrate(ctx); err != nil || len(applied) != 0 {
				t.Fatalf("migrating a migrated store applied %v (%v)", applied, err)
			}
		}
		if _, err := a.Append(ctx, []journal.Event{{Provider: "p", EventID: "only-in-a", ContentHash: "h", Body: []byte("{}"), Path: "/"}}); err != nil {
			t.Fatal(err)
		}
		if evs, _, err := b.List(ctx, journal.Filter{}); err != nil || len(evs) != 0 {
			t.Fatalf("a write to one store shows in another: %v %v", evs, err)
		}
		u := OpenStore(t, store, false)
		if err := u.Ready(ctx); !errors.Is(err, journal.ErrNotMigrated) {
			t.Fatalf("unmigrated store: Ready = %v, want ErrNotMigrated", err)
		}
		if applied, err := u.Migrate(ctx); err != nil || len(applied) == 0 {
			t.Fatalf("migrating an unmigrated store applied %v (%v)", applied, err)
		}
	})
}

// The template is marked as one and takes no connections (a connected
// session would make every CREATE DATABASE from it fail).
func TestTemplateTakesNoConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name, err := migratedTemplate()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var isTemplate, allowConn bool
	if err := conn.QueryRow(ctx, `SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1`, name).
		Scan(&isTemplate, &allowConn); err != nil {
		t.Fatal(err)
	}
	if !isTemplate || allowConn {
		t.Fatalf("%s: datistemplate %v, datallowconn %v; want true, false", name, isTemplate, allowConn)
	}
}

// A database created for a test is gone once the test ends.
func TestDatabaseDroppedAtEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var name string
	t.Run("user", func(t *testing.T) {
		pg := OpenStore(t, "postgres", true).(*journal.Postgres)
		if err := pg.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%s still there after its test (%d, %v)", name, n, err)
	}
}
