package forwarder

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

// Wake asks the fetcher to look for ready rows now: a row may be ready (a
// commit of a pending row here, a NOTIFY from another replica, a replay).
// It never blocks.
func (f *Forwarder) Wake() {
	f.adm.announce()
	f.poke()
}

// poke wakes the fetcher without announcing a row (a slot was freed).
func (f *Forwarder) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// pokeIf pokes the fetcher when an admission decision says so.
func (f *Forwarder) pokeIf(wake bool) {
	if wake {
		f.poke()
	}
}

// fetchLoop leases whenever it is woken (a commit here, a NOTIFY from
// another replica, a freed slot) or the poll interval passes, until ctx
// ends. It is the only goroutine that leases.
func (f *Forwarder) fetchLoop(ctx context.Context) {
	poll := time.NewTicker(f.cfg.PollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-poll.C:
			f.adm.poll(f.cfg.Now(), f.cfg.PollInterval)
		}
		for ctx.Err() == nil && f.fetchOnce() {
		}
	}
}

// fetchOnce leases the batch admission plans and starts its deliveries; it
// reports whether to lease again at once (the batch was full and slots are
// left).
func (f *Forwarder) fetchOnce() bool {
	if !f.pausesKnown() {
		return false
	}
	plan := f.adm.planLease(f.cfg.Now())
	if plan.n == 0 {
		return false
	}
	// Not cancelled by Stop's first step: a lease statement interrupted
	// after its commit would strand rows as processing, their attempt
	// spent. Stop waits for it, until its deadline passes (f.aborted); a
	// row stranded then comes back through the reaper.
	lctx, cancel := context.WithTimeout(f.aborted, leaseStatementTimeout)
	leasedAt := f.cfg.Now()
	leased, err := f.cfg.Store.Lease(lctx, plan.n, f.cfg.Timeout+f.cfg.LeaseMargin)
	cancel()
	if err != nil {
		if f.aborted.Err() == nil {
			f.log.Warn("lease failed", zap.Error(err))
		}
		return false
	}
	// Set before the deliveries start: their ends read it.
	f.adm.leased(len(leased), plan.n)
	// Outcomes are retried until shortly before the lease expires.
	recordBy := leasedAt.Add(f.cfg.Timeout + f.cfg.LeaseMargin - time.Second)
	// Rows leased together are admitted together: one governor call per
	// provider instead of one per row. Not rows leased to wait for a
	// slot (those past plan.start): their permits would be held (and
	// refused to deliveries that are running) while they wait, and the
	// decision be stale when they start; each asks when it has its slot.
	pre := f.preAdmit(leased[:min(plan.start, len(leased))])
	for i, d := range leased {
		f.inflight.Add(1)
		j := job{d: d, recordBy: recordBy}
		if i < len(pre) {
			j.pre = pre[i]
		}
		f.startLeased(j)
	}
	return len(leased) == plan.n
}

// Claim reserves a delivery for an event its receiver is about to journal,
// so the event can be inserted already leased for the returned duration
// (journal.Event.LeaseFor) and, once committed, delivered from memory by
// Dispatch: no lease statement, and one write of the row fewer per
// delivery. The claim holds no delivery slot until Dispatch finds one
// free (slots bound the requests to the backends, not the commits). It
// declines before Start and after Stop, until the pauses are read, and
// when admission declines (admission.claim). Every accepted claim must end
// in exactly one Dispatch or Unclaim.
func (f *Forwarder) Claim() (leaseFor time.Duration, ok bool) {
	if f.pauses.Load() == nil {
		return 0, false // see Start: pauses hold from the first moment
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started || f.stopped || !f.adm.claim() {
		return 0, false
	}
	f.inflight.Add(1) // under mu: never after Stop's Wait has begun
	return f.cfg.Timeout + f.cfg.LeaseMargin, true
}

// Dispatch delivers a claimed event whose leased row is committed, as soon
// as a delivery slot is free. d carries the row's id, its first attempt
// and the claim's lease token; d.LeaseExpiresAt bounds how long it may
// wait for a slot and how long its outcome may be retried (measured from
// before the commit, so never past the row's real lease).
func (f *Forwarder) Dispatch(d journal.Delivery) {
	j := job{d: d, recordBy: d.LeaseExpiresAt.Add(-time.Second), claimed: true}
	f.goDeliver(func() { f.deliverWhenSlot(j) })
}

// DispatchSync is Dispatch for an event whose sender waits for the
// backend's answer (sync mode). The returned channel receives exactly one
// value: the reply once it is stored with the event (a 2xx answer of a
// Sync target, body within journal.MaxReplyBytes), else nil (any other
// answer, no answer, a hold, a hand-back at shutdown). The delivery goes
// on whether or not anybody still reads the channel.
func (f *Forwarder) DispatchSync(d journal.Delivery) <-chan *journal.Reply {
	ch := make(chan *journal.Reply, 1)
	j := job{d: d, recordBy: d.LeaseExpiresAt.Add(-time.Second), claimed: true, answer: ch}
	f.goDeliver(func() { f.deliverWhenSlot(j) })
	return ch
}

// Unclaim gives back a claim that holds no slot: its event was not
// inserted (a duplicate, a conflict, a failed commit), or its row is
// being handed back.
func (f *Forwarder) Unclaim() {
	f.pokeIf(f.adm.unclaim()) // the place it kept is free for the rows waiting
	f.inflight.Done()
}
