package journal_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// A journal left by the version before migration 0020 (an event that
// failed once, then was delivered, with a conflicting copy), upgraded in
// place: its timeline shows what was recorded then (its receipt without
// an answer, both attempts, the copy), and its new facts are recorded.
func TestTimelineUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, store := range testdb.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			j := journalBefore(t, store, 20, func(exec func(string, ...any)) {
				if store == "postgres" {
					exec(`INSERT INTO whguard_events (id, provider, event_id, content_hash, status, attempts, received_at)
						VALUES (1, 'p', 'old', 'h', 'done', 2, now() - interval '1 minute')`)
					exec(`INSERT INTO whguard_payloads (event_row_id, headers, body, path) VALUES (1, '{"X-Forwarded-For":["127.0.0.1"]}', '\x7b7d', '/p')`)
					exec(`INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code) VALUES
						(1, 1, now() - interval '50 seconds', 5, 503), (1, 2, now() - interval '40 seconds', 5, 200)`)
					exec(`INSERT INTO whguard_conflicts (event_row_id, content_hash, headers, body, received_at) VALUES (1, 'other', '{}', '\x7b7d', now() - interval '45 seconds')`)
					exec(`SELECT setval('whguard_events_id_seq', 1)`)
					return
				}
				now := time.Now().UnixNano()
				exec(`INSERT INTO whguard_events (id, provider, event_id, content_hash, status, attempts, next_attempt_at, received_at, updated_at)
					VALUES (1, 'p', 'old', 'h', 'done', 2, 0, ?, 0)`, now-int64(time.Minute))
				exec(`INSERT INTO whguard_payloads (event_row_id, headers, body, path) VALUES (1, '{"X-Forwarded-For":["127.0.0.1"]}', x'7b7d', '/p')`)
				exec(`INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code) VALUES (1, 1, ?, 5, 503), (1, 2, ?, 5, 200)`,
					now-int64(50*time.Second), now-int64(40*time.Second))
				exec(`INSERT INTO whguard_conflicts (event_row_id, content_hash, headers, body, received_at) VALUES (1, 'other', '{}', x'7b7d', ?)`,
					now-int64(45*time.Second))
			})
			if applied, err := j.Migrate(ctx); err != nil || len(applied) == 0 || applied[0] != 20 {
				t.Fatalf("migrate: applied %v, %v; want from 20", applied, err)
			}
			d := get(t, j, 1)
			var kinds []string
			for _, e := range d.Timeline {
				kinds = append(kinds, e.Kind)
			}
			want := []string{journal.TimelineReceived, journal.TimelineAttempt, journal.TimelineConflict, journal.TimelineAttempt}
			if len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] || kinds[3] != want[3] ||
				d.Timeline[0].Answer != 0 {
				t.Fatalf("timeline %v (%+v), want %v with the first answer unknown", kinds, d.Timeline, want)
			}
			// Journaled before the ingress recorded what it set: every
			// header shows as received.
			if d.ReceivedHeaders.Get("X-Forwarded-For") != "127.0.0.1" {
				t.Errorf("received headers %v", d.ReceivedHeaders)
			}
			if err := j.RecordReceipts(ctx, []journal.Receipt{{ID: 1, At: time.Now(), Answer: http.StatusOK}}); err != nil {
				t.Fatal(err)
			}
			if tl := get(t, j, 1).Timeline; tl[0].Duplicates != 1 || tl[len(tl)-1].Kind != journal.TimelineDuplicate {
				t.Fatalf("a duplicate after the upgrade: %+v", tl)
			}
		})
	}
}
