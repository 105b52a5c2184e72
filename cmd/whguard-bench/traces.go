package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// traceSink is a local OTLP/HTTP receiver that reads each export and
// answers 200: what a collector on the same host costs whguard, without
// the collector's own work.
type traceSink struct {
	srv            *http.Server
	url            string
	exports, bytes atomic.Int64
}

func startTraceSink() (*traceSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &traceSink{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		s.bytes.Add(n)
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
	progress("  the sink received %d exports, %.1f MB of spans", sink.exports.Load(), float64(sink.bytes.Load())/(1<<20))
	if r.Failed == "" && sink.exports.Load() == 0 {
		r.Failed = "no span reached the sink"
	}
	return r
}

// tracesTarget compares whguard-pg's acknowledgements (and deliveries,
// end to end) with traces on and off.
func tracesTarget(rep *Report, pg Result, havePG bool) Target {
	t := Target{Name: "whguard-pg acks/s with traces on (all sampled) / off", Goal: "≥ 0.9×", Status: statusNA}
	tr := rep.Traces
	if !havePG || tr == nil || tr.Failed != "" || pg.AcksPerSec <= 0 {
		return t
	}
	x := tr.AcksPerSec / pg.AcksPerSec
	t.Value = fmt.Sprintf("%.2f× (%.0f vs %.0f acks/s)", x, tr.AcksPerSec, pg.AcksPerSec)
	if tr.Deliveries != nil && pg.Deliveries != nil && pg.Deliveries.EndToEndPerSec > 0 {
		t.Value += fmt.Sprintf("; end to end %.2f×", tr.Deliveries.EndToEndPerSec/pg.Deliveries.EndToEndPerSec)
	}
	t.Status = verdict(true, x >= 0.9)
	return t
}
