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
// The hot statements (append, lease, complete) are not part of it: each is
// one round trip of SQL written for its store. The cold ones that decide
// where a row goes (a hold's retry-or-pending, the reaper's dead-or-retry)
// read the rows, decide in Go (transitions.go: afterHold, afterReap), and
// write the decisions, on both stores. What Go they share sits in
// append.go, delivery.go, transitions.go and text.go.
type dialect interface {
	// listPage returns up to n events matching f, newest first.
	listPage(ctx context.Context, f Filter, n int) ([]Summary, error)
	// getEvent reads one event (ErrNotFound when there is none) with its
	// conflict count, attempts and replays, and its payload as stored.
	getEvent(ctx context.Context, id int64) (*Detail, storedPayload, error)
	// eachBody calls fn with the stored body of each of ids whose payload
	// is kept, one row at a time (body is valid only during the call), and
	// stops at fn's first error: a search holds one body at a time.
	eachBody(ctx context.Context, ids []int64, fn func(id int64, body []byte) error) error
	// listConflicts returns the conflicting copies of event id, oldest
	// first, as stored.
	listConflicts(ctx context.Context, id int64) ([]storedConflict, error)
	// replayEvent sends event id back to retry and audits why, when it is
	// replayable, and reports what it found.
	replayEvent(ctx context.Context, id int64, reason string) (replayTarget, error)
	// replayIDs replays those of ids that are dead, done or ignored with their
	// payload, in one write, auditing why, and returns how many.
	replayIDs(ctx context.Context, ids []int64, reason string) (int, error)
	// retryIDs makes due now those of ids that wait for an attempt (pending
	// or retry) and not for their order key, in one write, auditing each
	// (retry.go), and returns how many.
	retryIDs(ctx context.Context, ids []int64, reason string) (int, error)
	// cleanupEvents deletes up to n done or ignored events last changed before
	// before, with everything recorded about them, and returns how many.
	cleanupEvents(ctx context.Context, before time.Time, n int) (int, error)
	// cleanupPayloads drops the payloads of up to n done or ignored events last
	// changed before before, and returns how many.
	cleanupPayloads(ctx context.Context, before time.Time, n int) (int, error)
	// StoredReply reads the stored reply of a sync-mode event (nil: none).
	StoredReply(ctx context.Context, id int64) (*Reply, error)
	// timelineFacts reads what event id's timeline needs beyond its
	// detail (timeline.go): its first answer, duplicates, holds and
	// copies.
	timelineFacts(ctx context.Context, id int64) (timelineFacts, error)
}

var (
	_ dialect = (*Postgres)(nil)
	_ dialect = (*SQLite)(nil)
)

// listEvents returns events newest first, and the cursor for the next page
// (0 when there is none): it reads one row more than the page to know
// whether another page follows.
func listEvents(ctx context.Context, d dialect, f Filter) ([]Summary, int64, error) {
	return listBounded(ctx, d, f, SearchTimeout)
}

// listBounded is listEvents stopped after bound: the status, type and
// time filters and an exact event id use an index, while a prefix or a
// body search on a large journal may read many rows.
func listBounded(ctx context.Context, d dialect, f Filter, bound time.Duration) (out []Summary, next int64, err error) {
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	defer func() {
		if err != nil && sctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			out, next, err = nil, 0, ErrSearchTooSlow
		}
	}()
	return listWithin(sctx, d, f)
}

// SearchTimeout bounds one listing or search (ErrSearchTooSlow past it);
// searchTimeoutText writes it for the error.
const (
	SearchTimeout     = 5 * time.Second
	searchTimeoutText = "5 s"
)

func listWithin(ctx context.Context, d dialect, f Filter) ([]Summary, int64, error) {
	lim := f.limit()
	if len(f.Match) > 0 {
		return matchEvents(ctx, d, f, lim)
	}
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

// matchPage is how many candidates a body search reads at once.
const matchPage = 200

// matchEvents lists events matching f whose bodies match f.Match: it walks
// the candidates (every other condition of f) newest first, reading their
// bodies a page at a time, until the page of results is full or
// MatchWindow candidates were read. The cursor continues from the last
// result, or, when the window ran out first, from the last candidate read.
func matchEvents(ctx context.Context, d dialect, f Filter, lim int) ([]Summary, int64, error) {
	var out []Summary
	cand := f
	cand.Match = nil
	for scanned := 0; scanned < MatchWindow; {
		want := min(matchPage, MatchWindow-scanned)
		page, err := d.listPage(ctx, cand, want)
		if err != nil {
			return nil, 0, fmt.Errorf("search events: %w", err)
		}
		if len(page) == 0 {
			return out, 0, nil
		}
		ids := make([]int64, len(page))
		for i, sm := range page {
			ids[i] = sm.ID
		}
		// One body at a time, matched as it is read: what a search holds
		// is one row, however large the bodies and however many searches
		// run (four searches over 700 KB bodies once took 3.2 GB); the
		// deadline is looked at between rows.
		hits := map[int64]bool{}
		err = d.eachBody(ctx, ids, func(id int64, body []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if matchesBody(body, f.Match) {
				hits[id] = true
			}
			return nil
		})
		if err != nil {
			return nil, 0, fmt.Errorf("search events: read bodies: %w", err)
		}
		for _, sm := range page {
			scanned++
			cand.Before = sm.ID
			if !hits[sm.ID] {
				continue
			}
			if len(out) == lim {
				return out, out[lim-1].ID, nil
			}
			out = append(out, sm)
		}
		if len(page) < want {
			return out, 0, nil // the candidates ran out
		}
	}
	return out, cand.Before, nil // the window ran out: go on from here
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
	det.Headers, det.ReceivedHeaders = http.Header{}, http.Header{}
	if pl.kept {
		if det.Headers, det.ReceivedHeaders, err = decodeStoredHeaders(pl.headers); err != nil {
			return nil, fmt.Errorf("decode headers of event %d: %w", id, err)
		}
	}
	setBody(det, pl.body)
	reply, err := d.StoredReply(ctx, id)
	if err != nil {
		return nil, err
	}
	det.Reply = reply.view()
	if det.AttemptLog == nil {
		det.AttemptLog = []Attempt{}
	}
	if det.Replays == nil {
		det.Replays = []Replay{}
	}
	facts, err := d.timelineFacts(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read the timeline of event %d: %w", id, err)
	}
	det.Timeline = buildTimeline(det, facts)
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
		_, h, err := decodeStoredHeaders(c.headers)
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

// replayable reports whether the event found may be replayed: a dead,
// done or ignored event whose payload retention has not dropped.
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
// ErrNotReplayable (saying why) when it is not dead, done or ignored, or has lost
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

// bulkReplay replays, in batches of replayBatch, up to f.Limit (0: all)
// dead, done or ignored events matching every condition of f (Status must
// be one of those; "" means dead, so ignored events are replayed in bulk
// only when asked for by name) whose payload is kept, and returns how many were
// replayed; with dryRun it only counts them. It walks the matching events
// newest first with a cursor that only goes down, so an event replayed
// (and failing or done again) during the walk is never picked twice.
func bulkReplay(ctx context.Context, d dialect, f Filter, reason string, dryRun bool) (int, error) {
	f.Status = cmp.Or(f.Status, StatusDead)
	if !f.Status.replayable() {
		return 0, fmt.Errorf("bulk replay of %s events: %w", f.Status, ErrNotReplayable)
	}
	f.WithPayload, f.Before = true, 0
	limit, total := f.Limit, 0
	for limit == 0 || total < limit {
		f.Limit = replayBatch
		if limit > 0 {
			f.Limit = min(f.Limit, limit-total)
		}
		page, next, err := listEvents(ctx, d, f)
		if err != nil {
			return total, fmt.Errorf("bulk replay: %w", err)
		}
		ids := make([]int64, len(page))
		for i, sm := range page {
			ids[i] = sm.ID
		}
		n := len(ids)
		if !dryRun && n > 0 {
			if n, err = d.replayIDs(ctx, ids, reason); err != nil {
				return total, fmt.Errorf("bulk replay: %w", err)
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

// cleanupBatch is how many rows one cleanup statement deletes, so retention
// never holds long locks or writes a huge transaction.
const cleanupBatch = 5000

// Cleaned counts what a cleanup removed.
type Cleaned struct {
	// Events are done (or ignored) events deleted with everything recorded about them;
	// their keys are forgotten, so a resend would be a new event.
	Events int
	// Payloads are bodies and headers dropped from done (or ignored) events that are
	// still kept for deduplication.
	Payloads int
	// Partitions are the day partitions of payloads and attempts dropped
	// (PostgreSQL only), their rows counted in Payloads.
	Partitions int
}

// cleanup applies retention in batches of cleanupBatch: it deletes done
// events last changed before keysBefore, and drops the payloads of done
// events last changed before payloadsBefore. Ignored events age like done
// ones: nothing is owed on them. Dead events are quarantine
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
