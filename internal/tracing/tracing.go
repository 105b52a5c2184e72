package tracing

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) names another.
const ServiceName = "whguard"

// StopTimeout bounds the last flush of spans at shutdown, within the
// caller's deadline: a collector that is down must not use up the
// shutdown's time.
const StopTimeout = 5 * time.Second

// Options configure New.
type Options struct {
	// Config says whether traces are on and where they go (FromEnv).
	Config Config
	// Getenv reads the OTEL_* variables; nil means os.Getenv. The SDK
	// and its exporters read theirs (endpoint, headers, sampler, batch
	// settings, resource) from the process's environment themselves.
	Getenv func(string) string
	// Version is whguard's, the resource's service.version.
	Version string
	// Registerer gets whguard_trace_spans_dropped_total, on or off; nil:
	// not registered.
	Registerer prometheus.Registerer
	// Logger reports export failures; nil means none.
	Logger *zap.Logger
	// Console is where the console exporter writes; nil means os.Stdout.
	Console io.Writer
}

// Tracing is whguard's tracer provider; off, it holds none. Its
// lifecycle is Start (nothing to do) and Stop, which flushes the spans
// still queued within its context (and StopTimeout).
type Tracing struct {
	tp      *sdktrace.TracerProvider // nil: off
	version string
}

// New builds the tracer provider that o.Config asks for: one batch
// processor per exporter, each behind a bounded queue (a span is dropped
// and counted, never waited for), the resource from OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES over service.name=whguard, the sampler from
// OTEL_TRACES_SAMPLER (the SDK's default: parentbased_always_on).
// Nothing connects yet: exporters dial when they first export.
func New(ctx context.Context, o Options) (*Tracing, error) {
	m := newMetrics(o.Registerer)
	t := &Tracing{version: o.Version}
	if !o.Config.On() {
		return t, nil
	}
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	// The SDK reports what it cannot do (a sampler argument it cannot
	// parse, a malformed header list) through its one global handler.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", zap.Error(err)) }))
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(o.Version)),
		resource.WithFromEnv())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the rest of it is kept.
		log.Warn("tracing: resource attributes", zap.Error(err))
	}
	limit := queueSize(getenv)
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, name := range o.Config.Exporters {
		exp, err := newExporter(ctx, name, o.Config.Protocol, o.Console)
		if err != nil {
			return nil, fmt.Errorf("tracing: %s exporter: %w", name, err)
		}
		opts = append(opts, sdktrace.WithSpanProcessor(pipeline(exp, limit, m, log.With(zap.String("exporter", name)))))
	}
	t.tp = sdktrace.NewTracerProvider(opts...)
	log.Info("traces on", zap.Strings("exporters", o.Config.Exporters), zap.String("protocol", o.Config.Protocol), zap.Int("queue", limit))
	return t, nil
}

// newExporter is the named exporter, configured by the OTEL_EXPORTER_OTLP_*
// variables (otlp) or writing to w (console).
func newExporter(ctx context.Context, name, protocol string, w io.Writer) (sdktrace.SpanExporter, error) {
	switch {
	case name == ExporterConsole:
		if w == nil {
			w = os.Stdout
		}
		return stdouttrace.New(stdouttrace.WithWriter(w))
	case protocol == ProtocolGRPC:
		return otlptracegrpc.New(ctx)
	default:
		return otlptracehttp.New(ctx)
	}
}

// On reports whether spans are made.
func (t *Tracing) On() bool { return t != nil && t.tp != nil }

// Tracer is the tracer of one of whguard's packages (its import path), or
// nil when tracing is off: the instrumented code then makes no span.
func (t *Tracing) Tracer(pkg string) trace.Tracer {
	if !t.On() {
		return nil
	}
	return t.tp.Tracer(pkg, trace.WithInstrumentationVersion(t.version))
}

// Start does nothing: the exporters connect when they first export.
func (t *Tracing) Start(context.Context) error { return nil }

// Stop exports the spans still queued and shuts the exporters down, giving
// up at ctx's deadline or after StopTimeout, whichever comes first; spans
// not exported by then are lost. A second call does nothing.
func (t *Tracing) Stop(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, StopTimeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush spans: %w", err)
	}
	return nil
}
