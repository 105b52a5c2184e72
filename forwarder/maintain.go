package forwarder

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"time"

	"go.uber.org/zap"
)

// maintainer is one periodic task: runOnce does one pass under its own
// timeout; run calls it at once and then every interval until ctx ends.
type maintainer struct {
	name     string
	interval time.Duration
	timeout  time.Duration
	runOnce  func(ctx context.Context) error
	log      *zap.Logger
}

func (m maintainer) run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, m.timeout)
		err := m.runOnce(rctx)
		cancel()
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			m.log.Warn(m.name+" failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maintainers are the forwarder's periodic tasks: the reaper, retention
// and the status gauges.
func (f *Forwarder) maintainers() []maintainer {
	ms := []maintainer{
		{name: "reap expired leases", interval: f.cfg.ReapInterval, timeout: 10 * time.Second, runOnce: f.reapOnce},
		{name: "retention cleanup", interval: f.cfg.CleanupInterval, timeout: time.Minute, runOnce: f.cleanupOnce},
		{name: "read pauses", interval: f.cfg.PauseInterval, timeout: f.cfg.PauseInterval, runOnce: f.refreshPauses},
		{name: "write delivery figures", interval: f.cfg.FiguresInterval, timeout: 10 * time.Second, runOnce: f.recordFigures},
	}
	if f.cfg.Metrics != nil {
		ms = append(ms, maintainer{name: "refresh event gauges", interval: f.cfg.StatsInterval, timeout: 10 * time.Second, runOnce: f.statsOnce})
	}
	for i := range ms {
		ms[i].log = f.log
	}
	return ms
}

// reapOnce returns expired leases to retry (or dead when their budget is
// spent) and wakes the fetcher for them.
func (f *Forwarder) reapOnce(ctx context.Context) error {
	reaped, err := f.cfg.Store.ReapExpired(ctx, f.cfg.Policy.MaxAttempts)
	if n := len(reaped); n > 0 {
		f.log.Warn("expired leases returned to retry", zap.Int("count", n))
		f.cfg.Metrics.leaseExpired(n)
		f.Wake()
	}
	// An expired lease whose last attempt was spent is dead: counted and
	// told like a delivery that went dead.
	now := f.cfg.Now()
	for _, r := range reaped {
		if !r.Dead {
			continue
		}
		f.log.Warn("delivery quarantined (dead): its last attempt's lease expired", zap.Int64("id", r.ID),
			zap.String("provider", r.Provider), zap.String("event_id", r.EventID))
		f.figures.observe(r.Provider, OutcomeDead, now, 0, false)
		f.cfg.Metrics.reapedDead(r.Provider)
		if f.cfg.Alerts != nil {
			f.cfg.Alerts.Dead(r.Provider, f.origins[r.Provider], r.EventID)
		}
	}
	return err
}

// cleanupOnce applies retention (leader-only across PostgreSQL replicas).
func (f *Forwarder) cleanupOnce(ctx context.Context) error {
	now := f.cfg.Now()
	// What a cleanup did is counted even when a later step of it failed.
	c, err := f.cfg.Store.Cleanup(ctx, now.Add(-f.cfg.KeyRetention), now.Add(-f.cfg.PayloadRetention))
	if c.Events > 0 || c.Payloads > 0 || c.Partitions > 0 {
		f.log.Info("retention cleanup", zap.Int("events_deleted", c.Events), zap.Int("payloads_dropped", c.Payloads),
			zap.Int("partitions_dropped", c.Partitions))
		f.cfg.Metrics.cleaned(c)
	}
	return err
}

// statsOnce refreshes the status gauges.
func (f *Forwarder) statsOnce(ctx context.Context) error {
	s, err := f.cfg.Store.Stats(ctx)
	if err != nil {
		return err
	}
	f.cfg.Metrics.setStats(s, f.cfg.Targets)
	return nil
}

// statsAtStart reads the status gauges once before Start returns, so
// that they are there from the first scrape after readiness (the
// maintainer refreshes them from then on).
func (f *Forwarder) statsAtStart(ctx context.Context) {
	if f.cfg.Metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := f.statsOnce(ctx); err != nil {
		f.log.Warn("event gauges not read at start; they are read again shortly", zap.Error(err))
	}
}

// probeBackends checks once, at start, that each backend answers a TCP
// connection, and warns about those that do not: a backend that is down or
// on the wrong port is otherwise invisible until events start retrying.
// It is a warning, never fatal: the sidecar may start before its app.
func (f *Forwarder) probeBackends(ctx context.Context) {
	var origins []string
	for _, o := range f.origins {
		if !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	slices.Sort(origins)
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" {
			continue
		}
		host := u.Host // with its port: see Origin
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("backend does not answer; deliveries to it will wait and retry",
					zap.String("backend", o), zap.String("error", classify(err)))
			}
			continue
		}
		_ = conn.Close()
	}
}

// Origin is a backend URL's scheme://host:port, with the scheme's
// default port when the URL has none (http://b and http://b:80 are one
// backend), or the URL itself when it does not parse. It names a backend
// in logs, limits, breakers and pauses.
func Origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port)
}
