package main

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/alert"
	"github.com/whguard/whguard/internal/startstop"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
)

// openJournal opens the configured journal: PostgreSQL for postgres://
// URLs, the embedded SQLite file for sqlite:PATH. listen is PostgreSQL's
// LISTEN loop (nil for the embedded store, whose only writer is this
// process and wakes its forwarder in process).
func openJournal(ctx context.Context, cfg *config, log *zap.Logger) (j journal.Store, listen func(context.Context, func()) error, err error) {
	if path, ok := strings.CutPrefix(cfg.DatabaseURL, "sqlite:"); ok {
		s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path, Logger: log.Named("journal")})
		return s, nil, err
	}
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: cfg.DatabaseURL, ListenURL: cfg.DatabaseListenURL, Logger: log.Named("journal")})
	if err != nil {
		return nil, nil, err
	}
	return pg, pg.Listen, nil
}

func migrate(ctx context.Context, cfg *config, log *zap.Logger) error {
	j, _, err := openJournal(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer j.Close()
	applied, err := j.Migrate(ctx)
	if err != nil {
		return err
	}
	version, err := j.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	log.Info("journal migrated", zap.Ints("applied", applied), zap.Int("version", version))
	return nil
}

// serve runs until ctx is cancelled (SIGINT/SIGTERM), then shuts down
// within WHGUARD_SHUTDOWN_TIMEOUT.
func serve(ctx context.Context, cfg *config, log *zap.Logger) error {
	return serveWith(ctx, cfg, log, nil)
}

// serveWith is serve, calling listening (when not nil) with the bound
// ingress and admin addresses once both listen (the demo binds port 0).
// Every part is built first, nothing running (wire); then one group
// starts them in order and, at the end, stops them in the reverse order
// within the one shutdown deadline: the ingress stops accepting first
// (requests in flight finish their commit), the forwarder stops leasing
// and lets deliveries in flight finish (what still runs at the deadline
// is interrupted and its lease handed back), the alerts report what went
// dead meanwhile, and the admin listener and the journal close last.
func serveWith(ctx context.Context, cfg *config, log *zap.Logger, listening func(ingress, admin string)) error {
	p, err := wire(cfg, log)
	if err != nil {
		return err
	}
	g := startstop.NewGroup(log)
	// First, so stopped last: the spans of the last requests and
	// deliveries are flushed, within what is left of the deadline.
	g.Add("traces", p.traces)
	g.Add("journal", p.journal)
	g.Add("receipts", p.receipts)
	g.Add("admin listener", p.admin)
	if p.metrics != nil {
		g.Add("metrics listener", p.metrics)
	}
	// An unreachable database is retried, not fatal: the sidecar can come
	// up before its database does (readyz says so, webhooks get 503
	// meanwhile), and what needs the schema starts once it is there.
	g.Add("migrations", p.migration)
	if p.governor != nil {
		g.Add("governor", p.governor)
	}
	if p.alerts != nil {
		// Alerts watch from the moment the journal is ready: they report
		// what becomes unreachable, not a slow start-up (which /readyz
		// and the logs show). Stopped after the forwarder, they report
		// the events that went dead while it stopped.
		g.AddAfter("alerts", p.alerts, p.migration.ready)
	}
	g.AddAfter("forwarder", p.forwarder, p.migration.ready)
	if p.rotation != nil {
		// Before the ingress: a secret rotated while whguard starts is
		// picked up at the first read.
		g.Add("secret files", p.rotation)
	}
	g.Add("ingress listener", p.ingress)
	if p.catchup != nil {
		// Last: a GitHub redelivery it asks for comes to the ingress, and
		// what it journals goes to the forwarder. Stopped first.
		g.AddAfter("catch-up", p.catchup, p.migration.ready)
	}
	if err := g.Start(ctx); err != nil {
		return err
	}
	if listening != nil {
		listening(p.ingress.addr, p.admin.addr)
	}
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", zap.Duration("timeout", cfg.ShutdownTimeout))
	case serveErr = <-p.listenerErrs:
		log.Error("listener failed; shutting down", zap.Error(serveErr))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := g.Stop(sctx); err != nil {
		log.Warn("shutdown incomplete", zap.Error(err))
	}
	log.Info("stopped")
	return serveErr
}

// newAlerts is the alert notifier when WHGUARD_ALERT_URL is set, else nil.
func newAlerts(cfg *config, reg prometheus.Registerer, log *zap.Logger) (*alert.Notifier, error) {
	if cfg.AlertURL == "" {
		return nil, nil
	}
	ac := cfg.alerts
	ac.Metrics, ac.Logger = alert.NewMetrics(reg), log
	return alert.New(ac)
}

// migrateUntilDone applies migrations, retrying every two seconds while the
// database is unreachable; it reports whether it succeeded before ctx ended.
func migrateUntilDone(ctx context.Context, j journal.Store, log *zap.Logger) bool {
	for {
		applied, err := j.Migrate(ctx)
		if err == nil {
			log.Info("journal ready", zap.Ints("applied", applied))
			return true
		}
		log.Warn("journal migration failed; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(2 * time.Second):
		}
	}
}

// providerNames lists the configured providers' names.
func providerNames(cfg *config) []string {
	names := make([]string, len(cfg.providers))
	for i, p := range cfg.providers {
		names[i] = p.name
	}
	return names
}

// backendOrigins lists the configured backends' origins.
func backendOrigins(cfg *config) []string {
	var out []string
	for _, p := range cfg.providers {
		if o := forwarder.Origin(cfg.forward.Targets[p.name].BackendURL); !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// providerSchemes maps the configured providers to their schemes.
func providerSchemes(cfg *config) map[string]string {
	m := make(map[string]string, len(cfg.providers))
	for _, p := range cfg.providers {
		m[p.name] = p.provider.SchemeName()
	}
	return m
}

// alertBackends reads the forwarder's backends as the alerts watch them.
func alertBackends(fwd *forwarder.Forwarder) func(context.Context) (alert.Backends, error) {
	return func(ctx context.Context) (alert.Backends, error) {
		bs, err := fwd.Backends(ctx)
		if err != nil {
			return alert.Backends{}, err
		}
		out := alert.Backends{PausedProviders: map[string]string{}}
		for _, b := range bs.Backends {
			s := alert.BackendState{Backend: b.Backend, Breaker: b.Breaker, Waiting: b.Waiting,
				OldestAge: time.Duration(b.OldestAgeSeconds * float64(time.Second))}
			if b.Paused != nil {
				s.Paused, s.PauseReason = true, b.Paused.Reason
			}
			out.Backends = append(out.Backends, s)
		}
		for _, p := range bs.PausedProviders {
			out.PausedProviders[p.Name] = p.Reason
		}
		return out, nil
	}
}

// backendControl adapts the forwarder to the admin API's BackendControl.
type backendControl struct{ f *forwarder.Forwarder }

func (b backendControl) Backends(ctx context.Context) (forwarder.Backends, error) {
	return b.f.Backends(ctx)
}
func (b backendControl) Pause(ctx context.Context, p journal.Pause) (journal.Pause, error) {
	return b.f.Pause(ctx, p)
}
func (b backendControl) Resume(ctx context.Context, kind, name, reason string) (bool, error) {
	return b.f.Resume(ctx, kind, name, reason)
}

// passThrough is the handler of the app's own traffic with
// WHGUARD_PASS_THROUGH, else nil.
func passThrough(cfg *config, log *zap.Logger) http.Handler {
	if !cfg.PassThrough {
		return nil
	}
	target, _ := url.Parse(cfg.BackendURL) // checked by the configuration
	target.RawQuery = ""
	return proxy.NewPassThrough(proxy.PassThroughConfig{Target: target, Logger: log.Named("pass-through")})
}
