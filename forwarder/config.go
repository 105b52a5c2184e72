package forwarder

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/fields"
	"github.com/whguard/whguard/internal/tracing"
)

// Target says where one provider's events go.
type Target struct {
	// BackendURL is the backend's base URL (WHGUARD_<NAME>_BACKEND_URL or
	// WHGUARD_BACKEND_URL).
	BackendURL string
	// ForwardPath replaces the received path when set
	// (WHGUARD_<NAME>_FORWARD_PATH).
	ForwardPath string
	// PreserveHost sends the Host the sender used (as received, recorded
	// in X-Forwarded-Host) instead of the backend's own
	// (WHGUARD_<NAME>_PRESERVE_HOST).
	PreserveHost bool
	// Resign, when set, replaces the provider's signature headers in h
	// with a fresh signature of body made at the given time, so that a
	// backend verifying them with the provider's library accepts a late
	// delivery (WHGUARD_<NAME>_RESIGN). Nil forwards them as received.
	Resign func(h http.Header, body []byte, at time.Time)
	// Scheme is the provider's signature scheme now (verify's name). An
	// event verified under another scheme, or under none, is not signed
	// for the backend: Resign is skipped and Unsign applied (whguard signs
	// only content it verified with this scheme). Empty: not checked.
	Scheme string
	// Unsign, when set, removes the provider's signature headers from h
	// (a delivery whguard must not sign). Nil leaves them as received.
	Unsign func(h http.Header)
	// Propagator writes an attempt's trace context into its request, with
	// traces on (OTEL_PROPAGATORS; the zero value: W3C Trace Context).
	Propagator tracing.Propagator
	// Sync stores the first 2xx answer (status, Content-Type, body of at
	// most journal.MaxReplyBytes) with the event, for the sender waiting
	// on DispatchSync and for later duplicates (WHGUARD_<NAME>_MODE=sync).
	Sync bool
}

// Defaults. The retry defaults ride out a backend outage of about eight
// hours on average (docs/guarantees.md, "Retries"): 25 attempts with
// full jitter from 5 s doubling to a 1 h cap.
//
// DefaultConcurrency is the ceiling of deliveries in flight per process;
// the adaptive limit (adapt.go) finds how many of them the backend needs.
// Measured with cmd/whguard-bench on 2 cores: at the old fixed default of 8
// a backlog drained at 0.27× naive-pg's ack rate to a fast backend, and at
// 148/s to one answering in 50 ms (8 / 54 ms). 256 lets such a backend take
// 5 000 deliveries a second, and costs nothing while the limit stays low.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultConcurrency  = 256 // the ceiling; see above
	DefaultBaseDelay    = 5 * time.Second
	DefaultMaxDelay     = time.Hour
	DefaultMaxAttempts  = 25
	DefaultPollInterval = time.Second
	DefaultReapInterval = 2 * time.Second
	DefaultLeaseMargin  = 10 * time.Second
	DefaultStatsEvery   = 10 * time.Second
	// DefaultFiguresEvery: see Config.FiguresInterval.
	DefaultFiguresEvery = 5 * time.Second
	// DefaultKeyRetention keeps the keys of done events 35 days: longer
	// than any common sender's redelivery horizon (Stripe resends events
	// up to 30 days old on request; automatic retries end within 3 days).
	DefaultKeyRetention = 35 * 24 * time.Hour
	// DefaultPayloadRetention keeps done payloads a week, for inspection
	// and replay.
	DefaultPayloadRetention = 7 * 24 * time.Hour
	DefaultCleanupEvery     = time.Minute
	// DefaultNoBackendHold: see Config.NoBackendHold.
	DefaultNoBackendHold = time.Minute
	// DefaultUnavailableHold: see Config.UnavailableHold.
	DefaultUnavailableHold = time.Second
)

// Config configures a Forwarder. Zero settings take the defaults above
// (WithDefaults); New refuses a Config that Validate refuses.
type Config struct {
	Store Store
	// Targets maps provider names to targets; an event whose provider has
	// no entry is held (not attempted) and waits.
	Targets map[string]Target
	// Timeout bounds one delivery (WHGUARD_FORWARD_TIMEOUT).
	Timeout time.Duration
	// Concurrency bounds the requests to the backends in flight; as many
	// finished deliveries may be waiting for their outcome to be written.
	// Within it, the number in flight adapts to the backend (adapt.go).
	Concurrency int
	// MaxInFlight, when set, is the most the adaptive limit grows to
	// (WHGUARD_BACKEND_MAX_IN_FLIGHT: the governor enforces it across
	// replicas; growing past it would only make deliveries to hold).
	MaxInFlight int
	// Policy is the retry policy; zero fields take the defaults.
	Policy Policy
	// PollInterval is the fallback poll when no wake-up arrives.
	PollInterval time.Duration
	// ReapInterval is how often expired leases are looked for.
	ReapInterval time.Duration
	// LeaseMargin is added to Timeout for the lease: the time an outcome
	// has to be written before another replica may take the event over; at
	// most MaxLeaseMargin.
	LeaseMargin time.Duration
	// StatsInterval is how often the status gauges are refreshed.
	StatsInterval time.Duration
	// KeyRetention is how long a done event's key (and the event) is kept
	// after it was delivered (WHGUARD_DEDUP_RETENTION).
	KeyRetention time.Duration
	// PayloadRetention is how long a done event's payload is kept
	// (WHGUARD_PAYLOAD_RETENTION); at most KeyRetention, which unset it
	// follows when shorter than DefaultPayloadRetention.
	PayloadRetention time.Duration
	// CleanupInterval is how often retention runs.
	CleanupInterval time.Duration
	// NoBackendHold is how long an event whose provider has no target
	// waits before it is looked at again (a replica with a target for it
	// may be running by then).
	NoBackendHold time.Duration
	// Governor, when set, is asked before each attempt of a provider it
	// limits; a delivery it turns down is held, not attempted. Nil means
	// no limits.
	Governor Governor
	// UnavailableHold is how long a delivery waits when the governor's
	// shared state does not answer.
	UnavailableHold time.Duration
	// PauseInterval is how often the pauses are read from the journal.
	PauseInterval time.Duration
	// PauseHold is how long a paused delivery is held (a resume makes it
	// due at once).
	PauseHold time.Duration
	// FiguresInterval is how often this replica's per-minute delivery
	// figures are written to the journal (for the overview).
	FiguresInterval time.Duration
	// Replica names this process in the per-minute figures; empty means a
	// random name chosen by New.
	Replica string
	// Alerts, when set, hears of every event that goes dead.
	Alerts Alerts
	// Listen, when set, runs until ctx ends and calls wake on every
	// cross-process notification of new rows (LISTEN/NOTIFY).
	Listen func(ctx context.Context, wake func()) error
	// Client sends the deliveries; nil means a tuned client of our own.
	Client *http.Client
	// Metrics records delivery metrics; nil means none.
	Metrics *Metrics
	// Tracer, when set, makes a span of each attempt (trace.go); nil
	// makes none, and received traceparent headers pass through.
	Tracer trace.Tracer
	// Logger receives the forwarder's logs; nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand returns floats in [0, 1) for jitter; nil means math/rand/v2.
	Rand func() float64
}

// Bounds of the settings.
const (
	// MaxConcurrency bounds Concurrency: more deliveries in flight than a
	// thousand would only queue in the backend's accept backlog.
	MaxConcurrency = 1000
	// MaxLeaseMargin bounds LeaseMargin: a longer margin only delays the
	// takeover of a crashed replica's events.
	MaxLeaseMargin = 30 * time.Second
	// MinKeyRetention bounds KeyRetention from below: a key forgotten
	// before the senders stop redelivering lets a duplicate through.
	MinKeyRetention = time.Hour
)

// WithDefaults returns c with each zero setting set to its default. It
// leaves the parts (Store, Targets, Client, Logger, …) alone: New fills
// those it can.
func (c Config) WithDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Policy = c.Policy.WithDefaults()
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.ReapInterval = cmp.Or(c.ReapInterval, DefaultReapInterval)
	c.LeaseMargin = cmp.Or(c.LeaseMargin, DefaultLeaseMargin)
	c.StatsInterval = cmp.Or(c.StatsInterval, DefaultStatsEvery)
	c.FiguresInterval = cmp.Or(c.FiguresInterval, DefaultFiguresEvery)
	c.KeyRetention = cmp.Or(c.KeyRetention, DefaultKeyRetention)
	if c.PayloadRetention == 0 {
		c.PayloadRetention = min(DefaultPayloadRetention, c.KeyRetention)
	}
	c.CleanupInterval = cmp.Or(c.CleanupInterval, DefaultCleanupEvery)
	c.NoBackendHold = cmp.Or(c.NoBackendHold, DefaultNoBackendHold)
	c.UnavailableHold = cmp.Or(c.UnavailableHold, DefaultUnavailableHold)
	c.PauseInterval = cmp.Or(c.PauseInterval, DefaultPauseInterval)
	c.PauseHold = cmp.Or(c.PauseHold, DefaultPauseHold)
	return c
}

// Validate checks a Config's settings with its defaults applied: it
// returns one fields.Error per bad setting (errors.Join), nil when there
// is none. A zero or negative duration or count is refused, never
// clamped. The parts (Store, Governor, …) are New's to check.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, a ...any) { errs = append(errs, fields.Errorf(field, format, a...)) }
	if c.Timeout <= 0 {
		add("Timeout", "must be positive, got %s", c.Timeout)
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		add("Concurrency", "must be from 1 to %d, got %d", MaxConcurrency, c.Concurrency)
	}
	if c.MaxInFlight < 0 {
		add("MaxInFlight", "must be 0 (no bound) or more, got %d", c.MaxInFlight)
	}
	errs = append(errs, fields.Nest("Policy", c.Policy.Validate()))
	if c.LeaseMargin <= 0 || c.LeaseMargin > MaxLeaseMargin {
		add("LeaseMargin", "must be above 0 and at most %s, got %s", MaxLeaseMargin, c.LeaseMargin)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"PollInterval", c.PollInterval}, {"ReapInterval", c.ReapInterval}, {"StatsInterval", c.StatsInterval},
		{"FiguresInterval", c.FiguresInterval}, {"CleanupInterval", c.CleanupInterval}, {"NoBackendHold", c.NoBackendHold},
		{"UnavailableHold", c.UnavailableHold}, {"PauseInterval", c.PauseInterval}, {"PauseHold", c.PauseHold},
	} {
		if d.v <= 0 {
			add(d.field, "must be positive, got %s", d.v)
		}
	}
	keysOK := c.KeyRetention >= MinKeyRetention
	if !keysOK {
		add("KeyRetention", "%s is too short: keys must outlive the senders' redelivery horizon (at least %s; default %s, %d days)",
			c.KeyRetention, fmtHours(MinKeyRetention), DefaultKeyRetention, DefaultKeyRetention/(24*time.Hour))
	}
	switch {
	case c.PayloadRetention <= 0:
		add("PayloadRetention", "must be positive and at most {KeyRetention}, got %s", c.PayloadRetention)
	case keysOK && c.PayloadRetention > c.KeyRetention:
		add("PayloadRetention", "must be positive and at most {KeyRetention} (%s), got %s", c.KeyRetention, c.PayloadRetention)
	}
	for name, t := range c.Targets {
		errs = append(errs, fields.Nest(fields.Key("Targets", name), t.Validate()))
	}
	return errors.Join(errs...)
}

// fmtHours writes a whole number of hours as 1h, not 1h0m0s.
func fmtHours(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
}

// Validate checks where the target sends: an http(s) backend URL and a
// forward path, when set, that is a path.
func (t Target) Validate() error {
	var errs []error
	if t.BackendURL == "" {
		errs = append(errs, fields.Errorf("BackendURL", "is required: where the events are forwarded, e.g. http://127.0.0.1:3000"))
	} else if err := fields.HTTPURL(t.BackendURL); err != nil {
		errs = append(errs, &fields.Error{Field: "BackendURL", Err: err})
	}
	if t.ForwardPath != "" && !strings.HasPrefix(t.ForwardPath, "/") {
		errs = append(errs, fields.Errorf("ForwardPath", "%q must start with /", t.ForwardPath))
	}
	return errors.Join(errs...)
}
