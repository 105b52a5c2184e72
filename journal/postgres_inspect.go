package journal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// List returns events newest first, and the cursor for the next page (0
// when there is none).
func (p *Postgres) List(ctx context.Context, f Filter) ([]Summary, int64, error) {
	return listEvents(ctx, p, f)
}

// likePatterns turns type patterns into LIKE patterns.
func likePatterns(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = likePattern(t)
	}
	return out
}

// narrowWindow is the longest since/until window whose rows' id range is
// looked up first (windowIDs).
const narrowWindow = 48 * time.Hour

// windowIDs returns the smallest and largest id received within a closed
// window of at most narrowWindow, through the BRIN index on received_at
// (ok false when none was). Rows are appended in received order, so the
// listing can then walk just that id range: without it, a window far in
// the past makes the newest-first walk cross every newer row first (the
// planner expects matches to be spread evenly and picks that walk). The
// "+ 0" keeps the planner from answering min and max by walking the
// primary key from either end, the very walk this avoids.
const sqlWindowIDs = `
SELECT min(id + 0), max(id + 0) FROM whguard_events WHERE received_at >= $1 AND received_at < $2`

func (p *Postgres) windowIDs(ctx context.Context, f Filter) (lo, hi int64, ok bool, err error) {
	var min, max *int64
	err = p.pool.QueryRow(ctx, sqlWindowIDs, f.Since, f.Until).Scan(&min, &max)
	if err != nil || min == nil {
		return 0, 0, false, err
	}
	return *min, *max, true, nil
}

func (p *Postgres) listPage(ctx context.Context, f Filter, n int) ([]Summary, error) {
	lo, hi := int64(0), int64(math.MaxInt64)
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Sub(f.Since) <= narrowWindow {
		var found bool
		var err error
		if lo, hi, found, err = p.windowIDs(ctx, f); err != nil || !found {
			return nil, err
		}
	}
	// An exact event id with a provider (or the configured providers) is
	// found through the unique key; the general pool plans each query for
	// its own values, so the other filters cost nothing when unset.
	rows, err := p.pool.Query(ctx, `
SELECT `+summaryColumns+` FROM whguard_events
WHERE ($1 = '' OR status = $1) AND ($2 = '' OR provider = $2) AND ($3::bigint = 0 OR id < $3::bigint)
  AND ($4::timestamptz IS NULL OR received_at >= $4)
  AND (coalesce(cardinality($6::text[]), 0) = 0 OR provider = ANY ($6::text[]))
  AND ($7 = '' OR CASE WHEN $8 THEN starts_with(event_id, $7) ELSE event_id = $7 END)
  AND (coalesce(cardinality($9::text[]), 0) = 0 OR event_type LIKE ANY ($9::text[]))
  AND ($10::timestamptz IS NULL OR received_at < $10)
  AND (NOT $11 OR EXISTS (SELECT 1 FROM whguard_payloads p WHERE p.event_row_id = whguard_events.id
                           AND `+inPartitions("p", "whguard_events.received_at")+`))
  AND id BETWEEN $12 AND $13
ORDER BY id DESC LIMIT $5`, string(f.Status), f.Provider, f.Before, nullTime(f.Since), n,
		providersFilter(f), f.EventID, f.EventIDPrefix, likePatterns(f.Types), nullTime(f.Until), f.WithPayload, lo, hi)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanSummary)
}

func (p *Postgres) eachBody(ctx context.Context, ids []int64, fn func(id int64, body []byte) error) error {
	rows, err := p.pool.Query(ctx, `SELECT ev.id, p.body FROM whguard_events ev JOIN `+payloadOf("ev")+` ON true WHERE ev.id = ANY ($1::bigint[])`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		// RawValues: the body as received from the server, not copied.
		raw := rows.RawValues()
		var id int64
		if err := rows.Scan(&id, nil); err != nil {
			return err
		}
		if err := fn(id, raw[1]); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Conflicts returns the copies of event id received with other content,
// oldest first.
func (p *Postgres) Conflicts(ctx context.Context, id int64) ([]ConflictCopy, error) {
	return listConflicts(ctx, p, id)
}

func (p *Postgres) listConflicts(ctx context.Context, id int64) ([]storedConflict, error) {
	rows, err := p.pool.Query(ctx, `
SELECT content_hash, received_at, headers, body FROM whguard_conflicts WHERE event_row_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, err
	}
	var (
		c       storedConflict
		headers []byte
		out     []storedConflict
	)
	_, err = pgx.ForEachRow(rows, []any{&c.hash, &c.receivedAt, &headers, &c.body}, func() error {
		c.headers = string(headers)
		out = append(out, c)
		return nil
	})
	return out, err
}

// Get returns one event with everything recorded about it.
func (p *Postgres) Get(ctx context.Context, id int64) (*Detail, error) {
	return getEvent(ctx, p, id)
}

func (p *Postgres) getEvent(ctx context.Context, id int64) (*Detail, storedPayload, error) {
	var (
		d       Detail
		headers []byte
		pl      storedPayload
	)
	row := p.pool.QueryRow(ctx, `
SELECT `+summaryColumnsEv+`, p.headers, p.body, p.path, p.raw_query, coalesce(p.scheme, ''),
       (SELECT count(*) FROM whguard_conflicts c WHERE c.event_row_id = ev.id),
       ev.order_holds,
       coalesce((SELECT min(b.id) FROM whguard_events b WHERE b.order_holds AND b.provider = ev.provider
                 AND b.order_key = ev.order_key AND b.id < ev.id), 0)
FROM whguard_events ev LEFT JOIN `+payloadOf("ev")+` ON true
WHERE ev.id = $1`, id)
	var path, query *string
	err := row.Scan(&d.ID, &d.Provider, &d.EventID, &d.EventType, &d.Status, &d.Attempts,
		&d.ReceivedAt, &d.NextAttemptAt, &d.LastError, &d.Held, &d.OrderKey, &d.Source, &headers, &pl.body, &path, &query, &d.Scheme, &d.Conflicts,
		&d.HoldsKey, &d.WaitingFor)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, pl, ErrNotFound
	}
	if err != nil {
		return nil, pl, fmt.Errorf("get event %d: %w", id, err)
	}
	pl.headers, pl.kept = string(headers), headers != nil
	if path != nil {
		d.Path, d.RawQuery = *path, *query
	}
	rows, err := p.pool.Query(ctx, pgAttemptsOf, id)
	if err != nil {
		return nil, pl, fmt.Errorf("get attempts of event %d: %w", id, err)
	}
	d.AttemptLog, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var (
			a    Attempt
			sent string
		)
		if err := r.Scan(&a.Number, &a.StartedAt, &a.DurationMS, &a.StatusCode, &a.Error, &a.ResponseExcerpt, &sent); err != nil {
			return a, err
		}
		a.Sent, err = decodeDelta(sent)
		return a, err
	})
	if err != nil {
		return nil, pl, fmt.Errorf("get attempts of event %d: %w", id, err)
	}
	rows, err = p.pool.Query(ctx, `
SELECT action, from_status, reason, replayed_at FROM whguard_replays WHERE event_row_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, pl, fmt.Errorf("get replays of event %d: %w", id, err)
	}
	d.Replays, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Replay, error) {
		var rp Replay
		err := r.Scan(&rp.Action, &rp.FromStatus, &rp.Reason, &rp.ReplayedAt)
		return rp, err
	})
	if err != nil {
		return nil, pl, fmt.Errorf("get replays of event %d: %w", id, err)
	}
	return &d, pl, nil
}

// Replay sends a dead, done or ignored event back to retry, due now, with a fresh
// budget of attempts (the attempt count keeps counting) and the same
// payload, and audits why. The row's key, and so its Idempotency-Key, do
// not change.
func (p *Postgres) Replay(ctx context.Context, id int64, reason string) error {
	return replayEvent(ctx, p, id, reason)
}

// replayEvent tries the replay first (sqlReplay moves only a replayable
// event) and looks at the event only when it did not move.
func (p *Postgres) replayEvent(ctx context.Context, id int64, reason string) (replayTarget, error) {
	var n int
	if err := p.pool.QueryRow(ctx, sqlReplay, []int64{id}, reason).Scan(&n); err != nil {
		return replayTarget{}, err
	}
	if n == 1 {
		return replayTarget{replayed: true}, nil
	}
	var t replayTarget
	err := p.pool.QueryRow(ctx, `SELECT status, EXISTS (SELECT 1 FROM whguard_payloads p WHERE p.event_row_id = $1
		AND `+inPartitions("p", "whguard_events.received_at")+`) FROM whguard_events WHERE id = $1`, id).Scan(&t.status, &t.hasPayload)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, nil
	}
	t.found = err == nil
	return t, err
}

// BulkReplay replays, in batches of 100, up to f.Limit (0: all) dead, done or ignored
// events matching f (Status must be one of those; "" means dead), and
// returns how many were replayed.
func (p *Postgres) BulkReplay(ctx context.Context, f Filter, reason string) (int, error) {
	return bulkReplay(ctx, p, f, reason, false)
}

// CountReplayable counts the events BulkReplay would replay with f.
func (p *Postgres) CountReplayable(ctx context.Context, f Filter) (int, error) {
	return bulkReplay(ctx, p, f, "", true)
}

func (p *Postgres) replayIDs(ctx context.Context, ids []int64, reason string) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, sqlReplay, ids, reason).Scan(&n)
	return n, err
}

// sqlStatusCounts counts the statuses other than done, through the status
// index (Stats).
const sqlStatusCounts = `
SELECT status, count(*) FROM whguard_events
WHERE status IN ('pending', 'processing', 'retry', 'dead', 'ignored') GROUP BY status`

// Stats counts events by status and measures the oldest undelivered one.
func (p *Postgres) Stats(ctx context.Context) (Stats, error) {
	standbys := p.SynchronousStandbys()
	s := Stats{ByStatus: map[Status]int{}, OldestUndelivered: map[string]time.Duration{}, Undelivered: map[string]int{},
		SynchronousStandbys: &standbys}
	// Exact counts for the statuses other than done (undelivered,
	// quarantined and ignored), through the status index; done rows are
	// most of a large journal, so their count is the planner's estimate of
	// the table minus the others, keeping this refresh cheap at millions of
	// rows. Ignored rows are counted exactly: a filter that drops most of a
	// provider's traffic makes them many, but they are still one index
	// range, and operators want their number right.
	rows, err := p.pool.Query(ctx, sqlStatusCounts)
	if err != nil {
		return s, fmt.Errorf("count events: %w", err)
	}
	var (
		status string
		n      int
	)
	others := 0
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error { s.ByStatus[Status(status)] = n; others += n; return nil }); err != nil {
		return s, fmt.Errorf("count events: %w", err)
	}
	var estimate float64
	if err := p.pool.QueryRow(ctx, `SELECT greatest(reltuples, 0)::float8 FROM pg_class WHERE oid = 'whguard_events'::regclass`).Scan(&estimate); err != nil {
		return s, fmt.Errorf("estimate events: %w", err)
	}
	if done := int(estimate) - others; estimate > 100_000 && done > 0 {
		s.ByStatus[StatusDone] = done
	} else {
		// Small (or never analyzed) table: count exactly, it is cheap.
		if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM whguard_events WHERE status = 'done'`).Scan(&n); err != nil {
			return s, fmt.Errorf("count done events: %w", err)
		}
		s.ByStatus[StatusDone] = n
	}
	rows, err = p.pool.Query(ctx, `
SELECT provider, count(*), extract(epoch FROM now() - min(received_at))::float8
FROM whguard_events WHERE status IN ('pending', 'retry', 'processing') GROUP BY provider`)
	if err != nil {
		return s, fmt.Errorf("oldest undelivered: %w", err)
	}
	var (
		provider string
		age      float64
	)
	if _, err := pgx.ForEachRow(rows, []any{&provider, &n, &age}, func() error {
		s.OldestUndelivered[provider] = time.Duration(age * float64(time.Second))
		s.Undelivered[provider] = n
		return nil
	}); err != nil {
		return s, fmt.Errorf("oldest undelivered: %w", err)
	}
	// Through the order index: only rows holding a key are in it.
	rows, err = p.pool.Query(ctx, `SELECT provider, count(*) FROM whguard_events WHERE order_holds AND status = 'dead' GROUP BY provider`)
	if err != nil {
		return s, fmt.Errorf("count blocked keys: %w", err)
	}
	s.BlockedKeys = map[string]int{}
	if _, err := pgx.ForEachRow(rows, []any{&provider, &n}, func() error { s.BlockedKeys[provider] = n; return nil }); err != nil {
		return s, fmt.Errorf("count blocked keys: %w", err)
	}
	return s, nil
}

const summaryColumns = `id, provider, event_id, event_type, status, attempts, received_at, next_attempt_at, last_error, ` +
	`CASE WHEN ` + waitingForOrder + ` THEN 'order' ELSE hold_reason END, coalesce(order_key, ''), source`
const summaryColumnsEv = `ev.id, ev.provider, ev.event_id, ev.event_type, ev.status, ev.attempts, ev.received_at, ev.next_attempt_at, ev.last_error, ` +
	`CASE WHEN ` + waitingForOrderEv + ` THEN 'order' ELSE ev.hold_reason END, coalesce(ev.order_key, ''), ev.source`

// waitingForOrder is true for a ready row whose order key an earlier row
// still holds: it waits for its turn (held "order").
const (
	waitingForOrder = `order_key IS NOT NULL AND status IN ('pending', 'retry') AND EXISTS (
    SELECT 1 FROM whguard_events b WHERE b.order_holds AND b.provider = whguard_events.provider
    AND b.order_key = whguard_events.order_key AND b.id < whguard_events.id)`
	waitingForOrderEv = `ev.order_key IS NOT NULL AND ev.status IN ('pending', 'retry') AND EXISTS (
    SELECT 1 FROM whguard_events b WHERE b.order_holds AND b.provider = ev.provider
    AND b.order_key = ev.order_key AND b.id < ev.id)`
)

func scanSummary(r pgx.CollectableRow) (Summary, error) {
	var s Summary
	err := r.Scan(&s.ID, &s.Provider, &s.EventID, &s.EventType, &s.Status, &s.Attempts, &s.ReceivedAt, &s.NextAttemptAt, &s.LastError, &s.Held, &s.OrderKey, &s.Source)
	return s, err
}

var sqlReplay = `
WITH moved AS (
    UPDATE whguard_events ev
    SET status = 'retry', next_attempt_at = now(), budget_base = ev.attempts, updated_at = now(),
        order_holds = ev.order_key IS NOT NULL -- its turn again: later events of its key wait for it
    -- The payload row is locked too: a retention cleanup deleting it
    -- concurrently either waits for this replay or, if it went first,
    -- makes this join find nothing (the event is then not replayable).
    FROM (SELECT e.id, e.status FROM whguard_events e
          JOIN whguard_payloads p ON p.event_row_id = e.id AND ` + inPartitions("p", "e.received_at") + `
          WHERE e.id = ANY($1::bigint[]) AND e.status IN ('dead', 'done', 'ignored')
          FOR UPDATE OF e, p) old
    WHERE ev.id = old.id
    RETURNING ev.id, old.status
), audit AS (
    INSERT INTO whguard_replays (event_row_id, from_status, reason)
    SELECT id, status, $2 FROM moved
)
SELECT count(*) FROM moved`

// Skip releases the order key of a dead event that still holds it
// (ORDER_ON_DEAD=block), so the events behind it go on; the event stays
// dead. It is audited like a replay. ErrNotFound when there is no such
// event, ErrNotSkippable when it is not dead or holds nothing.
func (p *Postgres) Skip(ctx context.Context, id int64, reason string) error {
	var skipped, found bool
	err := p.pool.QueryRow(ctx, sqlSkip, id, reason).Scan(&skipped, &found)
	if err != nil {
		return fmt.Errorf("skip event %d: %w", id, err)
	}
	return skipRefusal(id, skipped, found)
}

const sqlSkip = `
WITH skipped AS (
    UPDATE whguard_events SET order_holds = false, updated_at = now()
    WHERE id = $1 AND order_holds AND status = 'dead'
    RETURNING id, provider, order_key
), unpark AS (
    UPDATE whguard_events w SET next_attempt_at = now()
    WHERE w.id IN (SELECT ` + nextInLine + ` FROM skipped u) AND w.next_attempt_at = ` + pgParked + `
), audit AS (
    INSERT INTO whguard_replays (event_row_id, action, from_status, reason)
    SELECT id, 'skip', 'dead', $2 FROM skipped
)
SELECT EXISTS (SELECT 1 FROM skipped), EXISTS (SELECT 1 FROM whguard_events WHERE id = $1)`
