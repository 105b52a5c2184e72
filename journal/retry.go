package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
)

// Retry now: an event waiting for its next attempt (in retry after a
// failure, or pending and held by a limit, the breaker or a pause) made
// due at once. Its attempts and budget are unchanged (it is not a replay:
// a replay gives a finished event a fresh budget), and it is still leased
// the usual way, so a pause, the breaker, the limits and its order key
// apply when it is. Done by hand (RetryNow, BulkRetryNow: audited as
// ActionRetry beside replays and skips) or when its backend recovers
// (RetryDue).

// ActionRetry is the audit action of a retry now (Replay.Action).
const ActionRetry = "retry"

// ErrNotRetryable: only an event waiting for its next attempt can be
// retried now; NotRetryable says why one was not.
var ErrNotRetryable = errors.New("journal: only an event waiting for its next attempt can be retried now")

// NotRetryable is why event ID was not made due: its Status is not one
// waiting for an attempt (processing: being delivered; done, dead or
// ignored: finished, a replay delivers it again), or it waits for its
// turn behind WaitingFor, the earliest event holding its order key.
type NotRetryable struct {
	ID         int64
	Status     Status
	WaitingFor int64
}

// Error says it for people.
func (e *NotRetryable) Error() string {
	if e.WaitingFor != 0 {
		return fmt.Sprintf("event %d waits for its turn: event %d holds its order key", e.ID, e.WaitingFor)
	}
	return fmt.Sprintf("event %d is %s: only an event waiting for its next attempt can be retried now", e.ID, e.Status)
}

// Unwrap makes it ErrNotRetryable.
func (e *NotRetryable) Unwrap() error { return ErrNotRetryable }

// waiting reports whether an event in this status waits for an attempt
// (retry now applies to it): pending or retry.
func (s Status) waiting() bool { return s == StatusPending || s == StatusRetry }

// retryTries bounds how often RetryNow looks again at an event that was
// waiting when read but not when written (a lease took it in between and
// handed it back).
const retryTries = 3

// retryNow makes event id due now and audits it: ErrNotFound when there
// is no such event, a *NotRetryable when it does not wait for an attempt
// or waits for its order key.
func retryNow(ctx context.Context, d dialect, id int64, reason string) error {
	for range retryTries {
		n, err := d.retryIDs(ctx, []int64{id}, reason)
		if err != nil {
			return fmt.Errorf("retry event %d now: %w", id, err)
		}
		if n == 1 {
			return nil
		}
		det, _, err := d.getEvent(ctx, id)
		if err != nil {
			return err // ErrNotFound, or the journal's
		}
		if !det.Status.waiting() || det.WaitingFor != 0 {
			return &NotRetryable{ID: id, Status: det.Status, WaitingFor: det.WaitingFor}
		}
	}
	return &NotRetryable{ID: id, Status: StatusProcessing}
}

// bulkRetryNow makes due, in batches of replayBatch, up to f.Limit (0:
// all) events in retry matching every condition of f (f.Status must be
// retry or unset), leaving out those waiting for their order key, and
// audits each; with dryRun it only counts them. It walks newest first
// with a cursor that only goes down, so each event is taken at most once.
func bulkRetryNow(ctx context.Context, d dialect, f Filter, reason string, dryRun bool) (int, error) {
	f.Status = cmp.Or(f.Status, StatusRetry)
	if f.Status != StatusRetry {
		return 0, fmt.Errorf("bulk retry of %s events: %w", f.Status, ErrNotRetryable)
	}
	f.Before = 0
	limit, total := f.Limit, 0
	for limit == 0 || total < limit {
		f.Limit = replayBatch
		page, next, err := listEvents(ctx, d, f)
		if err != nil {
			return total, fmt.Errorf("bulk retry: %w", err)
		}
		var ids []int64
		for _, sm := range page {
			if sm.Held != HeldOrder && (limit == 0 || total+len(ids) < limit) {
				ids = append(ids, sm.ID)
			}
		}
		n := len(ids)
		if !dryRun && n > 0 {
			if n, err = d.retryIDs(ctx, ids, reason); err != nil {
				return total, fmt.Errorf("bulk retry: %w", err)
			}
		}
		total += n
		if next == 0 {
			break
		}
		f.Before = next
	}
	return total, nil
}

// HeldOrder is Summary.Held of an event waiting for its turn: an earlier
// event of its provider holds its order key.
const HeldOrder = "order"
