package tracing

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of whguard's own, beside the semantic conventions' HTTP ones.
const (
	// AttrProvider is the provider's name (WHGUARD_PROVIDERS).
	AttrProvider = attribute.Key("whguard.provider")
	// AttrEventID is the event's id as its provider knows it.
	AttrEventID = attribute.Key("whguard.event_id")
	// AttrJournalID is the event's row id in the journal.
	AttrJournalID = attribute.Key("whguard.journal_id")
	// AttrResult is the request's result, a value of the result label of
	// whguard_ingress_requests_total.
	AttrResult = attribute.Key("whguard.result")
	// AttrAttempt is the delivery attempt's number (X-Whguard-Attempt).
	AttrAttempt = attribute.Key("whguard.attempt")
	// AttrBatchSize is how many events the group commit that carried the
	// request's event wrote together.
	AttrBatchSize = attribute.Key("whguard.journal.batch_size")
)

// MaxTraceState bounds the tracestate kept with an event (and so sent
// with its attempts): a sender chooses it, and it would otherwise add up
// to 16 KB to the journal's hot row. Past it, members are dropped from the
// end, as W3C Trace Context lets a vendor do past 512 characters.
const MaxTraceState = 512

// Encode is the span context sc as the journal keeps it: its traceparent,
// then a newline and its tracestate when it has one, cut to MaxTraceState
// ("" when sc is not valid: nothing is stored). Both are W3C text, ASCII
// without newlines.
func Encode(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b strings.Builder
	b.Grow(55)
	b.WriteString("00-")
	b.WriteString(tid.String())
	b.WriteByte('-')
	b.WriteString(sid.String())
	b.WriteByte('-')
	b.WriteString(sc.TraceFlags().String())
	if ts := sc.TraceState(); ts.Len() > 0 {
		b.WriteByte('\n')
		b.WriteString(boundedState(ts))
	}
	return b.String()
}

// boundedState is ts as text, its last members dropped until it fits in
// MaxTraceState.
func boundedState(ts trace.TraceState) string {
	s := ts.String()
	if len(s) <= MaxTraceState {
		return s
	}
	var keys []string
	ts.Walk(func(key, _ string) bool {
		keys = append(keys, key)
		return true
	})
	for i := len(keys) - 1; i >= 0 && len(s) > MaxTraceState; i-- {
		ts = ts.Delete(keys[i])
		s = ts.String()
	}
	return s
}

// Decode returns ctx with the remote span context that stored (Encode's
// text) names as its parent; ctx as it is when stored is empty (an event
// journaled with tracing off, or before whguard kept trace contexts) or
// unreadable: its spans then start a trace of their own.
func Decode(ctx context.Context, stored string) context.Context {
	if stored == "" {
		return ctx
	}
	parent, state, _ := strings.Cut(stored, "\n")
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": parent, "tracestate": state})
}

// FullURL is u as a span's url.full: the user name and password replaced
// by REDACTED, and so is every query value (a backend URL may carry a
// token in its query); the parameter names stay.
func FullURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.UserPassword("REDACTED", "REDACTED")
	}
	if c.RawQuery != "" {
		parts := strings.Split(c.RawQuery, "&")
		for i, p := range parts {
			if name, _, ok := strings.Cut(p, "="); ok {
				parts[i] = name + "=REDACTED"
			} else if p != "" {
				parts[i] = "REDACTED" // a bare token
			}
		}
		c.RawQuery = strings.Join(parts, "&")
	}
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// knownMethods are the HTTP methods a span names as they are; any other is
// _OTHER (a method is chosen by whoever sends the request).
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodConnect: true, http.MethodOptions: true, http.MethodTrace: true,
}

// Method is m as a span's http.request.method.
func Method(m string) string {
	if knownMethods[m] {
		return m
	}
	return "_OTHER"
}
