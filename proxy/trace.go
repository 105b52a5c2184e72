package proxy

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/whguard/whguard/internal/tracing"
)

// Traces of the ingress (docs/operations.md, "Traces"): with a tracer, each
// request to a webhook path, refused or not, is a SERVER span, the child of
// the sender's traceparent when it sent one. Its context is stored with a
// new event (traceContext), so the event's attempts join its trace.

// tracedWriter is the ResponseWriter of a traced request: it keeps what
// the span reports once the request is answered (the status, as
// answeredWriter remembers it).
type tracedWriter struct {
	answeredWriter
	span    trace.Span
	result  string
	eventID string
	id      int64
}

// Unwrap lets http.ResponseController reach the server's writer (Flush).
func (w *tracedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// startSpan begins the SERVER span of a request to a webhook path and
// returns the writer and request that carry it, and the function that ends
// it with the answer's status and result. Nothing of the request's headers
// or body goes into it, bar the path and the method.
func (in *Ingress) startSpan(w http.ResponseWriter, r *http.Request, route Route) (http.ResponseWriter, *http.Request, func()) {
	method := tracing.Method(r.Method)
	name := method + " " + route.Path
	if method == "_OTHER" {
		name = "HTTP " + route.Path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	ctx, span := in.tracer.Start(in.propagator.Extract(r.Context(), r.Header), name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method), semconv.HTTPRoute(route.Path), semconv.URLPath(route.Path),
			semconv.URLScheme(scheme), tracing.AttrProvider.String(route.Provider.Name())))
	tw := &tracedWriter{answeredWriter: answeredWriter{ResponseWriter: w}, span: span}
	return tw, r.WithContext(ctx), tw.end
}

// end ends the request's span with what it answered.
func (w *tracedWriter) end() {
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.HTTPResponseStatusCode(w.status), tracing.AttrResult.String(w.result))
	if w.eventID != "" {
		attrs = append(attrs, tracing.AttrEventID.String(w.eventID))
	}
	if w.id != 0 {
		attrs = append(attrs, tracing.AttrJournalID.Int64(w.id))
	}
	if w.status >= 500 {
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(w.status)))
		w.span.SetStatus(codes.Error, "")
	}
	w.span.SetAttributes(attrs...)
	w.span.End()
}

// tracedOf finds the traced request's writer under w and the writers
// wrapped around it (those with Unwrap, as http.ResponseController
// expects), or nil when the request is not traced.
func tracedOf(w http.ResponseWriter) *tracedWriter {
	for {
		switch x := w.(type) {
		case *tracedWriter:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// noteResult records the result label of a traced request's answer.
func noteResult(w http.ResponseWriter, result string) {
	if tw := tracedOf(w); tw != nil {
		tw.result = result
	}
}

// noteEvent records the event a traced request carried: its id, and its
// row's once journaled (0: not yet, or none).
func noteEvent(w http.ResponseWriter, eventID string, id int64) {
	if tw := tracedOf(w); tw != nil {
		tw.eventID, tw.id = eventID, id
	}
}

// traceContext is the trace context to store with the event a request
// carried: its span's, or "" when the request is not traced.
func traceContext(w http.ResponseWriter) string {
	if tw := tracedOf(w); tw != nil {
		return tracing.Encode(tw.span.SpanContext())
	}
	return ""
}
