package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Lease claims up to n ready rows (pending or retry, due now) for leaseFor:
// status processing, a fresh random token, the attempt counted. SKIP LOCKED
// lets concurrent forwarders take disjoint rows without waiting.
func (p *Postgres) Lease(ctx context.Context, n int, leaseFor time.Duration) ([]Delivery, error) {
	rows, err := p.queue.Query(ctx, sqlLease, n, leaseFor.Seconds())
	if err != nil {
		return nil, fmt.Errorf("lease events: %w", err)
	}
	var (
		out     []Delivery
		d       Delivery
		headers []byte
		base    int
		token   pgtype.UUID
	)
	_, err = pgx.ForEachRow(rows, []any{&d.ID, &d.Provider, &d.EventID, &d.EventType, &d.Attempt, &base,
		&token, &d.LeaseExpiresAt, &d.ReceivedAt, &d.OrderKey, &d.TraceContext, &headers, &d.Body, &d.Path, &d.RawQuery, &d.Scheme}, func() error {
		c := d
		c.LeaseToken = token.Bytes
		c.BudgetAttempt = d.Attempt - base
		c.Headers = leasedHeaders(p.log, d.ID, string(headers))
		c.Body = append([]byte(nil), d.Body...)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease events: %w", err)
	}
	return out, nil
}

// Complete records outcomes, each only where the row's id and lease token
// still match: a worker whose lease expired (and was handed to another)
// changes nothing. The attempt is recorded with the state change, in the
// same statement: on the event's row when it is the first and delivered
// (Finish.onEventRow), else as a row of whguard_attempts. It returns the
// ids whose outcome took effect.
func (p *Postgres) Complete(ctx context.Context, fs []Finish) ([]int64, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	n := len(fs)
	ids, tokens := make([]int64, n), make([]pgtype.UUID, n)
	statuses, lastErrs := make([]string, n), make([]string, n)
	retryIn := make([]float64, n)
	numbers, durations, codes := make([]int32, n), make([]int64, n), make([]int32, n)
	started := make([]time.Time, n)
	errs, excerpts, sent := make([]string, n), make([]string, n), make([]string, n)
	onRow := make([]bool, n)
	for i, f := range fs {
		f = f.storable()
		ids[i], tokens[i], statuses[i], lastErrs[i] = f.ID, pgUUID(f.LeaseToken), string(f.Status), f.LastError
		retryIn[i] = f.RetryIn.Seconds()
		numbers[i], durations[i], codes[i] = int32(f.Attempt.Number), f.Attempt.DurationMS, int32(f.Attempt.StatusCode)
		started[i], errs[i], excerpts[i] = f.Attempt.StartedAt, f.Attempt.Error, f.Attempt.ResponseExcerpt
		onRow[i], sent[i] = f.onEventRow(), f.Attempt.Sent.encode()
	}
	var done []int64
	err := p.queue.QueryRow(ctx, sqlComplete, ids, tokens, statuses, retryIn, lastErrs,
		numbers, started, durations, codes, errs, excerpts, onRow, sent).Scan(&done)
	if err != nil {
		return nil, fmt.Errorf("complete %d deliveries: %w", n, err)
	}
	return done, nil
}

// Release hands unfinished leases back without spending their attempt (a
// graceful shutdown): the row is due again at once.
func (p *Postgres) Release(ctx context.Context, ids []int64, tokens []uuid.UUID) (int, error) {
	return p.Hold(ctx, releases(ids, tokens))
}

// Hold hands leases back without spending their attempt, each due again
// after its For and showing its Reason until its next outcome: a delivery
// that cannot be attempted now (no backend for its provider) waits without
// using its budget.
func (p *Postgres) Hold(ctx context.Context, hs []Hold) (int, error) {
	if len(hs) == 0 {
		return 0, nil
	}
	ids, toks := make([]int64, len(hs)), make([]pgtype.UUID, len(hs))
	secs, reasons := map[int64]float64{}, map[int64]string{}
	for i, h := range hs {
		ids[i], toks[i] = h.ID, pgUUID(h.LeaseToken)
		secs[h.ID], reasons[h.ID] = h.For.Seconds(), storableText(h.Reason, maxErrorBytes)
	}
	n := 0
	err := pgx.BeginFunc(ctx, p.queue, func(tx pgx.Tx) error {
		// The rows still leased under the tokens, locked: each one's next
		// status is decided here (afterHold), then written.
		rows, err := tx.Query(ctx, sqlHeldRows, ids, toks)
		if err != nil {
			return err
		}
		var (
			held           []int64
			statuses, rs   []string
			ss             []float64
			id             int64
			attempts, base int
			failedBefore   bool
			// The holds with a reason, for the event's timeline, with the
			// attempts made before each.
			why     []int64
			whyText []string
			made    []int32
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &attempts, &base, &failedBefore}, func() error {
			held = append(held, id)
			statuses = append(statuses, string(afterHold(attempts, base, failedBefore)))
			ss, rs = append(ss, secs[id]), append(rs, reasons[id])
			if reasons[id] != "" {
				why, whyText, made = append(why, id), append(whyText, reasons[id]), append(made, int32(attempts-1))
			}
			return nil
		})
		if err != nil || len(held) == 0 {
			return err
		}
		tag, err := tx.Exec(ctx, sqlHold, held, statuses, ss, rs)
		n = int(tag.RowsAffected())
		if err == nil && len(why) > 0 {
			_, err = tx.Exec(ctx, sqlRecordHolds, why, whyText, made)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("hand back %d leases: %w", len(hs), err)
	}
	return n, nil
}

// ReapExpired returns rows whose lease has expired to retry (due now), or to
// dead when their budget of maxAttempts is spent (afterReap decides). The
// attempt stays counted: the delivery may have reached the backend before
// the worker died. It also makes due every ordered row parked at the head
// of its key's line (see sqlUnparkHeads).
func (p *Postgres) ReapExpired(ctx context.Context, maxAttempts int) ([]Reaped, error) {
	var reaped []Reaped
	err := pgx.BeginFunc(ctx, p.queue, func(tx pgx.Tx) error {
		reaped = reaped[:0]
		rows, err := tx.Query(ctx, sqlExpiredRows)
		if err != nil {
			return err
		}
		var (
			ids            []int64
			statuses       []string
			holdsAfter     []bool
			r              Reaped
			attempts, base int
			holds, block   bool
		)
		_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Provider, &r.EventID, &attempts, &base, &holds, &block}, func() error {
			st, h := afterReap(attempts, base, maxAttempts, holds, block)
			r.Dead = st == StatusDead
			ids, statuses, holdsAfter = append(ids, r.ID), append(statuses, string(st)), append(holdsAfter, h)
			reaped = append(reaped, r)
			return nil
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		_, err = tx.Exec(ctx, sqlReap, ids, statuses, holdsAfter, reapError)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reap expired leases: %w", err)
	}
	if _, err := p.queue.Exec(ctx, sqlUnparkHeads); err != nil {
		return reaped, fmt.Errorf("unpark heads of order keys: %w", err)
	}
	return reaped, nil
}

// Ordered rows appended behind their key's holder are parked: due at
// pgParked, past the end of the ready index, so no lease walks them. The
// statement that releases a key (an outcome, a skip) makes the next row of
// the key due (nextInLine). A row appended while its holder was being
// released can miss that (each statement saw the other uncommitted): the
// reaper's pass (sqlUnparkHeads) makes due every parked row that is first
// in its key's line, within seconds.
const (
	pgParked   = `'3000-01-01 00:00:00+00'::timestamptz`
	nextInLine = `(SELECT min(h.id) FROM whguard_events h
                   WHERE h.order_holds AND h.provider = u.provider AND h.order_key = u.order_key AND h.id > u.id)`
)

// sqlUnparkHeads walks the order index once (the first holder of each
// key) and makes due the heads that are parked.
const sqlUnparkHeads = `
UPDATE whguard_events SET next_attempt_at = now()
WHERE id IN (SELECT id FROM (SELECT DISTINCT ON (provider, order_key) id, next_attempt_at
                             FROM whguard_events WHERE order_holds ORDER BY provider, order_key, id) heads
             WHERE heads.next_attempt_at = ` + pgParked + `)`

// sqlLease claims the oldest due rows. The claimed ids are fed to the
// UPDATE as an array ("id = ANY"), so whatever the planner believes about
// the table's size the update goes by primary key: as a join on a CTE, a
// plan built for a few hundred rows hash-joined the whole table. A row with an order key is taken
// only while no other row of its provider and key holds the key before it
// or is being delivered (docs/delivery.md, "Per-key order"). The check
// reads rows, it does not lock them: a row another replica has locked (and
// SKIP LOCKED passes over) is still seen here, holding its key, so the
// rows behind it stay where they are. "order_key IS NULL OR" keeps
// unordered rows to the plan they had: the ready index, no sub-query. The
// earlier-holder probe comes first and stops at the first index entry,
// so a waiting row costs one probe; only the first in line of a key also
// looks for a later row of its key being delivered (after a replay).
var sqlLease = `
WITH leased AS (
    UPDATE whguard_events ev
    SET status = 'processing',
        attempts = ev.attempts + 1,
        lease_token = gen_random_uuid(),
        hold_reason = '',
        lease_expires_at = now() + make_interval(secs => $2),
        updated_at = now()
    WHERE ev.id = ANY (ARRAY(
        SELECT id FROM whguard_events e
        WHERE status IN ('pending', 'retry') AND next_attempt_at <= now()
          AND (e.order_key IS NULL OR (
              NOT EXISTS (SELECT 1 FROM whguard_events b
                          WHERE b.order_holds AND b.provider = e.provider AND b.order_key = e.order_key AND b.id < e.id)
              AND NOT EXISTS (SELECT 1 FROM whguard_events b
                          WHERE b.order_holds AND b.provider = e.provider AND b.order_key = e.order_key AND b.id > e.id
                            AND b.status = 'processing')))
        ORDER BY next_attempt_at, id
        LIMIT $1
        FOR UPDATE SKIP LOCKED))
    RETURNING ev.id, ev.provider, ev.event_id, ev.event_type, ev.attempts, ev.budget_base,
              ev.lease_token, ev.lease_expires_at, ev.received_at, coalesce(ev.order_key, ''),
              coalesce(ev.trace_context, '')
)
SELECT l.*, p.headers, p.body, p.path, p.raw_query, coalesce(p.scheme, '')
FROM leased l JOIN ` + payloadOf("l") + ` ON true
ORDER BY l.id`

// The fences below match rows by primary key and lease token only: a
// token is set by sqlLease and cleared by every statement that moves a row
// out of processing, so a matching token implies processing. Naming the
// status as well let the planner pick a partial status index from stale
// statistics and walk its dead entries; "id = ANY" keeps it on the key.
var sqlComplete = `
WITH f AS (
    SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::float8[], $5::text[],
                         $6::int[], $7::timestamptz[], $8::bigint[], $9::int[], $10::text[], $11::text[], $12::bool[], $13::text[])
           AS f(id, token, status, retry_in, last_error, number, started_at, duration_ms, status_code, error, excerpt, on_row, sent)
), upd AS (
    UPDATE whguard_events ev
    SET status = f.status,
        first_started_at = CASE WHEN f.on_row THEN f.started_at ELSE ev.first_started_at END,
        first_duration_ms = CASE WHEN f.on_row THEN f.duration_ms ELSE ev.first_duration_ms END,
        first_status_code = CASE WHEN f.on_row THEN f.status_code ELSE ev.first_status_code END,
        first_excerpt = CASE WHEN f.on_row THEN f.excerpt ELSE ev.first_excerpt END,
        first_sent_headers = CASE WHEN f.on_row THEN NULLIF(f.sent, '')::jsonb ELSE ev.first_sent_headers END,
        next_attempt_at = CASE WHEN f.status = 'retry' THEN now() + make_interval(secs => f.retry_in) ELSE ev.next_attempt_at END,
        last_error = f.last_error,
        hold_reason = '',
        lease_token = NULL,
        lease_expires_at = NULL,
        -- done releases the key; dead releases it unless the row blocks.
        order_holds = ev.order_holds AND (f.status = 'retry' OR (f.status = 'dead' AND ev.order_block)),
        updated_at = now()
    FROM f
    WHERE ev.id = ANY ($1::bigint[]) AND ev.id = f.id AND ev.lease_token = f.token
    RETURNING ev.id, ev.provider, ev.order_key, ev.order_holds, ev.received_at
), unpark AS (
    -- A row that released its key makes the next in line due.
    UPDATE whguard_events w SET next_attempt_at = now()
    WHERE w.id IN (SELECT ` + nextInLine + ` FROM upd u WHERE u.order_key IS NOT NULL AND NOT u.order_holds)
      AND w.next_attempt_at = ` + pgParked + `
), att AS (
    INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code, error, response_excerpt, sent_headers, day)
    SELECT f.id, f.number, f.started_at, f.duration_ms, f.status_code, f.error, f.excerpt, NULLIF(f.sent, '')::jsonb,
           ` + writeDay(attemptsTable, "upd.received_at") + `
    FROM f JOIN upd ON upd.id = f.id
    WHERE NOT f.on_row
)
SELECT coalesce(array_agg(id), '{}') FROM upd`

// sqlHeldRows locks the rows still leased under the given tokens.
const sqlHeldRows = `
SELECT ev.id, ev.attempts, ev.budget_base, ev.last_error <> ''
FROM whguard_events ev JOIN unnest($1::bigint[], $2::uuid[]) AS h(id, token) ON ev.id = h.id AND ev.lease_token = h.token
WHERE ev.id = ANY ($1::bigint[])
FOR UPDATE OF ev`

// sqlHold writes the holds of rows sqlHeldRows locked, each with the
// status afterHold gave it.
const sqlHold = `
UPDATE whguard_events ev
SET status = h.status,
    attempts = ev.attempts - 1,
    next_attempt_at = now() + make_interval(secs => h.secs),
    hold_reason = h.reason,
    lease_token = NULL,
    lease_expires_at = NULL,
    updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::float8[], $4::text[]) AS h(id, status, secs, reason)
WHERE ev.id = ANY ($1::bigint[]) AND ev.id = h.id`

// sqlExpiredRows locks the rows whose lease expired (another replica's
// reaper skips them rather than wait). Bounded: a reaper pass after a
// long outage takes the rest on its next round, two seconds later.
const sqlExpiredRows = `
SELECT id, provider, event_id, attempts, budget_base, order_holds, order_block
FROM whguard_events
WHERE status = 'processing' AND lease_expires_at < now()
ORDER BY id
LIMIT 1000
FOR UPDATE SKIP LOCKED`

// sqlReap writes what afterReap decided for the rows sqlExpiredRows
// locked.
const sqlReap = `
UPDATE whguard_events ev
SET status = r.status,
    last_error = $4,
    hold_reason = '',
    next_attempt_at = now(),
    order_holds = r.holds,
    lease_token = NULL,
    lease_expires_at = NULL,
    updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::bool[]) AS r(id, status, holds)
WHERE ev.id = ANY ($1::bigint[]) AND ev.id = r.id`
