package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordReceipts records requests that brought events, after they were
// answered: a duplicate counts on its event's receipts row (written at
// its first duplicate) and joins its latest MaxReceipts; a first answer
// replaces the one the append recorded. An event gone meanwhile (retention)
// records nothing. They go through the queue pool (synchronous_commit
// off): a receipt is history, not an event, and waiting for its WAL flush
// put a commit of its own on every duplicate's path, behind ingest's
// (10 % duplicates cost ~20 % of the acknowledgements). A PostgreSQL crash
// may forget the last fraction of a second of them, never an event.
func (p *Postgres) RecordReceipts(ctx context.Context, rs []Receipt) error {
	for _, r := range rs {
		var err error
		if r.First {
			_, err = p.queue.Exec(ctx, `UPDATE whguard_events SET first_answer = $2 WHERE id = $1`, r.ID, r.Answer)
		} else {
			_, err = p.queue.Exec(ctx, sqlRecordDuplicate, r.ID, r.At, r.Answer, MaxReceipts)
		}
		if err != nil {
			return fmt.Errorf("record a receipt of event %d: %w", r.ID, err)
		}
	}
	return nil
}

// sqlRecordDuplicate counts a duplicate of event $1 received at $2 and
// answered $3, keeping the latest $4 with their times and answers.
const sqlRecordDuplicate = `
INSERT INTO whguard_receipts AS r (event_row_id, duplicates, last_at, last_answer)
SELECT $1, 1, ARRAY[$2::timestamptz], ARRAY[$3::smallint]
WHERE EXISTS (SELECT 1 FROM whguard_events WHERE id = $1)
ON CONFLICT (event_row_id) DO UPDATE SET
    duplicates = r.duplicates + 1,
    last_at = (r.last_at || $2::timestamptz)[greatest(1, cardinality(r.last_at) + 2 - $4::int):],
    last_answer = (r.last_answer || $3::smallint)[greatest(1, cardinality(r.last_answer) + 2 - $4::int):]`

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
