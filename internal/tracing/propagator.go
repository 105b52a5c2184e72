package tracing

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagator reads a trace's context from a sender's request and writes it
// into the backend's, in the formats OTEL_PROPAGATORS names (W3C Trace
// Context when it is unset: the zero Propagator). The journal keeps an
// event's trace context as W3C text whatever the formats (Encode), so a
// change of OTEL_PROPAGATORS affects only the headers.
type Propagator struct {
	p propagation.TextMapPropagator
	// fields are the canonical names of the headers p reads.
	fields []string
}

// NewPropagator returns the propagator of names, values of OTEL_PROPAGATORS
// (tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace, none), in
// order; "none" among them propagates nothing. No names: W3C Trace Context
// (the zero Propagator), as with OTEL_PROPAGATORS unset.
func NewPropagator(names []string) (Propagator, error) {
	if len(names) == 0 {
		return Propagator{}, nil
	}
	// Each name on its own: beside "none" the library drops the others
	// unchecked, and an unknown name must be refused wherever it stands.
	for _, name := range names {
		if name == "none" {
			continue
		}
		if _, err := autoprop.TextMapPropagator(name); err != nil {
			return Propagator{}, err
		}
	}
	if slices.Contains(names, "none") {
		// Reads and writes no header: a sender's reach the backend as sent.
		return Propagator{p: propagation.NewCompositeTextMapPropagator()}, nil
	}
	p, err := autoprop.TextMapPropagator(names...)
	if err != nil {
		return Propagator{}, err
	}
	fields := p.Fields()
	if slices.Contains(names, "b3") || slices.Contains(names, "b3multi") {
		// B3 reads both of its encodings whichever it writes: a sender's
		// headers of the other one must count, and must not reach the
		// backend beside whguard's.
		fields = append(fields, b3Headers...)
	}
	for i, f := range fields {
		fields[i] = http.CanonicalHeaderKey(f)
	}
	slices.Sort(fields)
	return Propagator{p: p, fields: slices.Compact(fields)}, nil
}

// b3Headers are both B3 encodings' headers, single and multiple.
var b3Headers = []string{"b3", "x-b3-traceid", "x-b3-spanid", "x-b3-parentspanid", "x-b3-sampled", "x-b3-flags"}

// w3c is the zero Propagator's.
var w3c = Propagator{p: propagation.TraceContext{}, fields: []string{"Traceparent", "Tracestate"}}

func (p Propagator) orW3C() Propagator {
	if p.p == nil {
		return w3c
	}
	return p
}

// Extract returns ctx with the remote span context that h names in p's
// formats, or ctx as it is when h names none (absent, malformed).
func (p Propagator) Extract(ctx context.Context, h http.Header) context.Context {
	p = p.orW3C()
	for _, f := range p.fields {
		if len(h[f]) > 0 {
			return p.p.Extract(ctx, propagation.HeaderCarrier(h))
		}
	}
	return ctx
}

// Inject writes the span of ctx into h in p's formats, after removing
// every header of those formats h carried, in any spelling: the backend
// gets one parent, never two, and no part of the sender's (a tracestate
// or a sampling flag of another parent). Baggage is not whguard's to
// replace: a sender's stays as it came. With no span in ctx (tracing off)
// h is left as it is. It returns the canonical names it removed or set,
// sorted.
func (p Propagator) Inject(ctx context.Context, h http.Header) []string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	p = p.orW3C()
	written := propagation.MapCarrier{}
	p.p.Inject(ctx, written)
	var touched []string
	for _, f := range p.fields {
		if f == "Baggage" && written["baggage"] == "" {
			continue
		}
		for have := range h {
			if strings.EqualFold(have, f) {
				delete(h, have)
			}
		}
		touched = append(touched, f)
	}
	for name, v := range written {
		c := http.CanonicalHeaderKey(name)
		h[c] = []string{v}
		if !slices.Contains(touched, c) {
			touched = append(touched, c)
		}
	}
	slices.Sort(touched)
	return touched
}

// parsePropagators reads OTEL_PROPAGATORS: a comma list of propagator
// names, each checked; unset, W3C Trace Context alone (nil).
func parsePropagators(list string) ([]string, error) {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	if _, err := NewPropagator(names); err != nil {
		return nil, &VarError{Var: "OTEL_PROPAGATORS",
			Msg: fmt.Sprintf("%s (whguard propagates tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace, or none)", err)}
	}
	return names, nil
}
