package main

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/tracing"
)

// Tracers are named after the packages they instrument.
const (
	tracerIngress   = "github.com/whguard/whguard/proxy"
	tracerJournal   = "github.com/whguard/whguard/journal"
	tracerForwarder = "github.com/whguard/whguard/forwarder"
)

// loadTracing reads what the OTEL_* variables ask of traces (only the
// standard variables: whguard has none of its own for them), reporting a
// value it cannot honour to ps under its variable.
func (c *config) loadTracing(vars map[string]string, ps *problems) {
	tc, err := tracing.FromEnv(func(k string) string { return vars[k] })
	var ve *tracing.VarError
	switch {
	case errors.As(err, &ve):
		ps.addf(ve.Var, "%s", ve.Msg)
	case err != nil:
		ps.addf("OTEL_TRACES_EXPORTER", "%v", err)
	}
	c.tracing = tc
}

// newTracing is the tracer provider the configuration asks for (off: one
// that makes no tracer), with whguard_trace_spans_dropped_total in reg.
// The SDK reads the rest of the OTEL_* variables from the process's
// environment.
func newTracing(cfg *config, reg prometheus.Registerer, log *zap.Logger) (*tracing.Tracing, error) {
	return tracing.New(context.Background(), tracing.Options{Config: cfg.tracing, Version: version, Registerer: reg, Logger: log})
}
