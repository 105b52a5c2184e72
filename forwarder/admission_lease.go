package forwarder

import "time"

// The admission's side of leasing: what the fetcher is told (rows
// announced, polls, how much its last lease got) and its decision of the
// next lease. Same mutex and rules as the rest of admission (admission.go).

// announce says a row may be ready in the journal (a commit of a pending
// row, a NOTIFY, a retry or a hold coming due, a replay).
func (a *admission) announce() {
	a.mu.Lock()
	a.announced = true
	a.mu.Unlock()
}

// announceNext announces the next event of an order key (its holder is
// done or dead) and reports whether to wake the fetcher for it: not while
// it waits for freed slots, which wake it a refetchAt at a time and let
// it find the row then (a wake per outcome would make it lease one row
// per statement).
func (a *admission) announceNext() (wake bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.announced = true
	return !a.fetcherWaits()
}

// poll is the fetcher's poll at now: a probe is due when it has not leased
// for pollsBeforeProbe intervals.
func (a *admission) poll(now time.Time, interval time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.lastLease) >= pollsBeforeProbe*interval {
		a.probe = true
	}
}

// leasePlan is a decision of planLease.
type leasePlan struct {
	// n is how many rows to lease (0: none).
	n int
	// start is how many of them take free slots at once; the others
	// (all, when start is 0: every slot is busy) wait for slots in the
	// queue, in turn with the claims.
	start int
}

// planLease decides the fetcher's next lease at now: as many rows as slots
// are free (at most maxLeaseBatch), and, while rows wait in the journal
// (the last lease was full), rows to wait in the queue for the next freed
// slots: no more than the slots freed in about a second (rowsAhead), so a
// row freed slots will soon take is already in memory when one frees,
// instead of a lease statement away, and a held backend gets none ahead
// to wait out their leases. With no slot free, rows announced or probed
// for are leased to wait as well (rowsToWaitFor); otherwise the fetcher
// waits for a freed slot.
func (a *admission) planLease(now time.Time) leasePlan {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rollFreed(now)
	free := max(a.limit-a.inUse, 0)
	ahead := 0
	if a.backlog {
		ahead = rowsAhead(a.limit, a.rows, a.committed, max(a.freed, a.freedBefore))
	}
	if free == 0 {
		a.slotWait = true
		if a.announced || a.probe {
			ahead = max(ahead, rowsToWaitFor(a.limit, a.rows))
		}
		if ahead <= 0 {
			return leasePlan{}
		}
	}
	a.probe, a.slotWait, a.announced = false, false, false
	a.lastLease = now
	n := min(free+ahead, maxLeaseBatch)
	return leasePlan{n: n, start: min(free, n)}
}

// rollFreed starts a new window of freed slots once freeWindow has passed,
// keeping the last one's count scaled to a window. Under mu.
func (a *admission) rollFreed(now time.Time) {
	elapsed := now.Sub(a.freedSince)
	if elapsed < freeWindow {
		return
	}
	a.freedBefore = freedPerWindow(a.freed, elapsed)
	a.freed, a.freedSince = 0, now
}

// leased records what a planned lease got: a full one means rows wait in
// the journal.
func (a *admission) leased(got, asked int) {
	a.mu.Lock()
	a.backlog = got == asked
	a.mu.Unlock()
}
