package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// harness runs the servers under test.
type harness struct {
	opts    options
	root    string // module root
	tmp     string // scratch directory, removed at the end
	self    string // this executable, for the hidden subcommands
	whguard string // whguard built for this run
}

// Report is everything one bench run measured; it is written as
// results.json.
type Report struct {
	Started    time.Time `json:"started"`
	Seconds    float64   `json:"seconds"` // wall time of the whole bench
	Machine    Machine   `json:"machine"`
	Settings   Settings  `json:"settings"`
	Throughput []Result  `json:"throughput"`
	FixedRate  []Result  `json:"fixed_rate"`
	Backlog    []Backlog `json:"backlog"`
	Targets    []Target  `json:"targets"`
	Long       *Long     `json:"long,omitempty"`
	// Traces are whguard-pg's throughput runs with traces on (-traces),
	// and Untraced the run without that closes their ABBA sequence (the
	// other is whguard-pg's in Throughput): off, on, on, off.
	Traces   []Result `json:"traces,omitempty"`
	Untraced *Result  `json:"untraced,omitempty"`
}

// Settings records the flags a report was measured with.
type Settings struct {
	Senders            int     `json:"senders"`
	WarmupSeconds      float64 `json:"warmup_seconds"`
	DurationSeconds    float64 `json:"duration_seconds"`
	Rate               int     `json:"rate"`
	FixedSeconds       float64 `json:"fixed_seconds"`
	BacklogEvents      int     `json:"backlog_events"`
	ForwardConcurrency string  `json:"forward_concurrency"`
	BodyBytes          int     `json:"body_bytes"`
	DuplicatePercent   int     `json:"duplicate_percent"`
}

func run(ctx context.Context, opts options) int {
	start := time.Now()
	h, cleanup, err := newHarness(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "whguard-bench:", err)
		return 1
	}
	defer cleanup()

	rep := &Report{Started: start, Machine: readMachine(ctx), Settings: Settings{
		Senders: opts.senders, WarmupSeconds: opts.warmup.Seconds(), DurationSeconds: opts.duration.Seconds(),
		Rate: opts.rate, FixedSeconds: opts.fixedDuration.Seconds(), BacklogEvents: opts.backlog,
		ForwardConcurrency: h.concurrencyLabel(), BodyBytes: bodySize, DuplicatePercent: 100 / dupEvery,
	}}
	nullRate := 0.0
	for _, server := range opts.only {
		if ctx.Err() != nil {
			break
		}
		progress("throughput: %s, %d senders, %s after %s warm-up", server, opts.senders, opts.duration, opts.warmup)
		r := h.throughput(ctx, server, h.capacity(nullRate))
		if server == serverNull && r.Failed == "" {
			nullRate = r.AcksPerSec
		}
		progress("  %s", oneLine(r))
		rep.Throughput = append(rep.Throughput, r)
		if server == serverWhguardPG && opts.traces && ctx.Err() == nil {
			// Right after the run without traces, on the same settings,
			// in an ABBA sequence (off, on, on, off): one pair differs by
			// as much as this machine's noise.
			for i := range 2 {
				progress("throughput: %s (traces on, every span sampled, to a local OTLP/HTTP sink), %d of 2", serverWhguardPGTraced, i+1)
				r := h.throughputTraced(ctx, h.capacity(nullRate))
				progress("  %s", oneLine(r))
				rep.Traces = append(rep.Traces, r)
			}
			progress("throughput: %s again, traces off (closing the ABBA sequence)", server)
			u := h.throughput(ctx, server, h.capacity(nullRate))
			progress("  %s", oneLine(u))
			rep.Untraced = &u
		}
	}
	for _, server := range opts.only {
		if ctx.Err() != nil || !slices.Contains(opts.fixed, server) {
			continue
		}
		progress("fixed rate: %s at %d req/s for %s", server, opts.rate, opts.fixedDuration)
		r := h.fixedRate(ctx, server)
		progress("  %s", oneLine(r))
		rep.FixedRate = append(rep.FixedRate, r)
	}
	for _, server := range opts.only {
		if ctx.Err() != nil || !forwards(server) || opts.backlog <= 0 {
			continue
		}
		progress("backlog: %s, %d events held at the backend, then drained", server, opts.backlog)
		b := h.backlog(ctx, server)
		progress("  %.0f deliveries/s (%d in %.2fs)%s", b.PerSec, b.Received, b.DrainSeconds, failedSuffix(b.Failed))
		rep.Backlog = append(rep.Backlog, b)
		if server == serverWhguardPG && ctx.Err() == nil {
			progress("backlog: %s (limits in Redis that never bind), %d events", serverWhguardPGLimited, opts.backlog)
			b := h.backlogLimited(ctx)
			progress("  %.0f deliveries/s (%d in %.2fs)%s", b.PerSec, b.Received, b.DrainSeconds, failedSuffix(b.Failed))
			rep.Backlog = append(rep.Backlog, b)
		}
		if server == serverWhguardPG && ctx.Err() == nil {
			progress("backlog: %s (ordered by %s, many keys), %d events", serverWhguardPGOrdered, orderedKey, opts.backlog)
			b := h.backlogOrdered(ctx)
			progress("  %.0f deliveries/s (%d in %.2fs)%s", b.PerSec, b.Received, b.DrainSeconds, failedSuffix(b.Failed))
			rep.Backlog = append(rep.Backlog, b)
		}
		if server == serverWhguardPG && opts.slowBacklog > 0 && ctx.Err() == nil {
			progress("backlog: %s, %d events, backend answering in %s", serverWhguardPGSlow, opts.slowBacklog, slowBackendLatency)
			b := h.backlogSlow(ctx, serverWhguardPGSlow, slowBackendLatency)
			progress("  %.0f deliveries/s (%d in %.2fs)%s", b.PerSec, b.Received, b.DrainSeconds, failedSuffix(b.Failed))
			rep.Backlog = append(rep.Backlog, b)
		}
	}
	status := 0
	if opts.long && ctx.Err() == nil {
		rep.Long = h.long(ctx)
		if rep.Long.Failed != "" {
			status = 1
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.Targets = targets(rep)
	printReport(os.Stdout, rep)
	if err := h.writeOutputs(rep); err != nil {
		fmt.Fprintln(os.Stderr, "whguard-bench:", err)
		status = 1
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "whguard-bench: interrupted")
		return 1
	}
	return status
}

// newHarness finds the module root, makes a scratch directory and builds
// whguard when a whguard server is to run.
func newHarness(ctx context.Context, opts options) (*harness, func(), error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "whguard-bench-")
	if err != nil {
		return nil, nil, err
	}
	h := &harness{opts: opts, root: root, tmp: tmp, self: self}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	if opts.whguardBin != "" {
		h.whguard = opts.whguardBin
		progress("running whguard from %s", h.whguard)
	} else if slices.ContainsFunc(opts.only, forwards) || opts.long {
		h.whguard = filepath.Join(tmp, "whguard")
		progress("building whguard (go build -o %s ./cmd/whguard)", h.whguard)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", h.whguard, "./cmd/whguard")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("build whguard: %w\n%s", err, out)
		}
	}
	return h, cleanup, nil
}

// moduleRoot walks up from the working directory to the go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: run the bench from the whguard module")
		}
		dir = parent
	}
}

// writeOutputs writes results.json and the chart.
func (h *harness) writeOutputs(rep *Report) error {
	out := h.underRoot(h.opts.out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	jsonPath := filepath.Join(out, "results.json")
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nresults: %s\n", jsonPath)
	if len(rep.Throughput) == 0 {
		return nil
	}
	chart := h.underRoot(h.opts.chart)
	if err := writeChart(chart, rep); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	fmt.Printf("chart:   %s\n", chart)
	return nil
}

// underRoot resolves a relative path against the module root.
func (h *harness) underRoot(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(h.root, p)
}

// progress reports what the bench is doing on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "whguard-bench: "+format+"\n", args...)
}

func failedSuffix(failed string) string {
	if failed == "" {
		return ""
	}
	return " FAILED: " + failed
}

// oneLine summarises a result for the progress log.
func oneLine(r Result) string {
	if r.Failed != "" {
		return "FAILED: " + r.Failed
	}
	s := fmt.Sprintf("%.0f acks/s, p50 %.2f ms, p99 %.2f ms, %d errors, peak RSS %.0f MB, CPU server %.2f pg %.2f bench %.2f idle %.2f",
		r.AcksPerSec, r.Ack.P50, r.Ack.P99, r.Errors, r.PeakRSSMB, r.CPU.Server, r.CPU.Postgres, r.CPU.Bench, r.CPU.Idle)
	if d := r.Deliveries; d != nil {
		s += fmt.Sprintf("; %d/%d delivered, %.0f/s, e2e p50 %.2f ms p99 %.2f ms, drain %.2fs",
			d.Received, d.Expected, d.PerSec, d.E2E.P50, d.E2E.P99, d.DrainSeconds)
	}
	if len(r.ErrorSample) > 0 {
		s += fmt.Sprintf("; errors e.g. %q", r.ErrorSample)
	}
	return s
}
