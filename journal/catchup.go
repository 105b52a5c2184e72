package journal

import (
	"encoding/json"
	"fmt"
	"time"
)

// Catch-up (internal/catchup) keeps its state in the journal, so that the
// replicas share it: whose pass it is, when the next one is due, what the
// last one found, and the GitHub deliveries it asked to be redelivered.

// Sources of an event: how it came in.
const (
	// SourceWebhook: the sender delivered it.
	SourceWebhook = "webhook"
	// SourceCatchup: catch-up brought it in (listed by the provider's API,
	// or redelivered because catch-up asked for it).
	SourceCatchup = "catchup"
)

// CatchupPass is what one pass of catch-up did.
type CatchupPass struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Since is the start of the window the pass looked at.
	Since time.Time `json:"since"`
	// Listed: the Stripe events listed that pass the type filter, or the
	// GitHub GUIDs seen.
	Listed int `json:"listed"`
	// Missing: those not in the journal (GitHub: with no 2xx and no
	// redelivery already asked for).
	Missing int `json:"missing"`
	// Journaled and RedeliveryRequested: what the pass did.
	Journaled           int `json:"journaled"`
	RedeliveryRequested int `json:"redelivery_requested"`
	// Error is why the pass ended early, "" when it did not.
	Error string `json:"error"`
}

// CatchupError is the last failed pass's reason.
type CatchupError struct {
	At    time.Time `json:"at"`
	Error string    `json:"error"`
}

// CatchupState is one provider's catch-up as the journal keeps it.
type CatchupState struct {
	Provider    string
	NextPass    time.Time
	LastSuccess time.Time // zero: none yet
	LastPass    *CatchupPass
	LastError   *CatchupError
}

// CatchupRequest is what catch-up asked of GitHub about one missed
// delivery: how many redeliveries, the last when, and whether it was given
// up on.
type CatchupRequest struct {
	GUID string
	// DeliveryID is the hook delivery the last request redelivered.
	DeliveryID int64
	Requests   int
	LastAt     time.Time
	GaveUp     bool
}

// Catch-up's statements, the same on both stores but for their clocks:
// a pass's lease is taken when it is free (or expired) and, unless
// forced, the next pass is due; a provider without a row is due at once.
// The rows are few (one per provider, one per GUID asked for), so none
// of this is on the hot path.

// maxCatchupIDs bounds one Known look-up (a page of the provider's API).
const maxCatchupIDs = 1000

// encodePass renders p and its error for the last_pass and last_error
// columns: JSON, as the API shows them (errJSON nil when p succeeded).
func encodePass(p *CatchupPass) (passJSON, errJSON []byte, err error) {
	passJSON, err = json.Marshal(p)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the catch-up pass: %w", err)
	}
	if p.Error != "" {
		errJSON, err = json.Marshal(CatchupError{At: p.Finished, Error: p.Error})
		if err != nil {
			return nil, nil, fmt.Errorf("encode the catch-up error: %w", err)
		}
	}
	return passJSON, errJSON, nil
}

// decodeState fills s's last pass and error from their JSON columns.
func decodeState(s *CatchupState, passJSON, errJSON []byte) error {
	if len(passJSON) > 0 {
		s.LastPass = new(CatchupPass)
		if err := json.Unmarshal(passJSON, s.LastPass); err != nil {
			return fmt.Errorf("decode the last catch-up pass of %s: %w", s.Provider, err)
		}
	}
	if len(errJSON) > 0 {
		s.LastError = new(CatchupError)
		if err := json.Unmarshal(errJSON, s.LastError); err != nil {
			return fmt.Errorf("decode the last catch-up error of %s: %w", s.Provider, err)
		}
	}
	return nil
}
