package forwarder

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// pool bounds and runs the deliveries. It owns:
//   - slots: the requests to the backends (Concurrency); one is held from
//     the start of an attempt until the backend's answer is in. Of them,
//     only the adaptive limit's are in use (adapt.go): the others are
//     reserved, held by the pool itself, so the channel enforces the
//     limit as it enforces the ceiling;
//   - records: the finished attempts whose outcome is still being written
//     (Concurrency too). A slot is handed over to a record, so the next
//     delivery starts while the outcome waits for its batch, and when
//     outcomes back up the slots stay held and leasing stops;
//   - unslotted: the claims that hold no slot yet (Concurrency of them):
//     from Claim, through the commit, until a slot is free. A claim does
//     not take a slot while its event is being committed, so under load
//     new events keep the cheap path (measured with cmd/whguard-bench:
//     holding slots through the commit sent 43 % of new events to the
//     lease query; without, 7-12 % more acks on PostgreSQL and deliveries
//     keeping up with acks on the embedded journal);
//   - inflight: every delivery from its lease or claim to its end, which
//     Stop waits for;
//   - the delivery goroutines: idle hands work to one waiting for more,
//     workersQuit (closed once by quitWorkers) ends those that wait.
type pool struct {
	slots chan struct{}
	limit *inFlightLimit
	// reserveMu guards taking and giving back reserved slots; reserved
	// counts them, wantReserved is how many the limit asks for (Concurrency
	// minus the limit).
	reserveMu    sync.Mutex
	reserved     atomic.Int32
	wantReserved int
	records      chan struct{}
	unslotted    chan struct{}
	inflight     sync.WaitGroup

	idle        chan func()
	workersQuit chan struct{}
	quitOnce    sync.Once
	// workersStarted and workersLive count delivery goroutines (tests).
	workersStarted, workersLive atomic.Int32
}

// newPool makes a pool of concurrency slots whose in-flight limit adapts
// up to ceiling (at most concurrency), starting at now.
func newPool(concurrency, ceiling int, now time.Time) *pool {
	p := &pool{
		slots:       make(chan struct{}, concurrency),
		limit:       newInFlightLimit(min(ceiling, concurrency), now),
		records:     make(chan struct{}, concurrency),
		unslotted:   make(chan struct{}, concurrency),
		idle:        make(chan func()),
		workersQuit: make(chan struct{}),
	}
	p.applyLimit()
	return p
}

// applyLimit makes the limit's number of slots usable: it gives back
// reserved slots at once when the limit grew, and reserves free ones when
// it shrank (the rest as deliveries end, in putSlot). It reads the limit
// under reserveMu, so of two changes applied together the later wins.
func (p *pool) applyLimit() {
	p.reserveMu.Lock()
	defer p.reserveMu.Unlock()
	p.wantReserved = cap(p.slots) - p.limit.current()
	for int(p.reserved.Load()) > p.wantReserved {
		<-p.slots // a reserved one: never blocks
		p.reserved.Add(-1)
	}
	for int(p.reserved.Load()) < p.wantReserved {
		select {
		case p.slots <- struct{}{}:
			p.reserved.Add(1)
		default:
			return
		}
	}
}

// putSlot gives back a slot a delivery held, or keeps it reserved when the
// limit has shrunk below the slots in use.
func (p *pool) putSlot() {
	p.reserveMu.Lock()
	defer p.reserveMu.Unlock()
	if int(p.reserved.Load()) < p.wantReserved {
		p.reserved.Add(1)
		return
	}
	<-p.slots
}

// inUse is how many slots deliveries hold.
func (p *pool) inUse() int {
	return len(p.slots) - int(p.reserved.Load())
}

// workerIdle is how long a delivery goroutine waits for more work before
// it ends.
const workerIdle = 10 * time.Second

// free is how many rows the fetcher may lease: the slots neither in use
// nor reserved.
func (p *pool) free() int {
	return cap(p.slots) - len(p.slots)
}

// occupancy reads the bounds for the gauges.
func (p *pool) occupancy() occupancy {
	return occupancy{inFlight: p.inUse(), recording: len(p.records), claimsWaiting: len(p.unslotted), limit: p.limit.current()}
}

// goDeliver runs fn on a delivery goroutine that is waiting for work, or
// on a new one. Reusing them keeps their grown stacks: a goroutine per
// delivery grew its stack from scratch every time (runtime.newstack was
// 6 % of whguard's CPU draining a backlog). Their number follows the
// deliveries in flight, which the slots bound.
func (p *pool) goDeliver(fn func()) {
	select {
	case p.idle <- fn:
	default:
		go p.worker(fn)
	}
}

func (p *pool) worker(fn func()) {
	p.workersStarted.Add(1)
	p.workersLive.Add(1)
	defer p.workersLive.Add(-1)
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		fn()
		fn = nil // let the delivery (its body) go while waiting
		t.Reset(workerIdle)
		select {
		case fn = <-p.idle:
		case <-t.C:
			return
		case <-p.workersQuit:
			return
		}
	}
}

// quitWorkers ends the delivery goroutines waiting for work.
func (p *pool) quitWorkers() {
	p.quitOnce.Do(func() { close(p.workersQuit) })
}

// startLeased delivers a row the fetcher leased (counted in inflight) in
// the slot it counted for it, or waits for one when a claim took it.
func (f *Forwarder) startLeased(j job) {
	select {
	case f.slots <- struct{}{}:
		f.goDeliver(func() { f.deliver(j) })
	default:
		// Its slot went to a claim: the governor's decision taken with the
		// lease would be stale by the time a slot frees (a rate token spent
		// now, the request sent later, beside others granted then), so its
		// permit goes back and it asks again when it has a slot.
		f.unadmitPre(j)
		j.pre = nil
		f.rowWaiters.Add(1) // here, not in the goroutine: the next lease counts it
		f.goDeliver(func() { f.deliverWhenSlot(j) })
	}
}

// deliverWhenSlot delivers j as soon as a delivery slot is free. It waits
// while j's lease still leaves room for a whole attempt and half the lease
// margin (5 s by default): past that, or past the shutdown deadline, the
// row is handed back to the journal without spending its attempt, and
// whoever leases it next delivers it.
func (f *Forwarder) deliverWhenSlot(j job) {
	// Claim declines new claims while as many as the limit (or a quarter
	// of its ceiling) wait here; the fetcher leases rows to wait here up
	// to half the limit (counted by startLeased, before this goroutine
	// runs), and more of them as these get their slots.
	waited := func() {
		limit := f.limit.current()
		if n := f.rowWaiters.Add(-1); int(n) <= limit/4 && (f.backlog.Load() || f.announced.Load()) {
			// Freed slots go to the waiting, so free ones never add up
			// to a quarter while claims wait: ask for more rows here.
			f.poke()
		}
	}
	if j.claimed {
		waited = func() { f.slotWaiters.Add(-1) }
	}
	select {
	case f.slots <- struct{}{}:
		if !j.claimed {
			waited()
		}
		f.startSlotted(j)
		return
	default:
	}
	if j.claimed {
		f.slotWaiters.Add(1)
	}
	// What the lease has left, less a whole attempt and half the margin
	// (a lease already over, or a zero expiry, waits not at all).
	wait := time.Duration(0)
	if left := j.recordBy.Add(time.Second).Sub(f.cfg.Now()); left > 0 {
		wait = left - f.cfg.Timeout - f.cfg.LeaseMargin/2
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case f.slots <- struct{}{}:
		waited()
		f.startSlotted(j)
		return
	case <-timer.C:
		f.log.Debug("no delivery slot in time; the event goes back to the journal",
			zap.Int64("id", j.d.ID), zap.String("provider", j.d.Provider))
	case <-f.aborted.Done():
	}
	waited()
	f.unadmitPre(j)
	j.respond(nil) // not attempted in time: the sender gets the usual acknowledgement
	f.release(j.d) // before the counts below: Stop waits for it
	if j.claimed {
		f.Unclaim()
	} else {
		f.inflight.Done()
	}
	// The row is ready again; a slot freeing up wakes the fetcher for it.
	// Not announced: leased at once to wait for a slot again, it would
	// only come back again (a row nobody announces is probed for after
	// a few polls).
	f.poke()
}

// startSlotted delivers j, which now holds a slot.
func (f *Forwarder) startSlotted(j job) {
	if j.claimed {
		<-f.unslotted
		f.cfg.Metrics.claimed(j.d.Provider)
	}
	f.deliver(j)
}

// freeSlot ends a delivery that holds a slot and has no outcome to record
// (interrupted, or held).
func (f *Forwarder) freeSlot(j job) {
	f.releaseSlot(j)
	f.inflight.Done()
}

// toRecord hands a delivery's slot over to the recording of its outcome,
// waiting while Concurrency outcomes are already being recorded.
func (f *Forwarder) toRecord(j job) {
	f.records <- struct{}{}
	f.releaseSlot(j)
}

// recorded ends a delivery whose outcome is written (or given up).
func (f *Forwarder) recorded() {
	<-f.records
	f.inflight.Done()
}

func (f *Forwarder) releaseSlot(j job) {
	if j.claimed {
		f.claims.Add(-1)
	}
	f.putSlot()
	// With rows waiting, lease again once a quarter of the slots are
	// free rather than after every delivery: fewer, larger leases (one
	// statement per row leased stops scaling at a few thousand per
	// second on a 2-core machine).
	if f.fetcherWaits() && f.free() >= max(1, (cap(f.slots)-int(f.reserved.Load()))/4) {
		f.poke()
	}
}
