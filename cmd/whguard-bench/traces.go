package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// traceSink is a local OTLP/HTTP receiver that reads each export and
// answers 200: what a collector on the same host costs whguard, without
// the collector's own work.
type traceSink struct {
	srv                   *http.Server
	url                   string
	exports, bytes, count atomic.Int64
	// failed is the first export whose spans could not be counted.
	failed atomic.Pointer[error]
}

// spans is how many spans the exports received held.
func (s *traceSink) spans() (int, error) {
	if err := s.failed.Load(); err != nil {
		return int(s.count.Load()), *err
	}
	return int(s.count.Load()), nil
}

// countSpans counts the spans of an OTLP ExportTraceServiceRequest by
// walking its wire format (resource_spans = 1, their scope_spans = 2,
// their spans = 2) without decoding them: the sink runs in the load
// generator's process, which must not pay a collector's work, nor hold
// the exports until the run ends.
func countSpans(b []byte) (int, error) {
	n := 0
	err := eachField(b, 1, func(rs []byte) error {
		return eachField(rs, 2, func(ss []byte) error {
			return eachField(ss, 2, func([]byte) error { n++; return nil })
		})
	})
	return n, err
}

// eachField calls f with the bytes of every length-delimited field number
// num of message b, skipping the other fields.
func eachField(b []byte, num protowire.Number, f func([]byte) error) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			if err := f(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
	}
	return nil
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
		n, err := countSpans(b)
		s.count.Add(int64(n))
		if err != nil {
			err = fmt.Errorf("count the spans of an export: %w", err)
			s.failed.CompareAndSwap(nil, &err)
		}
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
