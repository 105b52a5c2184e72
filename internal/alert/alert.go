// Package alert tells operators when delivery goes wrong, without anyone
// watching the inspector: events going dead (grouped per provider), a
// backend's circuit breaker opening, a backend refusing whguard's
// requests (401, 403: its webhook secret), a pause, a backlog older than a
// threshold, the journal or Redis unreachable, catch-up's findings and
// failures, and each recovery.
//
// Messages go to one URL (WHGUARD_ALERT_URL), as a Slack incoming-webhook
// message or as JSON signed like a Standard Webhook. They are throttled so
// that an outage of thousands of events is a handful of messages: one
// message per condition when it starts, again every Repeat while it lasts,
// and one when it clears. Sending runs on a goroutine of its own behind a
// bounded queue: an alert receiver that is slow or down never slows a
// delivery (messages it cannot take are retried briefly, then counted and
// logged).
//
// Each replica watches and alerts on its own: with several replicas, a
// shared condition (a breaker, a pause, a backlog) is reported by each.
package alert

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/whguard/whguard/internal/fields"
	"go.uber.org/zap"
)

// Formats of WHGUARD_ALERT_FORMAT.
const (
	FormatSlack = "slack"
	FormatJSON  = "json"
)

// Types of message ("type" in the JSON format).
const (
	TypeEventDead          = "event_dead"
	TypeBreakerOpen        = "breaker_open"
	TypeBreakerClosed      = "breaker_closed"
	TypePaused             = "paused"
	TypeResumed            = "resumed"
	TypeBacklog            = "backlog"
	TypeBacklogCleared     = "backlog_cleared"
	TypeJournalUnreachable = "journal_unreachable"
	TypeJournalRecovered   = "journal_recovered"
	TypeRedisUnreachable   = "redis_unreachable"
	TypeRedisRecovered     = "redis_recovered"
	TypeCatchupRecovered   = "catchup_recovered"
	TypeCatchupFailing     = "catchup_failing"
	TypeCatchupOK          = "catchup_ok"
	TypeCatchupGaveUp      = "catchup_gave_up"
	TypeBackendRefuses     = "backend_refuses"
	TypeBackendAccepts     = "backend_accepts"
)

// Severities ("severity" in the JSON format).
const (
	SeverityCritical = "critical"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
	SeverityResolved = "resolved"
)

// Defaults.
const (
	DefaultRepeat        = 15 * time.Minute
	DefaultBacklogAge    = 5 * time.Minute
	DefaultDeadWindow    = time.Minute
	DefaultCheckInterval = 10 * time.Second
	// queueSize bounds the messages waiting to be sent; more are dropped
	// and counted (whguard_alerts_dropped_total).
	queueSize = 64
	// sendTries and sendTimeout bound the effort spent on one message.
	sendTries   = 3
	sendTimeout = 5 * time.Second
)

// Message is one alert; its JSON form is the body of the json format.
type Message struct {
	Type     string    `json:"type"`
	Severity string    `json:"severity"`
	Summary  string    `json:"summary"`
	Provider string    `json:"provider"`
	Backend  string    `json:"backend"`
	EventID  string    `json:"event_id"`
	At       time.Time `json:"at"`
}

// Config configures a Notifier. Zero settings take the defaults
// (WithDefaults); New refuses a Config that Validate refuses.
type Config struct {
	// URL receives the messages (WHGUARD_ALERT_URL). It may hold a token
	// (Slack's webhook URLs do): it is never logged.
	URL string
	// Format is FormatSlack or FormatJSON (WHGUARD_ALERT_FORMAT).
	Format string
	// Sign, when set, signs a JSON message's headers before it is sent
	// (a Standard Webhooks signature made with WHGUARD_ALERT_SECRET).
	Sign func(h http.Header, body []byte, at time.Time)
	// Repeat is how often a condition that lasts is reported again
	// (WHGUARD_ALERT_REPEAT); it also spaces the messages about events
	// going dead, per provider.
	Repeat time.Duration
	// BacklogAge is the age of the oldest undelivered event above which a
	// backend's backlog is reported (WHGUARD_ALERT_BACKLOG_AGE).
	BacklogAge time.Duration
	// DeadWindow is how long dead events are gathered into one message.
	DeadWindow time.Duration
	// CheckInterval is how often the probes run.
	CheckInterval time.Duration
	// Client sends the messages; nil means one with a short timeout.
	Client *http.Client
	// Metrics counts messages; nil means none.
	Metrics *Metrics
	// Logger receives the notifier's logs; nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// WithDefaults returns c with each zero setting set to its default; the
// parts (Client, Logger, Now) are New's to fill.
func (c Config) WithDefaults() Config {
	c.Format = cmp.Or(c.Format, FormatSlack)
	c.Repeat = cmp.Or(c.Repeat, DefaultRepeat)
	c.BacklogAge = cmp.Or(c.BacklogAge, DefaultBacklogAge)
	c.DeadWindow = cmp.Or(c.DeadWindow, DefaultDeadWindow)
	c.CheckInterval = cmp.Or(c.CheckInterval, DefaultCheckInterval)
	return c
}

// Validate checks a Config with its defaults applied, returning one
// fields.Error per bad setting. An empty URL passes (no alerts are sent:
// New refuses it), so that the other settings are checked either way.
func (c Config) Validate() error {
	var errs []error
	if c.URL != "" {
		if err := fields.HTTPURL(c.URL); err != nil {
			errs = append(errs, &fields.Error{Field: "URL", Err: err})
		}
	}
	formatOK := c.Format == FormatSlack || c.Format == FormatJSON
	if !formatOK {
		errs = append(errs, fields.Errorf("Format", "%q is not %s or %s", c.Format, FormatSlack, FormatJSON))
	}
	if c.Sign != nil && formatOK && c.Format != FormatJSON {
		// A Slack message carries no signature its receiver would check.
		errs = append(errs, fields.Errorf("Sign", "signs json alerts only; set {Format} to json or do not sign"))
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Repeat", c.Repeat}, {"BacklogAge", c.BacklogAge}, {"DeadWindow", c.DeadWindow}, {"CheckInterval", c.CheckInterval}} {
		if d.v <= 0 {
			errs = append(errs, fields.Errorf(d.field, "must be positive, got %s", d.v))
		}
	}
	return errors.Join(errs...)
}

// condition is one thing that can be wrong, while it is.
type condition struct {
	msg Message // the message that reported it (its first, or the last repeat)
	// since is when it started; sent when it was last reported.
	since, sent time.Time
	// silent: it started again within Repeat of its last report (a
	// flapping breaker): neither it nor its recovery is sent.
	silent bool
}

// deadGroup gathers one provider's dead events until they are reported.
type deadGroup struct {
	count   int
	ids     []string // the first few
	backend string
	first   time.Time // of the gathered ones
	sent    time.Time // last report
}

// maxDeadIDs is how many event ids a dead-events message names.
const maxDeadIDs = 5

// Notifier gathers conditions and dead events and sends the messages.
// Start it once with its probes; Stop it once.
type Notifier struct {
	cfg Config
	log *zap.Logger
	// probes are what Start watches (Watch sets them).
	probes Probes

	mu sync.Mutex
	// conds are the conditions in force, by key; fired remembers when each
	// key was last reported as starting (for the flap rule).
	conds map[string]*condition
	fired map[string]time.Time
	dead  map[string]*deadGroup

	queue chan Message
	// unsent counts the messages queued or being sent.
	unsent atomic.Int32
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Notifier for a valid cfg.
func New(cfg Config) (*Notifier, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("alert: %w", err)
	}
	if cfg.URL == "" {
		return nil, errors.New("alert: no URL to send the alerts to")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: sendTimeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Notifier{
		cfg:   cfg,
		log:   cfg.Logger,
		conds: map[string]*condition{},
		fired: map[string]time.Time{},
		dead:  map[string]*deadGroup{},
		queue: make(chan Message, queueSize),
	}, nil
}

// Dead records that an event went dead. It never blocks: the event joins
// its provider's group, reported after DeadWindow, at most once per Repeat.
func (n *Notifier) Dead(provider, backend, eventID string) {
	now := n.cfg.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	g := n.dead[provider]
	if g == nil {
		g = &deadGroup{}
		n.dead[provider] = g
	}
	if g.count == 0 {
		g.first = now
	}
	g.count++
	g.backend = backend
	if len(g.ids) < maxDeadIDs {
		g.ids = append(g.ids, eventID)
	}
}

// Set says whether the condition of key holds now; m describes it (its
// Type and Severity those of the start). The first Set that makes it hold
// reports m; while it holds, it is reported again every Repeat; the first
// Set that clears it reports recovered (a message of type recovery).
func (n *Notifier) Set(key string, holds bool, m Message, recovery Message) {
	now := n.cfg.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.conds[key]
	switch {
	case holds && c == nil:
		c = &condition{msg: m, since: now, sent: now}
		if last, ok := n.fired[key]; ok && now.Sub(last) < n.cfg.Repeat {
			c.silent = true
		} else {
			n.fired[key] = now
			n.enqueue(m, now)
		}
		n.conds[key] = c
	case holds:
		c.msg.Summary = m.Summary // keep the figures current for repeats
		if c.silent && now.Sub(n.fired[key]) >= n.cfg.Repeat {
			// A flap that stayed: report it like any lasting condition
			// (its recovery too), so the last word is not "cleared".
			c.silent, c.sent = false, now.Add(-n.cfg.Repeat)
			n.fired[key] = now
		}
		if !c.silent && now.Sub(c.sent) >= n.cfg.Repeat {
			c.sent = now
			r := c.msg
			r.Summary = "Still: " + m.Summary + " (since " + c.since.UTC().Format("15:04 MST") + ")"
			n.enqueue(r, now)
		}
	case c != nil:
		delete(n.conds, key)
		if !c.silent {
			recovery.Severity = SeverityResolved
			recovery.Summary += " (after " + now.Sub(c.since).Round(time.Second).String() + ")"
			n.enqueue(recovery, now)
		}
	}
}

// Active lists the keys of the conditions in force, sorted.
func (n *Notifier) Active() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	keys := make([]string, 0, len(n.conds))
	for k := range n.conds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// flushDead reports the dead-event groups that are due: gathered for
// DeadWindow, and Repeat after their provider's last report.
func (n *Notifier) flushDead() { n.reportDead(false) }

// reportDead reports the due dead-event groups, or every gathered one when
// all is set (at Stop: they would be lost).
func (n *Notifier) reportDead(all bool) {
	now := n.cfg.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for provider, g := range n.dead {
		due := now.Sub(g.first) >= n.cfg.DeadWindow && (g.sent.IsZero() || now.Sub(g.sent) >= n.cfg.Repeat)
		if g.count == 0 || !due && !all {
			continue
		}
		what := "1 event"
		if g.count > 1 {
			what = fmt.Sprintf("%d events", g.count)
		}
		ids := strings.Join(g.ids, ", ")
		if g.count > len(g.ids) {
			ids += ", …"
		}
		n.enqueue(Message{
			Type: TypeEventDead, Severity: SeverityCritical, Provider: provider, Backend: g.backend, EventID: g.ids[0],
			Summary: fmt.Sprintf("%s of %s went dead (quarantined) since %s: %s. Inspect them and replay once fixed.",
				what, provider, g.first.UTC().Format("15:04:05 MST"), ids),
		}, now)
		*g = deadGroup{sent: now}
	}
}

// enqueue hands m to the sender without blocking; n.mu is held.
func (n *Notifier) enqueue(m Message, now time.Time) {
	m.At = now.UTC()
	n.unsent.Add(1)
	select {
	case n.queue <- m:
	default:
		n.unsent.Add(-1)
		n.cfg.Metrics.dropped()
		n.log.Warn("alert dropped: too many waiting to be sent", zap.String("type", m.Type))
	}
}
