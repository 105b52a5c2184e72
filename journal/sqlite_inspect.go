package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

const sqliteSummaryColumns = `id, provider, event_id, event_type, status, attempts, received_at, next_attempt_at, last_error,
  CASE WHEN order_key IS NOT NULL AND status IN ('pending', 'retry') AND EXISTS (
      SELECT 1 FROM whguard_events b WHERE b.order_holds = 1 AND b.provider = whguard_events.provider
      AND b.order_key = whguard_events.order_key AND b.id < whguard_events.id) THEN 'order' ELSE hold_reason END,
  coalesce(order_key, ''), source`

func scanSQLiteSummary(sc interface{ Scan(...any) error }) (Summary, error) {
	var (
		sm           Summary
		recv, nextAt int64
	)
	err := sc.Scan(&sm.ID, &sm.Provider, &sm.EventID, &sm.EventType, &sm.Status, &sm.Attempts, &recv, &nextAt, &sm.LastError, &sm.Held, &sm.OrderKey, &sm.Source)
	sm.ReceivedAt, sm.NextAttemptAt = time.Unix(0, recv).UTC(), time.Unix(0, nextAt).UTC()
	return sm, err
}

// List returns events newest first and the next cursor.
func (s *SQLite) List(ctx context.Context, f Filter) ([]Summary, int64, error) {
	return listEvents(ctx, s, f)
}

func (s *SQLite) listPage(ctx context.Context, f Filter, n int) ([]Summary, error) {
	since := sqliteSince(f.Since)
	providers := providersFilter(f)
	inProviders := "1"
	args := []any{string(f.Status), string(f.Status), f.Provider, f.Provider, f.Before, f.Before, since, since,
		f.EventID, f.EventIDPrefix, f.EventID, f.EventID, f.EventID}
	if len(providers) > 0 {
		inProviders = "provider IN (?" + strings.Repeat(", ?", len(providers)-1) + ")"
		for _, p := range providers {
			args = append(args, p)
		}
	}
	types := "1"
	if len(f.Types) > 0 {
		types = "(event_type GLOB ?" + strings.Repeat(" OR event_type GLOB ?", len(f.Types)-1) + ")"
		for _, t := range f.Types {
			args = append(args, globPattern(t))
		}
	}
	until := sqliteSince(f.Until)
	args = append(args, until, until, f.WithPayload)
	rows, err := s.r.QueryContext(ctx, `
SELECT `+sqliteSummaryColumns+` FROM whguard_events
WHERE (? = '' OR status = ?) AND (? = '' OR provider = ?) AND (? = 0 OR id < ?) AND (? IS NULL OR received_at >= ?)
  AND (? = '' OR CASE WHEN ? THEN substr(event_id, 1, length(?)) = ? ELSE event_id = ? END)
  AND `+inProviders+` AND `+types+` AND (? IS NULL OR received_at < ?)
  AND (NOT ? OR EXISTS (SELECT 1 FROM whguard_payloads p WHERE p.event_row_id = whguard_events.id))
ORDER BY id DESC LIMIT ?`, append(args, n)...)
	if err != nil {
		return nil, err
	}
	var out []Summary
	err = eachRow(rows, func() error {
		sm, err := scanSQLiteSummary(rows)
		out = append(out, sm)
		return err
	})
	return out, err
}

func (s *SQLite) eachBody(ctx context.Context, ids []int64, fn func(id int64, body []byte) error) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.r.QueryContext(ctx, `SELECT event_row_id, body FROM whguard_payloads WHERE event_row_id IN (?`+
		strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return err
	}
	var (
		id   int64
		body sql.RawBytes // the driver's row, not copied
	)
	return eachRow(rows, func() error { return fn(id, body) }, &id, &body)
}

// Conflicts returns the copies of event id received with other content,
// oldest first.
func (s *SQLite) Conflicts(ctx context.Context, id int64) ([]ConflictCopy, error) {
	return listConflicts(ctx, s, id)
}

func (s *SQLite) listConflicts(ctx context.Context, id int64) ([]storedConflict, error) {
	rows, err := s.r.QueryContext(ctx, `
SELECT content_hash, received_at, headers, body FROM whguard_conflicts WHERE event_row_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, err
	}
	var (
		c   storedConflict
		at  int64
		out []storedConflict
	)
	err = eachRow(rows, func() error {
		c.receivedAt = time.Unix(0, at)
		out = append(out, c)
		return nil
	}, &c.hash, &at, &c.headers, &c.body)
	return out, err
}

// sqliteSince binds an optional bound on received_at: NULL when t is
// zero (no bound), else its Unix nanoseconds, clamped to what they can
// hold (years 1678 to 2262): a bound beyond them is beyond every event.
func sqliteSince(t time.Time) any {
	switch {
	case t.IsZero():
		return nil
	case t.After(maxUnixNano):
		return int64(math.MaxInt64)
	case t.Before(minUnixNano):
		return int64(math.MinInt64)
	}
	return t.UnixNano()
}

var (
	maxUnixNano = time.Unix(0, math.MaxInt64)
	minUnixNano = time.Unix(0, math.MinInt64)
)

// Get returns one event with its payload, attempts and replays.
func (s *SQLite) Get(ctx context.Context, id int64) (*Detail, error) {
	return getEvent(ctx, s, id)
}

func (s *SQLite) getEvent(ctx context.Context, id int64) (*Detail, storedPayload, error) {
	var (
		d       Detail
		headers sql.NullString
		pl      storedPayload
	)
	sm, err := scanSQLiteSummary(s.r.QueryRowContext(ctx, `SELECT `+sqliteSummaryColumns+` FROM whguard_events WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, pl, ErrNotFound
	}
	if err != nil {
		return nil, pl, fmt.Errorf("get event %d: %w", id, err)
	}
	d.Summary = sm
	err = s.r.QueryRowContext(ctx, `SELECT headers, body, path, raw_query, coalesce(scheme, '') FROM whguard_payloads WHERE event_row_id = ?`, id).
		Scan(&headers, &pl.body, &d.Path, &d.RawQuery, &d.Scheme)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, pl, fmt.Errorf("get payload of event %d: %w", id, err)
	}
	pl.headers, pl.kept = headers.String, headers.Valid
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM whguard_conflicts WHERE event_row_id = ?`, id).Scan(&d.Conflicts); err != nil {
		return nil, pl, fmt.Errorf("count conflicts of event %d: %w", id, err)
	}
	if err := s.r.QueryRowContext(ctx, `
SELECT ev.order_holds, coalesce((SELECT min(b.id) FROM whguard_events b WHERE b.order_holds = 1 AND b.provider = ev.provider
                                 AND b.order_key = ev.order_key AND b.id < ev.id), 0)
FROM whguard_events ev WHERE ev.id = ?`, id).Scan(&d.HoldsKey, &d.WaitingFor); err != nil {
		return nil, pl, fmt.Errorf("read order state of event %d: %w", id, err)
	}
	rows, err := s.r.QueryContext(ctx, sqliteAttemptsOf, id)
	if err != nil {
		return nil, pl, fmt.Errorf("get attempts of event %d: %w", id, err)
	}
	var (
		a       Attempt
		started int64
		sent    string
	)
	if err := eachRow(rows, func() error {
		a.StartedAt = time.Unix(0, started).UTC()
		var err error
		if a.Sent, err = decodeDelta(sent); err != nil {
			return err
		}
		d.AttemptLog = append(d.AttemptLog, a)
		return nil
	}, &a.Number, &started, &a.DurationMS, &a.StatusCode, &a.Error, &a.ResponseExcerpt, &sent); err != nil {
		return nil, pl, fmt.Errorf("get attempts of event %d: %w", id, err)
	}
	rows, err = s.r.QueryContext(ctx, `SELECT action, from_status, reason, replayed_at FROM whguard_replays WHERE event_row_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, pl, fmt.Errorf("get replays of event %d: %w", id, err)
	}
	var (
		rp Replay
		at int64
	)
	if err := eachRow(rows, func() error {
		rp.ReplayedAt = time.Unix(0, at).UTC()
		d.Replays = append(d.Replays, rp)
		return nil
	}, &rp.Action, &rp.FromStatus, &rp.Reason, &at); err != nil {
		return nil, pl, fmt.Errorf("get replays of event %d: %w", id, err)
	}
	return &d, pl, nil
}

// Replay sends a dead, done or ignored event back to retry with a fresh budget and
// audits why.
func (s *SQLite) Replay(ctx context.Context, id int64, reason string) error {
	return replayEvent(ctx, s, id, reason)
}

// replayEvent looks at the event and replays it in the same transaction
// (the single writer: nothing changes it in between).
func (s *SQLite) replayEvent(ctx context.Context, id int64, reason string) (replayTarget, error) {
	var t replayTarget
	err := s.write(ctx, func(tx sqliteTx) error {
		err := tx.QueryRowContext(ctx, `SELECT status, EXISTS (SELECT 1 FROM whguard_payloads WHERE event_row_id = ?)
			FROM whguard_events WHERE id = ?`, id, id).Scan(&t.status, &t.hasPayload)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		t.found = true
		if !t.replayable() {
			return nil
		}
		if err := s.replayOne(ctx, tx, id, t.status, reason); err != nil {
			return err
		}
		t.replayed = true
		return nil
	})
	return t, err
}

func (s *SQLite) replayOne(ctx context.Context, tx sqliteTx, id int64, from Status, reason string) error {
	now := s.now().UnixNano()
	if _, err := tx.ExecContext(ctx, `
UPDATE whguard_events SET status = 'retry', next_attempt_at = ?, budget_base = attempts, updated_at = ?,
    order_holds = order_key IS NOT NULL
WHERE id = ?`, now, now, id); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO whguard_replays (event_row_id, from_status, reason, replayed_at) VALUES (?, ?, ?, ?)`,
		id, string(from), reason, now)
	return err
}

// BulkReplay replays matching dead, done or ignored events in batches of 100,
// walking ids forward up to the newest id at its start.
func (s *SQLite) BulkReplay(ctx context.Context, f Filter, reason string) (int, error) {
	return bulkReplay(ctx, s, f, reason, false)
}

// CountReplayable counts the events BulkReplay would replay with f.
func (s *SQLite) CountReplayable(ctx context.Context, f Filter) (int, error) {
	return bulkReplay(ctx, s, f, "", true)
}

func (s *SQLite) replayIDs(ctx context.Context, ids []int64, reason string) (int, error) {
	n := 0
	err := s.write(ctx, func(tx sqliteTx) error {
		n = 0
		for _, id := range ids {
			var (
				t   replayTarget
				err error
			)
			err = tx.QueryRowContext(ctx, `SELECT status, EXISTS (SELECT 1 FROM whguard_payloads WHERE event_row_id = ?)
				FROM whguard_events WHERE id = ?`, id, id).Scan(&t.status, &t.hasPayload)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			t.found = true
			if !t.replayable() {
				continue
			}
			if err := s.replayOne(ctx, tx, id, t.status, reason); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// Stats counts events by status and measures the oldest undelivered one.
func (s *SQLite) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByStatus: map[Status]int{}, OldestUndelivered: map[string]time.Duration{}, Undelivered: map[string]int{}}
	rows, err := s.r.QueryContext(ctx, `SELECT status, count(*) FROM whguard_events GROUP BY status`)
	if err != nil {
		return st, fmt.Errorf("count events: %w", err)
	}
	var (
		status string
		n      int
	)
	if err := eachRow(rows, func() error {
		st.ByStatus[Status(status)] = n
		return nil
	}, &status, &n); err != nil {
		return st, fmt.Errorf("count events: %w", err)
	}
	rows, err = s.r.QueryContext(ctx, `
SELECT provider, count(*), min(received_at) FROM whguard_events
WHERE status IN ('pending', 'retry', 'processing') GROUP BY provider`)
	if err != nil {
		return st, fmt.Errorf("oldest undelivered: %w", err)
	}
	now := s.now()
	var (
		provider string
		oldest   int64
	)
	if err := eachRow(rows, func() error {
		st.OldestUndelivered[provider] = now.Sub(time.Unix(0, oldest))
		st.Undelivered[provider] = n
		return nil
	}, &provider, &n, &oldest); err != nil {
		return st, fmt.Errorf("oldest undelivered: %w", err)
	}
	rows, err = s.r.QueryContext(ctx, `SELECT provider, count(*) FROM whguard_events WHERE order_holds = 1 AND status = 'dead' GROUP BY provider`)
	if err != nil {
		return st, fmt.Errorf("count blocked keys: %w", err)
	}
	st.BlockedKeys = map[string]int{}
	if err := eachRow(rows, func() error { st.BlockedKeys[provider] = n; return nil }, &provider, &n); err != nil {
		return st, fmt.Errorf("count blocked keys: %w", err)
	}
	return st, nil
}

// Skip releases the order key of a dead event that still holds it (see
// Postgres.Skip).
func (s *SQLite) Skip(ctx context.Context, id int64, reason string) error {
	var skipped, found bool
	err := s.write(ctx, func(tx sqliteTx) error {
		now := s.now().UnixNano()
		res, err := tx.ExecContext(ctx, `UPDATE whguard_events SET order_holds = 0, updated_at = ?
WHERE id = ? AND order_holds = 1 AND status = 'dead'`, now, id)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		if skipped = n == 1; skipped {
			found = true
			var provider, key string
			if err := tx.QueryRowContext(ctx, `SELECT provider, order_key FROM whguard_events WHERE id = ?`, id).Scan(&provider, &key); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, sqliteUnparkNext, now, provider, key, id); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO whguard_replays (event_row_id, action, from_status, reason, replayed_at) VALUES (?, 'skip', 'dead', ?, ?)`,
				id, reason, now)
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM whguard_events WHERE id = ?)`, id).Scan(&found)
	})
	if err != nil {
		return fmt.Errorf("skip event %d: %w", id, err)
	}
	return skipRefusal(id, skipped, found)
}
