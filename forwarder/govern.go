package forwarder

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/internal/groupcommit"
	"github.com/whguard/whguard/journal"
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
	waited := time.Duration(0)
	pre := j.pre
	for {
		var dec governor.Decision
		var err error
		if pre != nil {
			dec, pre = *pre, nil // decided with the rows leased together
		} else {
			ctx, cancel := context.WithTimeout(f.aborted, governorTimeout)
			dec, err = f.acquire(ctx, a)
			cancel()
		}
		switch {
		case f.aborted.Err() != nil:
			defer f.freeSlot()
			f.release(d)
			return a, false
		case err != nil:
			// Nothing goes out past a limit that cannot be checked: the
			// event waits in the journal, its attempt unspent (the
			// governor logs the outage once).
			defer f.freeSlot()
			f.hold(d, f.cfg.UnavailableHold, governor.HoldUnavailable, true)
			return a, false
		case dec.Allowed:
			return a, true
		}
		if !counted {
			f.cfg.Metrics.held(d.Provider, dec.Reason)
			counted = true
		}
		if dec.Reason == governor.HoldBreaker {
			f.breakerHolds(a.Backend)
		}
		// Waiting here keeps a delivery slot: at most maxMemoryHold in
		// all for one delivery, and by at most governorWaitBound
		// deliveries at once, so that a limited backend cannot take every
		// slot from the others.
		if waited+dec.RetryAfter > maxMemoryHold || f.cfg.Now().Add(dec.RetryAfter+f.cfg.Timeout).After(j.recordBy) ||
			!f.adm.startGovernorWait() {
			defer f.freeSlot()
			f.hold(d, dec.RetryAfter, dec.Reason, false)
			return a, false
		}
		waited += dec.RetryAfter
		t := time.NewTimer(dec.RetryAfter)
		select {
		case <-t.C:
		case <-f.aborted.Done():
			t.Stop()
		}
		f.adm.endGovernorWait()
	}
}

// askGroups batches, per provider, the questions of deliveries that ask
// the governor one at a time (rows that waited for a slot, claims, asks
// after a wait): those asking while a batch is out go together in the
// next, one AcquireBatch (one Redis round trip) instead of one each; a
// lone ask goes at once. Nil when the governor cannot batch.
func (f *Forwarder) askGroups() map[string]*groupcommit.Group[governor.Ask, governor.Decision] {
	bg, ok := f.cfg.Governor.(batchGovernor)
	if !ok {
		return nil
	}
	groups := make(map[string]*groupcommit.Group[governor.Ask, governor.Decision], len(f.cfg.Targets))
	for name := range f.cfg.Targets {
		groups[name] = groupcommit.New(groupcommit.Config{
			MaxBatch: maxLeaseBatch, MaxInFlight: 2, Timeout: governorTimeout, Context: f.aborted,
		}, bg.AcquireBatch)
	}
	return groups
}

// acquire asks the governor whether a may start, in a batch with the other
// asks of its provider when the governor batches (askGroups).
func (f *Forwarder) acquire(ctx context.Context, a governor.Ask) (governor.Decision, error) {
	if g := f.asks[a.Provider]; g != nil {
		ds, err := g.Do(ctx, []governor.Ask{a})
		if err != nil {
			return governor.Decision{}, err
		}
		return ds[0], nil
	}
	return f.cfg.Governor.Acquire(ctx, a)
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

// batchGovernor is a governor that decides several deliveries in one
// call (one Redis round trip).
type batchGovernor interface {
	AcquireBatch(ctx context.Context, asks []governor.Ask) ([]governor.Decision, error)
}

// preAdmit asks the governor about leased rows together, one call per
// provider with two rows or more, and returns each row's answer (nil:
// ask when its attempt starts, as after a failed call).
func (f *Forwarder) preAdmit(leased []journal.Delivery) []*governor.Decision {
	bg, ok := f.cfg.Governor.(batchGovernor)
	if !ok || len(leased) < 2 {
		return nil
	}
	byProvider := map[string][]int{}
	for i, d := range leased {
		if _, ok := f.cfg.Targets[d.Provider]; ok {
			byProvider[d.Provider] = append(byProvider[d.Provider], i)
		}
	}
	out := make([]*governor.Decision, len(leased))
	for p, idx := range byProvider {
		if len(idx) < 2 {
			continue
		}
		asks := make([]governor.Ask, len(idx))
		for k, i := range idx {
			asks[k] = governor.Ask{Backend: f.origins[p], Provider: p, Token: leased[i].LeaseToken.String()}
		}
		ctx, cancel := context.WithTimeout(f.aborted, governorTimeout)
		ds, err := bg.AcquireBatch(ctx, asks)
		cancel()
		if err != nil {
			continue // each asks alone, and is held if that fails too
		}
		for k, i := range idx {
			out[i] = &ds[k]
		}
	}
	return out
}

// unadmitPre gives back what j's batch answer took, when j will not be
// sent after all (paused, or handed back before it had a slot).
func (f *Forwarder) unadmitPre(j job) {
	if j.pre == nil || !j.pre.Allowed {
		return
	}
	f.unadmit(governor.Ask{Backend: f.origins[j.d.Provider], Provider: j.d.Provider, Token: j.d.LeaseToken.String()}, false, 0)
}
