package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/tracing"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// tracedFixture is an ingress with a tracer whose spans the test reads, in
// front of an embedded journal of its own, behind a traced group commit.
func tracedFixture(t *testing.T) (*fixture, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	j := testdb.OpenStore(t, "sqlite", true)
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "std", Scheme: "standard", Secrets: []string{stdSecret}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{{Path: "/webhooks/std", Provider: p}},
		Intake: newIntake(t, journal.NewGroupCommitter(j, 1, nil).Traced(tp.Tracer("journal")), nil),
		// As wired: duplicates' answers are then written through the
		// receipt's writer (found: their spans lost their result).
		Receipts: j,
		Tracer:   tp.Tracer("proxy"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: httptest.NewServer(in), j: j, ingress: in}
	t.Cleanup(f.srv.Close)
	return f, rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// spansNamed returns the ended spans called name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// A webhook's request is a SERVER span continuing the sender's trace, with
// the event's ids and result; its wait for the group commit is a child
// span with the batch size; the event is stored with the SERVER span's
// context, the parent of its deliveries.
func TestRequestSpanAndStoredContext(t *testing.T) {
	t.Parallel()
	f, rec := tracedFixture(t)
	const senderTrace, senderSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"type":"traced"}`
	h := signStandard("msg_traced", time.Now(), body)
	h.Set("Traceparent", "00-"+senderTrace+"-"+senderSpan+"-01")
	h.Set("Tracestate", "sender=1")
	if r := f.post(t, "/webhooks/std", h, body); r.status != http.StatusAccepted {
		t.Fatalf("%+v", r)
	}
	servers := spansNamed(rec, "POST /webhooks/std")
	if len(servers) != 1 {
		t.Fatalf("%d server spans", len(servers))
	}
	srv := servers[0]
	if srv.SpanKind() != trace.SpanKindServer || srv.SpanContext().TraceID().String() != senderTrace ||
		srv.Parent().SpanID().String() != senderSpan || !srv.Parent().IsRemote() {
		t.Fatalf("server span %v in trace %s under %s: not the sender's child", srv.SpanKind(), srv.SpanContext().TraceID(), srv.Parent().SpanID())
	}
	ds, err := f.j.Lease(context.Background(), 10, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("lease: %v %v", ds, err)
	}
	a := attrs(srv)
	for k, want := range map[attribute.Key]attribute.Value{
		"whguard.provider":          attribute.StringValue("std"),
		"whguard.event_id":          attribute.StringValue("msg_traced"),
		"whguard.journal_id":        attribute.Int64Value(ds[0].ID),
		"whguard.result":            attribute.StringValue("accepted"),
		"http.request.method":       attribute.StringValue("POST"),
		"http.response.status_code": attribute.IntValue(202),
		"http.route":                attribute.StringValue("/webhooks/std"),
	} {
		if a[k] != want {
			t.Errorf("server span %s = %v, want %v", k, a[k].Emit(), want.Emit())
		}
	}
	commits := spansNamed(rec, "journal commit")
	if len(commits) != 1 || commits[0].Parent().SpanID() != srv.SpanContext().SpanID() ||
		attrs(commits[0])["whguard.journal.batch_size"] != attribute.IntValue(1) {
		t.Fatalf("journal commit spans %v: want one child of the server span with batch size 1", commits)
	}
	if want := tracing.Encode(srv.SpanContext()); ds[0].TraceContext != want || !strings.HasSuffix(want, "\nsender=1") {
		t.Fatalf("stored trace context %q, want the server span's %q (with the sender's trace state)", ds[0].TraceContext, want)
	}
	// Nothing of the request's headers or body is in a span.
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			v := kv.Value.Emit()
			if strings.Contains(v, "v1,") || strings.Contains(v, "traced\"") || strings.Contains(v, "sender=1") {
				t.Fatalf("span %s attribute %s carries a header or the body: %q", s.Name(), kv.Key, v)
			}
		}
	}
}

// Refusals and duplicates are spans too, with their result; a request
// without a traceparent starts a trace; a path that is no webhook's makes
// no span.
func TestRefusedAndDuplicateRequestsAreSpans(t *testing.T) {
	t.Parallel()
	f, rec := tracedFixture(t)
	body := `{"type":"x"}`
	good := signStandard("msg_dup", time.Now(), body)
	for _, want := range []int{202, 200} {
		if r := f.post(t, "/webhooks/std", good, body); r.status != want {
			t.Fatalf("%+v, want %d", r, want)
		}
	}
	bad := good.Clone()
	bad.Set("Webhook-Signature", "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	if r := f.post(t, "/webhooks/std", bad, body); r.status != 401 {
		t.Fatalf("%+v", r)
	}
	req, _ := http.NewRequest(http.MethodPut, f.srv.URL+"/webhooks/std", nil)
	if resp, err := f.srv.Client().Do(req); err != nil || resp.StatusCode != 405 {
		t.Fatalf("PUT: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if r := f.post(t, "/elsewhere", nil, body); r.status != 404 {
		t.Fatalf("%+v", r)
	}
	var results []string
	for _, s := range rec.Ended() {
		if s.SpanKind() != trace.SpanKindServer {
			continue
		}
		if s.Parent().IsValid() {
			t.Errorf("%s: a parent %v though the sender sent none", s.Name(), s.Parent())
		}
		a := attrs(s)
		results = append(results, a["whguard.result"].AsString()+"/"+a["http.response.status_code"].Emit())
	}
	want := []string{"accepted/202", "duplicate/200", "unauthorized/401", "method_not_allowed/405"}
	if strings.Join(results, " ") != strings.Join(want, " ") {
		t.Fatalf("server spans %v, want %v", results, want)
	}
	if n := len(spansNamed(rec, "journal commit")); n != 2 {
		t.Fatalf("%d journal commit spans, want 2 (the refused requests reach no commit)", n)
	}
}
