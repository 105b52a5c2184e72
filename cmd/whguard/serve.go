package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/alert"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/proxy/admin"
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
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: cfg.DatabaseURL, Logger: log.Named("journal")})
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
	log.Info("journal migrated", zap.Ints("applied", applied), zap.Int("version", journal.LatestVersion()))
	return nil
}

// serve runs until ctx is cancelled (SIGINT/SIGTERM), then shuts down
// within WHGUARD_SHUTDOWN_TIMEOUT.
func serve(ctx context.Context, cfg *config, log *zap.Logger) error {
	return serveWith(ctx, cfg, log, nil)
}

// serveWith is serve, calling listening (when not nil) with the bound
// ingress and admin addresses once both listen (the demo binds port 0).
func serveWith(ctx context.Context, cfg *config, log *zap.Logger, listening func(ingress, admin string)) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	j, listen, err := openJournal(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer j.Close()
	gov, closeGov, err := newGovernor(ctx, cfg, j, reg, log.Named("governor"))
	if err != nil {
		return err
	}
	defer closeGov()
	// Migrate at start-up; an unreachable database is retried, not fatal,
	// so the sidecar can come up before its database does (readyz says so,
	// and webhooks get 503 meanwhile). The forwarder starts once the
	// schema is there.
	migrated := make(chan struct{})
	go func() {
		if migrateUntilDone(ctx, j, log) {
			close(migrated)
		}
	}()

	var routes []proxy.Route
	for _, p := range cfg.providers {
		routes = append(routes, proxy.Route{Path: p.env.Path, ForwardPath: p.env.ForwardPath, Provider: p.provider, MaxBodyBytes: p.env.MaxBodyBytes, BodyGuard: p.bodyGuard,
			EventTypes: p.eventTypes, SyncTimeout: p.syncTimeout, Order: p.order})
		log.Info("provider configured", zap.String("provider", p.name), zap.String("scheme", p.env.Scheme), zap.String("path", p.env.Path),
			zap.Bool("resign", p.resign), zap.Bool("preserve_host", p.env.PreserveHost), zap.Strings("event_types", p.eventTypes),
			zap.Duration("sync_timeout", p.syncTimeout))
	}
	targets := map[string]forwarder.Target{}
	for _, p := range cfg.providers {
		t := forwarder.Target{BackendURL: p.env.BackendURL, ForwardPath: p.env.ForwardPath, PreserveHost: p.env.PreserveHost,
			Sync: p.syncTimeout > 0, Scheme: p.provider.SchemeName(), Unsign: p.provider.Unsign}
		if p.resign {
			t.Resign = p.provider.Resign
		}
		targets[p.name] = t
	}
	alerts, err := newAlerts(cfg, reg, log.Named("alerts"))
	if err != nil {
		return err
	}
	fwdCfg := forwarder.Config{
		Governor:    gov,
		Store:       j,
		Targets:     targets,
		Timeout:     cfg.ForwardTimeout,
		Concurrency: cfg.ForwardConcurrency,
		MaxInFlight: cfg.BackendMaxInFlight,
		Policy: forwarder.Policy{
			BaseDelay:   cfg.RetryBaseDelay,
			MaxDelay:    cfg.RetryMaxDelay,
			MaxAttempts: cfg.RetryMaxAttempts,
		},
		KeyRetention:     cfg.DedupRetention,
		PayloadRetention: cfg.PayloadRetention,
		Listen:           listen,
		Metrics:          forwarder.NewMetrics(reg),
		Logger:           log.Named("forwarder"),
	}
	if alerts != nil {
		fwdCfg.Alerts = alerts
	}
	fwd, err := forwarder.New(fwdCfg)
	if err != nil {
		return err
	}
	// Group commit: concurrent requests share one INSERT and one commit.
	// The embedded journal has one writer. PostgreSQL gets two commits in
	// flight: measured with cmd/whguard-bench on a 2-core machine, pure
	// ingest ran at 6.0k events/s with one, 6.9k with two, and 3.2k-6.3k
	// with four (concurrent committers contend for the same right-most
	// index pages and WAL insertion locks).
	commitsInFlight := 2
	if _, embedded := j.(*journal.SQLite); embedded {
		commitsInFlight = 1
	}
	ingressMetrics := proxy.NewMetrics(reg)
	intake, err := forwarder.NewIntake(forwarder.IntakeConfig{
		Journal: journal.NewGroupCommitter(j, commitsInFlight, ingressMetrics.ObserveCommit),
		// A new event is inserted leased and delivered from memory after
		// its commit (no lease statement); the others are leased, woken.
		Deliverer: fwd,
		OnCommit:  fwd.Wake,
	})
	if err != nil {
		return err
	}
	ingress, err := proxy.NewIngress(proxy.IngressConfig{
		Routes:           routes,
		MaxBufferedBytes: cfg.MaxBufferedBytes,
		PassThrough:      passThrough(cfg, log),
		Intake:           intake,
		Metrics:          ingressMetrics,
		Logger:           log.Named("ingress"),
		// Duplicates of sync-mode events get the reply stored with them.
		Replies: j,
	})
	if err != nil {
		return err
	}
	adminHandler := admin.NewAdmin(admin.AdminConfig{
		Ready:    j.Ready,
		Gatherer: reg,
		Token:    cfg.AdminToken,
		API: admin.NewAPI(admin.APIConfig{Store: j, OnReplay: fwd.Wake, Logger: log.Named("api"),
			RedactHeaders: cfg.RedactHeaders, Providers: providerNames(cfg), Backends: backendControl{fwd}, Overview: j,
			Schemes: providerSchemes(cfg), Origins: backendOrigins(cfg)}),
		Logger:       log.Named("admin"),
		AllowedHosts: cfg.AdminHosts,
	})
	if cfg.AdminToken == "" {
		log.Warn("WHGUARD_ADMIN_TOKEN is not set: the admin API stays closed")
	}

	servers := []*http.Server{
		proxy.NewServer(cfg.Listen, ingress, log.Named("ingress")),
		proxy.NewServer(cfg.AdminListen, adminHandler, log.Named("admin")),
	}
	if cfg.MetricsListen != "" {
		// Scrapers and probes get their own listener, whatever Host they
		// send; the admin one can stay on loopback.
		servers = append(servers, proxy.NewServer(cfg.MetricsListen, admin.NewProbes(j.Ready, reg, log.Named("metrics")), log.Named("metrics")))
	}
	// /debug/pprof/profile streams for 30 s by default: give the admin
	// listener room for it.
	servers[1].WriteTimeout = 2 * time.Minute
	errs := make(chan error, len(servers))
	var bound []string
	for _, srv := range servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", srv.Addr, err)
		}
		bound = append(bound, ln.Addr().String())
		log.Info("listening", zap.String("addr", ln.Addr().String()))
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serve %s: %w", srv.Addr, err)
			}
		}()
	}

	if listening != nil {
		listening(bound[0], bound[1])
	}
	alertsStarted := make(chan struct{})
	go func() {
		defer close(alertsStarted)
		select {
		case <-migrated:
			if err := fwd.Start(ctx); err != nil {
				log.Warn("forwarder not started", zap.Error(err))
			}
			// Alerts watch from the moment the journal is ready: they
			// report what becomes unreachable, not a slow start-up (which
			// /readyz and the logs show).
			if alerts != nil {
				probes := alert.Probes{Journal: j.Ready, Backends: alertBackends(fwd)}
				if p, ok := gov.(interface{ Ping(context.Context) error }); ok && cfg.RedisURL != "" {
					probes.Redis = p.Ping
				}
				_ = alerts.Start(ctx, probes)
			}
		case <-ctx.Done():
		}
	}()

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", zap.Duration("timeout", cfg.ShutdownTimeout))
	case serveErr = <-errs:
		log.Error("listener failed; shutting down", zap.Error(serveErr))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	// Stop accepting first (requests in flight finish their commit), then
	// stop leasing and let deliveries in flight finish; what is still
	// running at the deadline is interrupted and its lease handed back.
	if err := servers[0].Shutdown(sctx); err != nil {
		log.Warn("ingress shutdown incomplete", zap.Error(err))
	}
	if err := fwd.Stop(sctx); err != nil {
		log.Warn("deliveries interrupted at the shutdown deadline; their leases were handed back", zap.Error(err))
	}
	<-alertsStarted
	if alerts != nil {
		// After the forwarder: the events that went dead while stopping
		// are reported too.
		// At most a few seconds: a receiver that is down must not use
		// up the admin listener's share of the deadline.
		actx, acancel := context.WithTimeout(sctx, 5*time.Second)
		defer acancel()
		if err := alerts.Stop(actx); err != nil {
			log.Warn("alerts not all sent before the shutdown deadline", zap.Error(err))
		}
	}
	for _, srv := range servers[2:] {
		_ = srv.Shutdown(sctx)
	}
	if err := servers[1].Shutdown(sctx); err != nil {
		log.Warn("admin shutdown incomplete", zap.Error(err))
	}
	log.Info("stopped")
	return serveErr
}

// newAlerts is the alert notifier when WHGUARD_ALERT_URL is set, else nil.
func newAlerts(cfg *config, reg prometheus.Registerer, log *zap.Logger) (*alert.Notifier, error) {
	if cfg.AlertURL == "" {
		return nil, nil
	}
	return alert.New(alert.Config{
		URL: cfg.AlertURL, Format: cfg.AlertFormat, Sign: cfg.alertSign,
		Repeat: cfg.AlertRepeat, BacklogAge: cfg.AlertBacklogAge,
		Metrics: alert.NewMetrics(reg), Logger: log,
	})
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
		if o := forwarder.Origin(p.env.BackendURL); !slices.Contains(out, o) {
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
