package forwarder

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/journal"
)

// admission decides when rows are leased and which new events are
// delivered from memory. It owns:
//   - wake, the fetcher's wake-up (Wake and poke send, fetchLoop alone
//     receives);
//   - announced, probe and lastLease, set by Wake, the poll and the
//     fetcher;
//   - backlog and slotWait, set by the fetcher, read by the pool;
//   - claims, the claims not yet over (Claim to the end of the attempt, or
//     to Unclaim, or to handing the row back), and slotWaiters, those of
//     them committed and waiting for a delivery slot; rowWaiters, the
//     leased rows waiting for one.
type admission struct {
	wake chan struct{}
	// announced is true when, since the fetcher last leased, something
	// said a row may be ready: a Wake (a pending row committed here, a
	// NOTIFY from another replica, a row handed back or reaped, a replay,
	// a retry or the next event of an order key due).
	announced atomic.Bool
	// probe is set by a poll once the fetcher has not leased for
	// pollsBeforeProbe polls: rows nobody announced (a retry that came
	// due) may be waiting behind claims that keep every slot busy, so the
	// fetcher leases even without a free slot to find out.
	probe     atomic.Bool
	lastLease atomic.Int64 // when the fetcher last leased, Unix nanoseconds
	// backlog is true while ready rows are waiting in the journal: the
	// last lease filled everything it asked for. A finished delivery then
	// wakes the fetcher (a quarter of the slots at a time).
	backlog atomic.Bool
	// slotWait is true while the fetcher, woken, found every slot busy:
	// a freed slot must wake it. (Busy slots used to count as a backlog,
	// which held claims to half the limit and sent the declined events
	// through lease statements, which kept the flag up.)
	slotWait    atomic.Bool
	claims      atomic.Int32
	slotWaiters atomic.Int32
	// rowWaiters counts leased rows waiting for a slot (added as the
	// fetcher starts them, so its next lease sees them).
	rowWaiters atomic.Int32
}

// pollsBeforeProbe is how many poll intervals without a lease make a poll
// probe for rows: rows nobody announced (a retry coming due) wait about
// that long behind a stream of claims that keeps every slot busy.
const pollsBeforeProbe = 5

// fetcherWaits reports whether a freed slot should wake the fetcher: rows
// are waiting, or it found no slot the last time it was woken.
func (a *admission) fetcherWaits() bool {
	return a.backlog.Load() || a.slotWait.Load()
}

func newAdmission() admission {
	return admission{wake: make(chan struct{}, 1)}
}

// Wake asks the fetcher to look for ready rows now: a row may be ready (a
// commit of a pending row here, a NOTIFY from another replica, a replay).
// It never blocks.
func (f *Forwarder) Wake() {
	f.announced.Store(true)
	f.poke()
}

// poke wakes the fetcher without announcing a row (a slot was freed).
func (f *Forwarder) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// fetchLoop leases up to the number of free delivery slots whenever it is
// woken (a commit here, a NOTIFY from another replica, a finished delivery)
// or the poll interval passes, until ctx ends.
func (f *Forwarder) fetchLoop(ctx context.Context) {
	poll := time.NewTicker(f.cfg.PollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-poll.C:
			if f.cfg.Now().UnixNano()-f.lastLease.Load() >= int64(pollsBeforeProbe*f.cfg.PollInterval) {
				f.probe.Store(true)
			}
		}
		for ctx.Err() == nil && f.fetchOnce() {
		}
	}
}

// fetchOnce leases one batch and starts its deliveries; it reports whether
// to lease again at once (the batch was full and slots are left).
func (f *Forwarder) fetchOnce() bool {
	if !f.pausesKnown() {
		return false
	}
	busy := false // leasing rows to wait for a slot
	free := f.free()
	if free <= 0 {
		f.slotWait.Store(true) // a finished delivery wakes us
		// Unless it finished just before the store and saw no flag up:
		// look again now that it is.
		if free = f.free(); free <= 0 {
			// Every slot busy. Rows announced (or looked for by a probe)
			// may be waiting behind claims, and claims waiting for a slot
			// take every freed one: lease some anyway, up to half the
			// limit, to wait for slots in turn with the claims (a
			// channel's senders are served first come, first served).
			if !f.announced.Load() && !f.probe.Load() {
				return false
			}
			if free = max(1, f.limit.current()/2) - int(f.rowWaiters.Load()); free <= 0 {
				return false
			}
			busy = true
		}
	}
	f.probe.Store(false)
	// Cleared even when leasing rows to wait: kept while every slot stays
	// busy, it made the next event of an order key wait for a freed slot
	// or the poll (attempt.go skips its wake while the fetcher waits).
	// The rows leased to wait ask for more as they get their slots.
	f.slotWait.Store(false)
	// Consumed by this lease: a Wake from now on is for the next one.
	f.announced.Store(false)
	f.lastLease.Store(f.cfg.Now().UnixNano())
	n := min(free, maxLeaseBatch)
	// Not cancelled by Stop's first step: a lease statement interrupted
	// after its commit would strand rows as processing, their attempt
	// spent. Stop waits for it, until its deadline passes (f.aborted); a
	// row stranded then comes back through the reaper.
	lctx, cancel := context.WithTimeout(f.aborted, leaseStatementTimeout)
	leasedAt := f.cfg.Now()
	leased, err := f.cfg.Store.Lease(lctx, n, f.cfg.Timeout+f.cfg.LeaseMargin)
	cancel()
	if err != nil {
		if f.aborted.Err() == nil {
			f.log.Warn("lease failed", zap.Error(err))
		}
		return false
	}
	// Set before the deliveries start: their ends read it.
	f.backlog.Store(len(leased) == n)
	// Outcomes are retried until shortly before the lease expires.
	recordBy := leasedAt.Add(f.cfg.Timeout + f.cfg.LeaseMargin - time.Second)
	// Rows leased together are admitted together: one governor call per
	// provider instead of one per row. Not rows that will wait for a
	// slot: their permits would be held (and refused to deliveries that
	// are running) while they wait, and the decision be stale when they
	// start; each asks when it has its slot.
	var pre []*governor.Decision
	if !busy {
		pre = f.preAdmit(leased)
	}
	for i, d := range leased {
		f.inflight.Add(1)
		j := job{d: d, recordBy: recordBy}
		if pre != nil {
			j.pre = pre[i]
		}
		f.startLeased(j)
	}
	return len(leased) == n
}

// Claim reserves a delivery for an event its receiver is about to journal,
// so the event can be inserted already leased for the returned duration
// (journal.Event.LeaseFor) and, once committed, delivered from memory by
// Dispatch: no lease statement, and one write of the row fewer per
// delivery. The claim holds no delivery slot until Dispatch finds one
// free (slots bound the requests to the backends, not the commits). It
// declines before Start and after Stop; until the pauses are read; when the slots' ceiling of claims
// are already waiting for their commit or a slot; and when as many
// committed claims as the in-flight limit in force (or a quarter of the
// ceiling, when more) are waiting for a slot, each holding its body.
// Every accepted claim must end in exactly one Dispatch or Unclaim.
func (f *Forwarder) Claim() (leaseFor time.Duration, ok bool) {
	// Claims in their commit hold no slot and are bounded by the ceiling
	// (the unslotted channel's capacity), not the limit in force: an event
	// declined for them would wait for a slot all the same, in the
	// journal, and cost a lease statement more. Rows waiting in the
	// journal are not starved by claims: the fetcher leases them even
	// with every slot busy, and they wait for slots in turn with the
	// claims (fetchOnce).
	if waiting := f.slotWaiters.Load(); waiting > 0 && int(waiting) >= max(f.limit.current(), f.limit.ceiling()/4) {
		return 0, false
	}
	if f.pauses.Load() == nil {
		return 0, false // see Start: pauses hold from the first moment
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started || f.stopped {
		return 0, false
	}
	select {
	case f.unslotted <- struct{}{}:
	default:
		return 0, false
	}
	f.claims.Add(1)
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
	<-f.unslotted
	f.claims.Add(-1)
	f.inflight.Done()
	if f.fetcherWaits() {
		f.poke() // the place it kept is free for the rows waiting
	}
}
