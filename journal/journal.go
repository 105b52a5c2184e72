// Package journal is whguard's durable record of received webhooks: one row
// per (provider, event_id), unique by a database constraint, holding the
// delivery state the forwarder works from, the raw payload, every delivery
// attempt, conflicting resends and replay audits.
//
// PostgreSQL (Postgres) is the production store. Callers depend on small
// interfaces of their own that these stores satisfy.
package journal

import (
	"errors"
	"net/http"
	"time"
)

// Statuses of an event row (SPEC 5).
const (
	StatusPending    = "pending"
	StatusProcessing = "processing"
	StatusDone       = "done"
	StatusRetry      = "retry"
	StatusDead       = "dead"
)

// Errors translated at the store boundary.
var (
	// ErrNotFound: no event with that id.
	ErrNotFound = errors.New("journal: not found")
	// ErrNotMigrated: the schema is missing or older than this binary.
	ErrNotMigrated = errors.New("journal: schema not migrated")
)

// Event is one received webhook to append.
type Event struct {
	Provider    string
	EventID     string
	EventType   string
	ContentHash string
	// Headers are the received headers, stored so the forwarder can pass
	// them on (the provider's signature headers included).
	Headers http.Header
	// Body holds the exact received bytes.
	Body []byte
	// Path and RawQuery are the received request path and query string.
	Path     string
	RawQuery string
	// ReceivedAt is when the request arrived; zero means the database clock.
	ReceivedAt time.Time
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
	}
	return "unknown"
}

// Result is the outcome of one appended event, at the same index as the
// event in the batch.
type Result struct {
	// ID is the journal row id of the event with this key (new or existing).
	ID      int64
	Outcome Outcome
}
