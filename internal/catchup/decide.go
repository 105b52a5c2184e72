package catchup

import (
	"slices"
	"time"

	"github.com/whguard/whguard/journal"
)

// The decisions of a pass, as pure functions of what the provider's API
// and the journal said and of the clock.

// MaxRequests is how many times a missed GitHub delivery is asked for
// before it is given up on.
const MaxRequests = 3

// Action is what a pass does about one GUID.
type Action int

const (
	// Nothing: delivered (in the journal, or a 2xx), or waiting for the
	// redelivery already asked for, or given up on before.
	Nothing Action = iota
	// Ask: ask GitHub to redeliver it (the first time, or again).
	Ask
	// GiveUp: it was asked for MaxRequests times and never arrived.
	GiveUp
)

// Delivered reports whether one of a GUID's deliveries got a 2xx.
func Delivered(statusCodes []int) bool {
	return slices.ContainsFunc(statusCodes, func(c int) bool { return c >= 200 && c < 300 })
}

// DecideGUID decides what to do about one GUID seen in the hook's
// deliveries: nothing when the journal has it or a delivery of it got a
// 2xx; else ask for it, unless it was asked for already and its wait is
// not over. The wait after the n-th request is interval·2^(n−1); after
// the MaxRequests-th, it is given up on.
func DecideGUID(inJournal, delivered bool, req *journal.CatchupRequest, now time.Time, interval time.Duration) Action {
	switch {
	case inJournal || delivered:
		return Nothing
	case req == nil || req.Requests == 0:
		return Ask
	case req.GaveUp:
		return Nothing
	}
	wait := interval << (req.Requests - 1)
	if now.Sub(req.LastAt) < wait {
		return Nothing
	}
	if req.Requests >= MaxRequests {
		return GiveUp
	}
	return Ask
}

// StripeTypes decides how a pass filters Stripe's events by the webhook
// endpoint's enabled_events: up to 20 types (and not "*") go in the
// list request's types[]; more, or none known, are filtered after
// listing. keep reports whether an event type is wanted.
func StripeTypes(enabled []string) (query []string, keep func(typ string) bool) {
	if len(enabled) == 0 || slices.Contains(enabled, "*") {
		return nil, func(string) bool { return true }
	}
	if len(enabled) <= 20 {
		return enabled, func(string) bool { return true }
	}
	set := make(map[string]bool, len(enabled))
	for _, t := range enabled {
		set[t] = true
	}
	return nil, func(typ string) bool { return set[typ] }
}

// Paced reports whether a pass must stop early to spare the API's rate
// limit: when fewer than a fifth of the calls are left (limit 0: the
// API said nothing).
func Paced(remaining, limit int) bool { return limit > 0 && remaining*5 < limit }
