package journal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/journal"
)

// partitionOf names the partition holding event id's row of table.
func partitionOf(t *testing.T, s *journal.Postgres, table string, id int64) string {
	t.Helper()
	var name string
	err := s.Pool().QueryRow(context.Background(), `SELECT tableoid::regclass::text FROM `+table+` WHERE event_row_id = $1 LIMIT 1`, id).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// exists says whether a table of that name exists.
func exists(t *testing.T, s *journal.Postgres, table string) bool {
	t.Helper()
	var ok bool
	if err := s.Pool().QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A day's payloads and attempts are written to that day's partitions, and
// retention drops the partition once the day is over before its cutoff.
// What is still owed or kept (a dead event, an undelivered one, one
// replayed since) moves to the held partition first and is found there,
// body and attempts; the rest is gone with the partition. Writes for a
// day whose partition is gone go to the held partition.
func TestRetentionDropsDaysAndKeepsWhatIsOwed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	day := "_" + time.Now().UTC().Format("20060102")

	byID := map[string]int64{}
	for _, id := range []string{"done", "dead", "pending", "replayed"} {
		byID[id] = appendOne(t, s, ev("p", id, "h")).ID
	}
	for _, d := range leaseAll(t, s, time.Minute) {
		f := finish(d, journal.StatusDone, 200)
		switch d.EventID {
		case "dead":
			f = finish(d, journal.StatusDead, 422)
		case "pending":
			if _, err := s.Release(ctx, []int64{d.ID}, []uuid.UUID{d.LeaseToken}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := s.Complete(ctx, []journal.Finish{f}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replay(ctx, byID["replayed"], "again"); err != nil {
		t.Fatal(err)
	}
	for id, row := range byID {
		if got := partitionOf(t, s, "whguard_payloads", row); got != "whguard_payloads"+day {
			t.Fatalf("%s: payload in %q, want today's partition", id, got)
		}
	}
	if got := partitionOf(t, s, "whguard_attempts", byID["dead"]); got != "whguard_attempts"+day {
		t.Fatalf("dead: attempt in %q, want today's partition", got)
	}

	// Payloads: today is over before this cutoff; keys stay.
	later := time.Now().Add(48 * time.Hour)
	c, err := s.Cleanup(ctx, time.Now().Add(-time.Hour), later)
	if err != nil || c.Payloads != 1 || c.Events != 0 || c.Partitions < 1 {
		t.Fatalf("cleanup: %+v %v; want the done payload dropped with its partition", c, err)
	}
	if exists(t, s, "whguard_payloads"+day) || !exists(t, s, "whguard_attempts"+day) {
		t.Fatal("want today's payload partition dropped, its attempts partition kept")
	}
	if d := get(t, s, byID["done"]); d.Body != "" {
		t.Fatalf("done event still has a body: %q", d.Body)
	}
	for _, id := range []string{"dead", "pending", "replayed"} {
		if got := partitionOf(t, s, "whguard_payloads", byID[id]); got != "whguard_payloads_held" {
			t.Fatalf("%s: payload in %q, want held", id, got)
		}
		if d := get(t, s, byID[id]); d.Body != `{"id":"`+id+`","h":"h"}` {
			t.Fatalf("%s: body %q after its day was dropped", id, d.Body)
		}
	}
	// What is owed is still delivered, with its body.
	leased := leaseAll(t, s, time.Minute)
	if len(leased) != 2 {
		t.Fatalf("leased %d events, want the pending and the replayed one", len(leased))
	}
	for _, d := range leased {
		if string(d.Body) != `{"id":"`+d.EventID+`","h":"h"}` {
			t.Fatalf("%s leased with body %q", d.EventID, d.Body)
		}
	}
	// Today's partition is gone: a new event's payload is held, and found.
	n := appendOne(t, s, ev("p", "after", "h")).ID
	if got := partitionOf(t, s, "whguard_payloads", n); got != "whguard_payloads_held" {
		t.Fatalf("a payload written after its day was dropped is in %q, want held", got)
	}
	if d := get(t, s, n); d.Body == "" {
		t.Fatal("the held payload of a new event is not found")
	}

	// Keys and attempts: the done event goes; the dead one keeps its attempt.
	if c, err := s.Cleanup(ctx, later, later); err != nil || c.Events != 1 {
		t.Fatalf("key cleanup: %+v %v", c, err)
	}
	if exists(t, s, "whguard_attempts"+day) {
		t.Fatal("today's attempts partition is still there")
	}
	if d := get(t, s, byID["dead"]); len(d.AttemptLog) != 1 || d.AttemptLog[0].StatusCode != 422 {
		t.Fatalf("dead event's attempts after its day was dropped: %+v", d.AttemptLog)
	}
	var orphans int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM whguard_payloads p WHERE NOT EXISTS (SELECT 1 FROM whguard_events e WHERE e.id = p.event_row_id))
		+ (SELECT count(*) FROM whguard_attempts a WHERE NOT EXISTS (SELECT 1 FROM whguard_events e WHERE e.id = a.event_row_id))`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("%d payloads or attempts left without their event (%v)", orphans, err)
	}
}

// A replay that holds an event's payload while its day is being dropped:
// the drop waits for it (within its lock timeout), and the replayed event
// keeps its payload; a drop that cannot get its lock in time gives up
// until the next cleanup, and ingest is not held behind it.
func TestPartitionDropWaitsForAReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	old := deliveredEvent(t, s, "old")

	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// A replay in progress: the event and its payload locked, the event
	// moved to retry, not yet committed.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM whguard_events e JOIN whguard_payloads p ON p.event_row_id = e.id WHERE e.id = $1 FOR UPDATE OF e, p`, old.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE whguard_events SET status = 'retry', updated_at = now() WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(48 * time.Hour)
	// Held past the lock timeout: the drop gives up, ingest goes on.
	_, err = s.Cleanup(ctx, time.Now().Add(-time.Hour), later)
	if err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Fatalf("cleanup while a replay holds the day: %v, want a lock timeout", err)
	}
	if r := appendOne(t, s, ev("p", "meanwhile", "h")); r.Outcome != journal.Inserted {
		t.Fatalf("append after the drop gave up: %v", r.Outcome)
	}

	// Released while the drop waits (given all the time it needs here):
	// it then moves the replayed payload.
	journal.SetPartitionLockTimeout(s, time.Minute)
	done := make(chan error, 1)
	go func() {
		_, err := s.Cleanup(ctx, time.Now().Add(-time.Hour), later)
		done <- err
	}()
	var lockErr error
	if !testwait.Until(5*time.Second, testwait.Poll, func() bool {
		var waiting bool
		lockErr = s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND relation = 'whguard_payloads'::regclass)`).Scan(&waiting)
		return lockErr == nil && waiting
	}) {
		t.Fatalf("the drop never waited for the replay's lock (%v)", lockErr)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if exists(t, s, "whguard_payloads_"+time.Now().UTC().Format("20060102")) {
		t.Fatal("today's payload partition was not dropped")
	}
	ds := leaseAll(t, s, time.Minute)
	var found bool
	for _, d := range ds {
		found = found || d.ID == old.ID && string(d.Body) == "{}"
	}
	if !found {
		t.Fatalf("the replayed event was not leased with its payload: %+v", ds)
	}
}

// With no cleanup for days (whguard stopped), the next one creates every
// day's partition from the last one on, so the range stays whole, and
// drops the days that are over; one that finds the parent locked
// gives up within its lock timeout.
func TestPartitionsAreCreatedAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.CreateMigrated(ctx, "ahead")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	now := time.Now().AddDate(0, 0, 10)
	s, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Cleanup(ctx, time.Now().AddDate(0, 0, -40), time.Now().AddDate(0, 0, -40)); err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC()
	for d := 0; d <= 13; d++ {
		name := "whguard_payloads_" + today.AddDate(0, 0, d).Format("20060102")
		if !exists(t, s, name) {
			t.Fatalf("%s missing after a cleanup ten days on", name)
		}
	}
	if exists(t, s, "whguard_attempts_"+today.AddDate(0, 0, 14).Format("20060102")) {
		t.Fatal("created more than three days ahead")
	}

	// A reader holding the parent: creating the next day's partition
	// waits at most its lock timeout, then gives up until the next cleanup.
	now = now.AddDate(0, 0, 1)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM whguard_payloads`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Cleanup(ctx, time.Now().AddDate(0, 0, -40), time.Now().AddDate(0, 0, -40))
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("cleanup with the parent locked: %v after %s, want a lock timeout", err, time.Since(start))
	}
	tx.Rollback(ctx)
	if _, err := s.Cleanup(ctx, time.Now().AddDate(0, 0, -40), time.Now().AddDate(0, 0, -40)); err != nil {
		t.Fatal(err)
	}
	if !exists(t, s, "whguard_payloads_"+today.AddDate(0, 0, 14).Format("20060102")) {
		t.Fatal("the next cleanup did not create the day it missed")
	}
}

// A journal from before migration 0019, upgraded in place: on PostgreSQL
// its payloads and attempts become the held partitions, where they are
// found, delivered and aged out row by row as before, while new events
// go to their day's partitions; the embedded store is unchanged.
func TestPartitionsUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, store := range testdb.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			j := journalBefore(t, store, 19, func(exec func(string, ...any)) {
				ts, old := "now()", "now() - interval '8 days'"
				if store != "postgres" {
					ts = "CAST(unixepoch('subsec') * 1e9 AS INTEGER)" // nanoseconds
					old = "CAST((unixepoch('subsec') - 8 * 86400) * 1e9 AS INTEGER)"
				}
				exec(`INSERT INTO whguard_events (id, provider, event_id, content_hash, status, attempts, next_attempt_at, received_at, updated_at) VALUES
					(1, 'p', 'old-done', 'h', 'done', 1, ` + ts + `, ` + old + `, ` + old + `),
					(2, 'p', 'old-dead', 'h', 'dead', 1, ` + ts + `, ` + old + `, ` + old + `),
					(3, 'p', 'old-pending', 'h', 'pending', 0, ` + ts + `, ` + old + `, ` + old + `)`)
				for id := 1; id <= 3; id++ {
					exec(`INSERT INTO whguard_payloads (event_row_id, headers, body, path) VALUES ($1, '{}', $2, '/p')`, id, []byte(`{"n":`+string(rune('0'+id))+`}`))
				}
				exec(`INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code, response_excerpt) VALUES (2, 1, ` + ts + `, 5, 422, 'no')`)
				if store == "postgres" {
					exec(`SELECT setval('whguard_events_id_seq', 3)`)
				}
			})
			// 19, then whatever came after it.
			if applied, err := j.Migrate(ctx); err != nil || len(applied) == 0 || applied[0] != 19 {
				t.Fatalf("migrate: applied %v, %v; want 19 first", applied, err)
			}
			pg, _ := j.(*journal.Postgres)
			if pg != nil {
				for id := int64(1); id <= 3; id++ {
					if got := partitionOf(t, pg, "whguard_payloads", id); got != "whguard_payloads_held" {
						t.Fatalf("event %d: payload in %q after the upgrade, want held", id, got)
					}
				}
			}
			if d := get(t, j, 2); d.Body != `{"n":2}` || len(d.AttemptLog) != 1 || d.AttemptLog[0].StatusCode != 422 {
				t.Fatalf("dead event after the upgrade: body %q, attempts %+v", d.Body, d.AttemptLog)
			}
			if ds := leaseAll(t, j, time.Minute); len(ds) != 1 || ds[0].ID != 3 || string(ds[0].Body) != `{"n":3}` {
				t.Fatalf("leased after the upgrade: %+v", ds)
			}
			// Old rows age out by the old rule, row by row.
			c, err := j.Cleanup(ctx, time.Now().AddDate(0, 0, -35), time.Now().AddDate(0, 0, -7))
			if err != nil || c.Payloads != 1 || c.Events != 0 {
				t.Fatalf("cleanup after the upgrade: %+v %v, want the old done payload", c, err)
			}
			if d := get(t, j, 1); d.Body != "" {
				t.Fatalf("old done payload kept: %q", d.Body)
			}
			n := appendOne(t, j, ev("p", "new", "h")).ID
			if pg != nil {
				if got, want := partitionOf(t, pg, "whguard_payloads", n), "whguard_payloads_"+time.Now().UTC().Format("20060102"); got != want {
					t.Fatalf("new payload in %q, want %q", got, want)
				}
			}
			if d := get(t, j, n); d.Body == "" {
				t.Fatal("new event without its body")
			}
		})
	}
}

// The growth ANALYZE lets go of each table once it is analyzed: while it
// waits for its last table (today's payloads, locked here) it holds no
// lock on the others, so retention's lock of the payloads' parent, and the
// appends queued behind that, never wait for the whole list (found: one
// transaction held every table until the last was analyzed).
func TestGrowthAnalyzeHoldsOneTableAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	appendOne(t, s, ev("p", "one", "h"))
	today := "whguard_payloads_" + time.Now().UTC().Format("20060102")
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE `+today+` IN SHARE UPDATE EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- journal.AnalyzeHotTables(ctx, s) }()
	var pid int
	testwait.For(t, 5*time.Second, "the ANALYZE waiting for today's payloads", func() bool {
		err := s.Pool().QueryRow(ctx, `SELECT pid FROM pg_locks WHERE NOT granted AND relation = to_regclass($1)`, today).Scan(&pid)
		return err == nil
	})
	rows, err := s.Pool().Query(ctx, `SELECT relation::regclass::text FROM pg_locks
		WHERE pid = $1 AND granted AND locktype = 'relation' AND relation::regclass::text LIKE 'whguard%'`, pid)
	if err != nil {
		t.Fatal(err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(held) > 0 {
		t.Errorf("the ANALYZE waiting for %s still holds %v", today, held)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Days are dropped only by the replica holding the cleanup lock, like the
// deletes of events (found: every replica moved kept rows and dropped
// days with its own cutoffs beside the leader's deletes, leaving held rows
// of deleted events).
func TestOnlyTheCleaningReplicaDropsDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	appendOne(t, s, ev("p", "one", "h"))
	today := "whguard_payloads_" + time.Now().UTC().Format("20060102")
	later := time.Now().Add(48 * time.Hour)
	other, err := s.Pool().Acquire(ctx) // another replica, cleaning
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, journal.CleanupLockKey); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Cleanup(ctx, later, later); err != nil || c.Partitions != 0 || !exists(t, s, today) {
		t.Fatalf("cleanup while another replica cleans: %+v, %v; today's payloads exist: %v", c, err, exists(t, s, today))
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, journal.CleanupLockKey); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Cleanup(ctx, later, later); err != nil || c.Partitions == 0 || exists(t, s, today) {
		t.Fatalf("cleanup as the cleaning replica: %+v, %v", c, err)
	}
}
