package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// A journal left by the version before migration 0018 kept every attempt
// in whguard_attempts, the first that delivered included. Upgraded in
// place, its delivered event still shows that one attempt, once, and an
// event delivered afterwards has its first attempt on its row.
func TestFirstAttemptUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, store := range testdb.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			j := journalBefore(t, store, 18, func(exec func(string, ...any)) {
				if store == "postgres" {
					exec(`INSERT INTO whguard_events (id, provider, event_id, content_hash, status, attempts) VALUES (1, 'p', 'old', 'h', 'done', 1)`)
					exec(`INSERT INTO whguard_payloads (event_row_id, headers, body, path) VALUES (1, '{}', '\x7b7d', '/p')`)
					exec(`INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code, response_excerpt) VALUES (1, 1, now(), 5, 200, 'ok')`)
					exec(`SELECT setval('whguard_events_id_seq', 1)`)
					return
				}
				exec(`INSERT INTO whguard_events (id, provider, event_id, content_hash, status, attempts, next_attempt_at, received_at, updated_at)
					VALUES (1, 'p', 'old', 'h', 'done', 1, 0, 0, 0)`)
				exec(`INSERT INTO whguard_payloads (event_row_id, headers, body, path) VALUES (1, '{}', x'7b7d', '/p')`)
				exec(`INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code, response_excerpt) VALUES (1, 1, 0, 5, 200, 'ok')`)
			})
			if applied, err := j.Migrate(ctx); err != nil || len(applied) == 0 || applied[0] != 18 {
				t.Fatalf("migrate: applied %v, %v; want from 18", applied, err)
			}
			if d := get(t, j, 1); len(d.AttemptLog) != 1 || d.AttemptLog[0].StatusCode != 200 || d.AttemptLog[0].ResponseExcerpt != "ok" {
				t.Fatalf("the event delivered before the upgrade shows attempts %+v, want its one", d.AttemptLog)
			}
			r := appendOne(t, j, ev("p", "new", "h"))
			for _, d := range leaseAll(t, j, time.Minute) {
				if _, err := j.Complete(ctx, []journal.Finish{finish(d, journal.StatusDone, 200)}); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := journal.AttemptRows(ctx, j, r.ID); err != nil || n != 0 {
				t.Fatalf("an event delivered after the upgrade wrote %d attempt rows (%v), want 0", n, err)
			}
			if d := get(t, j, r.ID); len(d.AttemptLog) != 1 || d.AttemptLog[0].Number != 1 {
				t.Fatalf("the event delivered after the upgrade shows attempts %+v", d.AttemptLog)
			}
		})
	}
}
