package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordMinutes writes one replica's figures for the minutes in ms,
// replacing what that replica wrote before for the same minute and
// provider, and drops figures older than MinuteRetention.
func (p *Postgres) RecordMinutes(ctx context.Context, replica string, ms []Minute) error {
	b := &pgx.Batch{}
	for _, m := range ms {
		b.Queue(`
INSERT INTO whguard_minutes (minute, replica, provider, delivered, failed, dead, latency)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (minute, replica, provider) DO UPDATE SET
    delivered = excluded.delivered, failed = excluded.failed, dead = excluded.dead, latency = excluded.latency`,
			m.Minute.UTC(), replica, m.Provider, m.Delivered, m.Failed, m.Dead, latencyText(m.Latency))
	}
	b.Queue(`DELETE FROM whguard_minutes WHERE minute < now() - make_interval(secs => $1)`, MinuteRetention.Seconds())
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record minute figures: %w", err)
	}
	return nil
}

// Minutes reads the figures of every replica and provider from since on,
// oldest first.
func (p *Postgres) Minutes(ctx context.Context, since time.Time) ([]Minute, error) {
	rows, err := p.pool.Query(ctx, `
SELECT minute, provider, delivered, failed, dead, latency FROM whguard_minutes
WHERE minute >= $1 ORDER BY minute, provider`, since.UTC())
	if err != nil {
		return nil, fmt.Errorf("read minute figures: %w", err)
	}
	var (
		out     []Minute
		m       Minute
		latency string
	)
	_, err = pgx.ForEachRow(rows, []any{&m.Minute, &m.Provider, &m.Delivered, &m.Failed, &m.Dead, &latency}, func() error {
		h, err := parseLatency(latency)
		if err != nil {
			return err
		}
		m.Latency = h
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read minute figures: %w", err)
	}
	return out, nil
}
