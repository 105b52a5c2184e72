package forwarder_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/tracing"
	"github.com/whguard/whguard/journal"
)

// A sender's trace headers, as journaled with an event.
const (
	senderParent = "00-11111111111111111111111111111111-2222222222222222-01"
	senderState  = "sender=1"
	// receiptContext is a trace context as the ingress stores it: the
	// receipt's span, with a trace state.
	receiptTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
	receiptSpan    = "00f067aa0ba902b7"
	receiptContext = "00-" + receiptTrace + "-" + receiptSpan + "-01\nvendor=v"
)

// appendTraced journals an event of provider carrying the sender's trace
// headers, stored with the trace context stored ("" for none).
func appendTraced(t *testing.T, j journal.Store, provider, id, stored string) int64 {
	t.Helper()
	r, err := j.Append(context.Background(), []journal.Event{{
		Provider: provider, EventID: id, ContentHash: "h-" + id,
		Headers: http.Header{"Content-Type": {"application/json"}, "Traceparent": {senderParent}, "Tracestate": {senderState}},
		Body:    []byte(`{"id":"` + id + `"}`), Path: "/webhooks/" + provider, TraceContext: stored,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r[0].ID
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// Each attempt is a CLIENT span, a child of the receipt's span stored with
// the event (a trace of its own for an event stored without one), and the
// backend's parent: its traceparent names the attempt's span and replaces
// the sender's. A held delivery is no span.
func TestAttemptSpans(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "sqlite")
	rec, srv := newRecorder(t, status(503), status(200), status(200))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	backend := strings.Replace(srv.URL, "http://", "http://user:pw@", 1) + "/base?token=s3cret"
	traced := appendTraced(t, j, "acme", "evt_traced", receiptContext)
	_, reg := startForwarder(t, j, backend, func(c *forwarder.Config) {
		c.Tracer = tp.Tracer("forwarder")
		c.Targets["acme"] = forwarder.Target{BackendURL: backend}
	})
	waitStatus(t, j, traced, journal.StatusDone, 15*time.Second)
	old := appendTraced(t, j, "acme", "evt_untraced", "")
	waitStatus(t, j, old, journal.StatusDone, 15*time.Second)
	held := appendTraced(t, j, "ghost", "evt_held", receiptContext) // no backend: held
	if !eventually(10*time.Second, 20*time.Millisecond, func() bool {
		return metricValue(t, reg, "whguard_deliveries_held_total", map[string]string{"provider": "ghost", "reason": forwarder.HoldNoBackend}) >= 1
	}) {
		t.Fatalf("event %d never held", held)
	}

	ended := spans.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans, want one per attempt (3), none for the held delivery", len(ended))
	}
	reqs := rec.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, s := range ended {
		a := spanAttrs(s)
		wantStatus, wantAttempt, wantEvent := []int{503, 200, 200}[i], []int{1, 2, 1}[i], []string{"evt_traced", "evt_traced", "evt_untraced"}[i]
		if s.Name() != "POST" || s.SpanKind() != trace.SpanKindClient || a["http.response.status_code"] != attribute.IntValue(wantStatus) ||
			a["whguard.attempt"] != attribute.IntValue(wantAttempt) || a["whguard.event_id"].AsString() != wantEvent ||
			a["server.address"].AsString() != "127.0.0.1" || a["whguard.provider"].AsString() != "acme" {
			t.Fatalf("span %d: %s %v %v", i, s.Name(), s.SpanKind(), s.Attributes())
		}
		if url := a["url.full"].AsString(); strings.Contains(url, "pw") || strings.Contains(url, "s3cret") ||
			!strings.HasSuffix(url, "/base/webhooks/acme?token=REDACTED") {
			t.Fatalf("span %d url.full %q: credentials not removed", i, url)
		}
		// The backend's parent is this attempt's span, in place of the
		// sender's.
		sc := s.SpanContext()
		if got := reqs[i].header.Values("Traceparent"); len(got) != 1 || got[0] != "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01" {
			t.Fatalf("attempt %d sent traceparent %q, want span %s", i+1, got, sc.SpanID())
		}
		wantState := "vendor=v"
		if i == 2 {
			wantState = ""
		}
		if got := reqs[i].header.Get("Tracestate"); got != wantState {
			t.Fatalf("attempt %d sent tracestate %q, want %q", i+1, got, wantState)
		}
	}
	for i, s := range ended[:2] {
		if s.SpanContext().TraceID().String() != receiptTrace || s.Parent().SpanID().String() != receiptSpan {
			t.Fatalf("attempt %d: trace %s parent %s, want the receipt's", i+1, s.SpanContext().TraceID(), s.Parent().SpanID())
		}
	}
	if u := ended[2]; u.Parent().IsValid() || u.SpanContext().TraceID().String() == receiptTrace {
		t.Fatalf("an event stored without a trace context: parent %v", u.Parent())
	}
	if ended[0].Status().Code.String() != "Error" || ended[1].Status().Code.String() == "Error" {
		t.Fatalf("statuses %v %v: a 503 is an error, a 200 is not", ended[0].Status(), ended[1].Status())
	}
	// The timeline's headers sent are the trace headers the backend got,
	// not the sender's.
	d := get(t, j, traced)
	for _, a := range d.AttemptLog {
		sent := forwarder.SentHeaders(d.Headers, d.Provider, d.EventID, d.ID, a.Number, a.Sent)
		if got, want := sent.Get("Traceparent"), reqs[a.Number-1].header.Get("Traceparent"); got != want {
			t.Errorf("attempt %d: headers sent show traceparent %q, the backend got %q", a.Number, got, want)
		}
	}
	if len(d.AttemptLog) != 2 {
		t.Fatalf("attempt log of %d", len(d.AttemptLog))
	}
}

// With tracing off, the sender's trace headers pass through like any other.
func TestUntracedPassesTraceHeaders(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "sqlite")
	rec, srv := newRecorder(t)
	id := appendTraced(t, j, "acme", "evt_plain", "")
	startForwarder(t, j, srv.URL, nil)
	waitStatus(t, j, id, journal.StatusDone, 15*time.Second)
	h := rec.requests()[0].header
	if h.Get("Traceparent") != senderParent || h.Get("Tracestate") != senderState {
		t.Fatalf("received trace headers not passed through: %v", h)
	}
}

// With another format (OTEL_PROPAGATORS=b3multi), the backend gets the
// attempt's span as B3 headers in place of the sender's, the sender's W3C
// headers pass through, and the timeline's headers sent show what it got.
func TestAttemptSpansInB3(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "sqlite")
	rec, srv := newRecorder(t, status(200))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	b3, err := tracing.NewPropagator([]string{"b3multi"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := j.Append(context.Background(), []journal.Event{{
		Provider: "acme", EventID: "evt_b3", ContentHash: "h",
		Headers: http.Header{"Traceparent": {senderParent}, "X-B3-Traceid": {"33333333333333333333333333333333"},
			"X-B3-Spanid": {"4444444444444444"}, "X-B3-Sampled": {"0"}},
		Body: []byte(`{}`), Path: "/webhooks/acme", TraceContext: receiptContext,
	}})
	if err != nil {
		t.Fatal(err)
	}
	startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
		c.Tracer = tp.Tracer("forwarder")
		c.Targets["acme"] = forwarder.Target{BackendURL: srv.URL, Propagator: b3}
	})
	waitStatus(t, j, r[0].ID, journal.StatusDone, 15*time.Second)
	ended := spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans", len(ended))
	}
	sc := ended[0].SpanContext()
	got := rec.requests()[0].header
	if got.Get("X-B3-Traceid") != receiptTrace || got.Get("X-B3-Spanid") != sc.SpanID().String() || got.Get("X-B3-Sampled") != "1" ||
		got.Get("Traceparent") != senderParent {
		t.Fatalf("backend got %v: want B3 naming span %s of trace %s, and the sender's traceparent", got, sc.SpanID(), receiptTrace)
	}
	d := get(t, j, r[0].ID)
	sent := forwarder.SentHeaders(d.Headers, d.Provider, d.EventID, d.ID, 1, d.AttemptLog[0].Sent)
	for _, name := range []string{"X-B3-Traceid", "X-B3-Spanid", "X-B3-Sampled", "Traceparent"} {
		if sent.Get(name) != got.Get(name) {
			t.Errorf("headers sent show %s %q, the backend got %q", name, sent.Get(name), got.Get(name))
		}
	}
}
