package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Known reports which of ids the journal has for provider (at most
// maxCatchupIDs at once).
func (s *SQLite) Known(ctx context.Context, provider string, ids []string) (map[string]bool, error) {
	if len(ids) > maxCatchupIDs {
		return nil, fmt.Errorf("look up %d event ids: at most %d at once", len(ids), maxCatchupIDs)
	}
	known := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return known, nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, provider)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT event_id FROM whguard_events WHERE provider = ? AND event_id IN (?`+
		strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("look up event ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("look up event ids: %w", err)
		}
		known[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up event ids: %w", err)
	}
	return known, nil
}

// ClaimCatchup takes provider's pass for owner for leaseFor when nobody
// holds it and (unless force) it is due, and reports whether it did.
func (s *SQLite) ClaimCatchup(ctx context.Context, provider, owner string, leaseFor time.Duration, force bool) (bool, error) {
	got := false
	err := s.write(ctx, func(tx sqliteTx) error {
		now := s.now().UnixNano()
		var id string
		err := tx.QueryRowContext(ctx, `
INSERT INTO whguard_catchup AS c (provider, lease_owner, lease_until) VALUES (?1, ?2, ?3 + ?4)
ON CONFLICT (provider) DO UPDATE SET lease_owner = excluded.lease_owner, lease_until = excluded.lease_until
WHERE (c.lease_until IS NULL OR c.lease_until < ?3) AND (?5 OR c.next_pass IS NULL OR c.next_pass <= ?3)
RETURNING provider`, provider, owner, now, leaseFor.Nanoseconds(), force).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		got = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("claim the catch-up pass of %s: %w", provider, err)
	}
	return got, nil
}

// EndCatchup gives owner's pass back and, when pass is not nil, records
// it and when the next pass is due.
func (s *SQLite) EndCatchup(ctx context.Context, provider, owner string, pass *CatchupPass, next time.Time) error {
	err := s.write(ctx, func(tx sqliteTx) error {
		if pass == nil {
			_, err := tx.ExecContext(ctx, `UPDATE whguard_catchup SET lease_owner = NULL, lease_until = NULL
WHERE provider = ? AND lease_owner = ?`, provider, owner)
			return err
		}
		passJSON, errJSON, err := encodePass(pass)
		if err != nil {
			return err
		}
		var errText any
		if errJSON != nil {
			errText = string(errJSON)
		}
		_, err = tx.ExecContext(ctx, `
UPDATE whguard_catchup SET lease_owner = NULL, lease_until = NULL, next_pass = ?3, last_pass = ?4,
       last_success = CASE WHEN ?5 IS NULL THEN ?6 ELSE last_success END,
       last_error = coalesce(?5, last_error)
WHERE provider = ?1 AND lease_owner = ?2`, provider, owner, next.UnixNano(), string(passJSON), errText, pass.Finished.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("end the catch-up pass of %s: %w", provider, err)
	}
	return nil
}

// CatchupStates reads every provider's catch-up state.
func (s *SQLite) CatchupStates(ctx context.Context) ([]CatchupState, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT provider, next_pass, last_success, last_pass, last_error FROM whguard_catchup ORDER BY provider`)
	if err != nil {
		return nil, fmt.Errorf("read catch-up states: %w", err)
	}
	defer rows.Close()
	var out []CatchupState
	for rows.Next() {
		var (
			st                CatchupState
			next, success     sql.NullInt64
			passJSON, errJSON sql.NullString
		)
		if err := rows.Scan(&st.Provider, &next, &success, &passJSON, &errJSON); err != nil {
			return nil, fmt.Errorf("read catch-up states: %w", err)
		}
		if next.Valid {
			st.NextPass = time.Unix(0, next.Int64).UTC()
		}
		if success.Valid {
			st.LastSuccess = time.Unix(0, success.Int64).UTC()
		}
		if err := decodeState(&st, []byte(passJSON.String), []byte(errJSON.String)); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read catch-up states: %w", err)
	}
	return out, nil
}

// CatchupRequests reads the redeliveries catch-up asked of provider.
func (s *SQLite) CatchupRequests(ctx context.Context, provider string) ([]CatchupRequest, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT guid, delivery_id, requests, last_at, gave_up FROM whguard_catchup_requests
WHERE provider = ? ORDER BY guid`, provider)
	if err != nil {
		return nil, fmt.Errorf("read catch-up requests: %w", err)
	}
	defer rows.Close()
	var out []CatchupRequest
	for rows.Next() {
		var (
			c    CatchupRequest
			last int64
		)
		if err := rows.Scan(&c.GUID, &c.DeliveryID, &c.Requests, &last, &c.GaveUp); err != nil {
			return nil, fmt.Errorf("read catch-up requests: %w", err)
		}
		c.LastAt = time.Unix(0, last).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read catch-up requests: %w", err)
	}
	return out, nil
}

// SaveCatchupRequest records a redelivery asked of provider, or its
// giving up.
func (s *SQLite) SaveCatchupRequest(ctx context.Context, provider string, r CatchupRequest) error {
	err := s.write(ctx, func(tx sqliteTx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO whguard_catchup_requests (provider, guid, delivery_id, requests, last_at, gave_up)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (provider, guid) DO UPDATE SET delivery_id = excluded.delivery_id, requests = excluded.requests,
       last_at = excluded.last_at, gave_up = excluded.gave_up`, provider, r.GUID, r.DeliveryID, r.Requests, r.LastAt.UnixNano(), r.GaveUp)
		return err
	})
	if err != nil {
		return fmt.Errorf("record a catch-up request: %w", err)
	}
	return nil
}

// ForgetCatchupRequests drops provider's requests for guids (they
// arrived) and those last asked before before (out of the provider's
// window).
func (s *SQLite) ForgetCatchupRequests(ctx context.Context, provider string, guids []string, before time.Time) error {
	err := s.write(ctx, func(tx sqliteTx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM whguard_catchup_requests WHERE provider = ? AND last_at < ?`, provider, before.UnixNano()); err != nil {
			return err
		}
		for _, g := range guids {
			if _, err := tx.ExecContext(ctx, `DELETE FROM whguard_catchup_requests WHERE provider = ? AND guid = ?`, provider, g); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget catch-up requests: %w", err)
	}
	return nil
}
