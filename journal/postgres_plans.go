package journal

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Query plans. PostgreSQL plans a prepared statement either for each
// execution (a custom plan, for its parameters and the table as it is) or
// once per connection (a generic plan, kept until the statistics of a
// table it reads change). Planning whguard's hot statements every time
// cost about 30 % of PostgreSQL's CPU under load (perf, BENCHMARKS.md), so
// the ingest and queue pools run generic plans (plan_cache_mode=
// force_generic_plan) and the general pool, whose inspector queries take
// optional filters that a generic plan cannot prune, keeps custom plans.
//
// A generic plan is only as good as the statistics it was built from, and
// whguard's tables start empty and grow by thousands of rows a second: a
// plan built while the journal was nearly empty scanned whole tables long
// after they had grown (measured: an append, lease or outcome doing a
// sequential scan of 60 000 rows, a 95 ms lease, deliveries down from
// 8 700/s to 1 200/s until the next ANALYZE). So a process that appends
// analyzes the journal's two hot tables itself each time the rows it has
// appended since reach the table's size at the last analyze (at 1 000, then
// about every doubling): an ANALYZE updates the statistics and makes every
// session, on every replica, re-plan the statements that read those tables.
// A table that only doubles a few times costs a few ANALYZEs (each samples
// at most 30 000 rows); after that, autovacuum's (or whguard's own vacuum's)
// ANALYZE keeps the statistics current.

// firstAnalyzeAt is how many new events a process appends before its first
// ANALYZE of the hot tables.
const firstAnalyzeAt = 1000

// smallSampleUntil is the estimated size of the events table under which
// a growth ANALYZE samples 3 000 rows (statistics target 10) instead of the
// default 30 000: at 26 000 events, 25 against 107 ms for the events
// table alone (BENCHMARKS.md).
const smallSampleUntil = 100_000

// sqlEventsEstimate is the planner's estimate of the events table's rows.
const sqlEventsEstimate = `SELECT greatest(reltuples, 0)::float8 FROM pg_class WHERE oid = 'whguard_events'::regclass`

// growth counts the events this process appended and when to analyze next.
type growth struct {
	appended atomic.Int64
	next     atomic.Int64 // 0 means firstAnalyzeAt
	running  atomic.Bool
	analyzes atomic.Int64 // completed, for tests and logs
}

// grew records n newly appended events and starts an ANALYZE in the
// background when they reach the next threshold (never two at once).
func (p *Postgres) grew(n int) {
	g := &p.growth
	total := g.appended.Add(int64(n))
	next := g.next.Load()
	if next == 0 {
		next = firstAnalyzeAt
	}
	if total < next || !g.running.CompareAndSwap(false, true) {
		return
	}
	started := p.goBackground(func() {
		defer g.running.Store(false)
		ctx, cancel := context.WithTimeout(p.bg, time.Minute)
		defer cancel()
		rows, err := p.analyzeHotTables(ctx)
		if err != nil {
			// Try again after as many events again.
			g.next.Store(total + max(total, firstAnalyzeAt))
			if p.bg.Err() == nil {
				p.log.Warn("analyze the journal as it grows", zap.Error(err))
			}
			return
		}
		// At least twice what this process has appended: an ANALYZE that
		// changed nothing (a user that does not own the tables only gets
		// a warning) is not retried every thousand events.
		g.next.Store(total + max(rows, total, firstAnalyzeAt))
		g.analyzes.Add(1)
	})
	if !started {
		g.running.Store(false)
	}
}

// analyzeHotTables analyzes the tables the hot statements read and returns
// the events table's estimated row count.
func (p *Postgres) analyzeHotTables(ctx context.Context) (int64, error) {
	start := time.Now()
	tables, err := p.statTables(ctx, payloadsTable)
	if err != nil {
		return 0, err
	}
	var rows float64
	if err := p.pool.QueryRow(ctx, sqlEventsEstimate).Scan(&rows); err != nil {
		return 0, err
	}
	// While the journal is small, a sample of a tenth the default size:
	// what these ANALYZEs are for is the tables' size, which decides
	// whether the hot statements' plans use the indexes, and a new
	// journal pays each of them on its way up. Larger, the default
	// sample, as the server's own ANALYZE takes. A transaction per table
	// (for SET LOCAL): one for all would hold every table's lock until
	// the last is analyzed, and retention's lock of the payloads' parent
	// (and the appends behind it) would wait for all of them.
	for _, table := range tables {
		err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if rows < smallSampleUntil {
				if _, err := tx.Exec(ctx, `SET LOCAL default_statistics_target = 10`); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `ANALYZE `+table)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	if err := p.pool.QueryRow(ctx, sqlEventsEstimate).Scan(&rows); err != nil {
		return 0, err
	}
	p.log.Debug("analyzed the journal as it grew", zap.Float64("rows", rows), zap.Duration("took", time.Since(start)))
	return int64(rows), nil
}
