package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// SearchTime is one search's time on a large journal.
type SearchTime struct {
	Name string `json:"name"`
	// Ms is the median of three runs; Found the events of its first page.
	Ms    float64 `json:"ms"`
	Found int     `json:"found"`
	// TooSlow: it stopped at journal.SearchTimeout (the API's 422).
	TooSlow bool `json:"too_slow,omitempty"`
}

// searchRun times the inspector's kinds of search (API and CLI go through
// the same journal.List) on the pre-loaded journal at dbURL, as an
// operator would run them: newest first, one page of 50.
func searchRun(ctx context.Context, dbURL string, rows int) ([]SearchTime, error) {
	j, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: dbURL})
	if err != nil {
		return nil, err
	}
	defer j.Close()
	now := time.Now()
	cases := []struct {
		name string
		f    journal.Filter
	}{
		{"newest page, no filter", journal.Filter{}},
		{"status dead (none)", journal.Filter{Status: journal.StatusDead}},
		{"type invoice.* (40 %)", journal.Filter{Types: []string{"invoice.*"}}},
		{"rare type charge.refunded", journal.Filter{Types: []string{"charge.refunded"}}},
		{"exact event id", journal.Filter{Provider: "bench", EventID: fmt.Sprintf("pre_%d", rows/2)}},
		{"event id prefix", journal.Filter{Provider: "bench", EventID: fmt.Sprintf("pre_%d", rows/3), EventIDPrefix: true}},
		{"last hour", journal.Filter{Since: now.Add(-time.Hour)}},
		{"one hour, 20 days ago", journal.Filter{Since: now.Add(-20 * 24 * time.Hour), Until: now.Add(-20*24*time.Hour + time.Hour)}},
		{"rare type in the last day", journal.Filter{Types: []string{"charge.refunded"}, Since: now.Add(-24 * time.Hour)}},
		{"body match, no hit (10 000-event window)", journal.Filter{Match: []journal.Match{{Pointer: "/data/customer", Value: "cus_none"}}}},
	}
	var out []SearchTime
	for _, c := range cases {
		st := SearchTime{Name: c.name}
		var times []float64
		for range 3 {
			t0 := time.Now()
			got, _, err := j.List(ctx, c.f)
			times = append(times, float64(time.Since(t0).Microseconds())/1000)
			if errors.Is(err, journal.ErrSearchTooSlow) {
				st.TooSlow = true
			} else if err != nil {
				return nil, fmt.Errorf("search %q: %w", c.name, err)
			}
			st.Found = len(got)
		}
		slices.Sort(times)
		st.Ms = times[1]
		progress("  %-45s %8.1f ms  %d found%s", c.name, st.Ms, st.Found, map[bool]string{true: " (stopped at the bound)"}[st.TooSlow])
		out = append(out, st)
	}
	return out, nil
}

// printSearch writes the search table of the long runs.
func printSearch(w io.Writer, rows int, ss []SearchTime) {
	fmt.Fprintf(w, "search on a journal of %d rows (median of 3, one page of 50; bound %s):\n", rows, journal.SearchTimeout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  search\tms\tfound\t")
	for _, s := range ss {
		note := ""
		if s.TooSlow {
			note = " (stopped: 422)"
		}
		fmt.Fprintf(tw, "  %s\t%.1f%s\t%d\t\n", s.Name, s.Ms, note, s.Found)
	}
	tw.Flush()
}

// runSearchOnly is `whguard-bench search [-rows N]`: a journal of its own
// pre-loaded with N rows, the searches timed, the table printed.
func runSearchOnly(args []string) int {
	fs := flag.NewFlagSet("whguard-bench search", flag.ContinueOnError)
	rows := fs.Int("rows", 5_000_000, "rows pre-loaded in the journal")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	dbURL, drop, err := testdb.Create(ctx, "bench")
	if err != nil {
		fmt.Fprintln(os.Stderr, "whguard-bench search:", err)
		return 1
	}
	defer drop()
	j, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: dbURL})
	if err == nil {
		_, err = j.Migrate(ctx)
		j.Close()
	}
	if err == nil {
		progress("pre-loading %d delivered events", *rows)
		err = preload(ctx, dbURL, *rows)
	}
	var ss []SearchTime
	if err == nil {
		ss, err = searchRun(ctx, dbURL, *rows)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "whguard-bench search:", err)
		return 1
	}
	printSearch(os.Stdout, *rows, ss)
	return 0
}
