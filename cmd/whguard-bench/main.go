// Command whguard-bench measures whguard side by side with a null HTTP
// server and a hand-written "verify and commit one row" receiver, in one run
// on one machine, with the same pre-signed Standard Webhooks requests (1 KB
// bodies, 10 % re-signed duplicates).
//
//	go run ./cmd/whguard-bench        # or: make bench (starts PostgreSQL if needed)
//	go run ./cmd/whguard-bench -duration 2s -only null,whguard-pg
//	go run ./cmd/whguard-bench -long  # or: make bench-long
//
// Each server runs as its own process (peak RSS from /proc/PID/status,
// CPU from /proc/PID/stat): the null server and the naive receiver are
// hidden subcommands of this binary, whguard is built from ./cmd/whguard
// for the run. PostgreSQL is TEST_DATABASE_URL or the local server; every
// server run gets a fresh database, dropped afterwards.
//
// Phases: a closed-loop throughput run per server (64 senders), an
// open-loop fixed-rate run per server (2 000 req/s), and a backlog run per
// whguard store (delivery capacity); whguard-pg's throughput run is made
// again with traces on (-traces: every span sampled, to a local sink). It
// prints a table, the ratios against
// the targets (reported, never asserted), and writes
// cmd/whguard-bench/out/results.json and BENCHMARKS.png.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// options are the command-line settings.
type options struct {
	duration, warmup, fixedDuration, drainTimeout time.Duration
	senders, rate, backlog, maxRate               int
	forwardConcurrency                            int
	slowBacklog                                   int
	slowDrain                                     time.Duration
	out, chart                                    string
	only, fixed                                   []string
	long                                          bool
	longEvents, preloadRows, retentionEvents      int
	retentionDays                                 int
	retentionBudget                               time.Duration
	// whguardBin, when set, is the whguard binary to run instead of one
	// built from this checkout: the way to measure old code against new
	// in interleaved pairs with one harness.
	whguardBin string
	// traces adds the throughput run of whguard-pg with traces on.
	traces bool
}

func main() {
	if status, ok := runSubcommand(os.Args[1:]); ok {
		os.Exit(status)
	}
	opts, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0) // the usage is printed already; asking for it is no error
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "whguard-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, opts))
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("whguard-bench", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 8*time.Second, "measured window of each throughput run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "warm-up before each measured window (not counted)")
	fs.IntVar(&o.senders, "senders", 64, "concurrent senders of the throughput runs")
	fs.IntVar(&o.rate, "rate", 2000, "requests per second of the fixed-rate (open-loop) runs")
	fs.DurationVar(&o.fixedDuration, "fixed-duration", 5*time.Second, "measured window of each fixed-rate run")
	fs.IntVar(&o.backlog, "backlog", 50000, "unique events of each backlog (delivery capacity) run; 0 skips them")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 60*time.Second, "longest wait for deliveries after the load stops")
	fs.IntVar(&o.maxRate, "max-rate", 60000, "pre-sign enough requests for this many per second")
	fs.IntVar(&o.forwardConcurrency, "forward-concurrency", 0, "WHGUARD_FORWARD_CONCURRENCY of the whguard servers (0: whguard's default)")
	fs.IntVar(&o.slowBacklog, "slow-backlog", 10000, "unique events of the backlog drained to a backend answering in 50 ms (0 skips it)")
	fs.DurationVar(&o.slowDrain, "slow-drain", 20*time.Second, "longest drain of the 50 ms backend's backlog (the rate is what arrived by then)")
	fs.StringVar(&o.out, "out", "cmd/whguard-bench/out", "directory for results.json")
	fs.StringVar(&o.chart, "chart", "BENCHMARKS.png", "PNG chart path (relative paths are under the module root)")
	only := fs.String("only", strings.Join(serverNames(), ","), "comma list of servers to run")
	fixed := fs.String("fixed", strings.Join(serverNames(), ","), "comma list of servers to run at the fixed rate too (empty: none)")
	fs.StringVar(&o.whguardBin, "whguard", "", "run this whguard binary instead of building ./cmd/whguard (old against new, in interleaved pairs)")
	fs.BoolVar(&o.traces, "traces", true, "also whguard-pg's throughput with traces on (every span sampled, exported over OTLP/HTTP to a local sink), as a ratio to its run without")
	fs.BoolVar(&o.long, "long", false, "also the long runs: -long-events through whguard-pg (bounded memory), and an empty vs -preload-rows journal comparison")
	fs.IntVar(&o.longEvents, "long-events", 1_000_000, "requests of the -long memory run (0 skips it)")
	fs.IntVar(&o.preloadRows, "preload-rows", 5_000_000, "rows pre-loaded in the journal for the -long comparison (0 skips it)")
	fs.IntVar(&o.retentionEvents, "retention-events", 5_000_000, "events of the day the -long retention figure expires by DELETE and by dropping partitions; a tenth a day over -retention-days simulated days (0 skips it)")
	fs.IntVar(&o.retentionDays, "retention-days", 6, "simulated days of steady traffic after the one-day comparison, sizes measured after each (0 skips them)")
	fs.DurationVar(&o.retentionBudget, "retention-budget", 30*time.Minute, "the longest each DELETE step may run; a step stopped by it reports the rows it deleted (the old DELETE slows as the table empties, far past linear)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	known := map[string]bool{}
	for _, s := range serverNames() {
		known[s] = true
	}
	var err error
	if o.only, err = serverList(*only, known); err != nil {
		return o, fmt.Errorf("-only: %w", err)
	}
	if o.fixed, err = serverList(*fixed, known); err != nil {
		return o, fmt.Errorf("-fixed: %w", err)
	}
	switch {
	case o.senders < 1 || o.rate < 1 || o.maxRate < 1 || o.forwardConcurrency < 0:
		return o, fmt.Errorf("-senders, -rate and -max-rate must be positive, -forward-concurrency not negative")
	case o.duration <= 0 || o.fixedDuration <= 0 || o.warmup < 0:
		return o, fmt.Errorf("-duration and -fixed-duration must be positive, -warmup not negative")
	}
	return o, nil
}

// serverList parses a comma list of known server names, keeping the
// canonical order.
func serverList(s string, known map[string]bool) ([]string, error) {
	want := map[string]bool{}
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !known[name] {
			return nil, fmt.Errorf("unknown server %q (want %s)", name, strings.Join(serverNames(), ", "))
		}
		want[name] = true
	}
	var out []string
	for _, name := range serverNames() {
		if want[name] {
			out = append(out, name)
		}
	}
	return out, nil
}
