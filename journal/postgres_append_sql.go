package journal

// The append's statements (postgres_append.go runs them).

// appendStatement is the append, inserting the rows that pass where, with
// onConflict after the insert: it inserts a batch (keys sorted, in-batch
// duplicates folded; an ordered event's key is $15, with its dead policy
// $16) and its payloads in one statement (a claimed event, $12 > 0,
// already leased under its token $13; a body-guarded one with its guard
// $14, so either unique index can refuse the row; an
// ignored one, $17, as status ignored and never leased; the scheme it was
// verified with, $18, with its payload; how it came in, $19, where
// 'asked' means catch-up when catch-up asked the provider for its id; empty
// when every event is a webhook; what its sender is answered, $20, 0 when
// not known yet; its receipt's trace context, $21, empty when traces are
// off, stored as NULL),
// NOTIFYs when $11 is set and something was new,
// and returns per input position (1-based ord) either the new id or
// the stored id and content hash of the existing row, when this statement's
// snapshot can see it.
//
// ordered says whether some event of the batch has an order key: only then
// does the statement count each event's place in its key's line, which
// sorts the batch's rows, bodies and all, by key (ahead is 0 otherwise).
func appendStatement(where, onConflict string, ordered bool) string {
	ahead := "0::bigint"
	if ordered {
		ahead = aheadInLine
	}
	return `
WITH input AS (
    SELECT b.*, ahead >= 1 AS behind, ahead >= 2 AS parked,
           CASE WHEN b.source_arg IS NULL THEN 'webhook'
                WHEN b.source_arg <> 'asked' THEN b.source_arg
                WHEN EXISTS (SELECT 1 FROM whguard_catchup_requests r
                             WHERE r.provider = b.provider AND r.guid = b.event_id) THEN 'catchup'
                ELSE 'webhook' END AS source
    FROM (
    SELECT b.*, ` + ahead + ` AS ahead
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[],
                $6::jsonb[], $7::bytea[], $8::text[], $9::text[], $12::float8[], $13::uuid[], $14::text[],
                $15::text[], $16::bool[], $17::bool[], $18::text[], $19::text[], $20::int[], $21::text[])
           WITH ORDINALITY AS b(provider, event_id, event_type, content_hash, received_at, headers, body, path, raw_query,
                                lease_secs, lease_token, guard, order_key, order_block, ignored, scheme, source_arg, answer,
                                trace_ctx, ord)
    ) b
), ins AS (
    INSERT INTO whguard_events (provider, event_id, event_type, content_hash, received_at, next_attempt_at,
                                status, attempts, lease_token, lease_expires_at, body_guard,
                                order_key, order_block, order_holds, source, first_answer, trace_context)
    SELECT provider, event_id, event_type, content_hash, received_at,
           CASE WHEN parked THEN ` + pgParked + ` ELSE now() END,
           CASE WHEN ignored THEN 'ignored' WHEN lease_secs > 0 AND NOT behind THEN 'processing' ELSE 'pending' END,
           CASE WHEN lease_secs > 0 AND NOT behind AND NOT ignored THEN 1 ELSE 0 END,
           CASE WHEN lease_secs > 0 AND NOT behind AND NOT ignored THEN lease_token END,
           CASE WHEN lease_secs > 0 AND NOT behind AND NOT ignored THEN now() + make_interval(secs => lease_secs) END,
           NULLIF(guard, ''),
           NULLIF(order_key, ''), order_block, order_key <> '', source, NULLIF(answer, 0), NULLIF(trace_ctx, '')
    FROM input ` + where + `ORDER BY ord
    ` + onConflict + `
    RETURNING id, provider, event_id, received_at
), pay AS (
    INSERT INTO whguard_payloads (event_row_id, headers, body, path, raw_query, scheme, day)
    SELECT ins.id, input.headers, input.body, input.path, input.raw_query, NULLIF(input.scheme, ''),
           ` + writeDay(payloadsTable, "ins.received_at") + `
    FROM ins JOIN input ON input.provider = ins.provider AND input.event_id = ins.event_id
), note AS (
    SELECT pg_notify($10, $11) WHERE $11 <> '' AND EXISTS (SELECT 1 FROM ins)
)
SELECT input.ord, ins.id, ev.id, ev.content_hash, input.behind, coalesce(ev.source, input.source) = 'catchup'
FROM input
LEFT JOIN ins ON ins.provider = input.provider AND ins.event_id = input.event_id
-- One probe of the key per key not inserted, whatever the statistics say
-- (OFFSET 0 keeps the sub-query apart, so it is not turned into a join
-- that a plan made on a small table would run as a scan of it).
LEFT JOIN LATERAL (SELECT e.id, e.content_hash, e.source FROM whguard_events e
                   WHERE ins.id IS NULL AND e.provider = input.provider AND e.event_id = input.event_id
                   OFFSET 0) ev ON true
WHERE (SELECT count(*) FROM note) >= 0
ORDER BY input.ord`
}

// aheadInLine is, for an ordered batch, how many events are before each
// ordered one in its key's line (counted up to 2): rows of its provider and
// key that hold the key (every such row is earlier), and earlier events of
// this batch with its key. It is claimed ($12 > 0) only when none is;
// otherwise it goes in pending, behind them, and parked (pgParked) when it
// is not even next.
const aheadInLine = `CASE WHEN b.order_key = '' THEN 0 ELSE
                row_number() OVER (PARTITION BY b.provider, b.order_key ORDER BY b.ord) - 1
                + (SELECT count(*) FROM (SELECT 1 FROM whguard_events h
                                         WHERE h.order_holds AND h.provider = b.provider AND h.order_key = b.order_key
                                         LIMIT 2) held)
           END`

// appendStatements are the append's two statements for a batch: insert,
// and onConflict after the constraint refused insert.
type appendStatements struct{ insert, onConflict string }

// sqlAppend and sqlAppendOrdered are the append's statements for a batch
// without an ordered event and with one. The insert is a plain insert of the keys its snapshot
// does not hold. ON CONFLICT would decide the same, but by speculative
// insertion, which writes one more WAL record per row (its confirmation):
// 1 of the 11.5 per event. A key committed concurrently after the
// snapshot still meets the unique constraint, which refuses the whole
// statement; Append then runs onConflict. So the constraint still decides,
// and the insert only asks first.
//
// Each NOT EXISTS is one index probe per row: OFFSET 0 keeps it a
// sub-query, which the planner would otherwise turn into an anti join
// and, in a generic plan made while the table was small, run as a scan
// of the whole table for every batch.
var (
	sqlAppend        = appendStatements{appendStatement(appendUnseen, "", false), appendStatement("", "ON CONFLICT DO NOTHING", false)}
	sqlAppendOrdered = appendStatements{appendStatement(appendUnseen, "", true), appendStatement("", "ON CONFLICT DO NOTHING", true)}
)

// appendUnseen keeps the keys (and body guards) the statement does not see.
const appendUnseen = `WHERE NOT EXISTS (SELECT 1 FROM whguard_events k
                        WHERE k.provider = input.provider AND k.event_id = input.event_id OFFSET 0)
  AND (guard = '' OR NOT EXISTS (SELECT 1 FROM whguard_events g
                                 WHERE g.provider = input.provider AND g.body_guard = input.guard OFFSET 0))
    `

const sqlExistingByKey = `
SELECT ev.id, ev.provider, ev.event_id, ev.content_hash, ev.source
FROM whguard_events ev
JOIN unnest($1::text[], $2::text[]) AS k(p, e) ON ev.provider = k.p AND ev.event_id = k.e`

// sqlExistingByGuard finds the event a body-guarded copy repeats.
const sqlExistingByGuard = `
SELECT id, content_hash FROM whguard_events WHERE provider = $1 AND body_guard = $2`

// sqlInsertConflict records a copy, unless maxCopies are already kept for
// the event (a captured body resent again and again must not fill the
// disk).
const sqlInsertConflict = `
INSERT INTO whguard_conflicts (event_row_id, content_hash, headers, body)
SELECT $1, $2, $3, $4
WHERE (SELECT count(*) FROM whguard_conflicts WHERE event_row_id = $1) < $5`

// sqlOrderHolds records that events inserted behind their order key's
// holder wait for their turn from when they were received.
const sqlOrderHolds = `
INSERT INTO whguard_holds (event_row_id, reason, from_at, attempts)
SELECT id, '` + HeldOrder + `', at, 0 FROM unnest($1::bigint[], $2::timestamptz[]) AS h(id, at)`
