package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// Retention is the -long retention figure: expiring one day of events by
// DELETE (the journal before migration 0019, whose statements are kept
// here) against dropping that day's partitions (whguard's Cleanup), on two
// journals filled alike in the same run; then the journal's sizes over
// simulated days of steady traffic, both ways.
type Retention struct {
	Events int `json:"events"`
	// Payloads and Keys expire one day's payloads, then its keys (with
	// their attempts), each way.
	Payloads Expiry `json:"payloads"`
	Keys     Expiry `json:"keys"`
	// DayEvents a day over the simulated days; Days the sizes after each.
	DayEvents int       `json:"day_events"`
	Days      []DayRows `json:"days"`
	Failed    string    `json:"failed,omitempty"`
	// days and budget: -retention-days and -retention-budget.
	days   int
	budget time.Duration
}

// Expiry is one expiry step by DELETE and by dropping partitions.
type Expiry struct {
	Delete Cost `json:"delete"`
	Drop   Cost `json:"drop"`
}

// Cost is the time and WAL of one step, vacuum included. A DELETE step
// stopped by the time budget says how many rows it deleted of how many.
type Cost struct {
	Seconds float64 `json:"seconds"`
	WALMB   float64 `json:"wal_mb"`
	Stopped bool    `json:"stopped,omitempty"`
	Deleted int64   `json:"deleted,omitempty"`
	Of      int64   `json:"of,omitempty"`
}

// DayRows is each journal's size after a simulated day and its cleanup.
type DayRows struct {
	Day int `json:"day"`
	// MB of events, payloads and attempts (tables, indexes, TOAST), and
	// the cleanup's cost, DELETE way then partitioned.
	Delete, Drop         [3]float64
	DeleteCost, DropCost Cost
	DropPartitions       int
}

// oldCleanupPayloads and oldCleanupEvents are the cleanup statements of
// the journal before migration 0019 (row by row).
const (
	oldCleanupPayloads = `
DELETE FROM whguard_payloads p
USING whguard_events ev
WHERE p.event_row_id = ev.id AND ev.status IN ('done', 'ignored') AND ev.updated_at < $1
  AND ev.id IN (
    SELECT e.id FROM whguard_events e JOIN whguard_payloads pp ON pp.event_row_id = e.id
    WHERE e.status IN ('done', 'ignored') AND e.updated_at < $1 ORDER BY e.updated_at, e.id LIMIT $2
    FOR UPDATE OF e SKIP LOCKED)`
	oldCleanupEvents = `
WITH gone AS (
    DELETE FROM whguard_events ev
    WHERE ev.id IN (
        SELECT id FROM whguard_events
        WHERE status IN ('done', 'ignored') AND updated_at < $1
        ORDER BY updated_at, id LIMIT $2
        FOR UPDATE SKIP LOCKED)
      AND ev.status IN ('done', 'ignored') AND ev.updated_at < $1
    RETURNING ev.id
), payloads AS (
    DELETE FROM whguard_payloads WHERE event_row_id IN (SELECT id FROM gone)
), attempts AS (
    DELETE FROM whguard_attempts WHERE event_row_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone`
	oldVacuum = `VACUUM (ANALYZE, SKIP_LOCKED) whguard_events, whguard_payloads, whguard_attempts`
)

// fillDaySQL journals events $1..$2 received on the day starting $3, one
// a second or faster: 1 in 1 000 dead and 1 in 1 000 pending, the rest
// delivered; each with a 1 KB payload ($4 headers, $5 body) and one
// attempt in twenty a failed first attempt. %s is ", day" and %s "$6"
// for the partitioned journal, empty for the other.
const fillDaySQL = `WITH e AS (
	INSERT INTO whguard_events (provider, event_id, event_type, content_hash, status, attempts,
	                            next_attempt_at, received_at, updated_at)
	SELECT 'bench', 'ret_' || g, 'order.paid', 'sha256:' || md5(g::text),
	       CASE WHEN g %% 1000 = 0 THEN 'dead' WHEN g %% 1000 = 1 THEN 'pending' ELSE 'done' END, 1,
	       $3::timestamptz + interval '1 day', t, t + interval '1 second'
	FROM (SELECT g, $3::timestamptz + make_interval(secs => 86000.0 * (g - $1) / ($2 - $1 + 1)) AS t
	      FROM generate_series($1::bigint, $2::bigint) AS g) s
	RETURNING id, received_at
), p AS (
	INSERT INTO whguard_payloads (event_row_id, headers, body, path%[1]s)
	SELECT id, $4::jsonb, $5::bytea, '/webhooks/bench'%[2]s FROM e
)
INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code%[1]s)
SELECT id, 1, received_at, 5, 503%[2]s FROM e WHERE id %% 20 = 0`

// retention runs the retention figure with events in the one-day
// comparison and events/10 a day over six simulated days.
func (h *harness) retention(ctx context.Context, events, days int, budget time.Duration) *Retention {
	r := &Retention{Events: events, DayEvents: events / 10, days: days, budget: budget}
	if err := r.run(ctx); err != nil {
		r.Failed = err.Error()
	}
	return r
}

// retentionJournal is one of the two journals compared.
type retentionJournal struct {
	conn *pgx.Conn
	pg   *journal.Postgres // the partitioned one only
	now  time.Time         // its clock (partitioned)
	next int64             // next event number
}

func (r *Retention) run(ctx context.Context) error {
	// Simulated days far from today, so nothing real is near them.
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 100)
	progress("long: retention: one day of %d events expired by DELETE and by dropping partitions", r.Events)
	old, part, err := retentionPair(ctx, start)
	if err != nil {
		return err
	}
	defer old.close()
	defer part.close()
	for _, j := range []*retentionJournal{old, part} {
		if err := j.fill(ctx, start, r.Events); err != nil {
			return err
		}
	}
	// The day is over: payloads expire, then keys.
	part.now = start.AddDate(0, 0, 1).Add(time.Second)
	if r.Payloads, err = expire(ctx, old, part, time.Time{}, part.now, r.budget); err != nil {
		return err
	}
	progress("  payloads: DELETE %.1f s%s %.0f MB WAL, drop %.1f s %.0f MB WAL", r.Payloads.Delete.Seconds, r.Payloads.Delete.stoppedText(), r.Payloads.Delete.WALMB,
		r.Payloads.Drop.Seconds, r.Payloads.Drop.WALMB)
	if r.Keys, err = expire(ctx, old, part, part.now, part.now, r.budget); err != nil {
		return err
	}
	progress("  keys: DELETE %.1f s%s %.0f MB WAL, drop %.1f s %.0f MB WAL", r.Keys.Delete.Seconds, r.Keys.Delete.stoppedText(), r.Keys.Delete.WALMB,
		r.Keys.Drop.Seconds, r.Keys.Drop.WALMB)
	old.close()
	part.close()
	if r.days == 0 {
		return nil
	}

	// Steady traffic: payloads kept 2 days, keys 3; sizes after each day.
	progress("long: retention: %d events a day over %d simulated days, both ways", r.DayEvents, r.days)
	if old, part, err = retentionPair(ctx, start); err != nil {
		return err
	}
	defer old.close()
	defer part.close()
	for day := 0; day < r.days; day++ {
		d := start.AddDate(0, 0, day)
		row := DayRows{Day: day + 1}
		for _, j := range []*retentionJournal{old, part} {
			if err := j.fill(ctx, d, r.DayEvents); err != nil {
				return err
			}
		}
		part.now = d.AddDate(0, 0, 1).Add(time.Second)
		e, err := expire(ctx, old, part, part.now.AddDate(0, 0, -3), part.now.AddDate(0, 0, -2), r.budget)
		if err != nil {
			return err
		}
		row.DeleteCost, row.DropCost = e.Delete, e.Drop
		if row.Delete, _, err = old.sizes(ctx); err != nil {
			return err
		}
		if row.Drop, row.DropPartitions, err = part.sizes(ctx); err != nil {
			return err
		}
		progress("  day %d: DELETE way %.0f/%.0f/%.0f MB, partitioned %.0f/%.0f/%.0f MB (%d partitions)", row.Day,
			row.Delete[0], row.Delete[1], row.Delete[2], row.Drop[0], row.Drop[1], row.Drop[2], row.DropPartitions)
		r.Days = append(r.Days, row)
	}
	return nil
}

// retentionPair makes the two journals: one at the schema before 0019,
// one migrated by whguard with its clock at start.
func retentionPair(ctx context.Context, start time.Time) (old, part *retentionJournal, err error) {
	old, err = openRetentionJournal(ctx, "ret_old")
	if err != nil {
		return nil, nil, err
	}
	files, err := filepath.Glob("journal/migrations/postgres/*.sql")
	if err != nil || len(files) == 0 {
		return nil, nil, fmt.Errorf("retention: run from the repository's root (journal/migrations/postgres: %v)", err)
	}
	slices.Sort(files)
	for _, f := range files {
		if v, _ := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0]); v >= 19 {
			break
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		if _, err := old.conn.Exec(ctx, string(b)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	part, err = openRetentionJournal(ctx, "ret_part")
	if err != nil {
		return nil, nil, err
	}
	part.now = start
	part.pg, err = journal.OpenPostgres(ctx, journal.PostgresConfig{URL: part.conn.Config().ConnString(), Now: func() time.Time { return part.now }})
	if err != nil {
		return nil, nil, err
	}
	if _, err := part.pg.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	return old, part, nil
}

// openRetentionJournal connects to a new empty database.
func openRetentionJournal(ctx context.Context, prefix string) (*retentionJournal, error) {
	u, drop, err := testdb.Create(ctx, prefix)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		drop()
		return nil, err
	}
	dropOnClose[conn] = drop
	return &retentionJournal{conn: conn, next: 1}, nil
}

// dropOnClose drops each journal's database when it is closed.
var dropOnClose = map[*pgx.Conn]func(){}

func (j *retentionJournal) close() {
	if j.pg != nil {
		j.pg.Close()
		j.pg = nil
	}
	if drop, ok := dropOnClose[j.conn]; ok {
		j.conn.Close(context.Background())
		drop()
		delete(dropOnClose, j.conn)
	}
}

// fill journals n events received on day, then vacuums, so that what is
// measured next is the expiry alone.
func (j *retentionJournal) fill(ctx context.Context, day time.Time, n int) error {
	q := fmt.Sprintf(fillDaySQL, "", "")
	args := []any{nil, nil, day, `{"Content-Type":["application/json"],"Webhook-Id":["ret"]}`, []byte(strings.Repeat("x", 1000))}
	if j.pg != nil {
		q = fmt.Sprintf(fillDaySQL, ", day", ", $6::date")
		args = append(args, day)
	}
	for from := j.next; from < j.next+int64(n); from += preloadBatch {
		to := min(from+preloadBatch-1, j.next+int64(n)-1)
		args[0], args[1] = from, to
		if _, err := j.conn.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("fill a day: %w", err)
		}
	}
	j.next += int64(n)
	_, err := j.conn.Exec(ctx, `VACUUM ANALYZE`)
	return err
}

// expire runs one cleanup on both journals, keys before keysBefore (none
// when zero) and payloads before payloadsBefore, and measures each. The
// DELETE way stops once budget is spent, saying how far it got.
func expire(ctx context.Context, old, part *retentionJournal, keysBefore, payloadsBefore time.Time, budget time.Duration) (Expiry, error) {
	var e Expiry
	var err error
	var deleted, of int64
	table := "whguard_payloads"
	if !keysBefore.IsZero() {
		table = "whguard_events"
	}
	if err := old.conn.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&of); err != nil {
		return e, err
	}
	stopped := false
	e.Delete, err = measureCost(ctx, old.conn, func() error {
		// As the journal before 0019 did: batches until a short one.
		deadline := time.Now().Add(budget)
		for n := 5000; n == 5000 && !keysBefore.IsZero(); {
			if time.Now().After(deadline) {
				stopped = true
				break
			}
			if err := old.conn.QueryRow(ctx, oldCleanupEvents, keysBefore, 5000).Scan(&n); err != nil {
				return err
			}
			deleted += int64(n)
		}
		for n := int64(5000); n == 5000 && !stopped; {
			if time.Now().After(deadline) {
				stopped = true
				break
			}
			tag, err := old.conn.Exec(ctx, oldCleanupPayloads, payloadsBefore, 5000)
			if err != nil {
				return err
			}
			n = tag.RowsAffected()
			if keysBefore.IsZero() {
				deleted += n
			}
		}
		_, err := old.conn.Exec(ctx, oldVacuum)
		return err
	})
	if err != nil {
		return e, fmt.Errorf("expire by DELETE: %w", err)
	}
	if stopped {
		e.Delete.Stopped, e.Delete.Deleted, e.Delete.Of = true, deleted, of
	}
	e.Drop, err = measureCost(ctx, part.conn, func() error {
		_, err := part.pg.Cleanup(ctx, keysBefore, payloadsBefore)
		return err
	})
	if err != nil {
		return e, fmt.Errorf("expire by dropping partitions: %w", err)
	}
	return e, nil
}

// stoppedText says how far a step stopped by the budget got ("" when it
// finished).
func (c Cost) stoppedText() string {
	if !c.Stopped {
		return ""
	}
	return fmt.Sprintf(" (stopped: %d of %d rows)", c.Deleted, c.Of)
}

// measureCost times fn and the WAL its server wrote meanwhile.
func measureCost(ctx context.Context, conn *pgx.Conn, fn func() error) (Cost, error) {
	var lsn string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return Cost{}, err
	}
	t0 := time.Now()
	if err := fn(); err != nil {
		return Cost{}, err
	}
	c := Cost{Seconds: time.Since(t0).Seconds()}
	var wal float64
	err := conn.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - $1::pg_lsn)::float8`, lsn).Scan(&wal)
	c.WALMB = wal / (1 << 20)
	return c, err
}

// sizes is the MB of events, payloads and attempts (every partition,
// indexes and TOAST included) and the number of day partitions.
func (j *retentionJournal) sizes(ctx context.Context) ([3]float64, int, error) {
	var mb [3]float64
	var parts int
	err := j.conn.QueryRow(ctx, `
SELECT pg_total_relation_size('whguard_events') / 1048576.0,
       coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('whguard_payloads')), pg_total_relation_size('whguard_payloads')) / 1048576.0,
       coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('whguard_attempts')), pg_total_relation_size('whguard_attempts')) / 1048576.0,
       (SELECT count(*) FROM pg_partition_tree('whguard_payloads') WHERE isleaf AND relid::text ~ '_[0-9]{8}$')::int
         + (SELECT count(*) FROM pg_partition_tree('whguard_attempts') WHERE isleaf AND relid::text ~ '_[0-9]{8}$')::int`).
		Scan(&mb[0], &mb[1], &mb[2], &parts)
	return mb, parts, err
}

// print writes the retention section of the report.
func (r *Retention) print(w io.Writer) {
	fmt.Fprintf(w, "retention: one day of %d events (1 KB payloads, 1 in 20 with a failed attempt), expired each way:\n", r.Events)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  step\tDELETE s\tDELETE WAL MB\tdrop s\tdrop WAL MB\t")
	for _, s := range []struct {
		name string
		e    Expiry
	}{{"payloads", r.Payloads}, {"keys and attempts", r.Keys}} {
		del := fmt.Sprintf("%.1f%s", s.e.Delete.Seconds, s.e.Delete.stoppedText())
		fmt.Fprintf(tw, "  %s\t%s\t%.0f\t%.1f\t%.0f\t\n", s.name, del, s.e.Delete.WALMB, s.e.Drop.Seconds, s.e.Drop.WALMB)
	}
	tw.Flush()
	if len(r.Days) > 0 {
		fmt.Fprintf(w, "sizes over simulated days of %d events (payloads kept 2 days, keys 3), MB of events/payloads/attempts:\n", r.DayEvents)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  day\tDELETE way\tcleanup s\tWAL MB\tpartitioned\tcleanup s\tWAL MB\tday partitions\t")
		for _, d := range r.Days {
			fmt.Fprintf(tw, "  %d\t%.0f/%.0f/%.0f\t%.1f\t%.0f\t%.0f/%.0f/%.0f\t%.1f\t%.0f\t%d\t\n", d.Day, d.Delete[0], d.Delete[1], d.Delete[2],
				d.DeleteCost.Seconds, d.DeleteCost.WALMB, d.Drop[0], d.Drop[1], d.Drop[2], d.DropCost.Seconds, d.DropCost.WALMB, d.DropPartitions)
		}
		tw.Flush()
	}
	if r.Failed != "" {
		fmt.Fprintf(w, "retention FAILED: %s\n", r.Failed)
	}
}
