package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordReceipts records requests that brought events, after they were
// answered, in one statement per kind: duplicates count on their events'
// receipts rows (written at each one's first duplicate), each joining its
// event's latest MaxReceipts; a first answer replaces the one the append
// recorded. An event gone meanwhile (retention) records nothing. They go
// through the queue pool (synchronous_commit off): a receipt is history,
// not an event, and waiting for its WAL flush behind ingest's cost
// acknowledgements. A PostgreSQL crash may forget the last fraction of a
// second of them, never an event. Callers batch them (ReceiptWriter).
func (p *Postgres) RecordReceipts(ctx context.Context, rs []Receipt) error {
	var (
		dupIDs, firstIDs     []int64
		dupAt                []time.Time
		dupAnswers, firstAns []int16
	)
	for _, r := range rs {
		if r.First {
			firstIDs, firstAns = append(firstIDs, r.ID), append(firstAns, int16(r.Answer))
		} else {
			dupIDs, dupAt, dupAnswers = append(dupIDs, r.ID), append(dupAt, r.At), append(dupAnswers, int16(r.Answer))
		}
	}
	var errs []error
	if len(firstIDs) > 0 {
		if _, err := p.queue.Exec(ctx, sqlRecordFirstAnswers, firstIDs, firstAns); err != nil {
			errs = append(errs, fmt.Errorf("record %d first answers: %w", len(firstIDs), err))
		}
	}
	if len(dupIDs) > 0 {
		if _, err := p.queue.Exec(ctx, sqlRecordDuplicates, dupIDs, dupAt, dupAnswers, MaxReceipts); err != nil {
			errs = append(errs, fmt.Errorf("record %d duplicates: %w", len(dupIDs), err))
		}
	}
	return errors.Join(errs...)
}

// Both statements lock the events they touch first, in id order: two
// batches (or a batch and retention's delete) then never wait for each
// other in a cycle, and an event deleted meanwhile is skipped (a locked
// row is read again once its deleter commits) rather than failing the
// whole batch on the foreign key.

// sqlRecordFirstAnswers sets the first answer of events $1 to $2.
const sqlRecordFirstAnswers = `
WITH f AS (
    SELECT * FROM unnest($1::bigint[], $2::smallint[]) AS f(id, answer)
), locked AS MATERIALIZED (
    SELECT f.id, f.answer FROM f JOIN whguard_events e ON e.id = f.id
    ORDER BY f.id
    FOR NO KEY UPDATE OF e
)
UPDATE whguard_events ev SET first_answer = locked.answer
FROM locked
WHERE ev.id = locked.id`

// sqlRecordDuplicates counts duplicates of events $1 received at $2 and
// answered $3, keeping each event's latest $4 with their times and
// answers. Duplicates of one event are gathered first (an upsert may
// change a row once per statement), both arrays in the same order (ties
// in time broken by the answer, so that each time keeps its answer), and
// rows are taken in id order, so that two replicas' batches lock them in
// the same order.
const sqlRecordDuplicates = `
WITH d AS (
    SELECT id, count(*)::int AS n,
           array_agg(at ORDER BY at, answer) AS ats, array_agg(answer ORDER BY at, answer) AS answers
    FROM unnest($1::bigint[], $2::timestamptz[], $3::smallint[]) AS u(id, at, answer)
    GROUP BY id
), locked AS MATERIALIZED (
    SELECT d.* FROM d JOIN whguard_events e ON e.id = d.id
    ORDER BY d.id
    FOR KEY SHARE OF e
)
INSERT INTO whguard_receipts AS r (event_row_id, duplicates, last_at, last_answer)
SELECT d.id, d.n, d.ats[greatest(1, cardinality(d.ats) + 1 - $4::int):],
       d.answers[greatest(1, cardinality(d.answers) + 1 - $4::int):]
FROM locked d
ORDER BY d.id
ON CONFLICT (event_row_id) DO UPDATE SET
    duplicates = r.duplicates + EXCLUDED.duplicates,
    last_at = (r.last_at || EXCLUDED.last_at)[greatest(1, cardinality(r.last_at) + cardinality(EXCLUDED.last_at) + 1 - $4::int):],
    last_answer = (r.last_answer || EXCLUDED.last_answer)[greatest(1, cardinality(r.last_answer) + cardinality(EXCLUDED.last_answer) + 1 - $4::int):]`

// sqlRecordHolds records the holds of events held with a reason ($1 ids,
// $2 reasons, $3 the attempts each had made): a row unless the event's
// last hold had that reason and no attempt was made since (the same hold
// going on: a paused delivery is held again every PauseHold).
const sqlRecordHolds = `
INSERT INTO whguard_holds (event_row_id, reason, from_at, attempts)
SELECT h.id, h.reason, now(), h.attempts
FROM unnest($1::bigint[], $2::text[], $3::int[]) AS h(id, reason, attempts)
WHERE NOT EXISTS (
    SELECT 1 FROM (SELECT w.reason, w.attempts FROM whguard_holds w
                   WHERE w.event_row_id = h.id ORDER BY w.id DESC LIMIT 1) last
    WHERE last.reason = h.reason AND last.attempts = h.attempts)`

func (p *Postgres) timelineFacts(ctx context.Context, id int64) (timelineFacts, error) {
	var (
		f       timelineFacts
		at      []time.Time
		answers []int16
	)
	err := p.pool.QueryRow(ctx, `
SELECT ev.content_hash, coalesce(ev.first_answer, 0), coalesce(r.duplicates, 0),
       coalesce(r.last_at, '{}'), coalesce(r.last_answer, '{}')
FROM whguard_events ev LEFT JOIN whguard_receipts r ON r.event_row_id = ev.id
WHERE ev.id = $1`, id).Scan(&f.contentHash, &f.firstAnswer, &f.duplicates, &at, &answers)
	if err != nil {
		return f, fmt.Errorf("read receipts: %w", err)
	}
	for i := range min(len(at), len(answers)) {
		f.last = append(f.last, storedReceipt{at: at[i].UTC(), answer: int(answers[i])})
	}
	rows, err := p.pool.Query(ctx, `SELECT reason, from_at FROM whguard_holds WHERE event_row_id = $1 ORDER BY id`, id)
	if err != nil {
		return f, fmt.Errorf("read holds: %w", err)
	}
	var h storedHold
	if _, err := pgx.ForEachRow(rows, []any{&h.reason, &h.from}, func() error {
		h.from = h.from.UTC()
		f.holds = append(f.holds, h)
		return nil
	}); err != nil {
		return f, fmt.Errorf("read holds: %w", err)
	}
	rows, err = p.pool.Query(ctx, `SELECT received_at, content_hash FROM whguard_conflicts WHERE event_row_id = $1 ORDER BY id`, id)
	if err != nil {
		return f, fmt.Errorf("read copies: %w", err)
	}
	var c storedCopy
	if _, err := pgx.ForEachRow(rows, []any{&c.at, &c.hash}, func() error {
		c.at = c.at.UTC()
		f.copies = append(f.copies, c)
		return nil
	}); err != nil {
		return f, fmt.Errorf("read copies: %w", err)
	}
	return f, nil
}
