package journal

import (
	"context"
	"fmt"
)

// RetryNow makes event id, waiting for its next attempt (pending or
// retry), due now without spending or renewing its budget, and audits it
// with reason (which may be empty). ErrNotFound when there is no such
// event; a *NotRetryable (ErrNotRetryable) when it is being delivered, is
// finished (done, dead, ignored: replay those), or waits for its order
// key.
func (p *Postgres) RetryNow(ctx context.Context, id int64, reason string) error {
	return retryNow(ctx, p, id, reason)
}

// BulkRetryNow makes due the events in retry matching f (see
// bulkRetryNow) and returns how many.
func (p *Postgres) BulkRetryNow(ctx context.Context, f Filter, reason string) (int, error) {
	return bulkRetryNow(ctx, p, f, reason, false)
}

// CountRetryable counts the events BulkRetryNow would make due with f.
func (p *Postgres) CountRetryable(ctx context.Context, f Filter) (int, error) {
	return bulkRetryNow(ctx, p, f, "", true)
}

func (p *Postgres) retryIDs(ctx context.Context, ids []int64, reason string) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, sqlRetryNow, ids, storableText(reason, maxErrorBytes)).Scan(&n)
	return n, err
}

// RetryDue makes due now, in one statement, every event of providers in
// retry whose next attempt is later: what a backend's recovery does for
// its providers (its breaker closed, it was resumed, it answered again).
// A row already due keeps its place; a parked row (waiting for its order
// key) stays parked. Running it twice does nothing more the second time.
func (p *Postgres) RetryDue(ctx context.Context, providers []string) (int, error) {
	if len(providers) == 0 {
		return 0, nil
	}
	tag, err := p.queue.Exec(ctx, sqlRetryDue, providers)
	if err != nil {
		return 0, fmt.Errorf("make the retries of %v due: %w", providers, err)
	}
	return int(tag.RowsAffected()), nil
}

// sqlRetryNow makes due those of $1 that wait for an attempt and not for
// their order key, and audits each. A row already due keeps its due time
// (its place in line). A row a lease holds locked is seen once the lease
// commits: processing, so not moved.
var sqlRetryNow = `
WITH moved AS (
    UPDATE whguard_events ev
    SET next_attempt_at = least(ev.next_attempt_at, now()), hold_reason = '', updated_at = now()
    WHERE ev.id = ANY ($1::bigint[]) AND ev.status IN ('pending', 'retry')
      AND NOT (ev.order_key IS NOT NULL AND EXISTS (
          SELECT 1 FROM whguard_events b WHERE b.order_holds AND b.provider = ev.provider
          AND b.order_key = ev.order_key AND b.id < ev.id))
    RETURNING ev.id, ev.status
), audit AS (
    INSERT INTO whguard_replays (event_row_id, action, from_status, reason)
    SELECT id, '` + ActionRetry + `', status, $2 FROM moved
)
SELECT count(*) FROM moved`

// sqlRetryDue is RetryDue's statement: through whguard_events_undone
// (status, id), the backlog's rows in retry.
var sqlRetryDue = `
UPDATE whguard_events SET next_attempt_at = now(), hold_reason = '', updated_at = now()
WHERE status = 'retry' AND provider = ANY ($1::text[])
  AND next_attempt_at > now() AND next_attempt_at < ` + pgParked
