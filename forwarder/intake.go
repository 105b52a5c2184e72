package forwarder

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/whguard/whguard/journal"
)

// Appender commits events to the journal and says what became of each
// (a journal.GroupCommitter, or a store).
type Appender interface {
	Append(ctx context.Context, events []journal.Event) ([]journal.Result, error)
}

// Deliverer takes new events for delivery from memory (a *Forwarder): a
// claimed event is journaled already leased, and once committed it is
// delivered without a lease statement.
type Deliverer interface {
	// Claim reserves a delivery from memory, or declines.
	Claim() (leaseFor time.Duration, ok bool)
	// Dispatch delivers a claimed event whose row is committed.
	Dispatch(d journal.Delivery)
	// Unclaim gives back a claim whose event was not inserted leased.
	Unclaim()
}

// SyncDeliverer is a Deliverer that can also hand back the backend's
// answer to a claimed event (sync mode): the channel gets the reply once
// it is stored with the event, or nil when there is none to give.
type SyncDeliverer interface {
	DispatchSync(d journal.Delivery) <-chan *journal.Reply
}

var (
	_ Deliverer     = (*Forwarder)(nil)
	_ SyncDeliverer = (*Forwarder)(nil)
)

// IntakeConfig configures an Intake.
type IntakeConfig struct {
	// Journal commits the events (required).
	Journal Appender
	// Deliverer, when set, is offered every new event that is to be
	// delivered: claimed, it is delivered from memory once committed;
	// declined, it is leased from the journal. Nil: every event is.
	Deliverer Deliverer
	// OnCommit, when set, is called after a commit that left a new row
	// to be leased from the journal (the forwarder's Wake).
	OnCommit func()
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Intake journals new events and hands them to delivery: it owns the
// claim protocol (claim before the commit, then dispatch or unclaim), so
// that the ingress only says what arrived and answers what became of it.
type Intake struct {
	cfg IntakeConfig
}

// NewIntake checks cfg and builds an Intake.
func NewIntake(cfg IntakeConfig) (*Intake, error) {
	if cfg.Journal == nil {
		return nil, errors.New("intake: no journal")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OnCommit == nil {
		cfg.OnCommit = func() {}
	}
	return &Intake{cfg: cfg}, nil
}

// Accepted is what became of one event.
type Accepted struct {
	// Result is the journal's: the row id, and whether the event was new,
	// a duplicate, a conflict, refused or a replay.
	journal.Result
	// Reply, for a new event accepted with sync, receives the backend's
	// stored answer to its first attempt, or nil (no storable answer, or
	// none in time: it goes on all the same). Nil when the event was not
	// delivered from memory (then its sender gets the usual answer now).
	Reply <-chan *journal.Reply
}

// errUnrecorded: the event's key exists with other content, and recording
// the conflicting copy failed (nothing of it was written).
var errUnrecorded = errors.New("recording the conflicting copy failed")

// Accept journals ev (received at ev.ReceivedAt) and hands it to delivery:
// a new event to be delivered is claimed before its commit and, once
// committed, delivered from memory (with sync, its reply is awaited on
// Accepted.Reply); a declined claim, an ordered event behind its key's
// holder, and an ignored event are left in the journal. An error means
// nothing is known to be committed: the sender must be told to retry.
func (in *Intake) Accept(ctx context.Context, ev journal.Event, sync bool) (Accepted, error) {
	claimed := false
	var claimedAt time.Time // the claim's lease counts from here, before the commit
	if d := in.cfg.Deliverer; d != nil && !ev.Ignored {
		claimedAt = in.cfg.Now()
		if ev.LeaseFor, claimed = d.Claim(); claimed {
			ev.LeaseToken = uuid.New()
		}
	}
	results, err := in.cfg.Journal.Append(ctx, []journal.Event{ev})
	if err == nil && results[0].Outcome == journal.Unrecorded {
		err = errUnrecorded
	}
	if err != nil {
		if claimed {
			in.cfg.Deliverer.Unclaim()
		}
		return Accepted{}, err
	}
	res := Accepted{Result: results[0]}
	switch {
	case res.Outcome != journal.Inserted:
		if claimed {
			in.cfg.Deliverer.Unclaim() // nothing was inserted leased
		}
	case ev.Ignored:
		// Never delivered unless replayed: nothing to wake.
	case claimed && !res.Behind:
		d := journal.Delivery{
			ID: res.ID, Provider: ev.Provider, EventID: ev.EventID, EventType: ev.EventType,
			Attempt: 1, BudgetAttempt: 1, Headers: ev.Headers, Body: ev.Body,
			Path: ev.Path, RawQuery: ev.RawQuery, ReceivedAt: ev.ReceivedAt, OrderKey: ev.OrderKey, Scheme: ev.Scheme,
			LeaseToken: ev.LeaseToken, LeaseExpiresAt: claimedAt.Add(ev.LeaseFor), TraceContext: ev.TraceContext,
		}
		if sd, ok := in.cfg.Deliverer.(SyncDeliverer); ok && sync {
			res.Reply = sd.DispatchSync(d)
		} else {
			in.cfg.Deliverer.Dispatch(d)
		}
	default:
		// Not claimed (the forwarder is busy or stopping), or an ordered
		// event behind its key's holder, inserted pending: leased from the
		// journal in its turn. The wake also covers a holder that
		// finished while this commit was under way.
		if claimed {
			in.cfg.Deliverer.Unclaim()
		}
		in.cfg.OnCommit()
	}
	return res, nil
}
