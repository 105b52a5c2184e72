package forwarder

import (
	"sync"
	"time"
)

// inFlightLimit adapts how many deliveries may be in flight, between 1 and
// its ceiling (Concurrency, and MaxInFlight when set), to the backend it
// delivers to. How many are needed depends on the backend's latency: a
// fast backend on the same machine is served by a few dozen (more only
// queue for the CPU), one that takes 50 ms per webhook needs hundreds to
// keep up with ingest. So the limit is found, not configured:
//
//   - it doubles while it binds (deliveries waiting for it) and the
//     backend's latency holds (at most twice the lowest seen), and grows
//     by half while growing still raises the delivery rate;
//   - a growth that only raised latency is taken back, and growth waits
//     adaptProbeEvery before probing again;
//   - failures (5xx, 429, timeouts, refused connections) in 5 % or more
//     of a window's attempts halve it.
//
// Each window lasts at least adaptWindow and as many attempts as the
// limit (one turn of it), so a slow backend is judged over whole
// attempts. The limit is only a bound: the pool enforces it by keeping
// ceiling−limit of its slots reserved (pool.go).
type inFlightLimit struct {
	mu         sync.Mutex
	limit, max int
	// The current window.
	start     time.Time
	n, errs   int
	saturated int // attempts that ended with the limit (almost) all in use
	latency   time.Duration
	// base is the lowest mean latency of a window. It does not drift up:
	// the limit itself raises latency, and a base that followed would let
	// the limit creep past the point where more in flight only queues. A
	// backend that became slower for good still gets a larger limit, by
	// the rate rising with it.
	base time.Duration
	// grewFrom is the limit before the last growth (0: the last window
	// did not grow it), rateBefore the delivery rate measured at it.
	grewFrom   int
	rateBefore float64
	// noGrowthUntil holds growth after a growth that did not pay.
	noGrowthUntil time.Time
}

// Tuning of inFlightLimit.
const (
	// adaptInitial is where the limit starts (at most the ceiling).
	adaptInitial = 16
	// adaptWindow is the shortest window of observations.
	adaptWindow = 250 * time.Millisecond
	// adaptLongestWindow ends a window that sees few attempts.
	adaptLongestWindow = 10 * time.Second
	// adaptLatencyHolds: latency up to this multiple of the lowest seen
	// still "holds".
	adaptLatencyHolds = 2.0
	// adaptRateGain is the rise in the delivery rate that makes a growth
	// worth its added latency.
	adaptRateGain = 1.05
	// adaptProbeEvery is how long growth waits after a growth that did
	// not pay.
	adaptProbeEvery = 5 * time.Second
	// adaptFailureShare of a window's attempts failing halves the limit.
	adaptFailureShare = 0.05
)

func newInFlightLimit(ceiling int, now time.Time) *inFlightLimit {
	return &inFlightLimit{limit: min(ceiling, adaptInitial), max: ceiling, start: now}
}

// ceiling is the most the limit may grow to.
func (l *inFlightLimit) ceiling() int { return l.max }

// current is the limit now.
func (l *inFlightLimit) current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}

// observe counts one attempt that ended at now after took, failed or not,
// with inFlight deliveries in flight (itself included) when it ended, and
// returns the limit and whether it changed (only when the attempt closed a
// window).
func (l *inFlightLimit) observe(now time.Time, took time.Duration, failed bool, inFlight int) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if failed {
		l.errs++
	} else {
		// Only answers count for latency: a refused connection fails in
		// microseconds, and as the lowest latency seen it would make the
		// backend's real latency look like a queue once it is back.
		l.latency += took
	}
	// Leasing starts again once a quarter of the slots are free: a limit
	// in use to three quarters or more is binding.
	if 4*inFlight >= 3*l.limit {
		l.saturated++
	}
	elapsed := now.Sub(l.start)
	if !(elapsed >= adaptWindow && l.n >= l.limit) && elapsed < adaptLongestWindow {
		return l.limit, false
	}
	was := l.limit
	l.decide(now, elapsed)
	l.start, l.n, l.errs, l.saturated, l.latency = now, 0, 0, 0, 0
	return l.limit, l.limit != was
}

// decide closes a window of l.n attempts over elapsed.
func (l *inFlightLimit) decide(now time.Time, elapsed time.Duration) {
	rate := float64(l.n) / elapsed.Seconds()
	holds := true // no answers, no latency to judge
	if ok := l.n - l.errs; ok > 0 {
		mean := l.latency / time.Duration(ok)
		if l.base == 0 || mean < l.base {
			l.base = mean
		}
		holds = float64(mean) <= adaptLatencyHolds*float64(l.base)
	}
	grewFrom, rateBefore := l.grewFrom, l.rateBefore
	l.grewFrom = 0
	switch {
	case l.errs > 0 && float64(l.errs) >= adaptFailureShare*float64(l.n):
		l.limit = max(1, l.limit/2)
		l.noGrowthUntil = now.Add(adaptProbeEvery)
	case grewFrom > 0 && !holds && rate < adaptRateGain*rateBefore:
		// The last growth bought latency, not deliveries.
		l.limit = grewFrom
		l.noGrowthUntil = now.Add(adaptProbeEvery)
	case 2*l.saturated >= l.n && l.limit < l.max && !now.Before(l.noGrowthUntil) &&
		(holds || grewFrom == 0 || rate >= adaptRateGain*rateBefore):
		// Latency holds, or the last growth raised the rate: grow again,
		// doubling while the latency holds (a slow backend is served in a
		// second or two), by half once it only pays in rate.
		l.grewFrom, l.rateBefore = l.limit, rate
		step := l.limit / 2
		if holds {
			step = l.limit
		}
		l.limit = min(l.max, l.limit+max(1, step))
	}
}
