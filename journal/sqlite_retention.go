package journal

import (
	"context"
	"fmt"
	"time"
)

// Cleanup applies retention, as Postgres.Cleanup does.
func (s *SQLite) Cleanup(ctx context.Context, keysBefore, payloadsBefore time.Time) (Cleaned, error) {
	var c Cleaned
	for _, step := range []struct {
		sql    string
		before time.Time
		count  *int
	}{
		{sqliteCleanupEvents, keysBefore, &c.Events},
		{sqliteCleanupPayloads, payloadsBefore, &c.Payloads},
	} {
		for {
			var n int64
			err := s.write(ctx, func(tx sqliteTx) error {
				res, err := tx.ExecContext(ctx, step.sql, step.before.UnixNano(), cleanupBatch)
				if err != nil {
					return err
				}
				n, _ = res.RowsAffected()
				return nil
			})
			if err != nil {
				return c, fmt.Errorf("retention cleanup: %w", err)
			}
			*step.count += int(n)
			if n < cleanupBatch {
				break
			}
		}
	}
	return c, nil
}

const sqliteCleanupEvents = `
DELETE FROM whguard_events WHERE id IN (
    SELECT id FROM whguard_events WHERE status = 'done' AND updated_at < ? ORDER BY updated_at, id LIMIT ?)`

const sqliteCleanupPayloads = `
DELETE FROM whguard_payloads WHERE event_row_id IN (
    SELECT ev.id FROM whguard_events ev JOIN whguard_payloads p ON p.event_row_id = ev.id
    WHERE ev.status = 'done' AND ev.updated_at < ? ORDER BY ev.updated_at, ev.id LIMIT ?)`
