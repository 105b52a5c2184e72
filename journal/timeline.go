package journal

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// What happened to an event, in one place (Detail.Timeline): the requests
// that brought it (the first, its duplicates, conflicting copies), the
// holds that made it wait, its attempts with the headers they sent, and
// the replays, skips and retries done by hand, in time order. Each fact
// lives where it costs least (docs/journal.md, "Where each fact lives"):
// nothing is written for the timeline on the happy path but the first
// answer, a column of the row the append inserts anyway.

// Kinds of timeline entries; replays, skips and retries now carry their
// audit action (ActionReplay, ActionSkip, ActionRetry).
const (
	// TimelineReceived: the request that journaled the event.
	TimelineReceived = "received"
	// TimelineDuplicate: a later request with the same key and content.
	TimelineDuplicate = "duplicate"
	// TimelineConflict: a later request with the same key and other
	// content (its copy is kept: Conflicts, which also shows its content
	// hash).
	TimelineConflict = "conflict"
	// TimelineCopy: the same signed body under a fresh event id, caught
	// by the body guard and recorded on this event, never forwarded.
	TimelineCopy = "copy"
	// TimelineHold: the delivery waited without spending an attempt.
	TimelineHold = "hold"
	// TimelineAttempt: one delivery attempt.
	TimelineAttempt = "attempt"
)

// ActionReplay is the audit action of a replay (Replay.Action); ActionSkip
// that of a skip.
const (
	ActionReplay = "replay"
	ActionSkip   = "skip"
)

// The answers the ingress gives the requests the journal records apart
// from the event's own receipts: a conflicting copy is refused, a copy of
// the same body under a fresh id is acknowledged like a duplicate.
const (
	ConflictAnswer = http.StatusConflict
	CopyAnswer     = http.StatusOK
)

// TimelineEntry is one fact of an event's story. Kind says which; the
// fields that do not concern it are left out of the JSON.
type TimelineEntry struct {
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	// Answer is the HTTP status whguard answered the request with (a
	// receipt; 0 when it is not known: an event received before it was
	// recorded, or brought in by catch-up, which has no sender).
	Answer int `json:"answer,omitempty"`
	// Source is how a received event came in (webhook, catchup).
	Source string `json:"source,omitempty"`
	// Duplicates is, on the received entry, how many duplicates came in
	// all (the last MaxReceipts are listed with their times).
	Duplicates int `json:"duplicates,omitempty"`
	// Number is a duplicate's count (the 3rd duplicate: 3) or an
	// attempt's number.
	Number int `json:"number,omitempty"`
	// Reason is a hold's (breaker, paused, rate, order, no_backend, …) or
	// the reason given for a replay, skip or retry.
	Reason string `json:"reason,omitempty"`
	// From and Until bound a hold: Until is when it ended (the next
	// attempt, or the next hold for another reason); nil while it lasts.
	From  *time.Time `json:"from,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	// An attempt's record (Attempt).
	DurationMS      *int64 `json:"duration_ms,omitempty"`
	StatusCode      int    `json:"status_code,omitempty"`
	Error           string `json:"error,omitempty"`
	ResponseExcerpt string `json:"response_excerpt,omitempty"`
	// Headers are the headers an attempt sent. The journal keeps only
	// what differs from the journaled headers (Sent); the admin API fills
	// this in (forwarder.SentHeaders), credentials redacted.
	Headers http.Header `json:"headers,omitempty"`
	// Sent is an attempt's Attempt.Sent.
	Sent HeaderDelta `json:"-"`
	// FromStatus is the status a replay, skip or retry found.
	FromStatus Status `json:"from_status,omitempty"`
}

// Receipt is one request that brought an event, recorded after it was
// answered (RecordReceipts): a duplicate, or (First) the request that
// journaled it, when its answer was not known at the append (a sync-mode
// sender answered with the backend's reply).
type Receipt struct {
	ID     int64
	At     time.Time
	Answer int
	First  bool
}

// MaxReceipts is how many duplicates are listed per event with their
// times and answers: the latest ones (all are counted).
const MaxReceipts = 10

// HeaderDelta is how the headers an attempt sent differ from those the
// forwarder builds from the journaled headers alone (forwarder.SentHeaders):
// the headers it set (a signature made afresh for the backend) and those
// it removed (a provider signature it may not forward). A delivery that
// is neither re-signed nor traced changes nothing and stores nothing
// (NULL); a re-signed one stores its fresh signature headers (~150 bytes,
// BENCHMARKS.md measures what they cost).
type HeaderDelta struct {
	Set http.Header `json:"set,omitempty"`
	Del []string    `json:"del,omitempty"`
}

// IsZero reports whether d changes nothing.
func (d HeaderDelta) IsZero() bool { return len(d.Set) == 0 && len(d.Del) == 0 }

// encode is d as stored: "" (NULL) when it changes nothing.
func (d HeaderDelta) encode() string {
	if d.IsZero() {
		return ""
	}
	stored := struct {
		Set http.Header `json:"set,omitempty"`
		Del []string    `json:"del,omitempty"`
	}{rawHeaderValues(d.Set), d.Del}
	b, err := json.Marshal(stored)
	if err != nil {
		return "" // a header map always encodes
	}
	return string(b)
}

// decodeDelta reads a stored delta ("" is none).
func decodeDelta(s string) (HeaderDelta, error) {
	var d HeaderDelta
	if s == "" {
		return d, nil
	}
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return d, fmt.Errorf("decode sent headers: %w", err)
	}
	if d.Set != nil {
		var err error
		if d.Set, err = restoreRawValues(d.Set); err != nil {
			return d, fmt.Errorf("decode sent headers: %w", err)
		}
	}
	return d, nil
}

// storedReceipt is one listed duplicate as stored.
type storedReceipt struct {
	at     time.Time
	answer int
}

// storedHold is the start of one hold as stored: a row is written when a
// delivery is held for another reason than the last one it was held for,
// or after an attempt; holding it again for the same reason continues it.
type storedHold struct {
	reason string
	from   time.Time
}

// storedCopy is one conflicting copy or replayed body as stored.
type storedCopy struct {
	at   time.Time
	hash string
}

// timelineFacts are what a store reads for an event's timeline beyond its
// detail (attempts and replays).
type timelineFacts struct {
	contentHash string
	// firstAnswer is what the first request was answered (0: unknown).
	firstAnswer int
	duplicates  int
	// last are the latest duplicates, oldest first.
	last   []storedReceipt
	holds  []storedHold
	copies []storedCopy
}

// appendReceipt adds a duplicate to the listed ones, keeping the latest
// MaxReceipts.
func appendReceipt(last []storedReceipt, r storedReceipt) []storedReceipt {
	// Concurrent duplicates are recorded once answered, not always in the
	// order they came in: r goes after every one that came in before it.
	i := len(last)
	for i > 0 && last[i-1].at.After(r.at) {
		i--
	}
	last = slices.Insert(last, i, r)
	if len(last) > MaxReceipts {
		last = slices.Clone(last[len(last)-MaxReceipts:])
	}
	return last
}

// timelineOrder breaks ties between entries of one instant: what came in
// before what it caused.
var timelineOrder = map[string]int{
	TimelineReceived: 0, TimelineDuplicate: 1, TimelineConflict: 1, TimelineCopy: 1,
	TimelineHold: 2, TimelineAttempt: 3,
}

// buildTimeline puts d's story together, in time order: d's attempts and
// replays with the facts read for it.
func buildTimeline(d *Detail, f timelineFacts) []TimelineEntry {
	out := make([]TimelineEntry, 0, 1+len(f.last)+len(f.copies)+len(f.holds)+len(d.AttemptLog)+len(d.Replays))
	out = append(out, TimelineEntry{Kind: TimelineReceived, At: d.ReceivedAt, Answer: f.firstAnswer,
		Source: d.Source, Duplicates: f.duplicates})
	// Duplicates are recorded once answered, so concurrent ones may be
	// stored out of order: numbered by when they came in.
	last := slices.Clone(f.last)
	slices.SortStableFunc(last, func(a, b storedReceipt) int { return a.at.Compare(b.at) })
	for i, r := range last {
		out = append(out, TimelineEntry{Kind: TimelineDuplicate, At: r.at, Answer: r.answer,
			Number: f.duplicates - len(f.last) + i + 1})
	}
	for _, c := range f.copies {
		e := TimelineEntry{Kind: TimelineConflict, At: c.at, Answer: ConflictAnswer}
		if c.hash == f.contentHash {
			e = TimelineEntry{Kind: TimelineCopy, At: c.at, Answer: CopyAnswer}
		}
		out = append(out, e)
	}
	for i, h := range f.holds {
		from := h.from
		e := TimelineEntry{Kind: TimelineHold, At: from, From: &from, Reason: h.reason}
		var until time.Time
		if i+1 < len(f.holds) {
			until = f.holds[i+1].from
		}
		for _, a := range d.AttemptLog {
			if !a.StartedAt.Before(from) && (until.IsZero() || a.StartedAt.Before(until)) {
				until = a.StartedAt
			}
		}
		if !until.IsZero() {
			e.Until = &until
		}
		out = append(out, e)
	}
	for _, a := range d.AttemptLog {
		ms := a.DurationMS
		out = append(out, TimelineEntry{Kind: TimelineAttempt, At: a.StartedAt, Number: a.Number, DurationMS: &ms,
			StatusCode: a.StatusCode, Error: a.Error, ResponseExcerpt: a.ResponseExcerpt, Sent: a.Sent})
	}
	for _, r := range d.Replays {
		out = append(out, TimelineEntry{Kind: cmp.Or(r.Action, ActionReplay), At: r.ReplayedAt, Reason: r.Reason, FromStatus: r.FromStatus})
	}
	slices.SortStableFunc(out, func(a, b TimelineEntry) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return cmp.Compare(rank(a.Kind), rank(b.Kind))
	})
	return out
}

// rank is a kind's place among entries of one instant (replays, skips and
// retries last).
func rank(kind string) int {
	if r, ok := timelineOrder[kind]; ok {
		return r
	}
	return 4
}
