package journal_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// Migration 0010 rebuilds whguard_events to allow status ignored. On a
// journal left by migrations 1-9, with rows in every table that refers to
// it, it keeps every row (none cascaded away by the DROP), the foreign
// keys (a retention delete still cascades), the indexes, and the
// AUTOINCREMENT high-water mark (an id retention deleted is never reused).
func TestSQLiteIgnoredMigrationKeepsEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "whguard.db")
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE whguard_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	applyBefore(t, "migrations/sqlite", 10, func(v int, name, sql string) {
		exec(sql)
		exec(`INSERT INTO whguard_schema_migrations VALUES (?, ?, 0)`, v, name)
	})
	now := time.Now().UnixNano()
	old := now - int64(2*time.Hour)
	for id := 1; id <= 3; id++ {
		exec(`INSERT INTO whguard_events (id, provider, event_id, content_hash, status, next_attempt_at, received_at, updated_at, body_guard)
			VALUES (?, 'p', ?, 'h', 'done', ?, ?, ?, ?)`, id, "e"+string(rune('0'+id)), old, old, old, "g"+string(rune('0'+id)))
		exec(`INSERT INTO whguard_payloads (event_row_id, headers, body, path) VALUES (?, '{}', '{"id":1}', '/webhooks/p')`, id)
		exec(`INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code) VALUES (?, 1, ?, 5, 200)`, id, old)
		exec(`INSERT INTO whguard_conflicts (event_row_id, content_hash, headers, body, received_at) VALUES (?, 'h2', '{}', 'x', ?)`, id, old)
		exec(`INSERT INTO whguard_replays (event_row_id, from_status, reason, replayed_at) VALUES (?, 'dead', 'r', ?)`, id, old)
	}
	exec(`DELETE FROM whguard_events WHERE id = 3`) // the high-water mark stays 3
	raw.Close()

	s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	applied, err := s.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0] != 10 {
		t.Fatalf("applied %v, want 10 first", applied)
	}
	for _, id := range []int64{1, 2} {
		d, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != journal.StatusDone || len(d.AttemptLog) != 1 || len(d.Replays) != 1 || d.Conflicts != 1 || d.Body != `{"id":1}` {
			t.Fatalf("event %d after the rebuild: %+v", id, d)
		}
	}

	e := journal.Event{Provider: "p", EventID: "new", EventType: "x", ContentHash: "h", Body: []byte("{}"), Path: "/", Ignored: true}
	r, err := s.Append(ctx, []journal.Event{e})
	if err != nil {
		t.Fatal(err)
	}
	if r[0].ID <= 3 {
		t.Fatalf("new event id %d reuses an id retention deleted (high-water mark 3)", r[0].ID)
	}
	if d, err := s.Get(ctx, r[0].ID); err != nil || d.Status != journal.StatusIgnored {
		t.Fatalf("ignored event after the rebuild: %+v %v", d, err)
	}

	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var fk int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_list('whguard_attempts') WHERE "table" = 'whguard_events'`).Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("attempts' foreign key to whguard_events: %d %v", fk, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'whguard_events' AND sql IS NOT NULL ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	// Every index of the rebuilt table, plus those later migrations add.
	want := "whguard_events_body_guard whguard_events_finished_age whguard_events_order whguard_events_ready whguard_events_undone"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("indexes %q, want %q", got, want)
	}

	// Foreign keys are enforced again after migrating: retention's
	// delete cascades to the conflicts and replays.
	c, err := s.Cleanup(ctx, time.Now(), time.Now())
	if err != nil || c.Events != 3 { // the two old ones and the new ignored one
		t.Fatalf("cleanup: %+v %v", c, err)
	}
	for _, table := range []string{"whguard_payloads", "whguard_attempts", "whguard_conflicts", "whguard_replays"} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+table+` WHERE event_row_id <= 3`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s: %d rows of deleted events left (%v)", table, n, err)
		}
	}
}
