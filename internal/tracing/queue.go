package tracing

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Reasons a span is dropped (the reason label of
// whguard_trace_spans_dropped_total).
const (
	// DropQueueFull: the export queue was full (a slow or unreachable
	// collector, or more spans than it takes).
	DropQueueFull = "queue_full"
	// DropExportFailed: the exporter gave up on the span's batch.
	DropExportFailed = "export_failed"
)

// defaultQueueSize is the SDK's batch queue when OTEL_BSP_MAX_QUEUE_SIZE is
// not set.
const defaultQueueSize = 2048

// queueSize is OTEL_BSP_MAX_QUEUE_SIZE, or its default when unset (FromEnv
// refuses a value that is not a positive integer).
func queueSize(getenv func(string) string) int {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("OTEL_BSP_MAX_QUEUE_SIZE"))); err == nil && n > 0 {
		return n
	}
	return defaultQueueSize
}

// metrics are tracing's own counters.
type metrics struct {
	queueFull, exportFailed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_trace_spans_dropped_total",
		Help: "Spans never handed to the collector: the export queue was full (queue_full: a slow or unreachable collector) or the exporter gave up on them (export_failed).",
	}, []string{"reason"})
	if reg != nil {
		reg.MustRegister(c)
	}
	return &metrics{queueFull: c.WithLabelValues(DropQueueFull), exportFailed: c.WithLabelValues(DropExportFailed)}
}

// bounded is the span processor in front of the SDK's batch processor: it
// admits a span only while fewer than limit are waiting for their export
// (queued, batched or being exported) and drops the others, counted. The
// batch processor behind it has a queue of limit, so it never drops one
// itself (it would, uncounted), and a span's end never waits for a
// collector.
type bounded struct {
	sdktrace.SpanProcessor
	limit   int64
	waiting *atomic.Int64
	m       *metrics
}

func (b *bounded) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor exports only sampled spans
	}
	if b.waiting.Add(1) > b.limit {
		b.waiting.Add(-1)
		b.m.queueFull.Inc()
		return
	}
	b.SpanProcessor.OnEnd(s)
}

// pipeline is exp behind the SDK's batch processor (its other settings
// from the OTEL_BSP_* variables) behind a bounded queue of limit spans.
func pipeline(exp sdktrace.SpanExporter, limit int, m *metrics, log *zap.Logger, opts ...sdktrace.BatchSpanProcessorOption) sdktrace.SpanProcessor {
	waiting := new(atomic.Int64)
	bsp := sdktrace.NewBatchSpanProcessor(&counted{SpanExporter: exp, waiting: waiting, m: m, log: log},
		append(opts, sdktrace.WithMaxQueueSize(limit))...)
	return &bounded{SpanProcessor: bsp, limit: int64(limit), waiting: waiting, m: m}
}

// counted wraps the exporter: each batch it is handed stops waiting
// (bounded) once exported or given up; a batch given up is counted and the
// change from working to failing (and back) logged once, not per batch.
type counted struct {
	sdktrace.SpanExporter
	waiting *atomic.Int64
	m       *metrics
	log     *zap.Logger
	failing atomic.Bool
}

func (c *counted) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	c.waiting.Add(-int64(len(spans)))
	if err != nil {
		c.m.exportFailed.Add(float64(len(spans)))
		if !c.failing.Swap(true) {
			c.log.Warn("exporting spans failed; they are dropped and counted (whguard_trace_spans_dropped_total) until the collector answers", zap.Error(err))
		}
		// Handled: the SDK would report it again through its global
		// handler.
		return nil
	}
	if c.failing.Swap(false) {
		c.log.Info("exporting spans works again")
	}
	return nil
}
