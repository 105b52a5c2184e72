// Package catchup asks the providers' APIs what they failed to deliver to
// whguard, and brings it in: what a sender gave up on while whguard (or
// its journal) could not take it is not lost as long as the provider
// still remembers it.
//
// Stripe lists its events with the delivery_success=false filter: each
// one the journal does not have is journaled as if received now (its
// authenticity is the authenticated TLS call to the API) and delivered
// like any other. GitHub lists its hook's deliveries: a GUID the journal
// does not have and that no delivery got a 2xx for is redelivered through
// GitHub's API, so that it arrives signed at the ingress like any
// delivery. The decisions are pure functions (decide.go); the passes are
// stripe.go and github.go; this file runs them, one at a time across
// replicas (a lease in the journal), every interval.
package catchup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

// Journal is what catch-up keeps in, and asks of, the journal.
type Journal interface {
	// Known reports which of ids the journal has for provider.
	Known(ctx context.Context, provider string, ids []string) (map[string]bool, error)
	// ClaimCatchup takes provider's pass for owner for leaseFor, when no
	// other owner holds it and (unless force) the next pass is due. It
	// reports whether it got it.
	ClaimCatchup(ctx context.Context, provider, owner string, leaseFor time.Duration, force bool) (bool, error)
	// EndCatchup gives the pass back; p, when not nil, is recorded as the
	// last pass and next becomes when the next one is due.
	EndCatchup(ctx context.Context, provider, owner string, p *journal.CatchupPass, next time.Time) error
	// CatchupStates reads every provider's state.
	CatchupStates(ctx context.Context) ([]journal.CatchupState, error)
	// CatchupRequests reads what was asked of GitHub for provider.
	CatchupRequests(ctx context.Context, provider string) ([]journal.CatchupRequest, error)
	// SaveCatchupRequest records a request (or its giving up).
	SaveCatchupRequest(ctx context.Context, provider string, r journal.CatchupRequest) error
	// ForgetCatchupRequests drops the requests for guids and those last
	// made before before.
	ForgetCatchupRequests(ctx context.Context, provider string, guids []string, before time.Time) error
}

// Ingest journals an event a provider's API listed, as the ingress would
// have journaled its webhook (path, filters, order key), marked as
// brought in by catch-up, and hands it to delivery. It reports whether
// the event was new.
type Ingest interface {
	Inject(ctx context.Context, provider, id, eventType string, body []byte) (journaled bool, err error)
}

// Alerts hears what operators should: events recovered, passes failing
// for longer than three intervals, deliveries given up on.
type Alerts interface {
	Recovered(provider string, n int)
	Failing(provider string, failing bool, reason string)
	GaveUp(provider string, guids []string)
}

// Options configures Catchup.
type Options struct {
	Providers []Config
	Journal   Journal
	Ingest    Ingest
	// Replica names this process as a pass's owner; "" is a random name.
	Replica string
	// Client calls the APIs; nil means one with a 30 s timeout.
	Client *http.Client
	// RedeliverySpacing separates two GitHub redelivery requests; 0
	// means 1 s.
	RedeliverySpacing time.Duration
	Alerts            Alerts
	Metrics           *Metrics
	Logger            *zap.Logger
	Now               func() time.Time
}

// Errors of Run.
var (
	ErrUnknownProvider = errors.New("no catch-up for this provider")
	ErrBusy            = errors.New("a pass is already running")
	ErrSinceTooFar     = errors.New("since is beyond how far back the provider's API lists")
)

// Bounds of a pass.
const (
	passTimeout = 2 * time.Minute
	// busyWait is how long Run waits for another replica's pass.
	busyWait = 30 * time.Second
)

// Catchup runs the passes. Start it once; Stop it once.
type Catchup struct {
	opt   Options
	cfgs  map[string]Config
	names []string
	log   *zap.Logger
	owner string

	// mu guards failingSince: when each provider's passes started to fail.
	mu           sync.Mutex
	failingSince map[string]time.Time

	cancel context.CancelFunc
	done   chan struct{}
}

// New checks the providers' configurations and builds a stopped Catchup.
func New(o Options) (*Catchup, error) {
	if o.Journal == nil || o.Ingest == nil {
		return nil, errors.New("catchup: a journal and an ingest are required")
	}
	c := &Catchup{opt: o, cfgs: map[string]Config{}, log: o.Logger, owner: o.Replica, failingSince: map[string]time.Time{}}
	var errs []error
	for _, cfg := range o.Providers {
		cfg = cfg.WithDefaults()
		if err := cfg.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("catchup %s: %w", cfg.Provider, err))
		}
		c.cfgs[cfg.Provider] = cfg
		c.names = append(c.names, cfg.Provider)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.Sort(c.names)
	o.Metrics.zero(c.names)
	if c.log == nil {
		c.log = zap.NewNop()
	}
	if c.owner == "" {
		c.owner = uuid.NewString()
	}
	if c.opt.Client == nil {
		c.opt.Client = apiClient(requestTimeout(c.cfgs))
	}
	if c.opt.RedeliverySpacing <= 0 {
		c.opt.RedeliverySpacing = time.Second
	}
	if c.opt.Now == nil {
		c.opt.Now = time.Now
	}
	return c, nil
}

// requestTimeout bounds one API call: the shortest interval, from 5 s to
// 30 s (an API that hangs ends the pass, and the next one tries again).
func requestTimeout(cfgs map[string]Config) time.Duration {
	t := 30 * time.Second
	for _, c := range cfgs {
		t = min(t, c.Interval)
	}
	return max(t, 5*time.Second)
}

// Providers lists the providers with catch-up, sorted.
func (c *Catchup) Providers() []string { return c.names }

// Start runs the scheduled passes in the background until Stop.
func (c *Catchup) Start(ctx context.Context) error {
	if c.cancel != nil || len(c.names) == 0 {
		return nil
	}
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.done = make(chan struct{})
	go c.loop(ctx)
	return nil
}

// Stop ends the loop, interrupting a pass, and waits for it within ctx.
func (c *Catchup) Stop(ctx context.Context) error {
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("catchup: stop: %w", ctx.Err())
	}
}

// tick is how often the loop looks for a due pass: a fifth of the
// shortest interval, from 100 ms to 10 s.
func (c *Catchup) tick() time.Duration {
	t := 10 * time.Second
	for _, cfg := range c.cfgs {
		t = min(t, cfg.Interval/5)
	}
	return max(t, 100*time.Millisecond)
}

func (c *Catchup) loop(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(c.tick())
	defer t.Stop()
	for {
		for _, name := range c.names {
			if ctx.Err() != nil {
				return
			}
			if _, err := c.scheduled(ctx, name); err != nil && ctx.Err() == nil {
				c.log.Warn("catch-up pass not run", zap.String("provider", name), zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scheduled runs provider's pass when it is due and nobody else runs it.
func (c *Catchup) scheduled(ctx context.Context, provider string) (bool, error) {
	ok, err := c.opt.Journal.ClaimCatchup(ctx, provider, c.owner, passTimeout+10*time.Second, false)
	if err != nil || !ok {
		return false, err
	}
	cfg := c.cfgs[provider]
	p := c.pass(ctx, cfg, cfg.Window, false)
	if ctx.Err() != nil {
		// Interrupted by Stop: not a failure of the API. The lease is
		// given back with nothing recorded, and the pass is still due.
		return true, c.opt.Journal.EndCatchup(context.WithoutCancel(ctx), provider, c.owner, nil, time.Time{})
	}
	return true, c.end(ctx, cfg, &p)
}

// Run runs a pass of provider now (the API's and the CLI's): since, when
// positive, replaces the window for this pass; a dry run journals and
// asks for nothing, and is not recorded. While another pass runs it waits
// for it, up to 30 s, then answers ErrBusy.
func (c *Catchup) Run(ctx context.Context, provider string, since time.Duration, dryRun bool) (journal.CatchupPass, error) {
	cfg, ok := c.cfgs[provider]
	if !ok {
		return journal.CatchupPass{}, ErrUnknownProvider
	}
	window := cfg.Window
	if since > 0 {
		if since > Retention(cfg.Kind) {
			return journal.CatchupPass{}, ErrSinceTooFar
		}
		window = since
	}
	deadline := c.opt.Now().Add(busyWait)
	for {
		ok, err := c.opt.Journal.ClaimCatchup(ctx, provider, c.owner, passTimeout+10*time.Second, true)
		if err != nil {
			return journal.CatchupPass{}, err
		}
		if ok {
			break
		}
		if !c.opt.Now().Before(deadline) {
			return journal.CatchupPass{}, ErrBusy
		}
		select {
		case <-ctx.Done():
			return journal.CatchupPass{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	p := c.pass(ctx, cfg, window, dryRun)
	if dryRun {
		return p, c.opt.Journal.EndCatchup(context.WithoutCancel(ctx), provider, c.owner, nil, time.Time{})
	}
	return p, c.end(ctx, cfg, &p)
}

// pass runs one pass of cfg's provider over the window.
func (c *Catchup) pass(ctx context.Context, cfg Config, window time.Duration, dryRun bool) journal.CatchupPass {
	ctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	now := c.opt.Now()
	p := journal.CatchupPass{Started: now, Since: now.Add(-window)}
	var err error
	switch cfg.Kind {
	case KindStripe:
		err = c.stripePass(ctx, cfg, &p, dryRun)
	case KindGitHub:
		err = c.githubPass(ctx, cfg, &p, dryRun)
	}
	p.Finished = c.opt.Now()
	if err != nil {
		p.Error = err.Error()
	}
	c.log.Info("catch-up pass", zap.String("provider", cfg.Provider), zap.Bool("dry_run", dryRun), zap.Int("listed", p.Listed),
		zap.Int("missing", p.Missing), zap.Int("journaled", p.Journaled), zap.Int("redelivery_requested", p.RedeliveryRequested),
		zap.String("error", p.Error))
	return p
}

// end records a pass (not a dry run's), counts it and tells the alerts.
func (c *Catchup) end(ctx context.Context, cfg Config, p *journal.CatchupPass) error {
	next := p.Finished.Add(cfg.Interval)
	err := c.opt.Journal.EndCatchup(context.WithoutCancel(ctx), cfg.Provider, c.owner, p, next)
	c.opt.Metrics.pass(cfg.Provider, p)
	if c.opt.Alerts == nil {
		return err
	}
	if p.Journaled > 0 {
		c.opt.Alerts.Recovered(cfg.Provider, p.Journaled)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Error == "" {
		delete(c.failingSince, cfg.Provider)
		c.opt.Alerts.Failing(cfg.Provider, false, "")
		return err
	}
	since, ok := c.failingSince[cfg.Provider]
	if !ok {
		since = p.Started
		c.failingSince[cfg.Provider] = since
	}
	if p.Finished.Sub(since) > 3*cfg.Interval {
		c.opt.Alerts.Failing(cfg.Provider, true, p.Error)
	}
	return err
}

// knownChunk is how many ids one journal look-up takes (a busy hook
// lists thousands of GUIDs in three days).
const knownChunk = 500

// known reports which of ids the journal has for provider, looking them
// up knownChunk at a time.
func (c *Catchup) known(ctx context.Context, provider string, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	for chunk := range slices.Chunk(ids, knownChunk) {
		k, err := c.opt.Journal.Known(ctx, provider, chunk)
		if err != nil {
			return nil, err
		}
		for id := range k {
			out[id] = true
		}
	}
	return out, nil
}

// Status is one provider's catch-up as the API shows it.
type Status struct {
	Provider    string                `json:"provider"`
	Window      string                `json:"window"`
	NextPass    *time.Time            `json:"next_pass"`
	LastSuccess *time.Time            `json:"last_success"`
	LastPass    *journal.CatchupPass  `json:"last_pass"`
	LastError   *journal.CatchupError `json:"last_error"`
	Unarrived   []string              `json:"unarrived"`
}

// Status reads every provider's catch-up.
func (c *Catchup) Status(ctx context.Context) ([]Status, error) {
	states, err := c.opt.Journal.CatchupStates(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]journal.CatchupState{}
	for _, s := range states {
		by[s.Provider] = s
	}
	out := make([]Status, 0, len(c.names))
	for _, name := range c.names {
		cfg, s := c.cfgs[name], by[name]
		st := Status{Provider: name, Window: cfg.Window.String(), LastPass: s.LastPass, LastError: s.LastError, Unarrived: []string{}}
		if !s.NextPass.IsZero() {
			st.NextPass = &s.NextPass
		}
		if !s.LastSuccess.IsZero() {
			st.LastSuccess = &s.LastSuccess
		}
		if cfg.Kind == KindGitHub {
			reqs, err := c.opt.Journal.CatchupRequests(ctx, name)
			if err != nil {
				return nil, err
			}
			for _, r := range reqs {
				if r.GaveUp {
					st.Unarrived = append(st.Unarrived, r.GUID)
				}
			}
		}
		out = append(out, st)
	}
	return out, nil
}
