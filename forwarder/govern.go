package forwarder

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/governor"
)

const (
	// governorTimeout bounds one question to the governor (a Redis round
	// trip); past it the shared state is taken as unavailable.
	governorTimeout = 2 * time.Second
	// maxMemoryHold is the longest a delivery turned down by the governor
	// waits in memory, holding its lease and slot, before asking again;
	// a longer wait goes to the journal (the lease handed back, due again
	// when the governor said), so that rate-limited rows do not pin the
	// process's slots and leases for long.
	maxMemoryHold = time.Second
)

// admit asks the governor whether j, which holds a slot, may start now.
// It returns ok with the Ask to release after the attempt, or !ok once j
// has been held (its lease handed back without spending an attempt, its
// slot freed). A short wait is spent here, a longer one in the journal.
func (f *Forwarder) admit(j job) (a governor.Ask, ok bool) {
	d := j.d
	g := f.cfg.Governor
	a = governor.Ask{Backend: f.origins[d.Provider], Provider: d.Provider, Token: d.LeaseToken.String()}
	if g == nil {
		return a, true
	}
	counted := false
	for {
		ctx, cancel := context.WithTimeout(f.aborted, governorTimeout)
		dec, err := g.Acquire(ctx, a)
		cancel()
		switch {
		case f.aborted.Err() != nil:
			defer f.freeSlot(j)
			f.release(d)
			return a, false
		case err != nil:
			// Nothing goes out past a limit that cannot be checked: the
			// event waits in the journal, its attempt unspent (the
			// governor logs the outage once).
			defer f.freeSlot(j)
			f.hold(d, f.cfg.UnavailableHold, governor.HoldUnavailable, true)
			return a, false
		case dec.Allowed:
			return a, true
		}
		if !counted {
			f.cfg.Metrics.held(d.Provider, dec.Reason)
			counted = true
		}
		if dec.RetryAfter > maxMemoryHold || f.cfg.Now().Add(dec.RetryAfter+f.cfg.Timeout).After(j.recordBy) {
			defer f.freeSlot(j)
			f.hold(d, dec.RetryAfter, dec.Reason, false)
			return a, false
		}
		t := time.NewTimer(dec.RetryAfter)
		select {
		case <-t.C:
		case <-f.aborted.Done():
			t.Stop()
		}
	}
}

// unadmit gives back what a took once the backend has answered with
// status (0: no answer), or, when sent is false, once it turned out not to
// be sent. When Redis does not answer, a slot expires by itself.
func (f *Forwarder) unadmit(a governor.Ask, sent bool, status int) {
	if f.cfg.Governor == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), governorTimeout)
	defer cancel()
	var err error
	if sent {
		err = f.cfg.Governor.Finish(ctx, a, governor.OutcomeOf(status))
	} else {
		err = f.cfg.Governor.Release(ctx, a)
	}
	if err != nil {
		f.log.Debug("release in-flight slot failed; it expires by itself", zap.String("backend", a.Backend), zap.Error(err))
	}
}
