package journal

import (
	"context"
	"fmt"
	"time"
)

// Pause records pa (see Postgres.Pause).
func (s *SQLite) Pause(ctx context.Context, pa Pause) (Pause, error) {
	if err := checkPause(pa.Kind, pa.Name); err != nil {
		return Pause{}, err
	}
	pa.Reason = storableText(pa.Reason, maxPauseText)
	var since int64
	err := s.write(ctx, func(tx sqliteTx) error {
		return tx.QueryRowContext(ctx, `
INSERT INTO whguard_pauses (kind, name, reason, since) VALUES (?, ?, ?, ?)
ON CONFLICT (kind, name) DO UPDATE SET reason = excluded.reason
RETURNING since`, pa.Kind, pa.Name, pa.Reason, s.now().UnixNano()).Scan(&since)
	})
	if err != nil {
		return Pause{}, fmt.Errorf("pause %s %s: %w", pa.Kind, pa.Name, err)
	}
	pa.Since = time.Unix(0, since)
	return pa, nil
}

// Resume ends a pause (see Postgres.Resume).
func (s *SQLite) Resume(ctx context.Context, kind, name string) (bool, error) {
	if err := checkPause(kind, name); err != nil {
		return false, err
	}
	var found bool
	err := s.write(ctx, func(tx sqliteTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM whguard_pauses WHERE kind = ? AND name = ?`, kind, name)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		found = n > 0
		now := s.now().UnixNano()
		_, err = tx.ExecContext(ctx, `
UPDATE whguard_events SET next_attempt_at = ?
WHERE status IN ('pending', 'retry') AND hold_reason = ? AND next_attempt_at > ?`, now, HoldPaused, now)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("resume %s %s: %w", kind, name, err)
	}
	return found, nil
}

// WakePaused makes every delivery held by a pause due now, ending no
// pause (see Postgres.WakePaused).
func (s *SQLite) WakePaused(ctx context.Context) error {
	err := s.write(ctx, func(tx sqliteTx) error {
		now := s.now().UnixNano()
		_, err := tx.ExecContext(ctx, `
UPDATE whguard_events SET next_attempt_at = ?
WHERE status IN ('pending', 'retry') AND hold_reason = ? AND next_attempt_at > ?`, now, HoldPaused, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("wake paused deliveries: %w", err)
	}
	return nil
}

// Pauses lists the pauses in force, oldest first.
func (s *SQLite) Pauses(ctx context.Context) ([]Pause, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT kind, name, reason, since FROM whguard_pauses ORDER BY since, kind, name`)
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	var (
		out   []Pause
		pa    Pause
		since int64
	)
	if err := eachRow(rows, func() error {
		pa.Since = time.Unix(0, since)
		out = append(out, pa)
		return nil
	}, &pa.Kind, &pa.Name, &pa.Reason, &since); err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return out, nil
}
