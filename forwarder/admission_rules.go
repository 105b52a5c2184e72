package forwarder

// The admission's rules: what share of the in-flight limit each kind of
// waiting may take, as pure functions of the limit (table-tested in
// admission_test.go).

import "time"

// Shares of the limit the admission rules use.
const (
	// claimWaitShare: committed claims waiting for a slot are bounded by
	// the limit, or ceiling/claimWaitShare when more, each holding its
	// body; past that Claim declines and new events are leased from the
	// journal instead.
	claimWaitShare = 4
	// rowWaitShare: with every slot busy, announced rows are leased to
	// wait for slots in turn with the claims, up to limit/rowWaitShare of
	// them, so that a stream of claims cannot starve the journal.
	rowWaitShare = 2
	// refetchShare: with rows waiting in the journal, the fetcher leases
	// again once limit/refetchShare slots are free, rather than after
	// every delivery (a statement per row stops scaling at a few
	// thousand per second on two cores); and rows waiting in the queue ask
	// for more once they are down to that many.
	refetchShare = 4
	// governorWaitShare: at most limit/governorWaitShare deliveries wait
	// in memory for the governor, holding their slots, so that a limited
	// backend cannot take every slot from the others.
	governorWaitShare = 2
	// pollsBeforeProbe is how many poll intervals without a lease make a
	// poll probe for rows nobody announced (a retry coming due), which
	// may wait behind a stream of claims that keeps every slot busy.
	pollsBeforeProbe = 5
	// freeWindow is the span over which freed slots are counted to bound
	// the rows leased ahead of a slot: rows that slots freed at the
	// recent pace would take within about this long, far inside the
	// lease margin a leased row may wait before it goes back.
	freeWindow = time.Second
)

// claimsWaitingBound is how many committed claims may wait for a slot.
func claimsWaitingBound(limit, ceiling int) int { return max(limit, ceiling/claimWaitShare) }

// rowsToWaitFor is how many rows to lease, with every slot busy, to wait
// for slots beside the waiting rows already leased.
func rowsToWaitFor(limit, waiting int) int { return max(1, limit/rowWaitShare) - waiting }

// rowsAhead is how many rows to lease, while rows wait in the journal, to
// wait for slots beside the rows already leased and waiting: up to
// rowsToWaitFor, and no more than freed slots (those freed in the last
// window) would let in beyond what waits in the queue before them, those
// rows and the committed claims. None when no slot frees.
func rowsAhead(limit, rows, claims, freed int) int {
	return max(0, min(rowsToWaitFor(limit, rows), freed-rows-claims))
}

// freedPerWindow scales slots freed over elapsed to one freeWindow.
func freedPerWindow(freed int, elapsed time.Duration) int {
	if elapsed <= freeWindow {
		return freed
	}
	return int(int64(freed) * int64(freeWindow) / int64(elapsed))
}

// refetchAt is how many free slots (or how few waiting rows) make the
// fetcher lease again while rows wait in the journal.
func refetchAt(limit int) int { return max(1, limit/refetchShare) }

// governorWaitBound is how many deliveries may wait in memory for the
// governor.
func governorWaitBound(limit int) int { return max(1, limit/governorWaitShare) }
