package forwarder

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/whguard/whguard/internal/tracing"
	"github.com/whguard/whguard/journal"
)

// startAttempt begins the CLIENT span of an attempt of d to t: a child of
// the span that received d (the trace context stored with it), or the
// root of a trace of its own for an event stored without one. The
// returned context carries it, and BuildRequest names it to the backend
// as its traceparent. Without a tracer it returns f.aborted and no span.
// Only attempts have spans: a held delivery is none.
func (f *Forwarder) startAttempt(d journal.Delivery, t Target) (context.Context, trace.Span) {
	if f.cfg.Tracer == nil {
		return f.aborted, nil
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, semconv.HTTPRequestMethodPost,
		tracing.AttrProvider.String(d.Provider), tracing.AttrEventID.String(d.EventID),
		tracing.AttrJournalID.Int64(d.ID), tracing.AttrAttempt.Int(d.Attempt))
	if d.Attempt > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(d.Attempt-1))
	}
	if u, err := deliveryURL(t, d); err == nil {
		attrs = append(attrs, semconv.URLFull(tracing.FullURL(&u)), semconv.ServerAddress(u.Hostname()))
		if port, err := strconv.Atoi(u.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	ctx := tracing.Decode(f.aborted, d.TraceContext)
	return f.cfg.Tracer.Start(ctx, "POST", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endAttempt ends an attempt's span (nil: none) with what the backend
// answered: its status code, or the class of error that stopped it. An
// error status (4xx, 5xx) or none at all marks the span as failed.
func endAttempt(span trace.Span, res sendResult) {
	if span == nil {
		return
	}
	switch {
	case res.status > 0:
		span.SetAttributes(semconv.HTTPResponseStatusCode(res.status))
		if res.status >= 400 {
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(res.status)))
			span.SetStatus(codes.Error, "")
		}
	case res.errClass != "":
		span.SetAttributes(semconv.ErrorTypeKey.String(res.errClass))
		span.SetStatus(codes.Error, res.errClass)
	}
	span.End()
}
