package forwarder

import (
	"sync"
	"time"
)

// admission decides who delivers, and when. It owns, under one mutex and
// nothing else:
//
//   - the delivery slots: the requests in flight to the backends. There
//     are ceiling of them (Concurrency), of which limit may be in use (the
//     adaptive limit's, adapt.go). A slot is held from the start of an
//     attempt (its governor wait included) until the backend has answered;
//   - the recording places: finished attempts whose outcome is still being
//     written (at most ceiling). A slot is handed over to a recording
//     place, so the next delivery starts while the outcome waits for its
//     batch; when outcomes back up, slots stay held and leasing stops;
//   - the claims: new events reserved by their receiver before their commit
//     (Claim), holding no slot until their commit is done and a slot free
//     (at most ceiling of them: a slot is not held through a commit, so
//     under load new events keep the cheap path);
//   - one first-in, first-out queue of deliveries waiting for a slot:
//     committed claims and leased rows take turns in the order they came;
//   - the deliveries waiting in memory for the governor (govern.go);
//   - what the fetcher needs to decide a lease: whether a row was
//     announced, whether the last lease was full (a backlog), whether it
//     found every slot busy, when it last leased, and how many slots were
//     freed lately (the pace at which rows leased ahead will start).
//
// Its decisions are pure functions with named constants
// (admission_rules.go); its methods only apply them under the mutex. Any goroutine may call any
// method; none blocks except wait.
type admission struct {
	mu sync.Mutex

	ceiling, limit int
	inUse          int // slots held
	recording      int // recording places held
	claims         int // claims holding no slot yet (from claim to a slot or unclaim)
	committed      int // of claims: committed, waiting in queue
	rows           int // leased rows waiting in queue
	queue          []*waiter
	recordQueue    []*waiter // finished attempts waiting for a recording place
	governorWaits  int

	announced bool // a row may be ready since the last lease (a Wake)
	probe     bool // a poll found no lease for pollsBeforeProbe intervals
	backlog   bool // the last lease was full: more rows wait in the journal
	slotWait  bool // the fetcher found every slot busy: a freed one wakes it
	lastLease time.Time

	// Slots freed since freedSince, and in the freeWindow before it (as
	// counted at the roll, scaled to one window); rolled by planLease.
	freed, freedBefore int
	freedSince         time.Time
}

// waiter is one delivery waiting in a queue. ready is closed when it is
// granted what it waits for (granted is then true, under mu).
type waiter struct {
	ready   chan struct{}
	claim   bool
	granted bool
}

func newAdmission(ceiling, limit int) *admission {
	return &admission{ceiling: ceiling, limit: min(limit, ceiling)}
}

// claim reserves a place for a new event about to be committed, or
// declines: when claimsWaitingBound committed claims already wait for a
// slot, or ceiling claims hold no slot.
func (a *admission) claim() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.committed > 0 && a.committed >= claimsWaitingBound(a.limit, a.ceiling) {
		return false
	}
	if a.claims >= a.ceiling {
		return false
	}
	a.claims++
	return true
}

// unclaim gives back a claim that holds no slot and is not queued (its
// event was not inserted). It reports whether to wake the fetcher: the
// place is free for the rows waiting.
func (a *admission) unclaim() (wake bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims--
	return a.fetcherWaits()
}

// acquire takes a slot for a delivery (claim: a committed claim; else a
// leased row): at once, when one is free and nobody waits before it (w is
// nil), or queued (w is the waiter to wait on).
func (a *admission) acquire(claim bool) (w *waiter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inUse < a.limit && len(a.queue) == 0 {
		a.inUse++
		if claim {
			a.claims--
		}
		return nil
	}
	w = &waiter{ready: make(chan struct{}), claim: claim}
	a.queue = append(a.queue, w)
	if claim {
		a.committed++
	} else {
		a.rows++
	}
	return w
}

// withdraw takes w out of the queue (its wait ran out). It reports whether
// w was granted its slot meanwhile: it then holds it, as if it had not
// waited out.
func (a *admission) withdraw(w *waiter) (granted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.granted {
		return true
	}
	for i, q := range a.queue {
		if q == w {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	if w.claim {
		a.committed-- // the claim itself is given back by unclaim
	} else {
		a.rows--
	}
	return false
}

// grant hands free slots to the queue's head, in order. Under mu.
func (a *admission) grant() (rowsLeft bool) {
	for a.inUse < a.limit && len(a.queue) > 0 {
		w := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		a.inUse++
		if w.claim {
			a.committed--
			a.claims--
		} else {
			a.rows--
			rowsLeft = true
		}
		w.granted = true
		close(w.ready)
	}
	return rowsLeft
}

// release gives back a slot (a delivery interrupted, held, or whose
// outcome needs no recording). It reports whether to wake the fetcher.
func (a *admission) release() (wake bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.freeSlot()
	return a.afterFree()
}

// freeSlot gives back a held slot and counts it. Under mu.
func (a *admission) freeSlot() {
	a.inUse--
	a.freed++
}

// afterFree passes freed slots on and says whether to wake the fetcher:
// rows wait in the journal (or it found no slot) and refetchAt slots are
// free, or the rows waiting in the queue ran low while rows are announced
// or wait in the journal. Under mu.
func (a *admission) afterFree() (wake bool) {
	rowsGranted := a.grant()
	if a.fetcherWaits() && a.limit-a.inUse >= refetchAt(a.limit) {
		return true
	}
	return rowsGranted && a.rows <= a.limit/refetchShare && (a.backlog || a.announced)
}

// fetcherWaits reports whether a freed slot concerns the fetcher. Under mu.
func (a *admission) fetcherWaits() bool { return a.backlog || a.slotWait }

// toRecord hands a finished attempt's slot over to a recording place. It
// returns nil when it did so, or the waiter to wait on while ceiling
// outcomes are being recorded (the slot stays held until then).
func (a *admission) toRecord() (w *waiter, wake bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recording < a.ceiling && len(a.recordQueue) == 0 {
		a.recording++
		a.freeSlot()
		return nil, a.afterFree()
	}
	w = &waiter{ready: make(chan struct{})}
	a.recordQueue = append(a.recordQueue, w)
	return w, false
}

// recorded ends a recording: the place goes to the next finished attempt
// waiting for one, whose slot is freed then. It reports whether to wake
// the fetcher.
func (a *admission) recorded() (wake bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recording--
	if len(a.recordQueue) == 0 {
		return false
	}
	w := a.recordQueue[0]
	a.recordQueue[0] = nil
	a.recordQueue = a.recordQueue[1:]
	a.recording++
	a.freeSlot()
	w.granted = true
	close(w.ready)
	return a.afterFree()
}

// setLimit applies a new in-flight limit: a larger one lets the queue in
// at once; a smaller one takes effect as slots come back.
func (a *admission) setLimit(limit int) (wake bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.limit = min(limit, a.ceiling)
	return a.afterFree()
}

// startGovernorWait takes a place among the deliveries waiting in memory
// for the governor, or reports none is free.
func (a *admission) startGovernorWait() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.governorWaits >= governorWaitBound(a.limit) {
		return false
	}
	a.governorWaits++
	return true
}

func (a *admission) endGovernorWait() {
	a.mu.Lock()
	a.governorWaits--
	a.mu.Unlock()
}

// occupancy is a snapshot for the gauges and tests.
type occupancy struct {
	inFlight, recording, claimsWaiting, limit int
	// queued are the deliveries waiting for a slot: committed claims and
	// leased rows.
	queuedClaims, queuedRows int
}

func (a *admission) snapshot() occupancy {
	a.mu.Lock()
	defer a.mu.Unlock()
	return occupancy{inFlight: a.inUse, recording: a.recording, claimsWaiting: a.claims, limit: a.limit,
		queuedClaims: a.committed, queuedRows: a.rows}
}
