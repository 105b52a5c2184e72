package journal

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Lease claims up to n ready rows. With a single writer, a plain UPDATE …
// WHERE id IN (SELECT … LIMIT n) is as safe as SKIP LOCKED.
func (s *SQLite) Lease(ctx context.Context, n int, leaseFor time.Duration) ([]Delivery, error) {
	var out []Delivery
	err := s.writeState(ctx, func(tx sqliteTx) error {
		now := s.now()
		rows, err := tx.QueryContext(ctx, sqliteLease,
			now.Add(leaseFor).UnixNano(), now.UnixNano(), now.UnixNano(), n)
		if err != nil {
			return fmt.Errorf("lease events: %w", err)
		}
		var (
			d               Delivery
			base            int
			token           []byte
			expires, recvAt int64
		)
		if err := eachRow(rows, func() error {
			c := d
			c.BudgetAttempt = d.Attempt - base
			c.LeaseToken, _ = uuid.FromBytes(token)
			c.LeaseExpiresAt, c.ReceivedAt = time.Unix(0, expires), time.Unix(0, recvAt)
			out = append(out, c)
			return nil
		}, &d.ID, &d.Provider, &d.EventID, &d.EventType, &d.Attempt, &base, &token, &expires, &recvAt, &d.OrderKey, &d.TraceContext); err != nil {
			return fmt.Errorf("lease events: %w", err)
		}
		for i := range out {
			var headers string
			err := tx.QueryRowContext(ctx, sqlitePayload, out[i].ID).
				Scan(&headers, &out[i].Body, &out[i].Path, &out[i].RawQuery, &out[i].Scheme)
			if err != nil {
				return fmt.Errorf("read payload of event %d: %w", out[i].ID, err)
			}
			out[i].Headers = leasedHeaders(s.log, out[i].ID, headers)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Delivery) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Complete records outcomes fenced by id and lease token, and returns the
// ids whose outcome took effect.
func (s *SQLite) Complete(ctx context.Context, fs []Finish) ([]int64, error) {
	var done []int64
	err := s.writeState(ctx, func(tx sqliteTx) error {
		done = done[:0]
		now := s.now()
		for _, f := range fs {
			f = f.storable()
			next := sql.NullInt64{}
			if f.Status == StatusRetry {
				next = sql.NullInt64{Int64: now.Add(f.RetryIn).UnixNano(), Valid: true}
			}
			var (
				provider string
				orderKey sql.NullString
				holds    bool
			)
			a, onRow := f.Attempt, f.onEventRow()
			var sent any
			if enc := a.Sent.encode(); enc != "" {
				sent = enc
			}
			err := tx.QueryRowContext(ctx, sqliteComplete,
				string(f.Status), next, f.LastError, now.UnixNano(), f.ID, f.LeaseToken[:],
				onRow, a.StartedAt.UnixNano(), a.DurationMS, a.StatusCode, a.ResponseExcerpt, sent).Scan(&provider, &orderKey, &holds)
			if errors.Is(err, sql.ErrNoRows) {
				continue // the lease was lost
			}
			if err != nil {
				return fmt.Errorf("complete event %d: %w", f.ID, err)
			}
			if orderKey.Valid && !holds {
				if _, err := tx.ExecContext(ctx, sqliteUnparkNext, now.UnixNano(), provider, orderKey.String, f.ID); err != nil {
					return fmt.Errorf("make the next of event %d's key due: %w", f.ID, err)
				}
			}
			done = append(done, f.ID)
			if onRow {
				continue // recorded on its row by sqliteComplete
			}
			if _, err := tx.ExecContext(ctx, sqliteInsertAttempt, f.ID, a.Number, a.StartedAt.UnixNano(), a.DurationMS, a.StatusCode, a.Error, a.ResponseExcerpt, sent); err != nil {
				return fmt.Errorf("record attempt of event %d: %w", f.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d deliveries: %w", len(fs), err)
	}
	return done, nil
}

// Release hands unfinished leases back without spending their attempt.
func (s *SQLite) Release(ctx context.Context, ids []int64, tokens []uuid.UUID) (int, error) {
	return s.Hold(ctx, releases(ids, tokens))
}

// Hold hands leases back without spending their attempt, each due after
// its For and showing its Reason (see Postgres.Hold).
func (s *SQLite) Hold(ctx context.Context, hs []Hold) (int, error) {
	n := 0
	err := s.writeState(ctx, func(tx sqliteTx) error {
		n = 0
		now := s.now()
		for _, h := range hs {
			var attempts, base int
			var failedBefore bool
			err := tx.QueryRowContext(ctx, sqliteHeldRow, h.ID, h.LeaseToken[:]).Scan(&attempts, &base, &failedBefore)
			if errors.Is(err, sql.ErrNoRows) {
				continue // the lease was lost
			}
			if err != nil {
				return err
			}
			reason := storableText(h.Reason, maxErrorBytes)
			if _, err := tx.ExecContext(ctx, sqliteHold, string(afterHold(attempts, base, failedBefore)), now.Add(h.For).UnixNano(),
				reason, now.UnixNano(), h.ID); err != nil {
				return err
			}
			if reason != "" {
				if _, err := tx.ExecContext(ctx, sqliteRecordHold, h.ID, reason, now.UnixNano(), attempts-1); err != nil {
					return fmt.Errorf("record the hold of event %d: %w", h.ID, err)
				}
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("hand back %d leases: %w", len(hs), err)
	}
	return n, nil
}

// ReapExpired returns expired leases to retry, or dead when the budget is
// spent (afterReap decides).
func (s *SQLite) ReapExpired(ctx context.Context, maxAttempts int) ([]Reaped, error) {
	var reaped []Reaped
	err := s.writeState(ctx, func(tx sqliteTx) error {
		reaped = reaped[:0]
		now := s.now().UnixNano()
		rows, err := tx.QueryContext(ctx, sqliteReap, now)
		if err != nil {
			return err
		}
		type expired struct {
			r              Reaped
			attempts, base int
			holds, block   bool
		}
		var all []expired
		var e expired
		if err := eachRow(rows, func() error { all = append(all, e); return nil },
			&e.r.ID, &e.r.Provider, &e.r.EventID, &e.attempts, &e.base, &e.holds, &e.block); err != nil {
			return err
		}
		for _, e := range all {
			st, holds := afterReap(e.attempts, e.base, maxAttempts, e.holds, e.block)
			if _, err := tx.ExecContext(ctx, sqliteReapRow, string(st), holds, reapError, now, now, e.r.ID); err != nil {
				return err
			}
			e.r.Dead = st == StatusDead
			reaped = append(reaped, e.r)
		}
		_, err = tx.ExecContext(ctx, sqliteUnparkHeads, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reap expired leases: %w", err)
	}
	return reaped, nil
}

// sqliteParked is the due time of a parked row (see pgParked), as stored
// (unix nanoseconds: the largest time they hold, in 2262).
const (
	sqliteParked     int64 = math.MaxInt64
	sqliteParkedText       = "9223372036854775807"
)

// The delivery path's statements, prepared once on the writer connection
// (see SQLite.prepareHot).
const (
	sqliteLease = `
UPDATE whguard_events
SET status = 'processing', attempts = attempts + 1, lease_token = randomblob(16), hold_reason = '',
    lease_expires_at = ?, updated_at = ?
WHERE id IN (
    SELECT id FROM whguard_events e
    WHERE status IN ('pending', 'retry') AND next_attempt_at <= ?
      AND (e.order_key IS NULL OR (
          NOT EXISTS (SELECT 1 FROM whguard_events b
                      WHERE b.order_holds = 1 AND b.provider = e.provider AND b.order_key = e.order_key AND b.id < e.id)
          AND NOT EXISTS (SELECT 1 FROM whguard_events b
                      WHERE b.order_holds = 1 AND b.provider = e.provider AND b.order_key = e.order_key AND b.id > e.id
                        AND b.status = 'processing')))
    ORDER BY next_attempt_at, id LIMIT ?)
RETURNING id, provider, event_id, event_type, attempts, budget_base, lease_token, lease_expires_at, received_at,
          coalesce(order_key, ''), coalesce(trace_context, '')`
	sqlitePayload  = `SELECT headers, body, path, raw_query, coalesce(scheme, '') FROM whguard_payloads WHERE event_row_id = ?`
	sqliteComplete = `
UPDATE whguard_events
SET status = ?1, next_attempt_at = coalesce(?2, next_attempt_at), last_error = ?3, hold_reason = '',
    lease_token = NULL, lease_expires_at = NULL, updated_at = ?4,
    order_holds = order_holds AND (?1 = 'retry' OR (?1 = 'dead' AND order_block)),
    first_started_at = CASE WHEN ?7 THEN ?8 ELSE first_started_at END,
    first_duration_ms = CASE WHEN ?7 THEN ?9 ELSE first_duration_ms END,
    first_status_code = CASE WHEN ?7 THEN ?10 ELSE first_status_code END,
    first_excerpt = CASE WHEN ?7 THEN ?11 ELSE first_excerpt END,
    first_sent_headers = CASE WHEN ?7 THEN ?12 ELSE first_sent_headers END
WHERE id = ?5 AND lease_token = ?6 AND status = 'processing'
RETURNING provider, order_key, order_holds`
	// sqliteUnparkNext makes due the row next in line after a row that
	// released its key, when it is parked (see pgParked).
	sqliteUnparkNext = `
UPDATE whguard_events SET next_attempt_at = ?1
WHERE id = (SELECT min(h.id) FROM whguard_events h
            WHERE h.order_holds = 1 AND h.provider = ?2 AND h.order_key = ?3 AND h.id > ?4)
  AND next_attempt_at = ` + sqliteParkedText + `
  AND status IN ('pending', 'retry')`
	// sqliteUnparkHeads makes due every parked row first in its key's line
	// (the reaper's pass, see sqlUnparkHeads).
	sqliteUnparkHeads = `
UPDATE whguard_events SET next_attempt_at = ?1
WHERE id IN (SELECT min(id) FROM whguard_events WHERE order_holds = 1 GROUP BY provider, order_key)
  AND next_attempt_at = ` + sqliteParkedText + `
  AND status IN ('pending', 'retry')`
	sqliteInsertAttempt = `
INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code, error, response_excerpt, sent_headers)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	// sqliteHeldRow reads a row still leased under the token; sqliteHold
	// writes its hold with the status afterHold gave it.
	sqliteHeldRow = `
SELECT attempts, budget_base, last_error <> '' FROM whguard_events WHERE id = ? AND lease_token = ? AND status = 'processing'`
	sqliteHold = `
UPDATE whguard_events
SET status = ?, attempts = attempts - 1, next_attempt_at = ?, hold_reason = ?, lease_token = NULL, lease_expires_at = NULL, updated_at = ?
WHERE id = ?`
	// sqliteReap finds the rows whose lease expired; sqliteReapRow writes
	// what afterReap decided for one. "status <> 'done'" repeats
	// whguard_events_undone's predicate: SQLite only uses a partial index
	// when the query names its WHERE clause, and the reaper has no index of
	// its own (migration 0005).
	sqliteReap = `
SELECT id, provider, event_id, attempts, budget_base, order_holds, order_block
FROM whguard_events
WHERE status <> 'done' AND status = 'processing' AND lease_expires_at < ?`
	sqliteReapRow = `
UPDATE whguard_events
SET status = ?, order_holds = ?, last_error = ?, hold_reason = '',
    next_attempt_at = ?, lease_token = NULL, lease_expires_at = NULL, updated_at = ?
WHERE id = ?`
)
