package governor

import (
	"sync/atomic"
	"time"
)

// BreakerConfig configures the circuit breaker per backend. It opens when,
// within Window, at least MinAttempts attempts ended and at least
// FailureRatio of them failed transiently; while open no delivery starts;
// after Cooldown (doubling while probes fail, up to MaxBreakerCooldown)
// one delivery goes out as a probe: a 2xx closes it, a failure reopens it.
type BreakerConfig struct {
	// Enabled is WHGUARD_BREAKER=on.
	Enabled      bool
	Window       time.Duration
	MinAttempts  int
	FailureRatio float64
	Cooldown     time.Duration
}

// BreakerState is a breaker's state, the value of
// whguard_backend_breaker_state.
type BreakerState int

const (
	BreakerClosed   BreakerState = 0
	BreakerOpen     BreakerState = 1
	BreakerHalfOpen BreakerState = 2
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// Outcome is how an attempt ended, as the breaker counts it.
type Outcome int

const (
	// Succeeded: any answer that is not a failure (a 2xx, and also a
	// permanent 4xx: the backend is up, the event is wrong).
	Succeeded Outcome = iota
	// FailedTransiently: the backend failed whatever the event: a
	// connection error, a timeout, 401 or 403 (it refuses whguard's
	// requests: a wrong webhook secret), 408, 429, 502, 503 or 504. Always
	// a failure for the breaker.
	FailedTransiently
	// FailedOnEvent: a 500 or another 5xx (and 425), which may be about
	// the event rather than the backend (a handler that throws on one
	// event's content). A failure for the breaker only while no attempt
	// to the backend succeeded within its window: poison events of one
	// provider must not stop the deliveries that succeed.
	FailedOnEvent
)

// OutcomeOf classifies an attempt by its HTTP status (0: no answer).
func OutcomeOf(status int) Outcome {
	switch {
	case status == 0, status == 401, status == 403, status == 408, status == 429, status == 502, status == 503, status == 504:
		return FailedTransiently
	case status == 425, status >= 500:
		return FailedOnEvent
	}
	return Succeeded
}

// breaker is one backend's breaker, kept in process (Local). The Redis
// governor runs the same rules in breakerScript.
type breaker struct {
	state BreakerState
	// The attempts of the current window (from curStart) and of the one
	// before; the previous one is weighted by how much of it still lies
	// within Window of now (a sliding window in two counters).
	curStart              time.Time
	curTotal, curFailed   float64
	prevTotal, prevFailed float64
	until                 time.Time // open: when the probe may go
	cooldown              time.Duration
	probe                 string // half-open: the probe's token
	probeExpires          time.Time
	// lastSuccess is when an attempt last Succeeded (zero: never).
	lastSuccess time.Time
}

// slide moves the window to now.
func (b *breaker) slide(cfg BreakerConfig, now time.Time) {
	if b.curStart.IsZero() {
		b.curStart = now
	}
	for now.Sub(b.curStart) >= cfg.Window {
		b.prevTotal, b.prevFailed = b.curTotal, b.curFailed
		b.curTotal, b.curFailed = 0, 0
		b.curStart = b.curStart.Add(cfg.Window)
		if now.Sub(b.curStart) >= cfg.Window {
			// More than a whole window passed: nothing is left of either.
			b.prevTotal, b.prevFailed = 0, 0
			b.curStart = now
		}
	}
}

// counts estimates the attempts and failures within Window of now.
func (b *breaker) counts(cfg BreakerConfig, now time.Time) (total, failed float64) {
	w := 1 - float64(now.Sub(b.curStart))/float64(cfg.Window)
	return b.curTotal + w*b.prevTotal, b.curFailed + w*b.prevFailed
}

// check says whether a delivery with token may start: closed, yes; open
// before its cooldown ends, no; after it (or when the probe out was lost),
// this delivery becomes the probe.
func (b *breaker) check(now time.Time, token string, ttl time.Duration) (ok bool, wait time.Duration) {
	switch {
	case b.state == BreakerClosed:
		return true, 0
	case b.state == BreakerOpen && now.Before(b.until):
		return false, b.until.Sub(now)
	case b.state == BreakerHalfOpen && b.probe != token && now.Before(b.probeExpires):
		return false, min(b.probeExpires.Sub(now), time.Second)
	}
	b.state, b.probe, b.probeExpires = BreakerHalfOpen, token, now.Add(ttl)
	return true, 0
}

// record counts an attempt that ended. The probe's outcome decides the
// state; attempts that end while the breaker is not closed (started
// before it opened) are not counted.
func (b *breaker) record(cfg BreakerConfig, now time.Time, token string, o Outcome) {
	if o == Succeeded {
		defer func() { b.lastSuccess = now }()
	}
	if b.state == BreakerHalfOpen && token == b.probe {
		b.probe = ""
		if o == Succeeded {
			*b = breaker{}
			return
		}
		b.cooldown = min(2*b.cooldown, MaxBreakerCooldown)
		b.state, b.until = BreakerOpen, now.Add(b.cooldown)
		return
	}
	if b.state != BreakerClosed {
		return
	}
	if o == FailedOnEvent && !b.lastSuccess.IsZero() && now.Sub(b.lastSuccess) < cfg.Window {
		return // other events succeed: this one is about its content
	}
	b.slide(cfg, now)
	b.curTotal++
	if o != Succeeded {
		b.curFailed++
	}
	if total, failed := b.counts(cfg, now); total >= float64(cfg.MinAttempts) && failed >= cfg.FailureRatio*total {
		b.state, b.cooldown = BreakerOpen, cfg.Cooldown
		b.until = now.Add(b.cooldown)
	}
}

// abandon gives up a probe that was not sent (a limit held it): the
// breaker stays open, the next delivery may probe at once.
func (b *breaker) abandon(now time.Time, token string) {
	if b.state == BreakerHalfOpen && b.probe == token {
		b.state, b.probe, b.until = BreakerOpen, "", now
	}
}

// closeHook tells of a backend's recovery: a breaker closed by a probe
// this process sent. Local and Redis embed it.
type closeHook struct {
	fn atomic.Pointer[func(backend string)]
}

// OnClose sets fn, called with the backend's origin when its breaker
// closes because a probe this process sent succeeded (the backend
// recovered). With Redis, only the replica whose probe it was hears of it,
// so a recovery is told once across replicas. It is called on the
// goroutine that reported the probe's outcome (Finish), outside the
// governor's locks. A later call replaces fn.
func (h *closeHook) OnClose(fn func(backend string)) { h.fn.Store(&fn) }

// closed calls the hook for backend, if one is set.
func (h *closeHook) closed(backend string) {
	if fn := h.fn.Load(); fn != nil {
		(*fn)(backend)
	}
}
