package governor

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Local keeps the limits in this process: exact for one replica, and per
// replica when several run (each allows the whole rate), which is why
// WHGUARD_REDIS_URL exists.
type Local struct {
	cfg Config
	now func() time.Time
	closeHook

	mu sync.Mutex
	// tat is each rate key's theoretical arrival time (GCRA).
	tat map[string]time.Time
	// slots holds each backend's in-flight tokens and when they expire.
	slots map[string]map[string]time.Time
	// breakers holds each backend's circuit breaker.
	breakers map[string]*breaker
}

// NewLocal builds a Local governor; now nil means time.Now.
func NewLocal(cfg Config, now func() time.Time) (*Local, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("governor: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	l := &Local{cfg: cfg, now: now, tat: map[string]time.Time{}, slots: map[string]map[string]time.Time{}, breakers: map[string]*breaker{}}
	for _, b := range cfg.Backends {
		l.breakers[b] = &breaker{}
	}
	return l, nil
}

func (l *Local) breaker(backend string) *breaker {
	b := l.breakers[backend]
	if b == nil {
		b = &breaker{}
		l.breakers[backend] = b
	}
	return b
}

// Limits reports whether provider's deliveries need asking.
func (l *Local) Limits(provider string) bool { return l.cfg.Limits(provider) }

// Acquire says whether a's delivery may start now. The breaker is
// checked first; then nothing is spent unless every limit passes: a rate
// turned down takes no slot, a full backend spends no rate, and a probe
// that a limit holds is given up for the next delivery.
func (l *Local) Acquire(_ context.Context, a Ask) (Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.cfg.Breaker.Enabled {
		b := l.breaker(a.Backend)
		if ok, wait := b.check(now, a.Token, l.cfg.SlotTTL); !ok {
			return Decision{Reason: HoldBreaker, RetryAfter: wait}, nil
		}
	}
	d := l.limit(now, a)
	if !d.Allowed && l.cfg.Breaker.Enabled {
		l.breaker(a.Backend).abandon(now, a.Token)
	}
	return d, nil
}

// limit applies the rate limits and the in-flight bound.
func (l *Local) limit(now time.Time, a Ask) Decision {
	if l.cfg.MaxInFlight > 0 {
		held := l.slots[a.Backend]
		for tok, exp := range held {
			if !exp.After(now) {
				delete(held, tok)
			}
		}
		if _, mine := held[a.Token]; !mine && len(held) >= l.cfg.MaxInFlight {
			return Decision{Reason: HoldInFlight, RetryAfter: inFlightRetry}
		}
	}
	type grant struct {
		key string
		tat time.Time
	}
	var grants []grant
	var wait time.Duration
	for _, rk := range rateKeys(l.cfg, a) {
		tat := l.tat[rk.key]
		if tat.Before(now) {
			tat = now
		}
		next := tat.Add(rk.limit.Rate.interval())
		allowAt := next.Add(-time.Duration(rk.limit.burst()) * rk.limit.Rate.interval())
		if allowAt.After(now) {
			wait = max(wait, allowAt.Sub(now))
			continue
		}
		grants = append(grants, grant{rk.key, next})
	}
	if wait > 0 {
		return Decision{Reason: HoldRate, RetryAfter: wait}
	}
	for _, g := range grants {
		l.tat[g.key] = g.tat
	}
	if l.cfg.MaxInFlight > 0 {
		if l.slots[a.Backend] == nil {
			l.slots[a.Backend] = map[string]time.Time{}
		}
		l.slots[a.Backend][a.Token] = now.Add(l.cfg.SlotTTL)
	}
	return Decision{Allowed: true}
}

// Release gives back what a's allowed delivery took without an outcome
// (it was not sent after all): its slot, and its probe if it was one.
func (l *Local) Release(_ context.Context, a Ask) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.slots[a.Backend], a.Token)
	if b := l.breakers[a.Backend]; b != nil {
		b.abandon(l.now(), a.Token)
	}
	return nil
}

// Finish gives back a's slot once its attempt ended with o, and counts o
// for the backend's breaker; a breaker this closes (its probe succeeded)
// is told to OnClose's hook.
func (l *Local) Finish(_ context.Context, a Ask, o Outcome) error {
	l.mu.Lock()
	delete(l.slots[a.Backend], a.Token)
	closed := false
	if l.cfg.Breaker.Enabled {
		b := l.breaker(a.Backend)
		was := b.state
		b.record(l.cfg.Breaker, l.now(), a.Token, o)
		closed = was != BreakerClosed && b.state == BreakerClosed
	}
	l.mu.Unlock()
	if closed {
		l.closed(a.Backend)
	}
	return nil
}

// BreakerStates reads every known backend's breaker.
func (l *Local) BreakerStates() map[string]BreakerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]BreakerState, len(l.breakers))
	for k, b := range l.breakers {
		out[k] = b.state
	}
	return out
}

// InFlight counts the slots held on backend.
func (l *Local) InFlight(_ context.Context, backend string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	now := l.now()
	for _, exp := range l.slots[backend] {
		if exp.After(now) {
			n++
		}
	}
	return n, nil
}

// rateKey is one rate limit an Ask is subject to, with the key its state
// is kept under.
type rateKey struct {
	key   string
	limit Limit
}

// rateKeys lists the limits a is subject to: its backend's, then its
// provider's. The provider's key carries the backend too, so a provider
// moved to another backend starts afresh there.
func rateKeys(c Config, a Ask) []rateKey {
	var ks []rateKey
	if !c.Backend.Rate.IsZero() {
		ks = append(ks, rateKey{"rate:" + a.Backend, c.Backend})
	}
	if l := c.Providers[a.Provider]; !l.Rate.IsZero() {
		ks = append(ks, rateKey{"rate:" + a.Backend + ":" + a.Provider, l})
	}
	return ks
}

// Settings returns the limits it applies.
func (l *Local) Settings() Config { return l.cfg }
