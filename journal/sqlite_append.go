package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Append journals a batch in one transaction, with the same semantics as
// Postgres.Append: the unique constraint decides new, duplicate or conflict.
func (s *SQLite) Append(ctx context.Context, events []Event) ([]Result, error) {
	if len(events) == 0 {
		return nil, nil
	}
	return appendScreened(ctx, events, s.appendBatch)
}

// appendBatch is Append of events whose values are storable.
func (s *SQLite) appendBatch(ctx context.Context, events []Event) ([]Result, error) {
	entries := groupByKey(events)
	results := make([]Result, len(events))
	now := s.now().UnixNano()
	err := s.write(ctx, func(tx sqliteTx) error {
		for _, e := range entries {
			received := now
			if !e.ev.ReceivedAt.IsZero() {
				received = e.ev.ReceivedAt.UnixNano()
			}
			// A claimed event goes in already leased (Event.LeaseFor),
			// unless it is ordered and its key is held (by an earlier row,
			// this batch's included: the writer's transaction sees them).
			// ahead counts (up to 2) the rows before it in its key's line:
			// behind when any, parked (see pgParked) when it is not even
			// next.
			ahead := 0
			var orderKey any
			// An ignored event takes no place in its key's line (it is never
			// delivered unless replayed): it holds no key.
			if e.ev.OrderKey != "" && !e.ev.Ignored {
				orderKey = e.ev.OrderKey
				if err := tx.QueryRowContext(ctx, sqliteKeyHeld, e.ev.Provider, e.ev.OrderKey).Scan(&ahead); err != nil {
					return fmt.Errorf("look up the holders of an order key: %w", err)
				}
			}
			behind := ahead >= 1
			status, attempts, token, expires := StatusPending, 0, any(nil), any(nil)
			switch {
			case e.ev.Ignored:
				status = StatusIgnored
			case e.ev.LeaseFor > 0 && !behind:
				status, attempts = StatusProcessing, 1
				token, expires = e.ev.LeaseToken[:], now+e.ev.LeaseFor.Nanoseconds()
			}
			var id int64
			var guard any
			if g := guardOf(e.ev); g != "" {
				guard = g
			}
			source := e.ev.sourceArg()
			if source == "asked" {
				var asked bool
				if err := tx.QueryRowContext(ctx, sqliteCatchupAsked, e.ev.Provider, e.ev.EventID).Scan(&asked); err != nil {
					return fmt.Errorf("look up the redeliveries catch-up asked for: %w", err)
				}
				source = SourceWebhook
				if asked {
					source = SourceCatchup
				}
			}
			var trace any // NULL with traces off
			if e.ev.TraceContext != "" {
				trace = e.ev.TraceContext
			}
			due := now
			if ahead >= 2 {
				due = sqliteParked // see pgParked
			}
			var answer any
			if e.ev.Answer != 0 {
				answer = e.ev.Answer
			}
			err := tx.QueryRowContext(ctx, sqliteInsertEvent, e.ev.Provider, e.ev.EventID, e.ev.EventType, e.ev.ContentHash, due, received, now,
				string(status), attempts, token, expires, guard, orderKey, e.ev.OrderBlock, orderKey != nil, source, answer, trace).Scan(&id)
			ref, isNew := existingRow{}, false
			switch {
			case err == nil:
				h, err := marshalHeaders(e.ev.Headers, e.ev.AsReceived)
				if err != nil {
					return err
				}
				var scheme any
				if e.ev.Scheme != "" {
					scheme = e.ev.Scheme
				}
				if _, err := tx.ExecContext(ctx, sqliteInsertPayload,
					id, string(h), nonNil(e.ev.Body), e.ev.Path, e.ev.RawQuery, scheme); err != nil {
					return fmt.Errorf("insert payload: %w", err)
				}
				ref, isNew = existingRow{id: id, hash: e.ev.ContentHash, catchup: source == SourceCatchup}, true
				if behind {
					// It waits for its turn from when it was received.
					if _, err := tx.ExecContext(ctx, sqliteInsertHold, id, HeldOrder, received, 0); err != nil {
						return fmt.Errorf("record the order hold: %w", err)
					}
				}
			case errors.Is(err, sql.ErrNoRows):
				var stored string
				err := tx.QueryRowContext(ctx, sqliteExistingByKey, e.ev.Provider, e.ev.EventID).Scan(&ref.id, &ref.hash, &stored)
				if errors.Is(err, sql.ErrNoRows) && guard != nil {
					// Not the key: the body guard refused it (a replay).
					err = tx.QueryRowContext(ctx, sqliteExistingByGuard, e.ev.Provider, guard).Scan(&ref.id, &ref.hash)
					ref.replayOf = err == nil
				}
				ref.catchup = stored == SourceCatchup
				if err != nil {
					return fmt.Errorf("look up existing event: %w", err)
				}
			default:
				return fmt.Errorf("insert event: %w", err)
			}
			e.judge(results, events, ref, isNew)
			if isNew && behind {
				results[e.indexes[0]].Behind = true
			}
		}
		for i := range events {
			if !recordsCopy(results[i].Outcome) {
				continue
			}
			h, err := marshalHeaders(events[i].Headers, events[i].AsReceived)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO whguard_conflicts (event_row_id, content_hash, headers, body, received_at)
				SELECT ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM whguard_conflicts WHERE event_row_id = ?) < ?`,
				results[i].ID, events[i].ContentHash, string(h), nonNil(events[i].Body), now, results[i].ID, maxCopies); err != nil {
				return fmt.Errorf("record conflict: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("append %d events: %w", len(events), err)
	}
	return results, nil
}

// The append path's statements, prepared once on the writer connection
// (see SQLite.prepareHot).
const (
	sqliteInsertEvent = `
INSERT INTO whguard_events (provider, event_id, event_type, content_hash, next_attempt_at, received_at, updated_at,
                            status, attempts, lease_token, lease_expires_at, body_guard,
                            order_key, order_block, order_holds, source, first_answer, trace_context)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING
RETURNING id`
	sqliteInsertPayload   = `INSERT INTO whguard_payloads (event_row_id, headers, body, path, raw_query, scheme) VALUES (?, ?, ?, ?, ?, ?)`
	sqliteExistingByKey   = `SELECT id, content_hash, source FROM whguard_events WHERE provider = ? AND event_id = ?`
	sqliteCatchupAsked    = `SELECT EXISTS (SELECT 1 FROM whguard_catchup_requests WHERE provider = ? AND guid = ?)`
	sqliteExistingByGuard = `SELECT id, content_hash FROM whguard_events WHERE provider = ? AND body_guard = ?`
	sqliteKeyHeld         = `SELECT count(*) FROM (SELECT 1 FROM whguard_events WHERE order_holds = 1 AND provider = ? AND order_key = ? LIMIT 2)`
)
