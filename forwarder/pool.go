package forwarder

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// pool runs the deliveries. It owns the delivery goroutines (goDeliver
// hands work to one waiting for more, or starts one; workersQuit, closed
// once by quitWorkers, ends those that wait) and inflight, every delivery
// from its lease or claim to its end, which Stop waits for. Who may
// deliver, and when, is admission's (admission.go).
type pool struct {
	inflight sync.WaitGroup

	idle        chan func()
	workersQuit chan struct{}
	quitOnce    sync.Once
	// workersStarted and workersLive count delivery goroutines (tests).
	workersStarted, workersLive atomic.Int32
}

func newPool() *pool {
	return &pool{idle: make(chan func()), workersQuit: make(chan struct{})}
}

// workerIdle is how long a delivery goroutine waits for more work before
// it ends.
const workerIdle = 10 * time.Second

// goDeliver runs fn on a delivery goroutine that is waiting for work, or
// on a new one. Reusing them keeps their grown stacks: a goroutine per
// delivery grew its stack from scratch every time (runtime.newstack was
// 6 % of whguard's CPU draining a backlog). Their number follows the
// deliveries under way, which admission bounds.
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

// startLeased delivers a row the fetcher leased (counted in inflight) as
// soon as it has a slot.
func (f *Forwarder) startLeased(j job) {
	w := f.adm.acquire(false)
	if w == nil {
		f.goDeliver(func() { f.deliver(j) })
		return
	}
	// Its slot went to a claim, or it was leased to wait: the governor's
	// decision taken with the lease would be stale by the time a slot
	// frees (a rate token spent now, the request sent later, beside
	// others granted then), so its permit goes back and it asks again
	// when it has a slot.
	f.unadmitPre(j)
	j.pre = nil
	f.goDeliver(func() { f.waitForSlot(j, w) })
}

// deliverWhenSlot delivers a committed claim as soon as it has a slot.
func (f *Forwarder) deliverWhenSlot(j job) {
	w := f.adm.acquire(true)
	if w == nil {
		f.startSlotted(j)
		return
	}
	f.waitForSlot(j, w)
}

// waitForSlot waits in admission's queue, in turn with the others, while
// j's lease still leaves room for a whole attempt and half the lease
// margin (5 s by default): past that, or past the shutdown deadline, the
// row is handed back to the journal without spending its attempt, and
// whoever leases it next delivers it.
func (f *Forwarder) waitForSlot(j job, w *waiter) {
	// What the lease has left, less a whole attempt and half the margin
	// (a lease already over, or a zero expiry, waits not at all).
	wait := time.Duration(0)
	if left := j.recordBy.Add(time.Second).Sub(f.cfg.Now()); left > 0 {
		wait = left - f.cfg.Timeout - f.cfg.LeaseMargin/2
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		f.startSlotted(j)
		return
	case <-timer.C:
	case <-f.aborted.Done():
	}
	if f.adm.withdraw(w) {
		f.startSlotted(j) // granted as it ran out
		return
	}
	f.log.Debug("no delivery slot in time; the event goes back to the journal",
		zap.Int64("id", j.d.ID), zap.String("provider", j.d.Provider))
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
		f.cfg.Metrics.claimed(j.d.Provider)
	}
	f.deliver(j)
}

// freeSlot ends a delivery that holds a slot and has no outcome to record
// (interrupted, or held).
func (f *Forwarder) freeSlot() {
	f.pokeIf(f.adm.release())
	f.inflight.Done()
}

// toRecord hands a delivery's slot over to the recording of its outcome,
// waiting while Concurrency outcomes are already being recorded.
func (f *Forwarder) toRecord() {
	w, wake := f.adm.toRecord()
	if w != nil {
		<-w.ready
	}
	f.pokeIf(wake)
}

// recorded ends a delivery whose outcome is written (or given up).
func (f *Forwarder) recorded() {
	f.pokeIf(f.adm.recorded())
	f.inflight.Done()
}
