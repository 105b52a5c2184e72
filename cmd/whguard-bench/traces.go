package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// traceSink is a local OTLP/HTTP receiver that reads each export and
// answers 200: what a collector on the same host costs whguard, without
// the collector's own work.
type traceSink struct {
	srv            *http.Server
	url            string
	exports, bytes atomic.Int64
	// bodies are the exports as received, decoded after the run (spans)
	// so that decoding takes no CPU from the run.
	mu     sync.Mutex
	bodies [][]byte
}

// spans decodes the exports received and counts their spans.
func (s *traceSink) spans() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.bodies {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			return n, fmt.Errorf("decode an export: %w", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
	}
	return n, nil
}

func startTraceSink() (*traceSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &traceSink{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.exports.Add(1)
		s.bytes.Add(int64(len(b)))
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
	})}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// throughputTraced is whguard-pg's closed-loop run on a fresh database with
// traces on: every span sampled (a server span, its journal commit and
// one client span per attempt, per event), exported to a local sink.
func (h *harness) throughputTraced(ctx context.Context, n int) Result {
	fail := func(err error) Result {
		return Result{Server: serverWhguardPGTraced, Mode: "throughput", Failed: err.Error()}
	}
	sink, err := startTraceSink()
	if err != nil {
		return fail(err)
	}
	defer sink.srv.Close()
	dbURL, drop, err := h.database(ctx, serverWhguardPG)
	if err != nil {
		return fail(err)
	}
	defer drop()
	r := h.throughputOn(ctx, serverWhguardPG, dbURL, n,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+sink.url, "OTEL_TRACES_SAMPLER=always_on", "OTEL_SERVICE_NAME=whguard-bench")
	r.Server = serverWhguardPGTraced
	spans, err := sink.spans()
	progress("  the sink received %d exports, %.1f MB, %d spans: %.2f per request of the measured window (3 expected: server, journal commit, attempt; the warm-up's add a little; fewer: spans dropped)",
		sink.exports.Load(), float64(sink.bytes.Load())/(1<<20), spans, float64(spans)/float64(max(1, r.Requests)))
	switch {
	case r.Failed != "":
	case err != nil:
		r.Failed = err.Error()
	case spans == 0:
		r.Failed = "no span reached the sink"
	}
	return r
}

// tracesTarget compares whguard-pg's acknowledgements (and deliveries,
// end to end) with traces on and off: the mean of the traced runs over
// the mean of the untraced ones around them (off, on, on, off).
func tracesTarget(rep *Report, pg Result, havePG bool) Target {
	t := Target{Name: "whguard-pg acks/s with traces on (all sampled) / off", Goal: "≥ 0.9×", Status: statusNA}
	if !havePG || len(rep.Traces) == 0 || pg.AcksPerSec <= 0 {
		return t
	}
	off := []Result{pg}
	if rep.Untraced != nil && rep.Untraced.Failed == "" {
		off = append(off, *rep.Untraced)
	}
	for _, r := range rep.Traces {
		if r.Failed != "" {
			return t
		}
	}
	acks := func(r Result) float64 { return r.AcksPerSec }
	e2e := func(r Result) float64 {
		if r.Deliveries == nil {
			return 0
		}
		return r.Deliveries.EndToEndPerSec
	}
	on, base := meanOf(rep.Traces, acks), meanOf(off, acks)
	x := on / base
	t.Value = fmt.Sprintf("%.2f× (%.0f vs %.0f acks/s, means of %d and %d runs, ABBA)", x, on, base, len(rep.Traces), len(off))
	if e := meanOf(off, e2e); e > 0 && meanOf(rep.Traces, e2e) > 0 {
		t.Value += fmt.Sprintf("; end to end %.2f×", meanOf(rep.Traces, e2e)/e)
	}
	t.Status = verdict(true, x >= 0.9)
	return t
}

// meanOf is the mean of f over rs (0 when any is 0: a run without it).
func meanOf(rs []Result, f func(Result) float64) float64 {
	sum := 0.0
	for _, r := range rs {
		v := f(r)
		if v <= 0 {
			return 0
		}
		sum += v
	}
	return sum / float64(len(rs))
}
