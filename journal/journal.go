// Package journal is whguard's durable record of received webhooks: one row
// per (provider, event_id), unique by a database constraint, holding the
// delivery state the forwarder works from, the raw payload, every delivery
// attempt, conflicting resends and replay audits.
//
// PostgreSQL (Postgres) is the production store; SQLite is the embedded
// one, for a single process with a persistent volume and for the demo. Both
// implement Store and pass the same conformance suite. Callers depend on
// small interfaces of their own that these stores satisfy.
package journal

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
)

// Store is everything a journal does; both stores implement it.
type Store interface {
	// Migrate applies the schema migrations not yet applied.
	Migrate(ctx context.Context) (applied []int, err error)
	// SchemaVersion is the latest migration applied to the journal.
	SchemaVersion(ctx context.Context) (int, error)
	// Ready reports whether the store answers and is migrated.
	Ready(ctx context.Context) error
	// Identity names this journal: the same for every process that
	// writes to it (every replica), different for any other journal. It
	// is stable across restarts and, on PostgreSQL, across a failover to
	// a physical standby.
	Identity(ctx context.Context) (string, error)
	// Close releases the store's resources.
	Close()

	Append(ctx context.Context, events []Event) ([]Result, error)

	Lease(ctx context.Context, n int, leaseFor time.Duration) ([]Delivery, error)
	Complete(ctx context.Context, fs []Finish) (recorded []int64, err error)
	Release(ctx context.Context, ids []int64, tokens []uuid.UUID) (int, error)
	Hold(ctx context.Context, hs []Hold) (int, error)
	ReapExpired(ctx context.Context, maxAttempts int) ([]Reaped, error)
	Stats(ctx context.Context) (Stats, error)

	// SaveReply and StoredReply keep the answer of a sync-mode event.
	SaveReply(ctx context.Context, id int64, token uuid.UUID, r Reply) (bool, error)
	StoredReply(ctx context.Context, id int64) (*Reply, error)

	List(ctx context.Context, f Filter) ([]Summary, int64, error)
	Get(ctx context.Context, id int64) (*Detail, error)
	Conflicts(ctx context.Context, id int64) ([]ConflictCopy, error)
	Replay(ctx context.Context, id int64, reason string) error
	Skip(ctx context.Context, id int64, reason string) error
	BulkReplay(ctx context.Context, f Filter, reason string) (int, error)
	CountReplayable(ctx context.Context, f Filter) (int, error)

	// Retry now (retry.go): an event waiting for its next attempt made
	// due at once, by hand or in bulk, and a backend's recovery for its
	// providers.
	RetryNow(ctx context.Context, id int64, reason string) error
	BulkRetryNow(ctx context.Context, f Filter, reason string) (int, error)
	CountRetryable(ctx context.Context, f Filter) (int, error)
	RetryDue(ctx context.Context, providers []string) (int, error)

	Cleanup(ctx context.Context, keysBefore, payloadsBefore time.Time) (Cleaned, error)

	Pause(ctx context.Context, p Pause) (Pause, error)
	Resume(ctx context.Context, kind, name string) (bool, error)
	Pauses(ctx context.Context) ([]Pause, error)
	WakePaused(ctx context.Context) error

	RecordMinutes(ctx context.Context, replica string, ms []Minute) error
	Minutes(ctx context.Context, since time.Time) ([]Minute, error)

	// RecordReceipts records requests that brought events after they were
	// answered: duplicates (how many, and the latest MaxReceipts with
	// their answers), and a first answer not known at the append.
	RecordReceipts(ctx context.Context, rs []Receipt) error

	// Catch-up's state (catchup.go): which of ids the journal has, one
	// pass at a time across replicas, what the passes did, and the
	// redeliveries asked of GitHub.
	Known(ctx context.Context, provider string, ids []string) (map[string]bool, error)
	ClaimCatchup(ctx context.Context, provider, owner string, leaseFor time.Duration, force bool) (bool, error)
	EndCatchup(ctx context.Context, provider, owner string, p *CatchupPass, next time.Time) error
	CatchupStates(ctx context.Context) ([]CatchupState, error)
	CatchupRequests(ctx context.Context, provider string) ([]CatchupRequest, error)
	SaveCatchupRequest(ctx context.Context, provider string, r CatchupRequest) error
	ForgetCatchupRequests(ctx context.Context, provider string, guids []string, before time.Time) error
}

// Status is the delivery state of an event row (docs/delivery.md, "States
// and transitions"). It is stored, and encoded in JSON, as its string.
type Status string

// Statuses of an event row.
const (
	StatusPending    Status = "pending"
	StatusProcessing Status = "processing"
	StatusDone       Status = "done"
	StatusRetry      Status = "retry"
	StatusDead       Status = "dead"
	// StatusIgnored: verified and journaled, but its type matched none of
	// its provider's event-type filter when it was received. It is never
	// leased, counted as undelivered or forwarded unless replayed.
	StatusIgnored Status = "ignored"
)

// replayable reports whether an event in this status may be replayed: an
// ignored one too, delivered then on purpose.
func (s Status) replayable() bool { return s == StatusDead || s == StatusDone || s == StatusIgnored }

// Errors translated at the store boundary.
var (
	// ErrNotFound: no event with that id.
	ErrNotFound = errors.New("journal: not found")
	// ErrNotSkippable: only a dead event that still holds its order key
	// can be skipped.
	ErrNotSkippable = errors.New("journal: only a dead event holding its order key can be skipped")
	// ErrNotMigrated: the schema is missing or older than this binary.
	ErrNotMigrated = errors.New("journal: schema not migrated")
	// ErrSearchTooSlow: a listing ran past SearchTimeout (its filters
	// could not be narrowed by an index on a large journal).
	ErrSearchTooSlow = errors.New("search stopped after " + searchTimeoutText + ": narrow it with since/until, a type, a provider or a status")
)

// Event is one received webhook to append.
type Event struct {
	Provider    string
	EventID     string
	EventType   string
	ContentHash string
	// Headers are the headers to forward: the received ones (the
	// provider's signature headers included) with those the ingress sets
	// on top of them (X-Forwarded-For, …: AsReceived).
	Headers http.Header
	// AsReceived holds, for each header the ingress set in Headers, its
	// values as received: an empty list when it was not received. Headers
	// with these put back is the request's headers exactly as received
	// (Detail.ReceivedHeaders). Stored with Headers, never forwarded.
	AsReceived http.Header
	// Answer is the HTTP status the sender is answered with when the event
	// is new (202, or 200 with a fixed reply); 0 when it is not known yet
	// (a sync-mode sender may get the backend's reply: RecordReceipts
	// records it then).
	Answer int
	// Body holds the exact received bytes.
	Body []byte
	// Path and RawQuery are the received request path and query string.
	Path     string
	RawQuery string
	// ReceivedAt is when the request arrived; zero means the database clock.
	ReceivedAt time.Time
	// LeaseFor, when positive, claims the event for its receiver: if it is
	// new, its row is inserted already leased under LeaseToken for this
	// long (status processing, its first attempt counted), so the process
	// that received it can deliver it from memory without a lease
	// statement. Should that process die first, the lease expires and the
	// reaper returns the row like any other. A duplicate or conflict
	// claims nothing.
	LeaseFor   time.Duration
	LeaseToken uuid.UUID
	// BodyGuard makes the content hash unique per provider as well as
	// the key, for providers whose event id is not covered by the
	// signature: the same signed body under another id is then Replayed,
	// not a new event.
	BodyGuard bool
	// Ignored journals a new event with status ignored (its type matched
	// none of its provider's event-type filter): it is kept, shown and
	// replayable, but never delivered by itself. It wins over LeaseFor.
	// A duplicate or conflict is judged against the stored row as usual.
	Ignored bool
	// OrderKey, when not "", is the value found at the provider's order
	// key (docs/delivery.md, "Per-key order"): the event is delivered only
	// after every earlier event of its provider with the same OrderKey
	// stops holding it. "" means unordered.
	OrderKey string
	// OrderBlock keeps the key held when the event goes dead, until it is
	// replayed (and done) or skipped; otherwise a dead event releases it.
	OrderBlock bool
	// Scheme is the signature scheme the event's content was verified
	// with as it was received (verify's scheme name; "none" when it was
	// not verified). whguard signs a delivery of it for the backend only
	// while its provider still uses that scheme (docs/security.md).
	Scheme string
	// Source is how the event came in: SourceWebhook ("" too) or
	// SourceCatchup. A catch-up event and a webhook copy of the same key
	// are one event whatever their contents: Duplicate, never Conflict.
	Source string
	// CatchupAsked: catch-up may have asked the provider to redeliver
	// this event (GitHub); it is journaled as SourceCatchup when it did.
	CatchupAsked bool
	// TraceContext is the trace context of the event's receipt (the
	// ingress's span, as internal/tracing encodes it: W3C traceparent and
	// tracestate), stored with a new event so every attempt and replay of
	// it joins that trace; "" with tracing off (stored as NULL).
	TraceContext string
}

// Outcome says what appending an event did.
type Outcome int

const (
	// Inserted: a new row was committed.
	Inserted Outcome = iota + 1
	// Duplicate: the key existed with the same content hash; nothing written.
	Duplicate
	// Conflict: the key existed with another content hash; the first payload
	// is kept and the conflicting one recorded.
	Conflict
	// Refused: the store refused this event's data (nothing was written);
	// the other events of the batch are unaffected. Resending the same
	// request cannot succeed.
	Refused
	// Unrecorded: the key exists with other content, but recording this
	// conflicting copy failed: nothing of it was written while the rest
	// of the batch was committed. Answer it like a failed commit (503):
	// the sender's retry records it.
	Unrecorded
	// Replayed: the key is new, but the same content of a body-guarded
	// provider was already received under another event id (a captured
	// request resent with a fresh, unsigned id). Nothing was inserted;
	// the copy is recorded on the first event like a conflict; ID is the
	// first event's. Acknowledge it like a duplicate and never forward it.
	Replayed
)

// String names the outcome for logs and metrics.
func (o Outcome) String() string {
	switch o {
	case Inserted:
		return "inserted"
	case Duplicate:
		return "duplicate"
	case Conflict:
		return "conflict"
	case Refused:
		return "refused"
	case Unrecorded:
		return "unrecorded"
	case Replayed:
		return "replayed"
	}
	return "unknown"
}

// Result is the outcome of one appended event, at the same index as the
// event in the batch.
type Result struct {
	// ID is the journal row id of the event with this key (new or existing).
	ID      int64
	Outcome Outcome
	// Behind: the event was Inserted with an order key that an earlier
	// event still holds, so it was not claimed (Event.LeaseFor): it is
	// pending, leased once its turn comes.
	Behind bool
}
