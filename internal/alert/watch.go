package alert

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Probes are what the notifier watches. Nil fields are not watched.
type Probes struct {
	// Journal answers nil while the journal commits.
	Journal func(ctx context.Context) error
	// Redis answers nil while the shared limits' Redis answers (nil when
	// none is configured).
	Redis func(ctx context.Context) error
	// Backends reads each backend's breaker, pause and backlog.
	Backends func(ctx context.Context) (Backends, error)
}

// Backends is what the notifier watches of the backends: each one's
// state, and the providers paused by name.
type Backends struct {
	Backends []BackendState
	// PausedProviders maps each paused provider to the pause's reason.
	PausedProviders map[string]string
}

// BackendState is one backend as the notifier watches it.
type BackendState struct {
	// Backend is its origin, scheme://host:port.
	Backend string
	// Breaker is closed, open, half-open, or off.
	Breaker string
	// Paused says whether it is paused, PauseReason why.
	Paused      bool
	PauseReason string
	// Waiting counts its undelivered events; OldestAge is the oldest one's
	// age.
	Waiting   int
	OldestAge time.Duration
}

// Watch sets what the notifier watches once started (before Start: the
// probes often read parts built after the notifier, such as the
// forwarder, which itself tells the notifier of dead events).
func (n *Notifier) Watch(p Probes) { n.probes = p }

// Start runs the notifier until Stop: the sender, and the watcher that
// runs the probes every CheckInterval and reports due dead-event groups
// and repeats every second. Use it once (a startstop.Once makes a second
// call do nothing).
func (n *Notifier) Start(ctx context.Context) error {
	p := n.probes
	ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.done = make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for {
			select {
			case m := <-n.queue:
				n.send(ctx, m)
				n.unsent.Add(-1)
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		defer close(n.done)
		defer func() { <-sent }()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var lastCheck time.Time
		for {
			if now := n.cfg.Now(); now.Sub(lastCheck) >= n.cfg.CheckInterval {
				lastCheck = now
				n.Check(ctx, p)
			}
			n.flushDead()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return nil
}

// Stop reports the dead events gathered so far, sends what is waiting
// until ctx ends, then stops the notifier's goroutines and waits for them.
func (n *Notifier) Stop(ctx context.Context) error {
	if n.cancel == nil {
		return nil
	}
	n.reportDead(true)
	for n.unsent.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	unsent := n.unsent.Load()
	n.cancel()
	// Once cancelled, the sender gives up its message at once (its request
	// and its pause between tries end with the context) and the watcher's
	// probes too: wait for both, so nothing of the notifier outlives Stop.
	<-n.done
	if unsent > 0 {
		return fmt.Errorf("stop alerts: %d messages not sent: %w", unsent, ctx.Err())
	}
	return nil
}

// Check runs the probes once and sets the conditions they show.
func (n *Notifier) Check(ctx context.Context, p Probes) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	journalUp := true
	if p.Journal != nil {
		err := p.Journal(ctx)
		journalUp = err == nil
		n.Set("journal", err != nil,
			Message{Type: TypeJournalUnreachable, Severity: SeverityCritical,
				Summary: "The journal is unreachable: webhooks are answered 503 (senders retry) and deliveries wait."},
			Message{Type: TypeJournalRecovered, Summary: "The journal answers again: webhooks are accepted and deliveries resume."})
	}
	if p.Redis != nil {
		err := p.Redis(ctx)
		n.Set("redis", err != nil,
			Message{Type: TypeRedisUnreachable, Severity: SeverityWarning,
				Summary: "Redis is unreachable: webhooks are still acknowledged, deliveries to rate-limited backends wait."},
			Message{Type: TypeRedisRecovered, Summary: "Redis answers again: limited deliveries resume."})
	}
	if p.Backends == nil || !journalUp {
		return // unknown: keep the backend conditions as they were
	}
	bs, err := p.Backends(ctx)
	if err != nil {
		n.log.Debug("alert check: backends unknown this time")
		return
	}
	seen := map[string]bool{}
	// Their recoveries are written by recoveryOf when they clear.
	set := func(key string, m Message) {
		seen[key] = true
		n.Set(key, true, m, Message{})
	}
	for _, b := range bs.Backends {
		if b.Breaker == "open" || b.Breaker == "half-open" {
			set("breaker "+b.Backend,
				Message{Type: TypeBreakerOpen, Severity: SeverityCritical, Backend: b.Backend,
					Summary: fmt.Sprintf("Circuit breaker open for %s: deliveries to it wait (%d waiting).", b.Backend, b.Waiting)})
		}
		if b.Paused {
			set("pause backend "+b.Backend,
				Message{Type: TypePaused, Severity: SeverityInfo, Backend: b.Backend,
					Summary: fmt.Sprintf("Backend %s is paused (%s): deliveries to it wait.", b.Backend, reasonOr(b.PauseReason))})
		}
		if age := b.OldestAge; age > n.cfg.BacklogAge {
			set("backlog "+b.Backend,
				Message{Type: TypeBacklog, Severity: SeverityWarning, Backend: b.Backend,
					Summary: fmt.Sprintf("Backlog for %s: the oldest undelivered event is %s old (threshold %s), %d waiting.",
						b.Backend, age.Round(time.Second), n.cfg.BacklogAge, b.Waiting)})
		}
	}
	for name, reason := range bs.PausedProviders {
		set("pause provider "+name,
			Message{Type: TypePaused, Severity: SeverityInfo, Provider: name,
				Summary: fmt.Sprintf("Provider %s is paused (%s): its deliveries wait.", name, reasonOr(reason))})
	}
	// What held before and was not seen now has cleared; the conditions
	// others set (catch-up's, a backend refusing whguard) are theirs to
	// clear.
	for _, key := range n.Active() {
		if seen[key] || !probed(key) {
			continue
		}
		n.clear(key)
	}
}

// probedPrefixes start the keys of the conditions Check sets from the
// backends' probe.
var probedPrefixes = []string{"breaker ", "pause ", "backlog "}

// probed tells whether key is a condition Check sets from the backends'
// probe, and so clears when the probe no longer shows it.
func probed(key string) bool {
	for _, p := range probedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// clear ends the condition of key with the recovery message kept for it.
func (n *Notifier) clear(key string) {
	n.mu.Lock()
	c := n.conds[key]
	n.mu.Unlock()
	if c == nil {
		return
	}
	n.Set(key, false, Message{}, recoveryOf(c.msg))
}

// recoveryOf is the recovery message of a condition's message.
func recoveryOf(m Message) Message {
	r := Message{Provider: m.Provider, Backend: m.Backend}
	who := m.Backend
	if who == "" {
		who = m.Provider
	}
	switch m.Type {
	case TypeBreakerOpen:
		r.Type, r.Summary = TypeBreakerClosed, fmt.Sprintf("Circuit breaker closed for %s: deliveries resume.", who)
	case TypePaused:
		r.Type, r.Summary = TypeResumed, fmt.Sprintf("%s resumed.", who)
	case TypeBacklog:
		r.Type, r.Summary = TypeBacklogCleared, fmt.Sprintf("Backlog for %s is back under the threshold.", who)
	default:
		r.Type, r.Summary = m.Type+"_cleared", "Cleared: "+m.Summary
	}
	return r
}

func reasonOr(r string) string {
	if r == "" {
		return "no reason given"
	}
	return r
}
