package journal

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// RecordReceipts records requests that brought events, as
// Postgres.RecordReceipts does. Like an outcome, it is not synced at its
// commit (writeState): a power loss may forget the last receipts, never
// an event.
func (s *SQLite) RecordReceipts(ctx context.Context, rs []Receipt) error {
	err := s.writeState(ctx, func(tx sqliteTx) error {
		for _, r := range rs {
			if r.First {
				if _, err := tx.ExecContext(ctx, `UPDATE whguard_events SET first_answer = ? WHERE id = ?`, r.Answer, r.ID); err != nil {
					return err
				}
				continue
			}
			if err := recordDuplicate(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %d receipts: %w", len(rs), err)
	}
	return nil
}

// recordDuplicate counts one duplicate and keeps the latest MaxReceipts
// (the single writer: nothing changes the row in between).
func recordDuplicate(ctx context.Context, tx sqliteTx, r Receipt) error {
	var (
		n           int
		ats, answrs string
	)
	err := tx.QueryRowContext(ctx, `SELECT duplicates, last_at, last_answer FROM whguard_receipts WHERE event_row_id = ?`, r.ID).
		Scan(&n, &ats, &answrs)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	last, err := sqliteReceipts(ats, answrs)
	if err != nil {
		return err
	}
	last = appendReceipt(last, storedReceipt{at: r.At, answer: r.Answer})
	at, answers := make([]int64, len(last)), make([]int, len(last))
	for i, l := range last {
		at[i], answers[i] = l.at.UnixNano(), l.answer
	}
	atJSON, _ := json.Marshal(at)
	answersJSON, _ := json.Marshal(answers)
	_, err = tx.ExecContext(ctx, `
INSERT INTO whguard_receipts (event_row_id, duplicates, last_at, last_answer)
SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM whguard_events WHERE id = ?1)
ON CONFLICT (event_row_id) DO UPDATE SET duplicates = excluded.duplicates, last_at = excluded.last_at, last_answer = excluded.last_answer`,
		r.ID, n+1, string(atJSON), string(answersJSON))
	return err
}

// sqliteReceipts decodes the stored latest duplicates ("" when none).
func sqliteReceipts(atJSON, answersJSON string) ([]storedReceipt, error) {
	if atJSON == "" {
		return nil, nil
	}
	var (
		at      []int64
		answers []int
	)
	if err := json.Unmarshal([]byte(atJSON), &at); err != nil {
		return nil, fmt.Errorf("decode receipts: %w", err)
	}
	if err := json.Unmarshal([]byte(answersJSON), &answers); err != nil {
		return nil, fmt.Errorf("decode receipts: %w", err)
	}
	out := make([]storedReceipt, min(len(at), len(answers)))
	for i := range out {
		out[i] = storedReceipt{at: time.Unix(0, at[i]).UTC(), answer: answers[i]}
	}
	return out, nil
}

// The holds' statements (see sqlRecordHolds): sqliteRecordHold records a
// hold unless it goes on from the event's last one; sqliteInsertHold
// records one as it is (an event appended behind its order key).
const (
	sqliteRecordHold = `
INSERT INTO whguard_holds (event_row_id, reason, from_at, attempts)
SELECT ?1, ?2, ?3, ?4 WHERE NOT EXISTS (
    SELECT 1 FROM (SELECT reason, attempts FROM whguard_holds WHERE event_row_id = ?1 ORDER BY id DESC LIMIT 1) last
    WHERE last.reason = ?2 AND last.attempts = ?4)`
	sqliteInsertHold = `INSERT INTO whguard_holds (event_row_id, reason, from_at, attempts) VALUES (?, ?, ?, ?)`
)

func (s *SQLite) timelineFacts(ctx context.Context, id int64) (timelineFacts, error) {
	var (
		f           timelineFacts
		atJSON      sql.NullString
		answersJSON sql.NullString
	)
	err := s.r.QueryRowContext(ctx, `
SELECT ev.content_hash, coalesce(ev.first_answer, 0), coalesce(r.duplicates, 0), r.last_at, r.last_answer
FROM whguard_events ev LEFT JOIN whguard_receipts r ON r.event_row_id = ev.id
WHERE ev.id = ?`, id).Scan(&f.contentHash, &f.firstAnswer, &f.duplicates, &atJSON, &answersJSON)
	if err != nil {
		return f, fmt.Errorf("read receipts: %w", err)
	}
	if f.last, err = sqliteReceipts(atJSON.String, answersJSON.String); err != nil {
		return f, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT reason, from_at FROM whguard_holds WHERE event_row_id = ? ORDER BY id`, id)
	if err != nil {
		return f, fmt.Errorf("read holds: %w", err)
	}
	var (
		h  storedHold
		at int64
	)
	if err := eachRow(rows, func() error {
		h.from = time.Unix(0, at).UTC()
		f.holds = append(f.holds, h)
		return nil
	}, &h.reason, &at); err != nil {
		return f, fmt.Errorf("read holds: %w", err)
	}
	rows, err = s.r.QueryContext(ctx, `SELECT received_at, content_hash FROM whguard_conflicts WHERE event_row_id = ? ORDER BY id`, id)
	if err != nil {
		return f, fmt.Errorf("read copies: %w", err)
	}
	var c storedCopy
	if err := eachRow(rows, func() error {
		c.at = time.Unix(0, at).UTC()
		f.copies = append(f.copies, c)
		return nil
	}, &at, &c.hash); err != nil {
		return f, fmt.Errorf("read copies: %w", err)
	}
	return f, nil
}
