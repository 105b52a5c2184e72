package journal

import (
	"context"
	"fmt"
	"time"
)

// RecordMinutes writes one replica's minute figures (see
// Postgres.RecordMinutes).
func (s *SQLite) RecordMinutes(ctx context.Context, replica string, ms []Minute) error {
	err := s.write(ctx, func(tx sqliteTx) error {
		for _, m := range ms {
			if _, err := tx.ExecContext(ctx, `
INSERT INTO whguard_minutes (minute, replica, provider, delivered, failed, dead, latency)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (minute, replica, provider) DO UPDATE SET
    delivered = excluded.delivered, failed = excluded.failed, dead = excluded.dead, latency = excluded.latency`,
				m.Minute.UnixNano(), replica, m.Provider, m.Delivered, m.Failed, m.Dead, latencyText(m.Latency)); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM whguard_minutes WHERE minute < ?`, s.now().Add(-MinuteRetention).UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("record minute figures: %w", err)
	}
	return nil
}

// Minutes reads the figures from since on (see Postgres.Minutes).
func (s *SQLite) Minutes(ctx context.Context, since time.Time) ([]Minute, error) {
	rows, err := s.r.QueryContext(ctx, `
SELECT minute, provider, delivered, failed, dead, latency FROM whguard_minutes
WHERE minute >= ? ORDER BY minute, provider`, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("read minute figures: %w", err)
	}
	var (
		out     []Minute
		m       Minute
		minute  int64
		latency string
	)
	if err := eachRow(rows, func() error {
		h, err := parseLatency(latency)
		if err != nil {
			return err
		}
		m.Minute, m.Latency = time.Unix(0, minute), h
		out = append(out, m)
		return nil
	}, &minute, &m.Provider, &m.Delivered, &m.Failed, &m.Dead, &latency); err != nil {
		return nil, fmt.Errorf("read minute figures: %w", err)
	}
	return out, nil
}
