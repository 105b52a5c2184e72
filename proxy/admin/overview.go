package admin

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/whguard/whguard/journal"
)

// OverviewSource is what GET /api/overview reads from the journal.
type OverviewSource interface {
	Stats(ctx context.Context) (journal.Stats, error)
	Minutes(ctx context.Context, since time.Time) ([]journal.Minute, error)
}

var _ OverviewSource = (*journal.Postgres)(nil)

// Bounds of ?window= on GET /api/overview.
const (
	defaultOverviewWindow = time.Hour
	maxOverviewWindow     = 24 * time.Hour
)

// OverviewMinute is one minute of the overview's series (or the totals of
// its window); the latencies are null where nothing was delivered.
type OverviewMinute struct {
	At           time.Time `json:"at"`
	Delivered    int64     `json:"delivered"`
	Failed       int64     `json:"failed"`
	Dead         int64     `json:"dead"`
	LatencyP50Ms *float64  `json:"latency_p50_ms"`
	LatencyP99Ms *float64  `json:"latency_p99_ms"`
}

// Overview is the answer of GET /api/overview.
type Overview struct {
	Window string    `json:"window"`
	At     time.Time `json:"at"`
	// Counts are the events by status (done is an estimate on a large
	// PostgreSQL journal).
	Counts map[journal.Status]int `json:"counts"`
	// OldestPendingAgeSeconds is the age of the oldest event not yet
	// delivered, 0 when none waits.
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// BlockedKeys counts, per provider, the order keys held by a dead
	// event under ORDER_ON_DEAD=block (each stops its key's later events
	// until it is replayed or skipped).
	BlockedKeys map[string]int `json:"blocked_keys"`
	// Totals adds up the window's minutes.
	Totals OverviewMinute `json:"totals"`
	// Minutes has one entry per minute of the window, oldest first,
	// every replica's figures added together.
	Minutes []OverviewMinute `json:"minutes"`
	// Journal is the journal's replication, on PostgreSQL only.
	Journal *OverviewJournal `json:"journal,omitempty"`
	// Backends is GET /api/backends (state, breaker, pause, backlog per
	// backend), absent without a forwarder.
	Backends any `json:"backends,omitempty"`
}

func (a *api) overview(w http.ResponseWriter, r *http.Request) {
	if a.overviewSrc == nil {
		apiError(w, http.StatusNotFound, "no overview in this process")
		return
	}
	window := defaultOverviewWindow
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > maxOverviewWindow {
			apiError(w, http.StatusBadRequest, "window must be a duration from 1m to 24h, e.g. 15m or 1h")
			return
		}
		window = d.Truncate(time.Minute)
	}
	ctx := r.Context()
	now := time.Now().UTC()
	stats, err := a.overviewSrc.Stats(ctx)
	if err != nil {
		a.unavailable(w, err)
		return
	}
	last := now.Truncate(time.Minute)
	first := last.Add(-window + time.Minute)
	rows, err := a.overviewSrc.Minutes(ctx, first)
	if err != nil {
		a.unavailable(w, err)
		return
	}
	out := Overview{Window: windowText(window), At: now, Counts: stats.ByStatus, BlockedKeys: stats.BlockedKeys}
	if stats.SynchronousStandbys != nil {
		out.Journal = &OverviewJournal{SynchronousStandbys: *stats.SynchronousStandbys}
	}
	if out.BlockedKeys == nil {
		out.BlockedKeys = map[string]int{}
	}
	for _, age := range stats.OldestUndelivered {
		out.OldestPendingAgeSeconds = math.Max(out.OldestPendingAgeSeconds, age.Seconds())
	}
	byMinute := map[time.Time]*journal.Minute{}
	var total journal.Minute
	for _, m := range rows {
		k := m.Minute.UTC()
		if k.After(last) {
			continue // a replica whose clock runs ahead: not in this window yet
		}
		if byMinute[k] == nil {
			byMinute[k] = &journal.Minute{Minute: k}
		}
		byMinute[k].Add(m)
		total.Add(m)
	}
	for at := first; !at.After(last); at = at.Add(time.Minute) {
		m := byMinute[at]
		if m == nil {
			m = &journal.Minute{Minute: at}
		}
		out.Minutes = append(out.Minutes, minuteView(at, *m))
	}
	out.Totals = minuteView(first, total)
	if a.control != nil {
		if b, err := a.control.Backends(ctx); err == nil {
			out.Backends = b
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// OverviewJournal is the overview's view of the journal's replication.
type OverviewJournal struct {
	// SynchronousStandbys counts the primary's standbys in sync or quorum
	// state; -1 when unknown (not read yet, or the role cannot read
	// pg_stat_replication).
	SynchronousStandbys int `json:"synchronous_standbys"`
}

// windowText writes a whole number of minutes as 15m, 1h or 1h30m.
func windowText(d time.Duration) string {
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case h == 0:
		return strconv.Itoa(m) + "m"
	case m == 0:
		return strconv.Itoa(h) + "h"
	}
	return strconv.Itoa(h) + "h" + strconv.Itoa(m) + "m"
}

func minuteView(at time.Time, m journal.Minute) OverviewMinute {
	v := OverviewMinute{At: at, Delivered: m.Delivered, Failed: m.Failed, Dead: m.Dead}
	if p, ok := m.Percentile(0.5); ok {
		v.LatencyP50Ms = ms(p)
	}
	if p, ok := m.Percentile(0.99); ok {
		v.LatencyP99Ms = ms(p)
	}
	return v
}

func ms(d time.Duration) *float64 {
	f := math.Round(float64(d)/float64(time.Millisecond)*10) / 10
	return &f
}
