package forwarder

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/whguard/whguard/internal/fields"
)

// Outcome classes of one attempt.
const (
	OutcomeDone  = "done"
	OutcomeRetry = "retry"
	OutcomeDead  = "dead"
)

// MaxRetryAfter caps how long a backend's Retry-After can push a retry.
const MaxRetryAfter = time.Hour

// Policy decides what follows an attempt. It is a pure function of its
// inputs: the attempt number within the budget, the answer (or its
// absence), the clock and a random source.
type Policy struct {
	// BaseDelay is the backoff before the first retry (its upper bound).
	BaseDelay time.Duration
	// MaxDelay caps the exponential backoff.
	MaxDelay time.Duration
	// MaxAttempts is the budget of attempts; reaching it means dead.
	MaxAttempts int
}

// Decision is what to do after an attempt.
type Decision struct {
	Outcome string
	// Delay until the next attempt, for OutcomeRetry.
	Delay time.Duration
	// Reason is a short, loggable explanation.
	Reason string
}

// Decide applies the retry policy (docs/delivery.md, "Retry policy"): 2xx
// done; connection errors, timeouts, 401, 403, 408, 425, 429 and 5xx retry
// after a full-jitter exponential backoff, or later when the backend's
// Retry-After asks for longer (capped at an hour); any other status is
// permanent (dead at once); a spent budget is dead.
//
// status is 0 when the attempt got no response (err names why).
// budgetAttempt is 1-based. rnd returns a float in [0, 1).
func (p Policy) Decide(budgetAttempt, status int, retryAfter string, now time.Time, rnd func() float64) Decision {
	switch {
	case status >= 200 && status < 300:
		return Decision{Outcome: OutcomeDone, Reason: "delivered"}
	case status != 0 && !retryable(status):
		return Decision{Outcome: OutcomeDead, Reason: "permanent: backend answered " + strconv.Itoa(status)}
	}
	reason := "no response"
	if status != 0 {
		reason = "backend answered " + strconv.Itoa(status)
	}
	if RefusesWhguard(status) {
		reason += " (" + RefusalHint + ")"
	}
	if budgetAttempt >= p.MaxAttempts {
		return Decision{Outcome: OutcomeDead, Reason: "attempts exhausted: " + reason}
	}
	delay := p.Backoff(budgetAttempt, rnd)
	if hint, ok := parseRetryAfter(retryAfter, now); ok && hint > delay {
		delay = min(hint, MaxRetryAfter)
	}
	return Decision{Outcome: OutcomeRetry, Delay: delay, Reason: reason}
}

// Backoff is full jitter (AWS architecture blog, "Exponential Backoff And
// Jitter"): uniform in [0, min(MaxDelay, BaseDelay·2^(attempt-1))).
func (p Policy) Backoff(budgetAttempt int, rnd func() float64) time.Duration {
	ceiling := p.MaxDelay
	if shift := budgetAttempt - 1; shift < 40 {
		if c := p.BaseDelay << shift; c > 0 && c < ceiling {
			ceiling = c
		}
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return time.Duration(rnd() * float64(ceiling))
}

// RefusalHint is what a 401 or 403 from a backend means (RefusesWhguard),
// in an event's last error and in the alert.
const RefusalHint = "backend refuses whguard's requests: check its webhook secret"

// RefusesWhguard reports whether a backend's answer refuses whguard
// rather than the event: 401 Unauthorized or 403 Forbidden. Every event
// whguard delivers is verified and signed for the backend, so such an
// answer almost always means the backend's webhook secret is not the one
// whguard signs with (a rotation done on one side only) or that an auth
// layer in front of it turns whguard away. Fixing that makes the same
// event succeed: it is transient, never the event's fault.
func RefusesWhguard(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// retryable is the one classification of a backend's answer that is not
// 2xx: true means transient (retry after a backoff), false permanent (dead
// at once). Transient: 401 Unauthorized and 403 Forbidden (the backend
// refuses whguard, not the event: RefusesWhguard), 408 Request Timeout,
// 425 Too Early, 429 Too Many Requests and the 5xx server errors, except
// 501 Not Implemented and 505 HTTP Version Not Supported, which say the
// backend cannot handle this request at all. Everything else (3xx, since
// redirects are not followed, and the other 4xx) is permanent.
func retryable(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden,
		http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return status >= 500
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			return 0, false
		}
		return min(d, MaxRetryAfter), true
	}
	return 0, false
}

// overloaded reports whether an attempt's answer (0: none, a timeout or a
// refused connection) says the backend is short of capacity: 429, 502,
// 503, 504 or no answer. Only these shrink the in-flight limit: a 500 is
// most often one event the app cannot handle (a poison event retried), and
// must not slow every other delivery.
func overloaded(status int) bool {
	switch status {
	case 0, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// WithDefaults returns p with each zero setting set to its default.
func (p Policy) WithDefaults() Policy {
	p.BaseDelay = cmp.Or(p.BaseDelay, DefaultBaseDelay)
	p.MaxDelay = cmp.Or(p.MaxDelay, DefaultMaxDelay)
	p.MaxAttempts = cmp.Or(p.MaxAttempts, DefaultMaxAttempts)
	return p
}

// Validate checks a Policy with its defaults applied, returning one
// fields.Error per bad setting.
func (p Policy) Validate() error {
	var errs []error
	if p.BaseDelay <= 0 {
		errs = append(errs, fields.Errorf("BaseDelay", "must be positive, got %s", p.BaseDelay))
	}
	switch {
	case p.MaxDelay <= 0:
		errs = append(errs, fields.Errorf("MaxDelay", "must be positive, got %s", p.MaxDelay))
	case p.BaseDelay > 0 && p.MaxDelay < p.BaseDelay:
		errs = append(errs, fields.Errorf("MaxDelay", "%s is shorter than {BaseDelay} (%s); set it to at least that", p.MaxDelay, p.BaseDelay))
	}
	if p.MaxAttempts < 1 {
		errs = append(errs, fields.Errorf("MaxAttempts", "must be at least 1, got %d", p.MaxAttempts))
	}
	return errors.Join(errs...)
}
