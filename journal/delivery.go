package journal

import (
	"net/http"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// Delivery is one leased event: everything the forwarder needs to deliver
// it, and the lease that fences its outcome.
type Delivery struct {
	ID        int64
	Provider  string
	EventID   string
	EventType string
	// Attempt is the 1-based number of this attempt (X-Whguard-Attempt); it
	// keeps counting across replays.
	Attempt int
	// BudgetAttempt is the 1-based number of this attempt within the current
	// budget (a replay starts a fresh budget).
	BudgetAttempt int
	Headers       http.Header
	Body          []byte
	Path          string
	RawQuery      string
	ReceivedAt    time.Time
	// OrderKey is the event's order key value ("" when unordered): when its
	// outcome releases the key, the next event of the key is ready.
	OrderKey string
	// Scheme is the scheme the event was verified with (Event.Scheme); ""
	// for an event journaled before whguard recorded it.
	Scheme string
	// TraceContext is the trace context of the event's receipt
	// (Event.TraceContext); "" when none was stored.
	TraceContext string
	// LeaseToken fences every state change of this lease.
	LeaseToken uuid.UUID
	// LeaseExpiresAt is when the reaper may take the row back.
	LeaseExpiresAt time.Time
}

// Attempt is the record of one delivery attempt.
type Attempt struct {
	Number     int       `json:"number"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	StatusCode int       `json:"status_code"`
	// Error is the error class for attempts that got no response
	// (connection_refused, timeout, …), else "".
	Error           string `json:"error"`
	ResponseExcerpt string `json:"response_excerpt"`
	// Sent is how the headers this attempt sent differ from those built
	// from the journaled headers alone (shown in Detail.Timeline).
	Sent HeaderDelta `json:"-"`
}

// Hold hands one lease back without spending its attempt.
type Hold struct {
	ID         int64
	LeaseToken uuid.UUID
	// For is how long until the event is due again (0: at once).
	For time.Duration
	// Reason says why, for the inspector ("" for a plain release).
	Reason string
}

// releases are holds due at once, without a reason.
func releases(ids []int64, tokens []uuid.UUID) []Hold {
	hs := make([]Hold, min(len(ids), len(tokens)))
	for i := range hs {
		hs[i] = Hold{ID: ids[i], LeaseToken: tokens[i]}
	}
	return hs
}

// leasedHeaders decodes the stored headers of leased event id. Never strand
// a leased batch over one row: headers that cannot be read are logged and
// the event is delivered with the body alone.
func leasedHeaders(log *zap.Logger, id int64, stored string) http.Header {
	h, err := decodeHeaders(stored)
	if err != nil {
		log.Error("stored headers unreadable; delivering without them", zap.Int64("id", id), zap.Error(err))
		return http.Header{}
	}
	return h
}

// Finish is the outcome of one leased delivery.
type Finish struct {
	ID         int64
	LeaseToken uuid.UUID
	// Status is StatusDone, StatusRetry or StatusDead.
	Status Status
	// RetryIn is how long after now (the database clock, which Lease also
	// uses) a retry is due (Status == StatusRetry).
	RetryIn time.Duration
	// LastError summarises the attempt for the inspector ("" when done).
	LastError string
	Attempt   Attempt
}

// onEventRow reports whether f's attempt is recorded on its event's row
// rather than in the attempts table: the first attempt, delivered. That
// is most events' only attempt, so the happy path writes no attempt row;
// the table keeps retries, failures and replays (docs/journal.md).
func (f Finish) onEventRow() bool {
	return f.Status == StatusDone && f.Attempt.Number == 1 && f.Attempt.Error == ""
}

// MaxExcerptBytes bounds the response excerpt stored with one attempt.
const MaxExcerptBytes = 1024

// Reaped is a row whose lease expired and that ReapExpired took back:
// returned to retry, or dead when its budget of attempts was spent.
type Reaped struct {
	ID       int64
	Provider string
	EventID  string
	Dead     bool
}
