package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/alert"
	"github.com/whguard/whguard/internal/catchup"
	"github.com/whguard/whguard/internal/probe"
	"github.com/whguard/whguard/internal/startstop"
	"github.com/whguard/whguard/internal/tracing"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/proxy/admin"
)

// parts are whguard's long-lived parts, built and not yet running.
type parts struct {
	journal   startstop.Service
	migration *migration
	governor  startstop.Service // nil: nothing to run
	forwarder startstop.Service
	// delivering is set once the forwarder has started (after the
	// migrations): readiness waits for it (ready).
	delivering atomic.Bool
	alerts     startstop.Service // nil: no alerts
	catchup    startstop.Service // nil: catch-up is off
	// rotation reads the secret and key files again (nil: none is set).
	rotation startstop.Service
	// receipts writes what duplicates were answered (stopped after the
	// ingress, before the journal).
	receipts startstop.Service
	// traces flushes the spans still queued as whguard stops.
	traces         startstop.Service
	ingress, admin *listener
	metrics        *listener // nil: metrics stay on the admin listener
	// listenerErrs receives a listener's failure to serve.
	listenerErrs chan error
}

// wire builds every part from the configuration; nothing runs yet. The
// journal is opened (its pools connect lazily), and closed by its part's
// Stop.
func wire(cfg *config, log *zap.Logger) (*parts, error) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	j, listen, err := openJournal(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	up := journalUp(j, reg)
	p := &parts{
		journal: journalPart(cfg, j, up, reg),
		// The journal is checked once more as the migrations end, before
		// what waits for them starts: whguard_journal_up is 1 by readiness.
		migration:    newMigration(j, log, up.Once),
		listenerErrs: make(chan error, 3),
	}
	gov, govSvc, err := newGovernor(ctx, cfg, j, reg, log.Named("governor"))
	if err != nil {
		j.Close()
		return nil, err
	}
	p.governor = govSvc
	built := false
	defer func() {
		if !built { // a later part failed: let go of what was made
			if govSvc != nil {
				_ = govSvc.Stop(ctx)
			}
			j.Close()
		}
	}()

	// The trace context's formats (OTEL_PROPAGATORS, checked with the
	// configuration): read from senders, written for backends.
	propagator, err := tracing.NewPropagator(cfg.tracing.Propagators)
	if err != nil {
		return nil, err
	}
	targets := map[string]forwarder.Target{}
	for _, p := range cfg.providers {
		log.Info("provider configured", zap.String("provider", p.name), zap.String("scheme", p.env.Scheme), zap.String("path", p.env.Path),
			zap.Bool("resign", p.resign), zap.Bool("backend_secret", p.provider.BackendSigned()), zap.Bool("preserve_host", p.env.PreserveHost), zap.Strings("event_types", p.eventTypes),
			zap.Duration("sync_timeout", p.syncTimeout))
		t := cfg.forward.Targets[p.name]
		t.Scheme, t.Unsign, t.Propagator = p.provider.SchemeName(), p.provider.Unsign, propagator
		switch {
		case p.resign:
			t.Resign = p.provider.Resign
		case p.catchup != nil:
			// Catch-up's events have no signature of their own: they are
			// signed even when received signatures are passed on.
			t.Resign = p.provider.SignUnsigned
		}
		targets[p.name] = t
	}
	alerts, err := newAlerts(cfg, reg, log.Named("alerts"))
	if err != nil {
		return nil, err
	}
	traces, err := newTracing(cfg, reg, log.Named("tracing"))
	if err != nil {
		return nil, err
	}
	p.traces = traces
	fwdCfg := cfg.forward
	fwdCfg.Governor, fwdCfg.Store, fwdCfg.Targets, fwdCfg.Listen = gov, j, targets, listen
	fwdCfg.Metrics, fwdCfg.Logger = forwarder.NewMetrics(reg), log.Named("forwarder")
	fwdCfg.Tracer = traces.Tracer(tracerForwarder)
	if alerts != nil {
		fwdCfg.Alerts = alerts
	}
	fwd, err := forwarder.New(fwdCfg)
	if err != nil {
		return nil, err
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
	ingressMetrics.Zero(providerNames(cfg))
	intake, err := forwarder.NewIntake(forwarder.IntakeConfig{
		Journal: journal.NewGroupCommitter(j, commitsInFlight, ingressMetrics.ObserveCommit).Traced(traces.Tracer(tracerJournal)),
		// A new event is inserted leased and delivered from memory after
		// its commit (no lease statement); the others are leased, woken.
		Deliverer: fwd,
		OnCommit:  fwd.Wake,
	})
	if err != nil {
		return nil, err
	}
	ingressCfg := cfg.ingress
	ingressCfg.PassThrough, ingressCfg.Intake, ingressCfg.Metrics, ingressCfg.Logger = passThrough(cfg, log), intake, ingressMetrics, log.Named("ingress")
	ingressCfg.Tracer, ingressCfg.Propagator = traces.Tracer(tracerIngress), propagator
	// Duplicates of sync-mode events get the reply stored with them; what
	// duplicates were answered goes to the events' timelines, in batches
	// written after the answers.
	receipts := journal.NewReceiptWriter(j, 0, log.Named("receipts"))
	p.receipts = receipts
	ingressCfg.Replies, ingressCfg.Receipts = j, receipts
	// Refused requests are kept for the admin API, per replica.
	refusals := proxy.NewRefusals(proxy.DefaultRefusalsKept)
	ingressCfg.Refusals = refusals
	ingress, err := proxy.NewIngress(ingressCfg)
	if err != nil {
		return nil, err
	}
	cu, err := newCatchup(cfg, j, ingress, alerts, reg, log.Named("catchup"))
	if err != nil {
		return nil, err
	}
	apiCfg := admin.APIConfig{Store: j, OnReplay: fwd.Wake, Logger: log.Named("api"),
		RedactHeaders: cfg.RedactHeaders, Providers: providerNames(cfg), Backends: backendControl{fwd}, Overview: j,
		Schemes: providerSchemes(cfg), Origins: backendOrigins(cfg), Refusals: refusals}
	if cu != nil {
		apiCfg.Catchup, p.catchup = cu, cu
	}
	rot, err := newRotation(cfg, reg, log.Named("rotation"))
	if err != nil {
		return nil, err
	}
	if rot != nil {
		p.rotation = rot
	}
	adminHandler := admin.NewAdmin(admin.AdminConfig{
		Ready:        p.ready(j),
		Gatherer:     reg,
		Token:        cfg.AdminToken,
		API:          admin.NewAPI(apiCfg),
		Logger:       log.Named("admin"),
		AllowedHosts: cfg.AdminHosts,
	})
	if cfg.AdminToken == "" {
		log.Warn("WHGUARD_ADMIN_TOKEN is not set: the admin API stays closed")
	}

	p.ingress = newListener("ingress", proxy.NewServer(cfg.Listen, ingress, log.Named("ingress")), log, p.listenerErrs)
	p.admin = newListener("admin", proxy.NewServer(cfg.AdminListen, adminHandler, log.Named("admin")), log, p.listenerErrs)
	// /debug/pprof/profile streams for 30 s by default, and a catch-up
	// pass run by hand may wait 30 s for another, then run up to 2 min:
	// give the admin listener room for them.
	p.admin.srv.WriteTimeout = 3 * time.Minute
	if cfg.MetricsListen != "" {
		// Scrapers and probes get their own listener, whatever Host they
		// send; the admin one can stay on loopback.
		p.metrics = newListener("metrics", proxy.NewServer(cfg.MetricsListen, admin.NewProbes(p.ready(j), reg, log.Named("metrics")), log.Named("metrics")),
			log, p.listenerErrs)
	}
	p.forwarder = startstop.Func{StartFunc: func(ctx context.Context) error {
		err := fwd.Start(ctx)
		p.delivering.Store(err == nil)
		return err
	}, StopFunc: func(ctx context.Context) error {
		if err := fwd.Stop(ctx); err != nil {
			log.Warn("deliveries interrupted at the shutdown deadline; their leases were handed back", zap.Error(err))
		}
		return nil
	}}
	if alerts != nil {
		probes := alert.Probes{Journal: j.Ready, Backends: alertBackends(fwd)}
		if pinger, ok := gov.(interface{ Ping(context.Context) error }); ok && cfg.RedisURL != "" {
			probes.Redis = pinger.Ping
		}
		alerts.Watch(probes)
		p.alerts = startstop.Func{StartFunc: alerts.Start, StopFunc: func(ctx context.Context) error {
			// At most a few seconds: a receiver that is down must not use
			// up the admin listener's share of the deadline.
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := alerts.Stop(actx); err != nil {
				log.Warn("alerts not all sent before the shutdown deadline", zap.Error(err))
			}
			return nil
		}}
	}
	built = true
	return p, nil
}

// listener is one HTTP listener as a part: Start listens and serves in
// the background, Stop shuts it down gracefully within its context.
type listener struct {
	name string
	srv  *http.Server
	log  *zap.Logger
	errs chan<- error
	// addr is the bound address, once started.
	addr string
}

func newListener(name string, srv *http.Server, log *zap.Logger, errs chan<- error) *listener {
	return &listener{name: name, srv: srv, log: log, errs: errs}
}

func (l *listener) Start(context.Context) error {
	ln, err := net.Listen("tcp", l.srv.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", l.srv.Addr, err)
	}
	l.addr = ln.Addr().String()
	l.log.Info("listening", zap.String("listener", l.name), zap.String("addr", l.addr))
	go func() {
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.errs <- fmt.Errorf("serve %s: %w", l.srv.Addr, err)
		}
	}()
	return nil
}

func (l *listener) Stop(ctx context.Context) error {
	if err := l.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("%s listener: %w", l.name, err)
	}
	return nil
}

// migration applies the journal's migrations at start-up, retrying every
// two seconds while the database is unreachable; ready is closed once the
// schema is there.
// ready is the replica's readiness: its journal answers, and it delivers.
// Until the forwarder has started, after the migrations, an event would be
// journaled with nobody yet to deliver it (a sync-mode sender would get a
// 202 where a running replica answers with its backend's reply).
func (p *parts) ready(j journal.Store) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if !p.delivering.Load() {
			return admin.ErrStarting
		}
		return j.Ready(ctx)
	}
}

type migration struct {
	j     journal.Store
	log   *zap.Logger
	ready chan struct{}
	// then runs once the migrations are done, before ready is closed.
	then func(ctx context.Context)

	cancel context.CancelFunc
	done   chan struct{}
}

func newMigration(j journal.Store, log *zap.Logger, then func(ctx context.Context)) *migration {
	return &migration{j: j, log: log, then: then, ready: make(chan struct{}), done: make(chan struct{})}
}

func (m *migration) Start(ctx context.Context) error {
	ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(m.done)
		if migrateUntilDone(ctx, m.j, m.log) {
			m.then(ctx)
			close(m.ready)
		}
	}()
	return nil
}

func (m *migration) Stop(ctx context.Context) error {
	m.cancel()
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("migrations: %w", ctx.Err())
	}
}

// newCatchup is catch-up for the providers that turned it on, nil when
// none did.
func newCatchup(cfg *config, j journal.Store, ingress *proxy.Ingress, alerts *alert.Notifier, reg prometheus.Registerer, log *zap.Logger) (*catchup.Catchup, error) {
	var cfgs []catchup.Config
	for _, p := range cfg.providers {
		if p.catchup != nil {
			cfgs = append(cfgs, *p.catchup)
			// Never the credential: only where it is asked and how often.
			log.Info("catch-up on", zap.String("provider", p.name), zap.Duration("interval", p.catchup.Interval),
				zap.Duration("window", p.catchup.Window), zap.String("hook", p.catchup.Hook), zap.String("endpoint", p.catchup.Endpoint))
		}
	}
	if len(cfgs) == 0 {
		return nil, nil
	}
	o := catchup.Options{Providers: cfgs, Journal: j, Ingest: ingress, Metrics: catchup.NewMetrics(reg), Logger: log}
	if alerts != nil {
		o.Alerts = alerts
	}
	cu, err := catchup.New(o)
	if err != nil {
		return nil, fmt.Errorf("catch-up: %w", err)
	}
	return cu, nil
}

// journalUpInterval is how often whguard_journal_up is checked.
const journalUpInterval = 5 * time.Second

// journalUp is whguard_journal_up: the readiness check, every
// journalUpInterval.
func journalUp(j journal.Store, reg prometheus.Registerer) *probe.Gauge {
	return probe.NewGauge(reg, prometheus.GaugeOpts{
		Name: "whguard_journal_up",
		Help: "1 while the journal answers within 2 s, is migrated and commits (the readiness check, run every 5 s), else 0.",
	}, j.Ready, journalUpInterval, 2*time.Second)
}

// journalPart is the journal's part of the lifecycle: it runs up, and on
// PostgreSQL it reports the primary's synchronous standbys (a gauge, and
// a warning when there is none) from Start; Stop closes the journal.
func journalPart(cfg *config, j journal.Store, up *probe.Gauge, reg prometheus.Registerer) startstop.Func {
	part := startstop.Func{StartFunc: up.Start, StopFunc: func(ctx context.Context) error {
		err := up.Stop(ctx)
		j.Close()
		return err
	}}
	if pg, ok := j.(*journal.Postgres); ok {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "whguard_journal_synchronous_standbys",
			Help: "Standbys of the journal's primary in sync or quorum state (read every 30 s and after each reconnect); -1 when unknown: not read yet, or the role cannot read pg_stat_replication.",
		}, func() float64 { return float64(pg.SynchronousStandbys()) }))
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "whguard_journal_connection_resets_total",
			Help: "Times a connection failure found the journal's primary moved (or no host accepting writes) and whguard closed its connections to the old one.",
		}, func() float64 { return float64(pg.ConnectionResets()) }))
		part.StartFunc = func(ctx context.Context) error {
			if err := up.Start(ctx); err != nil {
				return err
			}
			return pg.WatchStandbys(cfg.JournalReplication == journal.ReplicatedStorage)
		}
	}
	return part
}
