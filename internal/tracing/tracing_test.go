package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/testwait"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want Config
		bad  string // the variable the error names
	}{
		{"nothing set", nil, Config{}, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, Config{Exporters: []string{"otlp"}, Protocol: ProtocolHTTP}, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, Config{Exporters: []string{"otlp"}, Protocol: ProtocolHTTP}, ""},
		{"exporter otlp, default endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, Config{Exporters: []string{"otlp"}, Protocol: ProtocolHTTP}, ""},
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, Config{Exporters: []string{"console"}}, ""},
		{"both, spaced and cased", map[string]string{"OTEL_TRACES_EXPORTER": " Console , otlp,otlp"}, Config{Exporters: []string{"console", "otlp"}, Protocol: ProtocolHTTP}, ""},
		{"none wins over the endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, Config{}, ""},
		{"disabled", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, Config{}, ""},
		{"disabled=false", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "console"}, Config{Exporters: []string{"console"}}, ""},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, Config{Exporters: []string{"otlp"}, Protocol: ProtocolGRPC}, ""},
		{"traces protocol wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			Config{Exporters: []string{"otlp"}, Protocol: ProtocolHTTP}, ""},
		{"bad protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, Config{}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"bad traces protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, Config{}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"protocol unused by console", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, Config{Exporters: []string{"console"}}, ""},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, Config{}, "OTEL_TRACES_EXPORTER"},
		{"propagators", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_PROPAGATORS": " B3, tracecontext,b3,baggage"},
			Config{Exporters: []string{"console"}, Propagators: []string{"b3", "tracecontext", "baggage"}}, ""},
		{"propagators none", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_PROPAGATORS": "none"},
			Config{Exporters: []string{"console"}, Propagators: []string{"none"}}, ""},
		{"propagators unknown", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_PROPAGATORS": "tracecontext,zipkin"}, Config{}, "OTEL_PROPAGATORS"},
		{"propagators unknown before none", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_PROPAGATORS": "zipkin,none"}, Config{}, "OTEL_PROPAGATORS"},
		{"propagators unknown after none", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_PROPAGATORS": "none,zipkn"}, Config{}, "OTEL_PROPAGATORS"},
		{"propagators unread with traces off", map[string]string{"OTEL_PROPAGATORS": "zipkin"}, Config{}, ""},
		{"queue size negative", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_MAX_QUEUE_SIZE": "-1"}, Config{}, "OTEL_BSP_MAX_QUEUE_SIZE"},
		{"batch size zero", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "0"}, Config{}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"},
		{"schedule delay not a number", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_SCHEDULE_DELAY": "5s"}, Config{}, "OTEL_BSP_SCHEDULE_DELAY"},
		{"batch settings", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_EXPORT_TIMEOUT": " 3000 "},
			Config{Exporters: []string{"console"}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromEnv(func(k string) string { return c.env[k] })
			var ve *VarError
			switch {
			case c.bad != "" && (!errors.As(err, &ve) || ve.Var != c.bad):
				t.Fatalf("error %v, want one naming %s", err, c.bad)
			case c.bad == "" && err != nil:
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			if got.On() != (len(c.want.Exporters) > 0) {
				t.Fatalf("On() = %v", got.On())
			}
		})
	}
}

func spanContext(t *testing.T, state string) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
}

// What the journal stores names the same parent once read back, trace
// state included; nothing is stored without a span, and what cannot be
// read starts a trace of its own.
func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"", "vendor=a b,other=x"} {
		sc := spanContext(t, state)
		s := Encode(sc)
		want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		if state != "" {
			want += "\n" + state
		}
		if s != want {
			t.Fatalf("Encode = %q, want %q", s, want)
		}
		got := trace.SpanContextFromContext(Decode(context.Background(), s))
		if !got.Equal(sc.WithRemote(true)) {
			t.Fatalf("Decode(%q) = %+v, want %+v", s, got, sc)
		}
	}
	// A sender's long trace state is cut from its end.
	var members []string
	for i := range 20 {
		members = append(members, fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", 60)))
	}
	s := Encode(spanContext(t, strings.Join(members, ",")))
	_, state, _ := strings.Cut(s, "\n")
	if len(state) > MaxTraceState || !strings.HasPrefix(state, members[0]+","+members[1]) || strings.Contains(state, "k19=") {
		t.Fatalf("long trace state kept as %q (%d bytes)", state, len(state))
	}
	if s := Encode(trace.SpanContext{}); s != "" {
		t.Fatalf("Encode(invalid) = %q", s)
	}
	for _, s := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if sc := trace.SpanContextFromContext(Decode(context.Background(), s)); sc.IsValid() {
			t.Fatalf("Decode(%q) gave a parent %+v", s, sc)
		}
	}
}

// With a span, the backend gets its traceparent and tracestate in place of
// any received (in any spelling); without one, received ones pass through.
func TestInject(t *testing.T) {
	t.Parallel()
	received := func() http.Header {
		h := http.Header{"Traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}, "Tracestate": {"sender=1"}, "X-Other": {"v"}}
		h["traceparent"] = []string{"00-33333333333333333333333333333333-4444444444444444-01"} // not canonical
		return h
	}
	h := received()
	Propagator{}.Inject(context.Background(), h)
	if !reflect.DeepEqual(h, received()) {
		t.Fatalf("off: headers changed: %v", h)
	}
	h = received()
	Propagator{}.Inject(trace.ContextWithSpanContext(context.Background(), spanContext(t, "vendor=v")), h)
	want := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "Tracestate": {"vendor=v"}, "X-Other": {"v"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("on: got %v, want %v", h, want)
	}
	// Without a trace state of its own, a received one does not stay.
	h = received()
	Propagator{}.Inject(trace.ContextWithSpanContext(context.Background(), spanContext(t, "")), h)
	if _, ok := h["Tracestate"]; ok || len(h["Traceparent"]) != 1 {
		t.Fatalf("on, no state: %v", h)
	}
}

func TestExtract(t *testing.T) {
	t.Parallel()
	h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "Tracestate": {"vendor=v"}}
	sc := trace.SpanContextFromContext(Propagator{}.Extract(context.Background(), h))
	if !sc.Equal(spanContext(t, "vendor=v").WithRemote(true)) {
		t.Fatalf("got %+v", sc)
	}
	for _, h := range []http.Header{{}, {"Traceparent": {"nonsense"}}} {
		if sc := trace.SpanContextFromContext(Propagator{}.Extract(context.Background(), h)); sc.IsValid() {
			t.Fatalf("%v: parent %+v", h, sc)
		}
	}
}

func TestFullURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://app:3000/hooks/stripe":                          "http://app:3000/hooks/stripe",
		"https://user:pw@app/hooks?token=s3cret&x=1":            "https://REDACTED:REDACTED@app/hooks?token=REDACTED&x=REDACTED",
		"http://app/hooks?s3cret&a=":                            "http://app/hooks?REDACTED&a=REDACTED",
		"http://user@app/h#frag":                                "http://REDACTED:REDACTED@app/h",
		"http://[::1]:8080/webhooks/github?delivery=abc&x=%2F1": "http://[::1]:8080/webhooks/github?delivery=REDACTED&x=REDACTED",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := FullURL(u); got != want {
			t.Errorf("FullURL(%s) = %s, want %s", in, got, want)
		}
	}
}

// blocking is an exporter that holds every export until released, then
// fails it when fail is set.
type blocking struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
	fail    bool
}

func (b *blocking) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail {
		return errors.New("collector unavailable")
	}
	b.got += len(spans)
	return nil
}

func (*blocking) Shutdown(context.Context) error { return nil }

// A collector that does not answer never makes a span's end wait: past the
// queue's bound spans are dropped and counted; what was queued goes out
// once it answers; a batch it refuses is counted too.
func TestSlowCollectorDropsCounted(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	exp := &blocking{release: make(chan struct{})}
	const limit = 4
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(
		pipeline(exp, limit, m, zap.NewNop(), sdktrace.WithBatchTimeout(time.Millisecond), sdktrace.WithMaxExportBatchSize(limit))))
	tr := tp.Tracer("test")
	start := time.Now()
	for range 50 {
		_, span := tr.Start(context.Background(), "s")
		span.End()
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("50 spans ended in %s with the collector stuck", took)
	}
	if got := testutil.ToFloat64(m.queueFull); got != 50-limit {
		t.Fatalf("dropped %v, want %d", got, 50-limit)
	}
	close(exp.release)
	var got int
	if !testwait.Until(10*time.Second, testwait.Poll, func() bool {
		exp.mu.Lock()
		got = exp.got
		exp.mu.Unlock()
		return got == limit
	}) {
		t.Fatalf("exported %d spans, want %d", got, limit)
	}
	exp.mu.Lock()
	exp.fail = true
	exp.mu.Unlock()
	_, span := tr.Start(context.Background(), "s")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.exportFailed); got != 1 {
		t.Fatalf("export failures counted %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.queueFull); got != 50-limit {
		t.Fatalf("dropped %v after the collector came back, want %d", got, 50-limit)
	}
}

// Off, New makes no tracer but still registers the dropped-span counter
// (every metric is there from start-up); Stop is a no-op.
func TestOffMakesNoTracer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	tr, err := New(context.Background(), Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if tr.On() || tr.Tracer("x") != nil {
		t.Fatal("tracing on with nothing set")
	}
	if err := tr.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "whguard_trace_spans_dropped_total"); err != nil || n != 2 {
		t.Fatalf("whguard_trace_spans_dropped_total: %d series, %v", n, err)
	}
}

// A stop never outlasts its context, whatever the collector does.
func TestStopBoundedByContext(t *testing.T) {
	t.Parallel()
	tr := &Tracing{}
	exp := &blocking{release: make(chan struct{})}
	tr.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(pipeline(exp, 8, newMetrics(nil), zap.NewNop())))
	_, span := tr.Tracer("x").Start(context.Background(), "s")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := tr.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v, want the deadline", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Stop took %s past a 200ms deadline", took)
	}
	close(exp.release)
}

// Each exporter builds from the configuration: console writes the spans
// as JSON, and an OTLP/gRPC exporter with nothing to talk to neither
// fails the start nor holds the stop past its context.
func TestExporters(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SERVICE_NAME", "orders-guard")
	var out strings.Builder
	tr, err := New(context.Background(), Options{Config: Config{Exporters: []string{ExporterConsole, ExporterOTLP}, Protocol: ProtocolGRPC},
		Console: &out, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Tracer("x").Start(context.Background(), "console span")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_ = tr.Stop(ctx) // the gRPC export fails: nothing listens
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Stop took %s", took)
	}
	if s := out.String(); !strings.Contains(s, `"Name":"console span"`) || !strings.Contains(s, "orders-guard") {
		t.Fatalf("console output lacks the span or the service name:\n%s", s)
	}
}

// Other formats (OTEL_PROPAGATORS): B3 is read from a sender and written
// for the backend in place of every B3 header received, W3C headers are
// left to the formats that name them, a sender's baggage stays, and none
// reads and writes nothing.
func TestPropagators(t *testing.T) {
	t.Parallel()
	ctx := trace.ContextWithSpanContext(context.Background(), spanContext(t, ""))
	received := func() http.Header {
		return http.Header{"X-B3-Traceid": {"11111111111111111111111111111111"}, "X-B3-Spanid": {"2222222222222222"},
			"x-b3-sampled": {"0"}, "Traceparent": {"00-33333333333333333333333333333333-4444444444444444-01"},
			"Baggage": {"user=1"}}
	}
	b3, err := NewPropagator([]string{"b3multi"})
	if err != nil {
		t.Fatal(err)
	}
	h := received()
	touched := b3.Inject(ctx, h)
	want := http.Header{"X-B3-Traceid": {"4bf92f3577b34da6a3ce929d0e0e4736"}, "X-B3-Spanid": {"00f067aa0ba902b7"},
		"X-B3-Sampled": {"1"}, "Traceparent": {"00-33333333333333333333333333333333-4444444444444444-01"}, "Baggage": {"user=1"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("b3multi: got %v, want %v", h, want)
	}
	if !slices.Contains(touched, "X-B3-Traceid") || slices.Contains(touched, "Traceparent") || slices.Contains(touched, "Baggage") {
		t.Fatalf("b3multi: touched %v", touched)
	}
	if sc := trace.SpanContextFromContext(b3.Extract(context.Background(), received())); sc.TraceID().String() != "11111111111111111111111111111111" {
		t.Fatalf("b3multi: extracted %v, want the X-B3 trace", sc.TraceID())
	}

	// Configured for the single header, B3 still reads a sender's
	// multiple headers, and removes them beside its own.
	single, err := NewPropagator([]string{"b3"})
	if err != nil {
		t.Fatal(err)
	}
	if sc := trace.SpanContextFromContext(single.Extract(context.Background(), received())); sc.TraceID().String() != "11111111111111111111111111111111" {
		t.Fatalf("b3: extracted %v, want the X-B3 trace", sc.TraceID())
	}
	h = received()
	single.Inject(ctx, h)
	want = http.Header{"B3": {"4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"},
		"Traceparent": {"00-33333333333333333333333333333333-4444444444444444-01"}, "Baggage": {"user=1"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("b3: got %v, want %v", h, want)
	}

	both, err := NewPropagator([]string{"tracecontext", "baggage"})
	if err != nil {
		t.Fatal(err)
	}
	h = received()
	both.Inject(ctx, h)
	if h.Get("Baggage") != "user=1" || h.Get("Traceparent") != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("tracecontext,baggage: %v", h)
	}

	// "none" beside other names still propagates nothing (found: b3
	// beside none removed the sender's B3 headers, writing none).
	for _, names := range [][]string{{"none"}, {"b3", "none"}, {"none", "b3multi"}} {
		none, err := NewPropagator(names)
		if err != nil {
			t.Fatal(err)
		}
		h = received()
		if touched := none.Inject(ctx, h); len(touched) > 0 || !reflect.DeepEqual(h, received()) {
			t.Fatalf("%v: touched %v, headers %v", names, touched, h)
		}
		if sc := trace.SpanContextFromContext(none.Extract(context.Background(), received())); sc.IsValid() {
			t.Fatalf("%v: extracted %+v", names, sc)
		}
	}
}
