package forwarder

import (
	"testing"
	"time"
)

// backendModel says, for a limit of deliveries in flight, how long each
// attempt takes, how many end per second, and whether they fail.
type backendModel func(limit int) (took time.Duration, perSec float64, failed bool)

// simulate feeds l the attempts model produces for d of a fake clock
// starting at t0, the limit always in use (deliveries waiting for it), and
// returns the clock at the end.
func simulate(l *inFlightLimit, t0 time.Time, d time.Duration, model backendModel) time.Time {
	now := t0
	for end := t0.Add(d); now.Before(end); {
		limit := l.current()
		took, perSec, failed := model(limit)
		now = now.Add(time.Duration(float64(time.Second) / perSec))
		l.observe(now, took, failed, limit)
	}
	return now
}

// slowBackend answers in 50 ms whatever the load: the rate is the limit
// over the latency (Little's law).
func slowBackend(limit int) (time.Duration, float64, bool) {
	return 50 * time.Millisecond, float64(limit) / 0.05, false
}

// cpuBound is a fast backend on a saturated machine: beyond 24 in
// flight the rate stays at 10 000/s and the latency grows with the
// queue.
func cpuBound(limit int) (time.Duration, float64, bool) {
	rate := 10000 * float64(min(limit, 24)) / 24
	return time.Duration(float64(limit) / rate * float64(time.Second)), rate, false
}

func TestLimitGrowsToServeASlowBackend(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	l := newInFlightLimit(256, t0)
	if got := l.current(); got != adaptInitial {
		t.Fatalf("initial limit %d, want %d", got, adaptInitial)
	}
	simulate(l, t0, 5*time.Second, slowBackend)
	if got := l.current(); got != 256 {
		t.Errorf("limit after 5 s of a 50 ms backend = %d, want the ceiling 256 (latency held)", got)
	}
}

func TestLimitStaysWithinItsCeiling(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	l := newInFlightLimit(4, t0)
	if got := l.current(); got != 4 {
		t.Fatalf("initial limit %d, want the ceiling 4", got)
	}
	simulate(l, t0, 3*time.Second, slowBackend)
	if got := l.current(); got != 4 {
		t.Errorf("limit = %d, want 4", got)
	}
}

func TestLimitDoesNotGrowWhenNotBinding(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	l := newInFlightLimit(256, t0)
	now := t0
	for range 2000 {
		now = now.Add(10 * time.Millisecond)
		l.observe(now, 50*time.Millisecond, false, 2) // 2 of 16 in use
	}
	if got := l.current(); got != adaptInitial {
		t.Errorf("limit = %d with 2 in flight, want it left at %d", got, adaptInitial)
	}
}

func TestLimitKeepsAGrowthOnlyWhileItPays(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	l := newInFlightLimit(256, t0)
	simulate(l, t0, 20*time.Second, cpuBound)
	// 16 → 24 raised the rate; 24 → 36 only the latency, and was taken
	// back; every probe after that is taken back too.
	if got := l.current(); got < 24 || got > 36 {
		t.Errorf("limit = %d on a CPU-bound fast backend, want it near 24 (where the rate stops rising)", got)
	}
}

func TestLimitHalvesOnFailures(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	l := newInFlightLimit(256, t0)
	now := simulate(l, t0, 5*time.Second, slowBackend)
	if l.current() != 256 {
		t.Fatalf("limit %d before the failures, want 256", l.current())
	}
	// The backend starts failing one attempt in ten.
	i := 0
	failing := func(limit int) (time.Duration, float64, bool) {
		i++
		return 50 * time.Millisecond, float64(limit) / 0.05, i%10 == 0
	}
	now = simulate(l, now, time.Second, failing)
	if got := l.current(); got > 64 {
		t.Fatalf("limit = %d after a second of 10 %% failures, want it halved at least twice (≤ 64)", got)
	}
	low := l.current()
	// Recovered: growth resumes after adaptProbeEvery, not before.
	now = simulate(l, now, adaptProbeEvery/2, slowBackend)
	if got := l.current(); got > low {
		t.Errorf("limit = %d within %s of the failures, want it held at %d or less", got, adaptProbeEvery, low)
	}
	simulate(l, now, adaptProbeEvery+3*time.Second, slowBackend)
	if got := l.current(); got != 256 {
		t.Errorf("limit = %d once the backend recovered, want 256 again", got)
	}
}

func TestLimitIgnoresRareFailures(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	l := newInFlightLimit(256, t0)
	i := 0
	rare := func(limit int) (time.Duration, float64, bool) {
		i++
		return 50 * time.Millisecond, float64(limit) / 0.05, i%1000 == 0
	}
	simulate(l, t0, 8*time.Second, rare)
	if got := l.current(); got != 256 {
		t.Errorf("limit = %d with one failure in a thousand, want 256", got)
	}
}

// A backend that refused every connection (failing in microseconds) and
// came back answering in 50 ms is served again as fast as at first: the
// refusals' latency is not taken for the backend's.
func TestLimitRecoversFromFastFailures(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	l := newInFlightLimit(256, t0)
	now := simulate(l, t0, 5*time.Second, slowBackend)
	refused := func(limit int) (time.Duration, float64, bool) {
		return 100 * time.Microsecond, 2000, true
	}
	now = simulate(l, now, 3*time.Second, refused)
	if got := l.current(); got != 1 {
		t.Fatalf("limit = %d after 3 s of refused connections, want 1", got)
	}
	// Held adaptProbeEvery, then doubling: 1 → 256 in eight windows.
	back := adaptProbeEvery + 2500*time.Millisecond
	simulate(l, now, back, slowBackend)
	if got := l.current(); got != 256 {
		t.Errorf("limit = %d %s after the backend came back, want 256 again", got, back)
	}
}

// TestLimitInputs: only answers that say the backend is short of capacity
// shrink the limit (a poison event's 500 does not), and a per-backend
// in-flight bound caps the process's limit only when every provider goes
// to that one backend.
func TestLimitInputs(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]bool{0: true, 429: true, 502: true, 503: true, 504: true, 500: false, 501: false, 400: false, 200: false} {
		if got := overloaded(status); got != want {
			t.Errorf("overloaded(%d) = %v, want %v", status, got, want)
		}
	}
	one := Config{Concurrency: 256, MaxInFlight: 4, Targets: map[string]Target{
		"stripe": {BackendURL: "http://app:3000/a"}, "github": {BackendURL: "http://app:3000/b"}}}
	if got := limitCeiling(one); got != 4 {
		t.Errorf("one backend: ceiling %d, want 4", got)
	}
	two := one
	two.Targets = map[string]Target{"stripe": {BackendURL: "http://app:3000"}, "github": {BackendURL: "http://other:4000"}}
	if got := limitCeiling(two); got != 256 {
		t.Errorf("two backends: ceiling %d, want 256 (each bounded by the governor)", got)
	}
}
