package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// drainIdle ends the wait for deliveries when none arrived for this long.
const drainIdle = 10 * time.Second

// session is one running server under test with its fast backend (nil for
// servers that do not forward).
type session struct {
	t  *target
	be *backend
}

// open starts a backend (for the whguard servers) answering after latency
// and expecting up to uniques unique events of signer sg, then server
// against dbURL.
func (h *harness) open(ctx context.Context, server, dbURL string, sg *signer, uniques int, gated bool, latency time.Duration, extraEnv ...string) (*session, error) {
	s := &session{}
	backendURL := ""
	if forwards(server) {
		be, err := startBackend(sg.tag, uniques, gated, latency)
		if err != nil {
			return nil, err
		}
		s.be, backendURL = be, be.url
	}
	t, err := h.start(ctx, server, dbURL, sg.secret, backendURL, extraEnv...)
	if err != nil {
		s.close()
		return nil, err
	}
	s.t = t
	return s, nil
}

// close stops the server, then the backend.
func (s *session) close() {
	if s.t != nil {
		s.t.proc.stop(stopTimeout)
	}
	if s.be != nil {
		s.be.close()
	}
}

// drive runs one load against s, waits (bounded) for the deliveries it
// acknowledged, and fills in r.
func (h *harness) drive(ctx context.Context, s *session, src source, conns int, r *Result, run func(*load)) {
	client := newLoadClient(conns)
	defer client.CloseIdleConnections()
	l := newLoad(client, s.t.url, src)
	pid := s.t.proc.cmd.Process.Pid
	c0 := snapshotCPU(pid)
	run(l)
	r.CPU = c0.use(snapshotCPU(pid))
	summarize(r, l)
	if s.be != nil {
		want := 0
		for _, a := range l.ackNs {
			if a != 0 {
				want++
			}
		}
		s.be.waitFor(ctx, int64(want), drainIdle, h.opts.drainTimeout)
		r.Deliveries = deliveries(l, s.be)
	}
	if peak, _, err := s.t.proc.memory(); err == nil {
		r.PeakRSSMB = float64(peak) / (1 << 20)
	}
}

// capacity is how many requests to pre-sign for a closed-loop run: enough
// for maxRate requests per second (or 1.2× the null server's measured
// rate, which no receiver should exceed) for the whole run. Should a
// server outrun it, the run says so and its window is shortened.
func (h *harness) capacity(nullRate float64) int {
	rate := float64(h.opts.maxRate)
	if nullRate > 0 {
		rate = min(rate, 1.2*nullRate)
	}
	secs := (h.opts.warmup + h.opts.duration).Seconds()
	return int(math.Ceil(rate*secs)) + 4*h.opts.senders
}

// throughput is the closed-loop run of server on a fresh database.
func (h *harness) throughput(ctx context.Context, server string, n int) Result {
	dbURL, drop, err := h.database(ctx, server)
	if err != nil {
		return Result{Server: server, Mode: "throughput", Failed: err.Error()}
	}
	defer drop()
	var walFrom string
	if strings.HasPrefix(dbURL, "postgres") {
		walFrom = walPosition(ctx, dbURL)
	}
	r := h.throughputOn(ctx, server, dbURL, n)
	if r.Failed == "" && strings.HasPrefix(dbURL, "postgres") {
		// The server has stopped: every statement it ran is counted.
		st, err := readStatements(ctx, dbURL, walFrom)
		if err != nil {
			progress("  %v", err)
		}
		r.Statements = st
	}
	return r
}

// throughputOn is the closed-loop run of server on dbURL: n pre-signed
// requests, h.opts.senders senders, warm-up then the measured window;
// extraEnv adds settings.
func (h *harness) throughputOn(ctx context.Context, server, dbURL string, n int, extraEnv ...string) Result {
	r := Result{Server: server, Mode: "throughput", Senders: h.opts.senders}
	h.loadRun(ctx, &r, dbURL, "tp", n, h.opts.senders, func(l *load) {
		runClosed(ctx, l, h.opts.senders, h.opts.warmup, h.opts.duration)
	}, extraEnv...)
	return r
}

// loadRun starts r.Server on dbURL (with extraEnv) and a fast backend,
// sends it n requests pre-signed by a signer tagged tag over conns
// connections as run drives them, and fills in r (r.Failed when the
// server did not start).
func (h *harness) loadRun(ctx context.Context, r *Result, dbURL, tag string, n, conns int, run func(*load), extraEnv ...string) {
	sg := newSigner(tag)
	s, err := h.open(ctx, r.Server, dbURL, sg, uniquesIn(n), false, 0, extraEnv...)
	if err != nil {
		r.Failed = err.Error()
		return
	}
	defer s.close()
	h.drive(ctx, s, presign(sg, n, time.Now()), conns, r, run)
}

// fixedRate is the open-loop run of server on a fresh database: requests
// start at h.opts.rate per second whatever the answers.
func (h *harness) fixedRate(ctx context.Context, server string) Result {
	r := Result{Server: server, Mode: "fixed-rate", TargetRate: h.opts.rate}
	dbURL, drop, err := h.database(ctx, server)
	if err != nil {
		r.Failed = err.Error()
		return r
	}
	defer drop()
	n := int(float64(h.opts.rate)*(h.opts.warmup+h.opts.fixedDuration).Seconds()) + 1
	h.loadRun(ctx, &r, dbURL, "fr", n, 256, func(l *load) {
		runOpen(ctx, l, h.opts.rate, h.opts.warmup, h.opts.fixedDuration)
	})
	return r
}

// Backlog is a delivery-capacity run: whguard journals a backlog while the
// backend holds every delivery, then the backend opens and the forwarder
// drains the backlog as fast as it can lease and deliver.
type Backlog struct {
	Server string `json:"server"`
	// BackendLatencyMS is how long the backend took to answer each
	// delivery (0: at once).
	BackendLatencyMS float64 `json:"backend_latency_ms"`
	// ForwardConcurrency is WHGUARD_FORWARD_CONCURRENCY ("default": not
	// set, whguard's own default).
	ForwardConcurrency string `json:"forward_concurrency"`
	// TimedOut: the drain was cut at the drain timeout; PerSec is the rate
	// until then.
	TimedOut      bool    `json:"timed_out,omitempty"`
	Events        int     `json:"events"`         // unique events acknowledged
	IngestPerSec  float64 `json:"ingest_per_sec"` // 2xx acks per second while filling
	Errors        int     `json:"errors"`
	Received      int     `json:"received"`
	DrainSeconds  float64 `json:"drain_seconds"` // gate opened → last receipt
	PerSec        float64 `json:"per_sec"`       // received / DrainSeconds
	CPU           CPUUse  `json:"cpu_cores"`     // during the drain
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Failed        string  `json:"failed,omitempty"`
	FillSeconds   float64 `json:"fill_seconds"`
	BeforeRelease int     `json:"before_release"` // deliveries held at the gate when it opened
}

// backlog runs the delivery-capacity run of server on a fresh database.
func (h *harness) backlog(ctx context.Context, server string) Backlog {
	dbURL, drop, err := h.database(ctx, server)
	if err != nil {
		return Backlog{Server: server, Failed: err.Error()}
	}
	defer drop()
	return h.backlogOn(ctx, server, dbURL, backlogSpec{events: h.opts.backlog})
}

// backlogSlow is the backlog run of whguard-pg to a backend that answers
// each delivery after latency, labelled label: a smaller backlog, drained
// for at most h.opts.slowDrain (the rate is what arrived by then).
func (h *harness) backlogSlow(ctx context.Context, label string, latency time.Duration) Backlog {
	dbURL, drop, err := h.database(ctx, serverWhguardPG)
	if err != nil {
		return Backlog{Server: label, Failed: err.Error()}
	}
	defer drop()
	b := h.backlogOn(ctx, serverWhguardPG, dbURL, backlogSpec{events: h.opts.slowBacklog, latency: latency, timeout: h.opts.slowDrain})
	b.Server = label
	return b
}

// backlogSpec shapes one backlog run: its unique events, the backend's
// answer time, and the longest drain (0: h.opts.drainTimeout).
type backlogSpec struct {
	events  int
	latency time.Duration
	timeout time.Duration
}

// backlogOn is backlog on dbURL. The forward timeout is raised so the
// deliveries held at the gate while the backlog fills do not time out.
func (h *harness) backlogOn(ctx context.Context, server, dbURL string, spec backlogSpec, extraEnv ...string) Backlog {
	b := Backlog{Server: server, BackendLatencyMS: float64(spec.latency) / float64(time.Millisecond),
		ForwardConcurrency: h.concurrencyLabel()}
	n := spec.events * dupEvery / (dupEvery - 1)
	sg := newSigner("bl")
	s, err := h.open(ctx, server, dbURL, sg, uniquesIn(n), true, spec.latency, append([]string{"WHGUARD_FORWARD_TIMEOUT=10m"}, extraEnv...)...)
	if err != nil {
		b.Failed = err.Error()
		return b
	}
	defer s.close()
	src := presign(sg, n, time.Now())
	var r Result
	client := newLoadClient(h.opts.senders)
	defer client.CloseIdleConnections()
	l := newLoad(client, s.t.url, src)
	runClosed(ctx, l, h.opts.senders, 0, time.Hour) // until the requests run out
	summarize(&r, l)
	b.Errors, b.FillSeconds = r.Errors, l.stopped.Sub(l.t0).Seconds()
	for _, a := range l.ackNs {
		if a != 0 {
			b.Events++
		}
	}
	b.IngestPerSec = float64(r.Statuses["202"]+r.Statuses["200"]) / b.FillSeconds
	// Let the forwarder lease what it can hold before the gate opens.
	time.Sleep(500 * time.Millisecond)
	pid := s.t.proc.cmd.Process.Pid
	c0 := snapshotCPU(pid)
	b.BeforeRelease = int(s.be.arrived.Load())
	opened := time.Now()
	s.be.release()
	timeout := cmp.Or(spec.timeout, h.opts.drainTimeout)
	b.Received = int(s.be.waitFor(ctx, int64(b.Events), drainIdle, timeout))
	b.CPU = c0.use(snapshotCPU(pid))
	var last int64
	for _, t := range s.be.receipts() {
		last = max(last, t)
	}
	if b.Received < b.Events && time.Since(opened) >= timeout {
		// Cut by the timeout: the rate until then.
		b.TimedOut, last = true, time.Now().UnixNano()
	}
	if d := time.Duration(last - opened.UnixNano()); d > 0 {
		b.DrainSeconds = d.Seconds()
		b.PerSec = float64(b.Received) / b.DrainSeconds
	}
	if peak, _, err := s.t.proc.memory(); err == nil {
		b.PeakRSSMB = float64(peak) / (1 << 20)
	}
	if b.Received < b.Events && !b.TimedOut {
		fmt.Fprintf(os.Stderr, "whguard-bench: %s backlog: %d of %d events delivered within the drain timeout\n", server, b.Received, b.Events)
	}
	return b
}

// backlogLimited is the backlog run of whguard-pg with limits in Redis
// that never bind (the cost of asking: one script per delivery), labelled
// whguard-pg-limited; compared with whguard-pg's own backlog run.
func (h *harness) backlogLimited(ctx context.Context) Backlog {
	dbURL, drop, err := h.database(ctx, serverWhguardPG)
	if err != nil {
		return Backlog{Server: serverWhguardPGLimited, Failed: err.Error()}
	}
	defer drop()
	redisURL := cmp.Or(os.Getenv("TEST_REDIS_URL"), "redis://127.0.0.1:6379/0")
	b := h.backlogOn(ctx, serverWhguardPG, dbURL, backlogSpec{events: h.opts.backlog}, "WHGUARD_REDIS_URL="+redisURL,
		"WHGUARD_BACKEND_RATE_LIMIT=1000000/s", "WHGUARD_BACKEND_RATE_BURST=1000000", "WHGUARD_BACKEND_MAX_IN_FLIGHT=100000")
	b.Server = serverWhguardPGLimited
	return b
}

// orderedKey is the order key of the ordered backlog run: the first
// item's SKU, 10 000 values over the backlog's events (about five events
// per key at the default 50 000), so keys both run in parallel and wait
// for their own earlier events.
const orderedKey = "/data/items/0/sku"

// backlogOrdered is the backlog run of whguard-pg with per-key order on
// orderedKey, labelled whguard-pg-ordered; compared with whguard-pg's own
// (unordered) backlog run of the same events.
func (h *harness) backlogOrdered(ctx context.Context) Backlog {
	dbURL, drop, err := h.database(ctx, serverWhguardPG)
	if err != nil {
		return Backlog{Server: serverWhguardPGOrdered, Failed: err.Error()}
	}
	defer drop()
	b := h.backlogOn(ctx, serverWhguardPG, dbURL, backlogSpec{events: h.opts.backlog}, "WHGUARD_BENCH_ORDER_KEY="+orderedKey)
	b.Server = serverWhguardPGOrdered
	return b
}
