package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// overview prints GET /api/overview: counts, the window's totals, its
// last minutes, and the backends that need attention.
func (c *apiClient) overview(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("events overview", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	window := fs.String("window", "1h", "the window, 1m to 24h")
	minutes := fs.Int("minutes", 10, "how many of the last minutes to print")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError("events overview takes -window, -minutes and -json\n" + eventsUsage)
	}
	var o struct {
		admin.Overview
		Backends *forwarder.Backends `json:"backends"`
	}
	if shown, err := c.view(w, "/api/overview?window="+url.QueryEscape(*window), *asJSON, &o); shown || err != nil {
		return err
	}
	var counts []string
	for _, st := range []string{"pending", "retry", "processing", "dead", "done", "ignored"} {
		counts = append(counts, fmt.Sprintf("%s %d", st, o.Counts[journal.Status(st)]))
	}
	oldest := "none"
	if o.Counts[journal.StatusPending]+o.Counts[journal.StatusRetry]+o.Counts[journal.StatusProcessing] > 0 {
		oldest = humanDuration(time.Duration(o.OldestPendingAgeSeconds * float64(time.Second)))
	}
	fmt.Fprintf(w, "events: %s; oldest undelivered %s\n", strings.Join(counts, ", "), oldest)
	fmt.Fprintf(w, "last %s: %d delivered, %d failed attempts, %d dead; ack to delivery p50 %s, p99 %s\n",
		o.Window, o.Totals.Delivered, o.Totals.Failed, o.Totals.Dead, latencyText(o.Totals.LatencyP50Ms), latencyText(o.Totals.LatencyP99Ms))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MINUTE (UTC)\tDELIVERED\tFAILED\tDEAD\tP50 MS\tP99 MS\t")
	for _, m := range o.Minutes[max(0, len(o.Minutes)-*minutes):] {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t\n", m.At.UTC().Format("15:04"), m.Delivered, m.Failed, m.Dead, msText(m.LatencyP50Ms), msText(m.LatencyP99Ms))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.Backends == nil {
		return nil
	}
	for _, b := range o.Backends.Backends {
		state := "breaker " + b.Breaker
		if b.Paused != nil {
			state += ", paused " + pausedText(*b.Paused)
		}
		fmt.Fprintf(w, "backend %s: %s, %d waiting", b.Backend, state, b.Waiting)
		if b.Waiting > 0 {
			fmt.Fprintf(w, " (oldest %s)", humanDuration(time.Duration(b.OldestAgeSeconds)*time.Second))
		}
		fmt.Fprintln(w)
	}
	for _, p := range o.Backends.PausedProviders {
		fmt.Fprintf(w, "provider %s paused %s\n", p.Name, pausedText(p))
	}
	return nil
}

// latencyText is a latency in milliseconds in human units, "-" for none.
func latencyText(v *float64) string {
	if v == nil {
		return "-"
	}
	if *v < 1 {
		return fmt.Sprintf("%.1f ms", *v) // humanDuration would say 0 ms
	}
	return humanDuration(time.Duration(*v * float64(time.Millisecond)))
}

// msText is a latency in milliseconds for the minutes' table, "-" for none.
func msText(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
}
