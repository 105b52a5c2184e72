package journal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// cleanupLockKey makes the PostgreSQL cleanup leader-only: among replicas
// sharing a database, one cleans at a time.
const cleanupLockKey int64 = 0x776867636c6e // "whgcln"

// Cleanup applies retention. It deletes done (and ignored) events last
// changed before keysBefore, one batch at a time; it creates the day
// partitions ahead and drops those of payloads whose day ended before
// payloadsBefore and of attempts whose day ended before keysBefore,
// after moving the rows still needed to the held partitions
// (postgres_partitions.go); and it deletes held payloads of done events
// last changed before payloadsBefore. Dead events are quarantine and are
// never deleted; pending, retry and processing ones are never touched. Only
// one replica deletes and drops at a time; the others' batches delete
// nothing and they drop no day. It
// then vacuums the hot tables when the server does not (vacuumIfNeeded).
// A step that fails (a lock not had in time) does not stop the others.
func (p *Postgres) Cleanup(ctx context.Context, keysBefore, payloadsBefore time.Time) (Cleaned, error) {
	var errs []error
	if err := p.ensurePartitions(ctx, p.now()); err != nil {
		errs = append(errs, err)
	}
	c, err := cleanup(ctx, p, keysBefore, payloadsBefore)
	if err != nil {
		return c, errors.Join(append(errs, err)...)
	}
	// Days are dropped by the replica holding the cleanup lock, as events
	// are deleted: two replicas moving a day's kept rows with cutoffs of
	// their own, beside the other's deletes, left held rows of deleted
	// events, and waited on each other's row locks under the parent's.
	err = p.asSessionLeader(ctx, cleanupLockKey, func(sessionConn) error {
		for _, d := range []struct {
			parent string
			cutoff time.Time
			rows   *int
		}{{payloadsTable, payloadsBefore, &c.Payloads}, {attemptsTable, keysBefore, new(int)}} {
			rows, dropped, err := p.dropDays(ctx, d.parent, d.cutoff)
			*d.rows += rows
			c.Partitions += dropped
			if err != nil {
				errs = append(errs, fmt.Errorf("retention: %w", err))
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("retention: %w", err))
	}
	if err := p.vacuumIfNeeded(ctx); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

func (p *Postgres) cleanupEvents(ctx context.Context, before time.Time, n int) (int, error) {
	var deleted int
	err := p.asCleaner(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, sqlCleanupEvents, before, n).Scan(&deleted)
	})
	return deleted, err
}

func (p *Postgres) cleanupPayloads(ctx context.Context, before time.Time, n int) (int, error) {
	var dropped int
	err := p.asCleaner(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlCleanupPayloads, before, n)
		dropped = int(tag.RowsAffected())
		return err
	})
	return dropped, err
}

// asCleaner runs fn in a transaction holding the cleanup lock, or does
// nothing when another replica holds it.
func (p *Postgres) asCleaner(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var leader bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, cleanupLockKey).Scan(&leader); err != nil || !leader {
			return err // another replica is cleaning
		}
		return fn(tx)
	})
}

// vacuumLockKey makes whguard's own VACUUM leader-only across replicas.
const vacuumLockKey int64 = 0x776867766163 // "whgvac"

// vacuumIfNeeded vacuums the hot tables when the server's autovacuum is off
// (or when PostgresConfig.AlwaysVacuum asks): every lease and outcome
// leaves a dead row version, and without vacuum the ready index fills
// with dead entries that every lease must walk. Measured here after a
// burst of 900 000 events with autovacuum off: 1.1 M dead tuples, a 10 ms
// lease, 500 deliveries/s.
func (p *Postgres) vacuumIfNeeded(ctx context.Context) error {
	if !p.alwaysVacuum {
		var av string
		if err := p.pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&av); err != nil {
			return fmt.Errorf("read autovacuum setting: %w", err)
		}
		if av == "on" {
			return nil
		}
		if p.warnedVacuum.CompareAndSwap(false, true) {
			p.log.Warn("PostgreSQL autovacuum is off: whguard vacuums its hot tables itself every minute; turn autovacuum on")
		}
	}
	tables, err := p.statTables(ctx, payloadsTable, attemptsTable)
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	vacuum := `VACUUM (ANALYZE, SKIP_LOCKED) ` + strings.Join(tables, ", ")
	// Behind a pooler with no direct connection there is no session lock,
	// and none is needed for safety: SKIP_LOCKED passes over a table
	// another replica is vacuuming.
	err = p.asSessionLeader(ctx, vacuumLockKey, func(conn sessionConn) error {
		if _, err := conn.Exec(ctx, vacuum); err != nil {
			return fmt.Errorf("vacuum hot tables: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// sessionConn is a connection that keeps a session (a session lock).
type sessionConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// asSessionLeader runs fn holding the session advisory lock key on a
// connection of its own, or does nothing when another replica holds it.
// Behind a pooler with no direct connection (no session to hold a lock)
// it runs fn on the pool, unlocked.
func (p *Postgres) asSessionLeader(ctx context.Context, key int64, fn func(conn sessionConn) error) error {
	var conn sessionConn
	switch {
	case !p.hasSession():
		return fn(p.pool)
	case p.listenConfig != nil:
		c, err := p.sessionConn(ctx)
		if err != nil {
			return err
		}
		defer closeSession(ctx, c)
		conn = c
	default:
		c, err := p.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("acquire connection: %w", err)
		}
		defer c.Release()
		conn = c
	}
	var leader bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&leader); err != nil || !leader {
		return err // another replica holds it
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key)
	return fn(conn)
}

// sqlCleanupEvents deletes old done (and ignored) events with their held
// payloads and attempts (which have no foreign key on PostgreSQL:
// migration 0004; those in day partitions go with their day, at most a
// day later); conflicts and replays go by ON DELETE CASCADE.
const sqlCleanupEvents = `
WITH gone AS (
    DELETE FROM whguard_events ev
    WHERE ev.id IN (
        SELECT id FROM whguard_events
        WHERE status IN ('done', 'ignored') AND updated_at < $1
        ORDER BY updated_at, id LIMIT $2
        FOR UPDATE SKIP LOCKED)
      -- Re-checked on the row as locked: a replay that got there first
      -- (status retry now) must not lose its event.
      AND ev.status IN ('done', 'ignored') AND ev.updated_at < $1
    RETURNING ev.id
), payloads AS (
    DELETE FROM whguard_payloads WHERE day = '-infinity' AND event_row_id IN (SELECT id FROM gone)
), attempts AS (
    DELETE FROM whguard_attempts WHERE day = '-infinity' AND event_row_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone`

// sqlCleanupPayloads drops old done (and ignored) payloads of the held
// partition (the others go with their day). The event row is locked
// (skipping rows a replay holds) and its state re-checked, so a replay and
// this cleanup never both succeed on one event: a replay that waited for
// this lock then finds no payload and refuses (Replay locks the payload).
const sqlCleanupPayloads = `
DELETE FROM whguard_payloads p
USING whguard_events ev
WHERE p.day = '-infinity' AND p.event_row_id = ev.id AND ev.status IN ('done', 'ignored') AND ev.updated_at < $1
  AND ev.id IN (
    SELECT e.id FROM whguard_events e JOIN whguard_payloads pp ON pp.event_row_id = e.id AND pp.day = '-infinity'
    WHERE e.status IN ('done', 'ignored') AND e.updated_at < $1 ORDER BY e.updated_at, e.id LIMIT $2
    FOR UPDATE OF e SKIP LOCKED)`
