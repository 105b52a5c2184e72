package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of retry now and recovery: real whguard processes on
// one PostgreSQL journal, in front of the instrumented backend of the
// protection tests, with retries an hour apart so that only a retry now or
// a recovery can deliver an event within the test.

// longBackoff makes every retry wait up to an hour (the jitter is drawn
// below it): events failed once stay in retry for the whole test unless
// brought forward.
var longBackoff = []string{"WHGUARD_RETRY_BASE_DELAY=1h", "WHGUARD_RETRY_MAX_DELAY=1h"}

// waitInRetry waits until n events wait in retry, as replica i's API lists
// them.
func (s *protectedSet) waitInRetry(i, n int) {
	s.t.Helper()
	waitFor(s.t, 30*time.Second, fmt.Sprintf("%d events in retry", n), func() bool {
		var v struct {
			Events []json.RawMessage `json:"events"`
		}
		s.api(i, http.MethodGet, "/api/events?status=retry&limit=500", "", &v)
		return len(v.Events) == n
	})
}

// sumMetric adds one sample (the line starting with prefix) over every
// replica.
func (s *protectedSet) sumMetric(prefix string) float64 {
	total := 0.0
	for i := range s.replicas {
		if v := s.metric(i, prefix); v > 0 {
			total += v
		}
	}
	return total
}

// origin is the backend's origin as whguard names it.
func (b *probeBackend) origin() string { return "http://" + strings.TrimPrefix(b.srv.URL, "http://") }

// TestE2EResumeBringsRetriesForward: an outage leaves events in retry an
// hour away; the backend is paused, comes back, and a resume made on
// another replica than the pause delivers every one of them within
// seconds, each once.
func TestE2EResumeBringsRetriesForward(t *testing.T) {
	t.Parallel()
	b := newProbeBackend(t, 0)
	b.down.Store(true)
	s := newProtectedSet(t, 2, b, longBackoff...)
	const n = 10
	s.sendMany("rs", n)
	s.waitInRetry(0, n)
	body := `{"backend":"` + b.origin() + `","reason":"outage"}`
	if code := s.api(0, http.MethodPost, "/api/backends/pause", body, nil); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	b.down.Store(false)
	resumed := time.Now()
	if code := s.api(1, http.MethodPost, "/api/backends/resume", body, nil); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	s.waitAllDelivered(n, 15*time.Second, 0)
	if _, twice := b.delivered(); twice != 0 {
		t.Errorf("%d events delivered twice", twice)
	}
	t.Logf("%d events brought forward and delivered %s after the resume", n, time.Since(resumed).Round(time.Millisecond))
	if got := s.sumMetric(`whguard_backend_recoveries_total{backend="` + b.origin() + `",cause="resumed"}`); got != 1 {
		t.Errorf("recoveries by resume over the replicas: %v, want 1", got)
	}
}

// TestE2EBreakerClosingBringsRetriesForward: with the shared breaker, an
// outage opens it and leaves events in retry an hour away; once the
// backend is back, the probe that closes the breaker brings every one of
// them forward, told once across the replicas.
func TestE2EBreakerClosingBringsRetriesForward(t *testing.T) {
	t.Parallel()
	rd := startRedis(t)
	b := newProbeBackend(t, 0)
	b.down.Store(true)
	s := newProtectedSet(t, 2, b, append([]string{"WHGUARD_REDIS_URL=" + rd.url(),
		"WHGUARD_BREAKER_MIN_ATTEMPTS=5", "WHGUARD_BREAKER_WINDOW=1m", "WHGUARD_BREAKER_COOLDOWN=1s"}, longBackoff...)...)
	const n = 8
	s.sendMany("brk", n)
	waitFor(t, 20*time.Second, "the breaker open on every replica", func() bool {
		for i := range s.replicas {
			if s.backendState(i).Backends[0].Breaker == "closed" {
				return false
			}
		}
		return true
	})
	b.down.Store(false)
	// An event sent now waits for the breaker, then goes as its probe (so
	// may one held since the outage); the probe's 2xx closes it.
	s.send(1, "brk-after")
	s.waitAllDelivered(n+1, 20*time.Second, 0)
	if got := s.sumMetric(`whguard_backend_recoveries_total{backend="` + b.origin() + `",cause="breaker_closed"}`); got != 1 {
		t.Errorf("recoveries by the breaker over the replicas: %v, want 1 (the probe's replica)", got)
	}
}

// TestE2EEventsRetryCLI: `whguard events retry ID`, run as the real
// binary, makes one event waiting in retry an hour away due now, and it is
// delivered within seconds; a done event is refused (exit 1) with its
// status and the advice to replay it.
func TestE2EEventsRetryCLI(t *testing.T) {
	t.Parallel()
	b := newProbeBackend(t, 0)
	b.down.Store(true)
	s := newProtectedSet(t, 1, b, longBackoff...)
	s.send(0, "cli-1")
	s.waitInRetry(0, 1)
	b.down.Store(false)
	cli := func(args ...string) (int, string) {
		t.Helper()
		code, out, errOut := runBinary(t, []string{"WHGUARD_ADMIN_URL=http://" + s.replicas[0].admin, "WHGUARD_ADMIN_TOKEN=e2e-token"},
			append([]string{"events"}, args...)...)
		return code, out + errOut
	}
	if code, out := cli("retry", "-all", "-dry-run"); code != 0 || !strings.Contains(out, "would make 1 events") {
		t.Fatalf("events retry -all -dry-run: %d %s", code, out)
	}
	if code, out := cli("retry", "cli-1"); code != 0 || !strings.Contains(out, "due now") {
		t.Fatalf("events retry cli-1: %d %s", code, out)
	}
	s.waitAllDelivered(1, 10*time.Second, 0)
	code, out := cli("retry", "cli-1")
	if code != 1 || !strings.Contains(out, "409") || !strings.Contains(out, "is done") || !strings.Contains(out, "replay") {
		t.Fatalf("events retry of a done event: %d %s; want exit 1, 409 saying it is done and to replay it", code, out)
	}
}
