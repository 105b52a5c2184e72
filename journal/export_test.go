package journal

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// HotConns acquires every idle connection of the ingest and queue pools
// (tests inspect their prepared statements); release each when done.
func HotConns(ctx context.Context, p *Postgres) []*pgxpool.Conn {
	return append(p.ingest.AcquireAllIdle(ctx), p.queue.AcquireAllIdle(ctx)...)
}

// GrowthAnalyzes reports how many ANALYZEs the store ran as it grew, and
// whether one is running.
func GrowthAnalyzes(p *Postgres) (done int64, running bool) {
	return p.growth.analyzes.Load(), p.growth.running.Load()
}

// WriterSynchronous reads the embedded journal's writer connection's
// synchronous setting (1 NORMAL, 2 FULL) between transactions.
func WriterSynchronous(ctx context.Context, s *SQLite) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var v int
	err := s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&v)
	return v, err
}

// SQLiteReap is the embedded journal's reap statement, for plan tests.
const SQLiteReap = sqliteReap

// ListBounded lists with a bound of the test's choosing instead of
// SearchTimeout.
func ListBounded(ctx context.Context, s Store, f Filter, bound time.Duration) ([]Summary, int64, error) {
	return listBounded(ctx, s.(dialect), f, bound)
}

// AttemptRows counts an event's rows in whguard_attempts, on either store.
func AttemptRows(ctx context.Context, s Store, eventRowID int64) (n int64, err error) {
	const q = `SELECT count(*) FROM whguard_attempts WHERE event_row_id = `
	switch st := s.(type) {
	case *Postgres:
		err = st.pool.QueryRow(ctx, q+`$1`, eventRowID).Scan(&n)
	case *SQLite:
		err = st.r.QueryRowContext(ctx, q+`?`, eventRowID).Scan(&n)
	}
	return n, err
}

// PlannedStatements are the PostgreSQL statements whose plans justify the
// indexes of the hot tables (TestIndexesAreJustified).
var PlannedStatements = map[string]string{
	"lease":        sqlLease,
	"outcome":      sqlComplete,
	"existing":     sqlExistingByKey,
	"guard":        sqlExistingByGuard,
	"expired":      sqlExpiredRows,
	"counts":       sqlStatusCounts,
	"cleanup":      sqlCleanupEvents,
	"unpark-heads": sqlUnparkHeads,
	"window":       sqlWindowIDs,
	"attempts":     pgAttemptsOf,
	"append":       sqlAppendOrdered.insert,
	"append-plain": sqlAppend.insert, // a batch without an ordered event
}

// FailoverIdle reports that no check for a new primary is running.
func FailoverIdle(p *Postgres) bool { return !p.failover.checking.Load() }

// SetPartitionLockTimeout replaces how long creating or dropping a
// partition waits for its parent's lock.
func SetPartitionLockTimeout(p *Postgres, d time.Duration) { p.lockTimeout.Store(int64(d)) }

// AnalyzeHotTables runs the growth ANALYZE once.
func AnalyzeHotTables(ctx context.Context, p *Postgres) error {
	_, err := p.analyzeHotTables(ctx)
	return err
}

// CleanupLockKey is the advisory lock the cleaning replica holds.
const CleanupLockKey = cleanupLockKey
