package journal

import (
	"context"
	"time"
)

// Cleanup applies retention, as Postgres.Cleanup does. One process owns
// the file, so there is no other cleaner to exclude.
func (s *SQLite) Cleanup(ctx context.Context, keysBefore, payloadsBefore time.Time) (Cleaned, error) {
	return cleanup(ctx, s, keysBefore, payloadsBefore)
}

func (s *SQLite) cleanupEvents(ctx context.Context, before time.Time, n int) (int, error) {
	return s.cleanupStep(ctx, sqliteCleanupEvents, before, n)
}

func (s *SQLite) cleanupPayloads(ctx context.Context, before time.Time, n int) (int, error) {
	return s.cleanupStep(ctx, sqliteCleanupPayloads, before, n)
}

// cleanupStep runs one retention statement in a durable write.
func (s *SQLite) cleanupStep(ctx context.Context, query string, before time.Time, n int) (int, error) {
	var deleted int64
	err := s.write(ctx, func(tx sqliteTx) error {
		res, err := tx.ExecContext(ctx, query, before.UnixNano(), n)
		if err != nil {
			return err
		}
		deleted, _ = res.RowsAffected()
		return nil
	})
	return int(deleted), err
}

const sqliteCleanupEvents = `
DELETE FROM whguard_events WHERE id IN (
    SELECT id FROM whguard_events WHERE status IN ('done', 'ignored') AND updated_at < ? ORDER BY updated_at, id LIMIT ?)`

const sqliteCleanupPayloads = `
DELETE FROM whguard_payloads WHERE event_row_id IN (
    SELECT ev.id FROM whguard_events ev JOIN whguard_payloads p ON p.event_row_id = ev.id
    WHERE ev.status IN ('done', 'ignored') AND ev.updated_at < ? ORDER BY ev.updated_at, ev.id LIMIT ?)`
