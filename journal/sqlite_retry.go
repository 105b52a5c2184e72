package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// RetryNow makes event id, waiting for its next attempt, due now (see
// Postgres.RetryNow).
func (s *SQLite) RetryNow(ctx context.Context, id int64, reason string) error {
	return retryNow(ctx, s, id, reason)
}

// BulkRetryNow makes due the events in retry matching f (see
// bulkRetryNow) and returns how many.
func (s *SQLite) BulkRetryNow(ctx context.Context, f Filter, reason string) (int, error) {
	return bulkRetryNow(ctx, s, f, reason, false)
}

// CountRetryable counts the events BulkRetryNow would make due with f.
func (s *SQLite) CountRetryable(ctx context.Context, f Filter) (int, error) {
	return bulkRetryNow(ctx, s, f, "", true)
}

// retryIDs makes due those of ids that wait for an attempt and not for
// their order key, auditing each, in one transaction of the writer.
func (s *SQLite) retryIDs(ctx context.Context, ids []int64, reason string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	reason = storableText(reason, maxErrorBytes)
	n := 0
	err := s.write(ctx, func(tx sqliteTx) error {
		n = 0
		now := s.now().UnixNano()
		for _, id := range ids {
			var status string
			err := tx.QueryRowContext(ctx, `
UPDATE whguard_events SET next_attempt_at = min(next_attempt_at, ?1), hold_reason = '', updated_at = ?1
WHERE id = ?2 AND status IN ('pending', 'retry')
  AND NOT (order_key IS NOT NULL AND EXISTS (
      SELECT 1 FROM whguard_events b WHERE b.order_holds = 1 AND b.provider = whguard_events.provider
      AND b.order_key = whguard_events.order_key AND b.id < whguard_events.id))
RETURNING status`, now, id).Scan(&status)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO whguard_replays (event_row_id, action, from_status, reason, replayed_at) VALUES (?, ?, ?, ?, ?)`,
				id, ActionRetry, status, reason, now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// RetryDue makes due now, in one statement, every event of providers in
// retry whose next attempt is later (see Postgres.RetryDue).
func (s *SQLite) RetryDue(ctx context.Context, providers []string) (int, error) {
	if len(providers) == 0 {
		return 0, nil
	}
	var n int64
	err := s.writeState(ctx, func(tx sqliteTx) error {
		now := s.now().UnixNano()
		args := []any{now, now, now}
		for _, p := range providers {
			args = append(args, p)
		}
		// "status <> 'done'" names whguard_events_undone's predicate, so
		// SQLite walks that partial index (see sqliteReap).
		res, err := tx.ExecContext(ctx, `
UPDATE whguard_events SET next_attempt_at = ?, hold_reason = '', updated_at = ?
WHERE status <> 'done' AND status = 'retry' AND next_attempt_at > ? AND next_attempt_at < `+sqliteParkedText+`
  AND provider IN (?`+strings.Repeat(", ?", len(providers)-1)+`)`, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("make the retries of %v due: %w", providers, err)
	}
	return int(n), nil
}
