package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
)

// longDrainTimeout bounds the wait for deliveries after a long run.
const longDrainTimeout = 10 * time.Minute

// preloadBatch is the rows inserted per statement while pre-loading.
const preloadBatch = 100_000

// Long is what the -long runs measured.
type Long struct {
	Memory *MemoryRun `json:"memory,omitempty"`
	// Empty and Preloaded are the same throughput and backlog runs of
	// whguard-pg on an empty journal and on one pre-loaded with
	// PreloadRows delivered events.
	Empty          *JournalRun `json:"empty,omitempty"`
	Preloaded      *JournalRun `json:"preloaded,omitempty"`
	PreloadRows    int         `json:"preload_rows"`
	PreloadSeconds float64     `json:"preload_seconds"`
	// Retention expires a day of events by DELETE and by dropping
	// partitions (retention.go).
	Retention *Retention `json:"retention,omitempty"`
	Failed    string     `json:"failed,omitempty"`
}

// MemoryRun is whguard-pg taking many events in one process lifetime.
type MemoryRun struct {
	Result
	// RSS samples whguard's resident set every second.
	RSS []RSSSample `json:"rss"`
}

// RSSSample is one resident-set reading.
type RSSSample struct {
	Seconds float64 `json:"seconds"`
	MB      float64 `json:"mb"`
}

// JournalRun is one journal state's ingest and lease figures.
type JournalRun struct {
	Rows       int     `json:"rows"`
	Throughput Result  `json:"throughput"`
	Backlog    Backlog `json:"backlog"`
	// Search times the inspector's searches on the pre-loaded journal.
	Search []SearchTime `json:"search,omitempty"`
}

// long runs the memory run and the pre-load comparison on whguard-pg.
func (h *harness) long(ctx context.Context) *Long {
	lh := *h
	lh.opts.drainTimeout = max(h.opts.drainTimeout, longDrainTimeout)
	l := &Long{PreloadRows: h.opts.preloadRows}
	if h.opts.longEvents > 0 {
		progress("long: %d requests through whguard-pg in one process (signed as sent), RSS sampled every second", h.opts.longEvents)
		m, err := lh.memoryRun(ctx)
		if err != nil {
			l.Failed = err.Error()
			return l
		}
		l.Memory = m
		progress("  %s", oneLine(m.Result))
	}
	if h.opts.retentionEvents > 0 {
		l.Retention = h.retention(ctx, h.opts.retentionEvents, h.opts.retentionDays, h.opts.retentionBudget)
	}
	if h.opts.preloadRows <= 0 {
		return l
	}
	for _, rows := range []int{0, h.opts.preloadRows} {
		if ctx.Err() != nil {
			l.Failed = ctx.Err().Error()
			return l
		}
		jr, secs, err := lh.journalRun(ctx, rows)
		if err != nil {
			l.Failed = err.Error()
			return l
		}
		if rows == 0 {
			l.Empty = jr
		} else {
			l.Preloaded, l.PreloadSeconds = jr, secs
		}
	}
	return l
}

// memoryRun sends h.opts.longEvents requests through one whguard-pg.
func (h *harness) memoryRun(ctx context.Context) (*MemoryRun, error) {
	dbURL, drop, err := h.database(ctx, serverWhguardPG)
	if err != nil {
		return nil, err
	}
	defer drop()
	m := &MemoryRun{Result: Result{Server: serverWhguardPG, Mode: "memory", Senders: h.opts.senders}}
	sg := newSigner("mem")
	src := lazy{s: sg, n: h.opts.longEvents}
	s, err := h.open(ctx, serverWhguardPG, dbURL, sg, src.Uniques(), false, 0)
	if err != nil {
		return nil, err
	}
	defer s.close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t0 := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, rss, err := s.t.proc.memory(); err == nil {
					m.RSS = append(m.RSS, RSSSample{Seconds: time.Since(t0).Seconds(), MB: float64(rss) / (1 << 20)})
					if len(m.RSS)%30 == 0 {
						progress("  %.0f s: whguard RSS %.0f MB", time.Since(t0).Seconds(), float64(rss)/(1<<20))
					}
				}
			}
		}
	})
	h.drive(ctx, s, src, h.opts.senders, &m.Result, func(l *load) {
		runClosed(ctx, l, h.opts.senders, 0, 24*time.Hour) // until the requests run out
	})
	close(stop)
	wg.Wait()
	return m, nil
}

// journalRun measures ingest (throughput run) and lease (backlog run)
// rates of whguard-pg on a journal pre-loaded with rows delivered events.
func (h *harness) journalRun(ctx context.Context, rows int) (*JournalRun, float64, error) {
	dbURL, drop, err := testdb.Create(ctx, "bench")
	if err != nil {
		return nil, 0, err
	}
	defer drop()
	var secs float64
	if rows > 0 {
		progress("long: pre-loading %d delivered events into the journal", rows)
		t0 := time.Now()
		if err := h.migrateWhguard(ctx, dbURL); err != nil {
			return nil, 0, err
		}
		if err := preload(ctx, dbURL, rows); err != nil {
			return nil, 0, err
		}
		secs = time.Since(t0).Seconds()
		progress("  pre-loaded in %.0f s", secs)
	}
	jr := &JournalRun{Rows: rows}
	if rows > 0 {
		progress("long: searches on a journal of %d rows", rows)
		if jr.Search, err = searchRun(ctx, dbURL, rows); err != nil {
			return nil, 0, err
		}
	}
	progress("long: throughput on a journal of %d rows", rows)
	jr.Throughput = h.throughputOn(ctx, serverWhguardPG, dbURL, h.capacity(0))
	progress("  %s", oneLine(jr.Throughput))
	if h.opts.backlog > 0 {
		progress("long: backlog drain on a journal of %d rows", rows)
		jr.Backlog = h.backlogOn(ctx, serverWhguardPG, dbURL, backlogSpec{events: h.opts.backlog})
		progress("  %.0f deliveries/s%s", jr.Backlog.PerSec, failedSuffix(jr.Backlog.Failed))
	}
	return jr, secs, nil
}

// preloadSQL inserts delivered events $1..$2 of $5 with one shared
// payload, received one every half second up to now, of five types (plus a
// rare one every 100 000). It writes whguard's tables directly (schema of
// journal/migrations), as a journal that has run for a long time would
// hold them.
const preloadSQL = `WITH e AS (
	INSERT INTO whguard_events (provider, event_id, event_type, content_hash, status, attempts,
	                            next_attempt_at, received_at, updated_at)
	SELECT 'bench', 'pre_' || g,
	       CASE WHEN g % 100000 = 0 THEN 'charge.refunded'
	            ELSE (ARRAY['order.created', 'order.paid', 'invoice.created', 'invoice.paid', 'customer.updated'])[1 + g % 5] END,
	       'sha256:' || md5(g::text) || md5((-g)::text), 'done', 1,
	       now(), now() - make_interval(secs => ($5::bigint - g) * 0.5), now() - make_interval(secs => ($5::bigint - g) * 0.5)
	FROM generate_series($1::bigint, $2::bigint) AS g
	RETURNING id)
INSERT INTO whguard_payloads (event_row_id, headers, body, path)
SELECT id, $3::jsonb, $4::bytea, '/webhooks/bench' FROM e`

// preload fills the journal at dbURL with rows delivered events, then
// vacuums and analyzes it as autovacuum eventually would.
func preload(ctx context.Context, dbURL string, rows int) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	body := newSigner("pre").body(0)
	headers := `{"Content-Type":["application/json"],"Webhook-Id":["pre"],"Webhook-Timestamp":["1767225600"]}`
	for from := 1; from <= rows; from += preloadBatch {
		to := min(from+preloadBatch-1, rows)
		if _, err := conn.Exec(ctx, preloadSQL, from, to, headers, body, rows); err != nil {
			return fmt.Errorf("pre-load rows %d–%d (has the journal schema changed?): %w", from, to, err)
		}
		if to%1_000_000 == 0 || to == rows {
			progress("  %d rows", to)
		}
	}
	for _, table := range []string{"whguard_events", "whguard_payloads"} {
		if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+table); err != nil {
			return fmt.Errorf("vacuum %s: %w", table, err)
		}
	}
	return nil
}

// print writes the long runs' section of the report.
func (l *Long) print(w io.Writer) {
	fmt.Fprintf(w, "\nLONG RUNS\n")
	if m := l.Memory; m != nil {
		fmt.Fprintf(w, "memory: %d requests through one whguard-pg (%d senders, signed as sent): %.0f acks/s over %.0f s, %d errors, peak RSS %.0f MB\n",
			m.Requests, m.Senders, m.AcksPerSec, m.Seconds, m.Errors, m.PeakRSSMB)
		if d := m.Deliveries; d != nil {
			fmt.Fprintf(w, "  delivered %d/%d (%.0f/s, drain %.1f s after the load), e2e p50 %.2f ms p99 %.2f ms\n",
				d.Received, d.Expected, d.PerSec, d.DrainSeconds, d.E2E.P50, d.E2E.P99)
		}
		if n := len(m.RSS); n > 0 {
			fmt.Fprintf(w, "  RSS MB at 10/25/50/75/100 %% of the run:")
			for _, q := range []float64{0.1, 0.25, 0.5, 0.75, 1} {
				fmt.Fprintf(w, " %.0f", m.RSS[min(n-1, int(q*float64(n)))].MB)
			}
			fmt.Fprintln(w)
		}
	}
	if l.Empty != nil && l.Preloaded != nil {
		fmt.Fprintf(w, "journal size (pre-load of %d delivered events took %.0f s):\n", l.PreloadRows, l.PreloadSeconds)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  rows before\tacks/s\tack p99 ms\terrors\tdeliveries/s under load\tbacklog deliveries/s\t")
		for _, jr := range []*JournalRun{l.Empty, l.Preloaded} {
			var under float64
			if d := jr.Throughput.Deliveries; d != nil {
				under = d.PerSec
			}
			fmt.Fprintf(tw, "  %d\t%.0f\t%s\t%d\t%.0f\t%.0f\t\n", jr.Rows, jr.Throughput.AcksPerSec, ms(jr.Throughput.Ack.P99),
				jr.Throughput.Errors, under, jr.Backlog.PerSec)
		}
		tw.Flush()
	}
	if l.Preloaded != nil && len(l.Preloaded.Search) > 0 {
		printSearch(w, l.Preloaded.Rows, l.Preloaded.Search)
	}
	if l.Retention != nil {
		l.Retention.print(w)
	}
	if l.Failed != "" {
		fmt.Fprintf(w, "FAILED: %s\n", l.Failed)
	}
}

// targets evaluates the long runs' goals.
func (l *Long) targets() []Target {
	var ts []Target
	t := Target{Name: "whguard-pg peak RSS over the long run", Goal: "< 150 MB, bounded", Status: statusNA}
	if m := l.Memory; m != nil {
		t.Value = fmt.Sprintf("%.0f MB after %d requests", m.PeakRSSMB, m.Requests)
		if n := len(m.RSS); n >= 4 {
			t.Value += fmt.Sprintf(" (RSS %.0f MB at a quarter of the run, %.0f MB at the end)", m.RSS[n/4].MB, m.RSS[n-1].MB)
		}
		t.Status = verdict(true, m.PeakRSSMB < 150)
	}
	ts = append(ts, t)
	ratio := func(name string, empty, loaded float64) Target {
		t := Target{Name: name, Goal: "≥ 0.80× of an empty journal", Status: statusNA}
		if empty > 0 && l.Preloaded != nil {
			x := loaded / empty
			t.Value = fmt.Sprintf("%.2f× (%.0f vs %.0f/s)", x, loaded, empty)
			t.Status = verdict(true, x >= 0.8)
		}
		return t
	}
	if l.Empty != nil && l.Preloaded != nil {
		rows := humanCount(l.PreloadRows)
		ts = append(ts,
			ratio("ingest acks/s with "+rows+" rows pre-loaded", l.Empty.Throughput.AcksPerSec, l.Preloaded.Throughput.AcksPerSec),
			ratio("lease (backlog drain) rate with "+rows+" rows pre-loaded", l.Empty.Backlog.PerSec, l.Preloaded.Backlog.PerSec))
	}
	return ts
}

// humanCount writes 5000000 as 5M and 200000 as 200k.
func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
