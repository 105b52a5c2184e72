package journal

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrNotReplayable: only dead, done or ignored events can be replayed.
var ErrNotReplayable = errors.New("journal: only dead, done or ignored events can be replayed")

// Summary is one event as the inspector and GET /api/events list it.
type Summary struct {
	ID            int64     `json:"id"`
	Provider      string    `json:"provider"`
	EventID       string    `json:"event_id"`
	EventType     string    `json:"event_type"`
	Status        Status    `json:"status"`
	Attempts      int       `json:"attempts"`
	ReceivedAt    time.Time `json:"received_at"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error"`
	// Held says why the delivery waits without spending attempts (for
	// example no_backend), "" when it does not.
	Held string `json:"held,omitempty"`
	// OrderKey is the value of the provider's order key in this event, ""
	// when it is unordered.
	OrderKey string `json:"order_key,omitempty"`
	// Source is how the event came in: "webhook" (its sender delivered
	// it) or "catchup" (catch-up brought it in).
	Source string `json:"source"`
}

// Detail is one event with its payload, attempts, replays and conflicts.
type Detail struct {
	Summary
	// Headers are the journaled headers, as whguard forwards them (the
	// received ones with X-Forwarded-For and the like set).
	Headers http.Header `json:"headers"`
	// ReceivedHeaders are the headers exactly as received, without those
	// whguard adds when forwarding.
	ReceivedHeaders http.Header `json:"received_headers"`
	// Timeline is everything that happened to the event, in time order.
	Timeline []TimelineEntry `json:"timeline"`
	// Body is the raw body when it is valid UTF-8; otherwise BodyBase64.
	Body       string    `json:"body"`
	BodyBase64 []byte    `json:"body_base64,omitempty"`
	Path       string    `json:"path"`
	RawQuery   string    `json:"raw_query"`
	AttemptLog []Attempt `json:"attempt_log"`
	Replays    []Replay  `json:"replays"`
	Conflicts  int       `json:"conflicts"`
	// Reply is the stored reply of a sync-mode event, nil when there is
	// none (docs/backend.md, "Sync replies").
	Reply *ReplyView `json:"reply,omitempty"`
	// HoldsKey: the event still holds its order key, so later events of
	// the key wait for it (until it is done, or dead and skipped).
	HoldsKey bool `json:"holds_key,omitempty"`
	// Scheme is the signature scheme the event was verified with as it was
	// received ("none": not verified; "" when journaled before whguard
	// recorded it).
	Scheme string `json:"scheme"`
	// WaitingFor is the earliest event that holds this event's order key
	// before it (0: none). An event waiting for its turn is held "order"
	// (Summary.Held) and spends no attempt.
	WaitingFor int64 `json:"waiting_for,omitempty"`
}

// Match is one body condition of a Filter: the JSON value at Pointer
// (RFC 6901) equals Value (a string's text; a number, true, false or null
// as written).
type Match struct {
	Pointer string
	Value   string
}

// MatchWindow bounds the events one listing with Match reads the bodies
// of (newest first): a search over a large journal answers in bounded time
// and says where to continue.
const MatchWindow = 10000

// ConflictCopy is one copy of an event received under its key with other
// content (the first payload is the one kept and delivered).
type ConflictCopy struct {
	ContentHash string      `json:"content_hash"`
	ReceivedAt  time.Time   `json:"received_at"`
	Headers     http.Header `json:"headers"`
	// Body is the raw body when it is valid UTF-8; otherwise BodyBase64.
	Body       string `json:"body"`
	BodyBase64 []byte `json:"body_base64,omitempty"`
}

// Replay is one audited replay.
type Replay struct {
	// Action is "replay", or "skip" when the event's order key was
	// released by hand.
	Action     string    `json:"action"`
	FromStatus Status    `json:"from_status"`
	Reason     string    `json:"reason"`
	ReplayedAt time.Time `json:"replayed_at"`
}

// Filter selects events for listing and bulk replay. Zero fields match all.
type Filter struct {
	Status   Status
	Provider string
	// Providers, when Provider is "", restricts to these providers (the
	// configured ones): an event-id lookup then goes by the unique key
	// instead of scanning.
	Providers []string
	// EventID matches the provider's event id exactly, or as a prefix with
	// EventIDPrefix.
	EventID       string
	EventIDPrefix bool
	// Types matches event types; each may hold * wildcards
	// (invoice.*, *.failed). Empty matches all.
	Types []string
	// Until: only events received before it (Since is inclusive, Until
	// exclusive).
	Until time.Time
	// Match keeps events whose JSON body holds each value at its pointer
	// (all of them). Bodies are read and matched in Go, at most
	// MatchWindow events per call: a listing that ran out of its window
	// returns what it found with a cursor to go on from.
	Match []Match
	// WithPayload keeps only events whose payload retention has not
	// dropped (what a replay needs).
	WithPayload bool
	// Before is a cursor: only ids below it (newest first paging).
	Before int64
	// Since: only events received at or after it.
	Since time.Time
	// Limit bounds the result; 0 means 50, at most 500.
	Limit int
}

func (f Filter) limit() int { return min(cmp.Or(f.Limit, 50), 500) }

// Stats feeds the whguard_events and whguard_oldest_pending_age_seconds
// gauges. On PostgreSQL, the done count of a journal over 100,000 rows is
// an estimate (the planner's statistics); every other status is exact.
type Stats struct {
	ByStatus map[Status]int
	// OldestUndelivered is, per provider, the age of the oldest event not
	// yet delivered (pending, retry or processing).
	OldestUndelivered map[string]time.Duration
	// Undelivered counts, per provider, the events not yet delivered.
	Undelivered map[string]int
	// BlockedKeys counts, per provider, the dead events that still hold
	// their order key (ORDER_ON_DEAD=block): each stops its key until it
	// is replayed or skipped.
	BlockedKeys map[string]int
	// SynchronousStandbys is, on PostgreSQL, the primary's standbys in
	// sync or quorum state (Postgres.SynchronousStandbys); nil on the
	// embedded store.
	SynchronousStandbys *int
}

// skipRefusal says why event id was not skipped (nil when it was).
func skipRefusal(id int64, skipped, found bool) error {
	switch {
	case skipped:
		return nil
	case !found:
		return ErrNotFound
	}
	return fmt.Errorf("event %d: %w", id, ErrNotSkippable)
}

// attemptsOf is the statement that lists an event's attempts on either
// store, where rows names the attempts rows t of event $1: a first attempt that
// delivered is kept on the event's row (migration 0018), every other in
// whguard_attempts. $1 is a parameter to SQLite as well, bound to the one
// argument wherever it appears.
func attemptsOf(rows string) string {
	return `
SELECT number, started_at, duration_ms, status_code, error, response_excerpt, sent FROM (
    SELECT 1 AS number, first_started_at AS started_at, first_duration_ms AS duration_ms,
           first_status_code AS status_code, '' AS error, coalesce(first_excerpt, '') AS response_excerpt, CAST(0 AS bigint) AS id,
           coalesce(CAST(first_sent_headers AS text), '') AS sent
    FROM whguard_events WHERE id = $1 AND first_started_at IS NOT NULL
    UNION ALL
    SELECT t.number, t.started_at, t.duration_ms, t.status_code, t.error, t.response_excerpt, t.id,
           coalesce(CAST(t.sent_headers AS text), '')
    FROM ` + rows + `) a
ORDER BY number, id`
}

// sqliteAttemptsOf lists an event's attempts on SQLite.
var sqliteAttemptsOf = attemptsOf(`whguard_attempts t WHERE t.event_row_id = $1`)

// pgAttemptsOf lists an event's attempts on PostgreSQL, from the two
// partitions they can be in.
var pgAttemptsOf = attemptsOf(`whguard_events ev JOIN LATERAL (SELECT * FROM whguard_attempts t WHERE t.event_row_id = ev.id AND ` +
	inPartitions("t", "ev.received_at") + ` OFFSET 0) t ON true WHERE ev.id = $1`)
