package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Known reports which of ids the journal has for provider (at most
// maxCatchupIDs at once).
func (p *Postgres) Known(ctx context.Context, provider string, ids []string) (map[string]bool, error) {
	if len(ids) > maxCatchupIDs {
		return nil, fmt.Errorf("look up %d event ids: at most %d at once", len(ids), maxCatchupIDs)
	}
	rows, err := p.pool.Query(ctx, `SELECT event_id FROM whguard_events WHERE provider = $1 AND event_id = ANY($2::text[])`, provider, ids)
	if err != nil {
		return nil, fmt.Errorf("look up event ids: %w", err)
	}
	known := make(map[string]bool, len(ids))
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { known[id] = true; return nil }); err != nil {
		return nil, fmt.Errorf("look up event ids: %w", err)
	}
	return known, nil
}

// ClaimCatchup takes provider's pass for owner for leaseFor when nobody
// holds it and (unless force) it is due, and reports whether it did.
func (p *Postgres) ClaimCatchup(ctx context.Context, provider, owner string, leaseFor time.Duration, force bool) (bool, error) {
	var got string
	err := p.pool.QueryRow(ctx, `
INSERT INTO whguard_catchup AS c (provider, lease_owner, lease_until)
VALUES ($1, $2, now() + make_interval(secs => $3))
ON CONFLICT (provider) DO UPDATE SET lease_owner = excluded.lease_owner, lease_until = excluded.lease_until
WHERE (c.lease_until IS NULL OR c.lease_until < now())
  AND ($4 OR c.next_pass IS NULL OR c.next_pass <= now())
RETURNING provider`, provider, owner, leaseFor.Seconds(), force).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim the catch-up pass of %s: %w", provider, err)
	}
	return true, nil
}

// EndCatchup gives owner's pass back and, when pass is not nil, records
// it and when the next pass is due.
func (p *Postgres) EndCatchup(ctx context.Context, provider, owner string, pass *CatchupPass, next time.Time) error {
	var err error
	if pass == nil {
		_, err = p.pool.Exec(ctx, `UPDATE whguard_catchup SET lease_owner = NULL, lease_until = NULL
WHERE provider = $1 AND lease_owner = $2`, provider, owner)
	} else {
		passJSON, errJSON, eerr := encodePass(pass)
		if eerr != nil {
			return eerr
		}
		_, err = p.pool.Exec(ctx, `
UPDATE whguard_catchup SET lease_owner = NULL, lease_until = NULL, next_pass = $3, last_pass = $4,
       last_success = CASE WHEN $5::jsonb IS NULL THEN $6 ELSE last_success END,
       last_error = coalesce($5, last_error)
WHERE provider = $1 AND lease_owner = $2`, provider, owner, next, passJSON, errJSON, pass.Finished)
	}
	if err != nil {
		return fmt.Errorf("end the catch-up pass of %s: %w", provider, err)
	}
	return nil
}

// CatchupStates reads every provider's catch-up state.
func (p *Postgres) CatchupStates(ctx context.Context) ([]CatchupState, error) {
	rows, err := p.pool.Query(ctx, `SELECT provider, next_pass, last_success, last_pass, last_error FROM whguard_catchup ORDER BY provider`)
	if err != nil {
		return nil, fmt.Errorf("read catch-up states: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CatchupState, error) {
		var (
			s                 CatchupState
			next, success     *time.Time
			passJSON, errJSON []byte
		)
		if err := r.Scan(&s.Provider, &next, &success, &passJSON, &errJSON); err != nil {
			return s, err
		}
		if next != nil {
			s.NextPass = *next
		}
		if success != nil {
			s.LastSuccess = *success
		}
		return s, decodeState(&s, passJSON, errJSON)
	})
	if err != nil {
		return nil, fmt.Errorf("read catch-up states: %w", err)
	}
	return out, nil
}

// CatchupRequests reads the redeliveries catch-up asked of provider.
func (p *Postgres) CatchupRequests(ctx context.Context, provider string) ([]CatchupRequest, error) {
	rows, err := p.pool.Query(ctx, `SELECT guid, delivery_id, requests, last_at, gave_up FROM whguard_catchup_requests
WHERE provider = $1 ORDER BY guid`, provider)
	if err != nil {
		return nil, fmt.Errorf("read catch-up requests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CatchupRequest, error) {
		var c CatchupRequest
		err := r.Scan(&c.GUID, &c.DeliveryID, &c.Requests, &c.LastAt, &c.GaveUp)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read catch-up requests: %w", err)
	}
	return out, nil
}

// SaveCatchupRequest records a redelivery asked of provider, or its
// giving up.
func (p *Postgres) SaveCatchupRequest(ctx context.Context, provider string, r CatchupRequest) error {
	_, err := p.pool.Exec(ctx, `
INSERT INTO whguard_catchup_requests (provider, guid, delivery_id, requests, last_at, gave_up)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (provider, guid) DO UPDATE SET delivery_id = excluded.delivery_id, requests = excluded.requests,
       last_at = excluded.last_at, gave_up = excluded.gave_up`, provider, r.GUID, r.DeliveryID, r.Requests, r.LastAt, r.GaveUp)
	if err != nil {
		return fmt.Errorf("record a catch-up request: %w", err)
	}
	return nil
}

// ForgetCatchupRequests drops provider's requests for guids (they
// arrived) and those last asked before before (out of the provider's
// window).
func (p *Postgres) ForgetCatchupRequests(ctx context.Context, provider string, guids []string, before time.Time) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM whguard_catchup_requests
WHERE provider = $1 AND (guid = ANY($2::text[]) OR last_at < $3)`, provider, guids, before)
	if err != nil {
		return fmt.Errorf("forget catch-up requests: %w", err)
	}
	return nil
}
