// Package governor decides whether a delivery may start now: the rate
// limits (per backend and per provider), the cap on requests in flight to
// one backend, and (breaker.go) the circuit breaker. A delivery it turns
// down is held, not attempted: the forwarder hands its lease back, due
// again after the RetryAfter it is given, without spending an attempt.
//
// Two implementations answer the same questions: Redis, shared by every
// replica, and Local, exact for one process. The forwarder only sees the
// narrow interface it declares; both are tested by one suite.
//
// It lives under internal/ rather than inside forwarder because it has
// its own state, clock and backing service (Redis) and its own tests
// against them, none of which the forwarder's delivery logic needs to
// know; and it is not an API whguard's users should import.
package governor

import (
	"fmt"
	"math"
	"time"
)

// Reasons a delivery is held, the reason label of
// whguard_deliveries_held_total.
const (
	// HoldRate: a rate limit (the backend's or the provider's) is spent.
	HoldRate = "rate"
	// HoldInFlight: the backend has MaxInFlight requests in flight.
	HoldInFlight = "in_flight"
	// HoldBreaker: the backend's circuit breaker is open (or its one
	// probe is out).
	HoldBreaker = "breaker"
	// HoldUnavailable: the shared state (Redis) did not answer; nothing
	// goes out past a limit while it cannot be checked.
	HoldUnavailable = "redis_unavailable"
)

// Rate is N requests per Per; the zero Rate is no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// IsZero reports whether r sets no limit.
func (r Rate) IsZero() bool { return r.N <= 0 || r.Per <= 0 }

// interval is the time one request uses up (the GCRA emission interval).
func (r Rate) interval() time.Duration { return r.Per / time.Duration(r.N) }

// DefaultBurst is the burst when none is set: the per-second rate rounded
// up, at least 1.
func (r Rate) DefaultBurst() int {
	if r.IsZero() {
		return 0
	}
	return max(1, int(math.Ceil(float64(r.N)*float64(time.Second)/float64(r.Per))))
}

func (r Rate) String() string {
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	if unit == "" {
		return fmt.Sprintf("%d/%s", r.N, r.Per)
	}
	return fmt.Sprintf("%d/%s", r.N, unit)
}

// Limit is a rate and the burst allowed above it (requests that may start
// at once after a quiet period); Burst 0 takes Rate.DefaultBurst.
type Limit struct {
	Rate  Rate
	Burst int
}

func (l Limit) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Rate.DefaultBurst()
}

// Config is what is limited. The zero Config limits nothing.
type Config struct {
	// Backend applies to every backend (WHGUARD_BACKEND_RATE_LIMIT and
	// _RATE_BURST): attempts started per backend, all replicas together.
	Backend Limit
	// Providers apply to one provider's deliveries each, on top of
	// Backend (WHGUARD_<NAME>_RATE_LIMIT and _RATE_BURST).
	Providers map[string]Limit
	// MaxInFlight bounds the requests in flight to one backend, all
	// replicas together (WHGUARD_BACKEND_MAX_IN_FLIGHT); 0 is no bound.
	MaxInFlight int
	// SlotTTL is how long an in-flight slot (or a breaker's probe) is
	// kept when its holder never releases it (it crashed): the forward
	// timeout plus the lease margin.
	SlotTTL time.Duration
	// Breaker is the circuit breaker per backend.
	Breaker BreakerConfig
	// Backends are the backends known at start, whose breaker states are
	// shown (and, in Redis, followed) before any delivery to them.
	Backends []string
}

// Limits reports whether deliveries of provider need asking at all: with
// nothing to check, the forwarder makes no call (no Redis round trip).
func (c Config) Limits(provider string) bool {
	return !c.Backend.Rate.IsZero() || c.MaxInFlight > 0 || !c.Providers[provider].Rate.IsZero()
}

// Ask names one delivery about to start.
type Ask struct {
	// Backend is the target's origin, scheme://host:port.
	Backend string
	// Provider is the event's provider.
	Provider string
	// Token identifies the delivery (its lease token): the in-flight slot
	// it takes is released by the same token.
	Token string
}

// Decision is the answer to an Ask.
type Decision struct {
	// Allowed: start the attempt now; when the backend has an in-flight
	// bound, a slot is taken and Release must give it back.
	Allowed bool
	// Reason says why not (HoldRate, HoldInFlight, HoldBreaker).
	Reason string
	// RetryAfter is when to ask again.
	RetryAfter time.Duration
}

// inFlightRetry is when a delivery turned down by the in-flight bound asks
// again: slots free when answers come in, which no clock predicts.
const inFlightRetry = 100 * time.Millisecond

// Circuit breaker defaults (WHGUARD_BREAKER_*).
const (
	DefaultBreakerWindow       = 30 * time.Second
	DefaultBreakerMinAttempts  = 20
	DefaultBreakerFailureRatio = 0.5
	DefaultBreakerCooldown     = 15 * time.Second
	// MaxBreakerCooldown caps the cooldown, which doubles while probes
	// fail.
	MaxBreakerCooldown = 5 * time.Minute
)
