package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
)

// openJournal connects to the configured journal.
func openJournal(ctx context.Context, cfg *config, log *zap.Logger) (*journal.Postgres, error) {
	return journal.OpenPostgres(ctx, journal.PostgresConfig{URL: cfg.DatabaseURL, Logger: log.Named("journal")})
}

func migrate(ctx context.Context, cfg *config, log *zap.Logger) error {
	j, err := openJournal(ctx, cfg, log)
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
	j, err := openJournal(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer j.Close()
	// Migrate at start-up; an unreachable database is retried, not fatal,
	// so the sidecar can come up before its database does (readyz says so).
	go migrateUntilDone(ctx, j, log)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var routes []proxy.Route
	for _, p := range cfg.providers {
		routes = append(routes, proxy.Route{Path: p.env.Path, Provider: p.provider, MaxBodyBytes: p.env.MaxBodyBytes})
		log.Info("provider configured", zap.String("provider", p.name), zap.String("scheme", p.env.Scheme), zap.String("path", p.env.Path))
	}
	ingress, err := proxy.NewIngress(proxy.IngressConfig{
		Routes:  routes,
		Journal: j,
		Metrics: proxy.NewMetrics(reg),
		Logger:  log.Named("ingress"),
	})
	if err != nil {
		return err
	}
	admin := proxy.NewAdmin(proxy.AdminConfig{
		Ready:    j.Ready,
		Gatherer: reg,
		Token:    cfg.AdminToken,
		Logger:   log.Named("admin"),
	})
	if cfg.AdminToken == "" {
		log.Warn("WHGUARD_ADMIN_TOKEN is not set: the admin API stays closed")
	}

	servers := []*http.Server{
		proxy.NewServer(cfg.Listen, ingress, log.Named("ingress")),
		proxy.NewServer(cfg.AdminListen, admin, log.Named("admin")),
	}
	errs := make(chan error, len(servers))
	for _, srv := range servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", srv.Addr, err)
		}
		log.Info("listening", zap.String("addr", ln.Addr().String()))
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serve %s: %w", srv.Addr, err)
			}
		}()
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down", zap.Duration("timeout", cfg.ShutdownTimeout))
	case err := <-errs:
		return err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	// Stop accepting first; requests in flight finish their commit.
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("shutdown incomplete", zap.String("addr", srv.Addr), zap.Error(err))
		}
	}
	return nil
}

// migrateUntilDone applies migrations, retrying every two seconds while the
// database is unreachable.
func migrateUntilDone(ctx context.Context, j *journal.Postgres, log *zap.Logger) {
	for {
		applied, err := j.Migrate(ctx)
		if err == nil {
			log.Info("journal ready", zap.Ints("applied", applied), zap.Int("version", journal.LatestVersion()))
			return
		}
		log.Warn("journal migration failed; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}
