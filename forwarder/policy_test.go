package forwarder

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestDecideTable(t *testing.T) {
	t.Parallel()
	p := Policy{BaseDelay: time.Second, MaxDelay: time.Minute, MaxAttempts: 5}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	half := func() float64 { return 0.5 }
	cases := []struct {
		name       string
		attempt    int
		status     int
		retryAfter string
		outcome    string
		delay      time.Duration
	}{
		{"200 done", 1, 200, "", OutcomeDone, 0},
		{"204 done", 3, 204, "", OutcomeDone, 0},
		{"2xx done even on last attempt", 5, 201, "", OutcomeDone, 0},
		{"no response retries", 1, 0, "", OutcomeRetry, 500 * time.Millisecond},
		{"500 retries", 2, 500, "", OutcomeRetry, time.Second},
		{"502 retries", 3, 502, "", OutcomeRetry, 2 * time.Second},
		{"503 retries", 1, 503, "", OutcomeRetry, 500 * time.Millisecond},
		{"408 retries", 1, 408, "", OutcomeRetry, 500 * time.Millisecond},
		{"425 retries", 1, 425, "", OutcomeRetry, 500 * time.Millisecond},
		{"429 retries", 1, 429, "", OutcomeRetry, 500 * time.Millisecond},
		{"429 Retry-After seconds wins when longer", 1, 429, "30", OutcomeRetry, 30 * time.Second},
		{"Retry-After shorter than backoff is ignored", 4, 503, "1", OutcomeRetry, 4 * time.Second},
		{"Retry-After HTTP date", 1, 503, now.Add(90 * time.Second).Format(http.TimeFormat), OutcomeRetry, 90 * time.Second},
		{"Retry-After past date ignored", 1, 503, now.Add(-time.Hour).Format(http.TimeFormat), OutcomeRetry, 500 * time.Millisecond},
		{"Retry-After capped at one hour", 1, 503, "86400", OutcomeRetry, time.Hour},
		{"Retry-After garbage ignored", 1, 503, "soon", OutcomeRetry, 500 * time.Millisecond},
		{"400 dead", 1, 400, "", OutcomeDead, 0},
		{"401 retries: the backend refuses whguard, not the event", 1, 401, "", OutcomeRetry, 500 * time.Millisecond},
		{"403 retries", 2, 403, "", OutcomeRetry, time.Second},
		{"401 Retry-After honoured", 1, 401, "30", OutcomeRetry, 30 * time.Second},
		{"401 budget spent: dead", 5, 401, "", OutcomeDead, 0},
		{"404 dead", 1, 404, "", OutcomeDead, 0},
		{"422 dead at once", 1, 422, "", OutcomeDead, 0},
		{"301 dead (redirects are not followed)", 1, 301, "", OutcomeDead, 0},
		{"budget spent: dead", 5, 503, "", OutcomeDead, 0},
		{"budget spent on no response: dead", 5, 0, "", OutcomeDead, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.attempt, tc.status, tc.retryAfter, now, half)
			if d.Outcome != tc.outcome || d.Delay != tc.delay {
				t.Fatalf("Decide = %+v, want %s after %s", d, tc.outcome, tc.delay)
			}
			if d.Reason == "" {
				t.Fatal("no reason")
			}
		})
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	p := Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: 3 * time.Second, MaxAttempts: 100}
	for attempt := 1; attempt <= 70; attempt++ {
		ceiling := p.BaseDelay
		for range attempt - 1 {
			ceiling = min(ceiling*2, p.MaxDelay)
		}
		if got := p.Backoff(attempt, func() float64 { return 0 }); got != 0 {
			t.Fatalf("attempt %d: rnd 0 gave %s", attempt, got)
		}
		top := p.Backoff(attempt, func() float64 { return 0.999999 })
		if top > ceiling || top < ceiling*99/100 {
			t.Fatalf("attempt %d: top %s, ceiling %s", attempt, top, ceiling)
		}
		// The real random source stays within bounds and is not constant.
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.Backoff(attempt, nil)
			if d < 0 || d >= ceiling {
				t.Fatalf("attempt %d: %s outside [0, %s)", attempt, d, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 150 {
			t.Fatalf("attempt %d: only %d distinct delays: no jitter", attempt, len(seen))
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"0": 0, "1": time.Second, " 120 ": 2 * time.Minute,
		now.Add(10 * time.Second).Format(http.TimeFormat): 10 * time.Second,
		"Mon, 30 Nov 2026 12:00:05 GMT":                   5 * time.Second,
		"Monday, 30-Nov-26 12:00:07 GMT":                  7 * time.Second, // RFC 850, still allowed
	} {
		got, ok := parseRetryAfter(in, now)
		if !ok || got != want {
			t.Errorf("parseRetryAfter(%q) = %s %v, want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5", "tomorrow"} {
		if _, ok := parseRetryAfter(in, now); ok {
			t.Errorf("parseRetryAfter(%q) accepted", in)
		}
	}
}

// TestStatusClasses covers every status the classification names, one
// row each: what the backend's answer means for the event.
func TestStatusClasses(t *testing.T) {
	t.Parallel()
	p := Policy{BaseDelay: time.Second, MaxDelay: time.Minute, MaxAttempts: 5}
	for code, want := range map[int]string{
		200: OutcomeDone, 201: OutcomeDone, 202: OutcomeDone, 204: OutcomeDone, 299: OutcomeDone,
		// Redirects are not followed: the target is misconfigured.
		301: OutcomeDead, 302: OutcomeDead, 307: OutcomeDead, 308: OutcomeDead,
		400: OutcomeDead, 404: OutcomeDead,
		// The backend refuses whguard (its secret), not the event.
		401: OutcomeRetry, 403: OutcomeRetry,
		405: OutcomeDead, 409: OutcomeDead, 410: OutcomeDead, 413: OutcomeDead,
		415: OutcomeDead, 422: OutcomeDead,
		408: OutcomeRetry, 425: OutcomeRetry, 429: OutcomeRetry,
		500: OutcomeRetry, 502: OutcomeRetry, 503: OutcomeRetry, 504: OutcomeRetry,
		507: OutcomeRetry, 511: OutcomeRetry, 599: OutcomeRetry,
		// The backend does not implement this at all: retrying cannot help.
		501: OutcomeDead, 505: OutcomeDead,
		0: OutcomeRetry, // no answer: connection error or timeout
	} {
		d := p.Decide(1, code, "", time.Now(), func() float64 { return 0.5 })
		if d.Outcome != want {
			t.Errorf("status %d: %s, want %s", code, d.Outcome, want)
		}
		if hinted := strings.Contains(d.Reason, RefusalHint); hinted != RefusesWhguard(code) || hinted != (code == 401 || code == 403) {
			t.Errorf("status %d: reason %q (hint %v, RefusesWhguard %v)", code, d.Reason, hinted, RefusesWhguard(code))
		}
	}
}
