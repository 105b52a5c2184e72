package journal

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"
)

// dialect is what each store supplies to the logic this file holds once
// for both (list paging, reading an event, replay and its refusals, the
// bulk-replay walk, the retention loop): the SQL text, how arguments are
// bound and rows scanned (a pgx pool on PostgreSQL; database/sql on SQLite,
// with every write in one transaction of the single writer), and how a
// write is kept safe beside others (row locks and an advisory lock on
// PostgreSQL; the one writer on SQLite).
//
// The hot statements (append, lease, complete, hold, reap) are not part of
// it: each is one round trip of SQL written for its store, with its
// decisions inside (the reaper's dead-or-retry, a hold's retry-or-pending),
// which the conformance suite holds to one rule. What Go they share sits
// in append.go, delivery.go and text.go.
type dialect interface {
	// listPage returns up to n events matching f, newest first.
	listPage(ctx context.Context, f Filter, n int) ([]Summary, error)
	// getEvent reads one event (ErrNotFound when there is none) with its
	// conflict count, attempts and replays, and its payload as stored.
	getEvent(ctx context.Context, id int64) (*Detail, storedPayload, error)
	// listConflicts returns the conflicting copies of event id, oldest
	// first, as stored.
	listConflicts(ctx context.Context, id int64) ([]storedConflict, error)
	// replayEvent sends event id back to retry and audits why, when it is
	// replayable, and reports what it found.
	replayEvent(ctx context.Context, id int64, reason string) (replayTarget, error)
	// newestID returns the highest event id (0 for an empty journal).
	newestID(ctx context.Context) (int64, error)
	// replayNext replays the next batch of a bulk replay.
	replayNext(ctx context.Context, w replayWalk) (replayedBatch, error)
	// cleanupEvents deletes up to n done events last changed before
	// before, with everything recorded about them, and returns how many.
	cleanupEvents(ctx context.Context, before time.Time, n int) (int, error)
	// cleanupPayloads drops the payloads of up to n done events last
	// changed before before, and returns how many.
	cleanupPayloads(ctx context.Context, before time.Time, n int) (int, error)
}

var (
	_ dialect = (*Postgres)(nil)
	_ dialect = (*SQLite)(nil)
)

// listEvents returns events newest first, and the cursor for the next page
// (0 when there is none): it reads one row more than the page to know
// whether another page follows.
func listEvents(ctx context.Context, d dialect, f Filter) ([]Summary, int64, error) {
	lim := f.limit()
	out, err := d.listPage(ctx, f, lim+1)
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	var next int64
	if len(out) > lim {
		out = out[:lim]
		next = out[lim-1].ID
	}
	return out, next, nil
}

// providersFilter is the provider set a listing is restricted to: none
// when one provider is named.
func providersFilter(f Filter) []string {
	if f.Provider != "" {
		return nil
	}
	return f.Providers
}

// storedPayload is an event's payload as stored.
type storedPayload struct {
	// kept is false once retention dropped the payload.
	kept    bool
	headers string
	body    []byte
}

// getEvent returns one event with everything recorded about it; the lists
// are empty, never nil, and a dropped payload reads as no headers and an
// empty body.
func getEvent(ctx context.Context, d dialect, id int64) (*Detail, error) {
	det, pl, err := d.getEvent(ctx, id)
	if err != nil {
		return nil, err
	}
	det.Headers = http.Header{}
	if pl.kept {
		if det.Headers, err = decodeHeaders(pl.headers); err != nil {
			return nil, fmt.Errorf("decode headers of event %d: %w", id, err)
		}
	}
	setBody(det, pl.body)
	if det.AttemptLog == nil {
		det.AttemptLog = []Attempt{}
	}
	if det.Replays == nil {
		det.Replays = []Replay{}
	}
	return det, nil
}

// storedConflict is one conflicting copy as stored.
type storedConflict struct {
	hash       string
	receivedAt time.Time
	headers    string
	body       []byte
}

// listConflicts returns the conflicting copies of event id, oldest first:
// ErrNotFound when there is no such event.
func listConflicts(ctx context.Context, d dialect, id int64) ([]ConflictCopy, error) {
	if _, _, err := d.getEvent(ctx, id); err != nil {
		return nil, err
	}
	stored, err := d.listConflicts(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list conflicts of event %d: %w", id, err)
	}
	out := make([]ConflictCopy, len(stored))
	for i, c := range stored {
		h, err := decodeHeaders(c.headers)
		if err != nil {
			return nil, fmt.Errorf("decode headers of a conflict of event %d: %w", id, err)
		}
		out[i] = ConflictCopy{ContentHash: c.hash, ReceivedAt: c.receivedAt.UTC(), Headers: h}
		out[i].Body, out[i].BodyBase64 = bodyText(c.body)
	}
	return out, nil
}

// replayTarget is what a replay found of its event.
type replayTarget struct {
	// replayed: the event was sent back to retry; nothing else is set.
	replayed bool
	// found: the event exists, in status, with or without its payload.
	found      bool
	status     Status
	hasPayload bool
}

// replayable reports whether the event found may be replayed: a dead or
// done event whose payload retention has not dropped.
func (t replayTarget) replayable() bool {
	return t.found && t.hasPayload && t.status.replayable()
}

// refusal says why event id was not replayed (nil when it was).
func (t replayTarget) refusal(id int64) error {
	switch {
	case t.replayed:
		return nil
	case !t.found:
		return ErrNotFound
	case !t.hasPayload:
		return fmt.Errorf("event %d: its payload was dropped by retention: %w", id, ErrNotReplayable)
	}
	return fmt.Errorf("event %d is %s: %w", id, t.status, ErrNotReplayable)
}

// replayEvent replays one event: ErrNotFound when there is no such event,
// ErrNotReplayable (saying why) when it is not dead or done or has lost
// its payload.
func replayEvent(ctx context.Context, d dialect, id int64, reason string) error {
	t, err := d.replayEvent(ctx, id, reason)
	if err != nil {
		return fmt.Errorf("replay event %d: %w", id, err)
	}
	return t.refusal(id)
}

// replayBatch is how many rows one bulk-replay statement moves, so a large
// replay never holds many row locks or floods the forwarder at once.
const replayBatch = 100

// replayWalk is one batch of a bulk replay: up to limit events in status
// (with their payload), of provider ("" for all), received at or after
// since (zero for all), with ids in (after, ceiling], lowest ids first.
type replayWalk struct {
	status   Status
	provider string
	since    time.Time
	after    int64
	ceiling  int64
	limit    int
	reason   string
}

// replayedBatch is what one batch of a bulk replay did.
type replayedBatch struct {
	// picked is how many events the batch selected, last the highest id
	// among them.
	picked int
	last   int64
	// replayed is how many of them were replayed (fewer when one changed
	// between the selection and the replay).
	replayed int
}

// bulkReplay replays, in batches of replayBatch, up to f.Limit (0: all)
// dead or done events matching f (Status must be dead or done; "" means
// dead), and returns how many were replayed.
func bulkReplay(ctx context.Context, d dialect, f Filter, reason string) (int, error) {
	status := cmp.Or(f.Status, StatusDead)
	if !status.replayable() {
		return 0, fmt.Errorf("bulk replay of %s events: %w", status, ErrNotReplayable)
	}
	// Walk ids upwards from where the last batch stopped, up to the newest
	// id at the start: a replayed row that fails again (or is done again)
	// before the walk ends must not be picked twice.
	ceiling, err := d.newestID(ctx)
	if err != nil {
		return 0, fmt.Errorf("bulk replay: read newest id: %w", err)
	}
	w := replayWalk{status: status, provider: f.Provider, since: f.Since, ceiling: ceiling, reason: reason}
	total := 0
	for f.Limit == 0 || total < f.Limit {
		w.limit = replayBatch
		if f.Limit > 0 {
			w.limit = min(w.limit, f.Limit-total)
		}
		b, err := d.replayNext(ctx, w)
		if err != nil {
			return total, fmt.Errorf("bulk replay: %w", err)
		}
		total += b.replayed
		if b.picked < w.limit {
			break
		}
		w.after = b.last
	}
	return total, nil
}

// cleanupBatch is how many rows one cleanup statement deletes, so retention
// never holds long locks or writes a huge transaction.
const cleanupBatch = 5000

// Cleaned counts what a cleanup removed.
type Cleaned struct {
	// Events are done events deleted with everything recorded about them;
	// their keys are forgotten, so a resend would be a new event.
	Events int
	// Payloads are bodies and headers dropped from done events that are
	// still kept for deduplication.
	Payloads int
}

// cleanup applies retention in batches of cleanupBatch: it deletes done
// events last changed before keysBefore, and drops the payloads of done
// events last changed before payloadsBefore. Dead events are quarantine
// and are never deleted; pending, retry and processing ones are never
// touched. A step ends with its first short batch.
func cleanup(ctx context.Context, d dialect, keysBefore, payloadsBefore time.Time) (Cleaned, error) {
	var c Cleaned
	for _, step := range []struct {
		run    func(ctx context.Context, before time.Time, n int) (int, error)
		before time.Time
		count  *int
	}{
		{d.cleanupEvents, keysBefore, &c.Events},
		{d.cleanupPayloads, payloadsBefore, &c.Payloads},
	} {
		for {
			n, err := step.run(ctx, step.before, cleanupBatch)
			if err != nil {
				return c, fmt.Errorf("retention cleanup: %w", err)
			}
			*step.count += n
			if n < cleanupBatch {
				break
			}
		}
	}
	return c, nil
}
