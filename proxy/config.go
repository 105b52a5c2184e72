package proxy

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/whguard/whguard/internal/fields"
	"github.com/whguard/whguard/internal/tracing"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// DefaultMaxBodyBytes is the body limit when none is configured: 1 MiB,
// above the documented maximum of the common senders (GitHub caps payloads
// at 25 MB but sends almost all under 1 MB; Stripe events are a few KB).
const DefaultMaxBodyBytes = 1 << 20

// DefaultCommitTimeout bounds one journal commit on the request path: with
// reading and verifying the request, a sender gets its 503 within 5 s of
// its request's arrival while the journal has no primary.
const DefaultCommitTimeout = 4 * time.Second

// IngressConfig configures the ingress handler. Zero settings take the
// defaults (WithDefaults); NewIngress refuses a config that Validate
// refuses.
type IngressConfig struct {
	Routes []Route
	// Intake journals each verified event and hands it to delivery
	// (required).
	Intake Intake
	// Metrics records ingress counters; nil means not recorded.
	Metrics *Metrics
	// Logger receives request logs; nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CommitTimeout bounds one journal commit; 0 means DefaultCommitTimeout.
	CommitTimeout time.Duration
	// MaxBodyBytes bounds the body on the routes that set no bound of
	// their own (WHGUARD_MAX_BODY_BYTES); 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBufferedBytes bounds the bodies being read at once, all requests
	// together (WHGUARD_MAX_BUFFERED_BYTES); 0 means
	// DefaultMaxBufferedBytes.
	MaxBufferedBytes int64
	// PassThrough, when set, serves every request whose path is no
	// provider's (WHGUARD_PASS_THROUGH): whguard then stands in front of
	// all of the app's traffic, passing the rest on unchanged. Nil answers
	// 404 there.
	PassThrough http.Handler
	// Replies reads the stored replies of sync-mode events for their
	// duplicates; nil answers them with the 202 body. It is asked only on
	// a sync route: async duplicates cost no extra query.
	Replies ReplyReader
	// Refusals keeps the refused requests, each with its diagnosis, for
	// the admin API; nil keeps none (they are still diagnosed, counted
	// and logged).
	Refusals *Refusals
	// Receipts, when set, records what duplicates were answered, and a
	// sync-mode sender's answer when it was the backend's reply (the
	// event's timeline); nil records neither.
	Receipts ReceiptRecorder
	// Tracer, when set, makes a SERVER span of each request to a webhook
	// path and stores its context with the event (proxy/trace.go); nil
	// makes none.
	Tracer trace.Tracer
	// Propagator reads a sender's trace context with Tracer
	// (OTEL_PROPAGATORS; the zero value: W3C Trace Context).
	Propagator tracing.Propagator
}

// MaxBodyLimit is the largest body limit accepted: 64 MiB, above any
// sender's documented maximum (GitHub caps payloads at 25 MB).
const MaxBodyLimit = 64 << 20

// Sync mode bounds. Senders that read the answer give up within seconds
// (Slack slash commands after 3 s, Twilio after 15 s by default): a wait
// longer than MaxSyncTimeout holds a request, a body buffer and a delivery
// slot for no sender that is still listening. 25 s also leaves the 202 of
// a sender that waited in vain room before the ingress listener's 30 s
// write deadline, which counts from the request's arrival too.
const (
	DefaultSyncTimeout = 2 * time.Second
	MaxSyncTimeout     = 25 * time.Second
)

// maxTypePattern bounds one pattern of an event-type filter: an event type
// longer than 256 bytes is never reported (verify drops it), so no longer
// pattern could match.
const maxTypePattern = 256

// WithDefaults returns c with each zero setting set to its default, its
// routes' included.
func (c IngressConfig) WithDefaults() IngressConfig {
	c.CommitTimeout = cmp.Or(c.CommitTimeout, DefaultCommitTimeout)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxBufferedBytes = cmp.Or(c.MaxBufferedBytes, DefaultMaxBufferedBytes)
	c.Routes = append([]Route(nil), c.Routes...)
	for i, r := range c.Routes {
		c.Routes[i] = r.withDefaults(c.MaxBodyBytes)
	}
	return c
}

// withDefaults sets the route's zero bounds: the ingress's body limit,
// and in sync mode the default wait.
func (r Route) withDefaults(maxBody int64) Route {
	r.MaxBodyBytes = cmp.Or(r.MaxBodyBytes, maxBody)
	if r.Sync {
		r.SyncTimeout = cmp.Or(r.SyncTimeout, DefaultSyncTimeout)
	}
	return r
}

// Validate checks a config with its defaults applied, returning one
// fields.Error per bad setting (a route's under Routes[i]). The parts
// (Intake, each route's Provider) are NewIngress's to check.
func (c IngressConfig) Validate() error {
	var errs []error
	add := func(field, format string, a ...any) { errs = append(errs, fields.Errorf(field, format, a...)) }
	bodyOK := c.MaxBodyBytes >= 1 && c.MaxBodyBytes <= MaxBodyLimit
	if !bodyOK {
		add("MaxBodyBytes", "must be from 1 to %d (64 MiB), got %d", MaxBodyLimit, c.MaxBodyBytes)
	}
	bufferOK := c.MaxBufferedBytes > 0
	if !bufferOK {
		add("MaxBufferedBytes", "must be positive, got %d", c.MaxBufferedBytes)
	}
	if c.CommitTimeout <= 0 {
		add("CommitTimeout", "must be positive, got %s", c.CommitTimeout)
	}
	// Large bodies may hold three quarters of the buffering budget (the
	// rest stays for small ones, see bodyBudget): a larger limit could
	// never be honoured. Said once of the shared limit, once of each
	// route's own.
	share := largeShare(c.MaxBufferedBytes)
	tooLarge := func(limit int64) string {
		return fmt.Sprintf("%d is above three quarters of {MaxBufferedBytes} (%d), the most one body may hold while it is read; "+
			"raise the budget to at least %d or lower the limit", limit, share, limit*4/3+1)
	}
	sharedTooLarge := false
	paths := map[string]int{}
	for i, r := range c.Routes {
		field := fields.Key("Routes", i)
		own := r.MaxBodyBytes != c.MaxBodyBytes
		errs = append(errs, fields.Nest(field, r.validate()))
		switch {
		case !bufferOK || r.MaxBodyBytes <= share:
		case own && r.MaxBodyBytes <= MaxBodyLimit:
			errs = append(errs, fields.Errorf(field+".MaxBodyBytes", "%s", tooLarge(r.MaxBodyBytes)))
		case !own && bodyOK && !sharedTooLarge:
			sharedTooLarge = true
			add("MaxBodyBytes", "%s", tooLarge(c.MaxBodyBytes))
		}
		if other, dup := paths[r.Path]; dup && r.Path != "" {
			errs = append(errs, fields.Errorf(field+".Path", "%q is already the path of {Routes[%d]}; give each route its own", r.Path, other))
		} else {
			paths[r.Path] = i
		}
	}
	return errors.Join(errs...)
}

// validate checks one route's own settings.
func (r Route) validate() error {
	var errs []error
	add := func(field, format string, a ...any) { errs = append(errs, fields.Errorf(field, format, a...)) }
	switch {
	case !strings.HasPrefix(r.Path, "/"):
		add("Path", "%q must start with /", r.Path)
	case strings.ContainsAny(r.Path, "?#%"):
		// The path is matched against the decoded request path, without
		// its query: such a path could never match a request.
		add("Path", "%q must be a plain path, without ?, # or %%-escapes", r.Path)
	}
	if r.ForwardPath != "" && !strings.HasPrefix(r.ForwardPath, "/") {
		add("ForwardPath", "%q must start with /", r.ForwardPath)
	}
	if r.MaxBodyBytes < 1 || r.MaxBodyBytes > MaxBodyLimit {
		add("MaxBodyBytes", "must be from 1 to %d (64 MiB), got %d", MaxBodyLimit, r.MaxBodyBytes)
	}
	switch {
	case r.Sync && (r.SyncTimeout <= 0 || r.SyncTimeout > MaxSyncTimeout):
		add("SyncTimeout", "must be a duration above 0 and at most %s, got %s", MaxSyncTimeout, r.SyncTimeout)
	case !r.Sync && r.SyncTimeout != 0:
		add("SyncTimeout", "is set on an async route; set {Sync} too, or leave it 0")
	}
	for i, pat := range r.EventTypes {
		var msg string
		switch {
		case pat == "":
			msg = "item %d is empty; expected event types such as invoice.*,customer.subscription.*"
		case !utf8.ValidString(pat) || strings.ContainsFunc(pat, unicode.IsControl):
			msg = "item %d holds a control character or invalid UTF-8; expected event types such as invoice.*"
		case len(pat) > maxTypePattern:
			msg = "item %d is longer than 256 bytes, the longest event type whguard reads"
		default:
			continue
		}
		errs = append(errs, &fields.Error{Field: "EventTypes", Index: i, Err: fmt.Errorf(msg, i+1)})
	}
	return errors.Join(errs...)
}
