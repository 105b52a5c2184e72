package journal

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"time"
)

var errNoPayload = errors.New("payload dropped")

const sqliteSummaryColumns = `id, provider, event_id, event_type, status, attempts, received_at, next_attempt_at, last_error, hold_reason`

func scanSQLiteSummary(sc interface{ Scan(...any) error }) (Summary, error) {
	var (
		sm           Summary
		recv, nextAt int64
	)
	err := sc.Scan(&sm.ID, &sm.Provider, &sm.EventID, &sm.EventType, &sm.Status, &sm.Attempts, &recv, &nextAt, &sm.LastError, &sm.Held)
	sm.ReceivedAt, sm.NextAttemptAt = time.Unix(0, recv).UTC(), time.Unix(0, nextAt).UTC()
	return sm, err
}

// List returns events newest first and the next cursor.
func (s *SQLite) List(ctx context.Context, f Filter) ([]Summary, int64, error) {
	lim := f.limit()
	var since any
	if !f.Since.IsZero() {
		since = f.Since.UnixNano()
	}
	rows, err := s.r.QueryContext(ctx, `
SELECT `+sqliteSummaryColumns+` FROM whguard_events
WHERE (? = '' OR status = ?) AND (? = '' OR provider = ?) AND (? = 0 OR id < ?) AND (? IS NULL OR received_at >= ?)
ORDER BY id DESC LIMIT ?`, string(f.Status), string(f.Status), f.Provider, f.Provider, f.Before, f.Before, since, since, lim+1)
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	var out []Summary
	if err := eachRow(rows, func() error {
		sm, err := scanSQLiteSummary(rows)
		out = append(out, sm)
		return err
	}); err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	var next int64
	if len(out) > lim {
		out = out[:lim]
		next = out[lim-1].ID
	}
	return out, next, nil
}

// Get returns one event with its payload, attempts and replays.
func (s *SQLite) Get(ctx context.Context, id int64) (*Detail, error) {
	var d Detail
	sm, err := scanSQLiteSummary(s.r.QueryRowContext(ctx, `SELECT `+sqliteSummaryColumns+` FROM whguard_events WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get event %d: %w", id, err)
	}
	d.Summary = sm
	var (
		headers sql.NullString
		body    []byte
	)
	err = s.r.QueryRowContext(ctx, `SELECT headers, body, path, raw_query FROM whguard_payloads WHERE event_row_id = ?`, id).
		Scan(&headers, &body, &d.Path, &d.RawQuery)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get payload of event %d: %w", id, err)
	}
	d.Headers = http.Header{}
	if headers.Valid {
		if d.Headers, err = decodeHeaders(headers.String); err != nil {
			return nil, fmt.Errorf("decode headers of event %d: %w", id, err)
		}
	}
	setBody(&d, nonNil(body))
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM whguard_conflicts WHERE event_row_id = ?`, id).Scan(&d.Conflicts); err != nil {
		return nil, fmt.Errorf("count conflicts of event %d: %w", id, err)
	}
	rows, err := s.r.QueryContext(ctx, `
SELECT number, started_at, duration_ms, status_code, error, response_excerpt
FROM whguard_attempts WHERE event_row_id = ? ORDER BY number, id`, id)
	if err != nil {
		return nil, fmt.Errorf("get attempts of event %d: %w", id, err)
	}
	d.AttemptLog = []Attempt{}
	var (
		a       Attempt
		started int64
	)
	if err := eachRow(rows, func() error {
		a.StartedAt = time.Unix(0, started).UTC()
		d.AttemptLog = append(d.AttemptLog, a)
		return nil
	}, &a.Number, &started, &a.DurationMS, &a.StatusCode, &a.Error, &a.ResponseExcerpt); err != nil {
		return nil, fmt.Errorf("get attempts of event %d: %w", id, err)
	}
	rows, err = s.r.QueryContext(ctx, `SELECT from_status, reason, replayed_at FROM whguard_replays WHERE event_row_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("get replays of event %d: %w", id, err)
	}
	d.Replays = []Replay{}
	var (
		rp Replay
		at int64
	)
	if err := eachRow(rows, func() error {
		rp.ReplayedAt = time.Unix(0, at).UTC()
		d.Replays = append(d.Replays, rp)
		return nil
	}, &rp.FromStatus, &rp.Reason, &at); err != nil {
		return nil, fmt.Errorf("get replays of event %d: %w", id, err)
	}
	return &d, nil
}

// Replay sends a dead or done event back to retry with a fresh budget and
// audits why.
func (s *SQLite) Replay(ctx context.Context, id int64, reason string) error {
	var (
		from       Status
		hasPayload bool
	)
	err := s.write(ctx, func(tx sqliteTx) error {
		if err := tx.QueryRowContext(ctx, `SELECT status, EXISTS (SELECT 1 FROM whguard_payloads WHERE event_row_id = ?)
			FROM whguard_events WHERE id = ?`, id, id).Scan(&from, &hasPayload); err != nil {
			return err
		}
		if from != StatusDead && from != StatusDone {
			return ErrNotReplayable
		}
		if !hasPayload {
			return errNoPayload
		}
		return s.replayOne(ctx, tx, id, from, reason)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case errors.Is(err, errNoPayload):
		return fmt.Errorf("event %d: its payload was dropped by retention: %w", id, ErrNotReplayable)
	case errors.Is(err, ErrNotReplayable):
		return fmt.Errorf("event %d is %s: %w", id, from, ErrNotReplayable)
	case err != nil:
		return fmt.Errorf("replay event %d: %w", id, err)
	}
	return nil
}

func (s *SQLite) replayOne(ctx context.Context, tx sqliteTx, id int64, from Status, reason string) error {
	now := s.now().UnixNano()
	if _, err := tx.ExecContext(ctx, `
UPDATE whguard_events SET status = 'retry', next_attempt_at = ?, budget_base = attempts, updated_at = ?
WHERE id = ?`, now, now, id); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO whguard_replays (event_row_id, from_status, reason, replayed_at) VALUES (?, ?, ?, ?)`,
		id, string(from), reason, now)
	return err
}

// BulkReplay replays matching dead or done events in batches of 100,
// walking ids forward up to the newest id at its start.
func (s *SQLite) BulkReplay(ctx context.Context, f Filter, reason string) (int, error) {
	status := cmp.Or(f.Status, StatusDead)
	if status != StatusDead && status != StatusDone {
		return 0, fmt.Errorf("bulk replay of %s events: %w", status, ErrNotReplayable)
	}
	var since any
	if !f.Since.IsZero() {
		since = f.Since.UnixNano()
	}
	var ceiling int64
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM whguard_events`).Scan(&ceiling); err != nil {
		return 0, fmt.Errorf("bulk replay: read newest id: %w", err)
	}
	total := 0
	var after int64
	for f.Limit == 0 || total < f.Limit {
		batch := replayBatch
		if f.Limit > 0 {
			batch = min(batch, f.Limit-total)
		}
		n, last := 0, int64(0)
		err := s.write(ctx, func(tx sqliteTx) error {
			rows, err := tx.QueryContext(ctx, `
SELECT id FROM whguard_events e
WHERE status = ? AND (? = '' OR provider = ?) AND (? IS NULL OR received_at >= ?) AND id > ? AND id <= ?
  AND EXISTS (SELECT 1 FROM whguard_payloads p WHERE p.event_row_id = e.id)
ORDER BY id LIMIT ?`, string(status), f.Provider, f.Provider, since, since, after, ceiling, batch)
			if err != nil {
				return err
			}
			var ids []int64
			var id int64
			if err := eachRow(rows, func() error {
				ids = append(ids, id)
				return nil
			}, &id); err != nil {
				return err
			}
			for _, id := range ids {
				if err := s.replayOne(ctx, tx, id, status, reason); err != nil {
					return err
				}
				n++
				last = id
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("bulk replay: %w", err)
		}
		total += n
		if n < batch {
			break
		}
		after = last
	}
	return total, nil
}

// Stats counts events by status and measures the oldest undelivered one.
func (s *SQLite) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByStatus: map[Status]int{}, OldestUndelivered: map[string]time.Duration{}}
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
SELECT provider, min(received_at) FROM whguard_events
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
		return nil
	}, &provider, &oldest); err != nil {
		return st, fmt.Errorf("oldest undelivered: %w", err)
	}
	return st, nil
}
