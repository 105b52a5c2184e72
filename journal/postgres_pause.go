package journal

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Pause records p (a pause already there keeps its since, takes the new
// reason) and returns it as stored.
func (p *Postgres) Pause(ctx context.Context, pa Pause) (Pause, error) {
	if err := checkPause(pa.Kind, pa.Name); err != nil {
		return Pause{}, err
	}
	pa.Reason = storableText(pa.Reason, maxPauseText)
	err := p.pool.QueryRow(ctx, sqlPause, pa.Kind, pa.Name, pa.Reason).Scan(&pa.Since)
	if err != nil {
		return Pause{}, fmt.Errorf("pause %s %s: %w", pa.Kind, pa.Name, err)
	}
	return pa, nil
}

// Resume ends a pause, reporting whether there was one, and makes the
// deliveries it held due at once (those of another pause still in force
// are held again when leased).
func (p *Postgres) Resume(ctx context.Context, kind, name string) (bool, error) {
	if err := checkPause(kind, name); err != nil {
		return false, err
	}
	var found bool
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM whguard_pauses WHERE kind = $1 AND name = $2`, kind, name)
		if err != nil {
			return err
		}
		found = tag.RowsAffected() > 0
		_, err = tx.Exec(ctx, sqlWakePaused, HoldPaused)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("resume %s %s: %w", kind, name, err)
	}
	return found, nil
}

// WakePaused makes every delivery held by a pause due now, ending no
// pause: those of a pause still in force are held again when leased. A
// replica that held deliveries for a pause it did not yet know was
// lifted calls it.
func (p *Postgres) WakePaused(ctx context.Context) error {
	if _, err := p.pool.Exec(ctx, sqlWakePaused, HoldPaused); err != nil {
		return fmt.Errorf("wake paused deliveries: %w", err)
	}
	return nil
}

// Pauses lists the pauses in force, oldest first.
func (p *Postgres) Pauses(ctx context.Context) ([]Pause, error) {
	rows, err := p.pool.Query(ctx, `SELECT kind, name, reason, since FROM whguard_pauses ORDER BY since, kind, name`)
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Pause, error) {
		var pa Pause
		err := r.Scan(&pa.Kind, &pa.Name, &pa.Reason, &pa.Since)
		return pa, err
	})
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return out, nil
}

const sqlPause = `
INSERT INTO whguard_pauses (kind, name, reason) VALUES ($1, $2, $3)
ON CONFLICT (kind, name) DO UPDATE SET reason = EXCLUDED.reason
RETURNING since`

// sqlWakePaused makes the deliveries held by a pause due now.
const sqlWakePaused = `
UPDATE whguard_events SET next_attempt_at = now()
WHERE status IN ('pending', 'retry') AND hold_reason = $1 AND next_attempt_at > now()`
