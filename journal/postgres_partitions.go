package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// On PostgreSQL the payloads and attempts of an event live in the
// partition of the UTC day it was received (migration 0019), so retention
// drops a day at a time. Invariants:
//   - whguard_partition_days names, per parent, the contiguous range of
//     day partitions that exist; it changes only in the transaction that
//     creates or drops one, under the parent's exclusive lock, so a
//     statement that read it finds those partitions there.
//   - A row is written with its event's day when that day's partition
//     exists, else with heldDay (writeDay), so no write lacks a partition.
//   - A row is found by its event's day or heldDay (inPartitions), so a
//     look-up probes at most two partitions.
//   - Before a day is dropped, the rows still needed (rowKept) move to
//     the held partition: in batches first, then the last ones under the
//     parent's exclusive lock, which no writer or reader of the parent can
//     pass; so nothing still needed is dropped.

// The tables partitioned by day.
const (
	payloadsTable = "whguard_payloads"
	attemptsTable = "whguard_attempts"
)

// heldDay is the day of rows kept past their own day's partition: they
// live in the held partition, which takes every day before 2000.
const heldDay = "'-infinity'::date"

// partitionsAhead is how many days after today have their partitions
// created in advance, so a cleanup that fails for a while (a lock it could
// not get) leaves writes with their partitions.
const partitionsAhead = 3

// partitionLockTimeout bounds the wait for a parent's exclusive lock
// (creating or dropping a partition): writers queue behind a waiting
// lock, so a long wait would stall ingest. On timeout the step is tried
// again at the next cleanup. (Postgres.lockTimeout, for tests.)
const partitionLockTimeout = 500 * time.Millisecond

// setLockTimeout bounds tx's waits for locks by the partition lock
// timeout.
func (p *Postgres) setLockTimeout(ctx context.Context, tx pgx.Tx) error {
	d := partitionLockTimeout
	if t := p.lockTimeout.Load(); t > 0 {
		d = time.Duration(t)
	}
	_, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, d.Milliseconds()))
	return err
}

// dayOf is the partition day of an event received at ts, an SQL
// expression.
func dayOf(ts string) string { return "(" + ts + " AT TIME ZONE 'UTC')::date" }

// inPartitions is the predicate that finds alias's row of an event
// received at ts: its day's partition or the held one, nothing else.
func inPartitions(alias, ts string) string {
	return alias + ".day IN (" + dayOf(ts) + ", " + heldDay + ")"
}

// payloadOf is a LATERAL sub-query of the payload of the event row ev (an
// alias of whguard_events), as p. OFFSET 0 keeps it a sub-query run once
// per event, each run probing the two partitions inPartitions names; as a
// join the planner could hash every partition's rows.
func payloadOf(ev string) string {
	return `LATERAL (SELECT * FROM whguard_payloads p WHERE p.event_row_id = ` + ev + `.id AND ` +
		inPartitions("p", ev+".received_at") + ` OFFSET 0) p`
}

// writeDay is the day to write a row of parent with, for an event received
// at ts: its own when that partition exists, else heldDay. The two
// sub-queries are uncorrelated: read once per statement.
func writeDay(parent, ts string) string {
	return "CASE WHEN " + dayOf(ts) + ` BETWEEN (SELECT first_day FROM whguard_partition_days WHERE parent = '` + parent + `')
	                  AND (SELECT last_day FROM whguard_partition_days WHERE parent = '` + parent + `')
	THEN ` + dayOf(ts) + " ELSE " + heldDay + " END"
}

// rowKept is the condition under which a row of a partitioned table must
// outlive its day, for a cutoff $1: its event still exists and is not a
// finished one last changed before the cutoff (dead, undelivered, or
// replayed or delivered since).
const rowKept = `EXISTS (SELECT 1 FROM whguard_events ev WHERE ev.id = t.event_row_id
                     AND NOT (ev.status IN ('done', 'ignored') AND ev.updated_at < $1))`

// partitionName is the name of parent's partition for day.
func partitionName(parent string, day time.Time) string {
	return parent + "_" + day.Format("20060102")
}

// partitionColumns are each partitioned table's columns but day.
var partitionColumns = map[string]string{
	payloadsTable: "event_row_id, headers, body, path, raw_query, scheme",
	attemptsTable: "id, event_row_id, number, started_at, duration_ms, status_code, error, response_excerpt, sent_headers",
}

// sqlParentStatistics is the ALTER TABLE clause that gives a new partition
// its parent's per-column statistics targets (a partition does not inherit
// them; the migrations set them on the parent, 0015 and 0022, to keep
// large columns out of ANALYZE's samples); empty when the parent has none.
const sqlParentStatistics = `
SELECT coalesce(string_agg(format('ALTER COLUMN %I SET STATISTICS %s', attname, attstattarget), ', '), '')
FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attstattarget >= 0`

// dayRange reads parent's range of day partitions; ok is false when it
// has none.
func dayRange(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, parent string) (first, last time.Time, ok bool, err error) {
	var f, l *time.Time
	err = q.QueryRow(ctx, `SELECT first_day, last_day FROM whguard_partition_days WHERE parent = $1`, parent).Scan(&f, &l)
	if err != nil || f == nil || l == nil {
		return time.Time{}, time.Time{}, false, err
	}
	return *f, *l, true, nil
}

// utcDay is t's day in UTC, at midnight.
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// ensurePartitions creates, for each partitioned table, the day
// partitions that follow its last one up to partitionsAhead days after
// today (all of them when it has none yet, from today), in one
// transaction per table.
func (p *Postgres) ensurePartitions(ctx context.Context, today time.Time) error {
	today = utcDay(today)
	end := today.AddDate(0, 0, partitionsAhead)
	for _, parent := range []string{payloadsTable, attemptsTable} {
		if _, last, ok, err := dayRange(ctx, p.pool, parent); err == nil && ok && !last.Before(end) {
			continue // the usual case: nothing to create, no lock taken
		}
		// Creating a partition takes the parent's lock anyway; taken
		// first, the range read holds until commit.
		err := p.withParentLocked(ctx, parent, func(tx pgx.Tx, first, last time.Time, ok bool) error {
			from := today
			if ok {
				from = last.AddDate(0, 0, 1)
			} else {
				first = today
			}
			if from.After(end) {
				return nil // another replica created them
			}
			var statistics string
			if err := tx.QueryRow(ctx, sqlParentStatistics, parent).Scan(&statistics); err != nil {
				return err
			}
			for d := from; !d.After(end); d = d.AddDate(0, 0, 1) {
				if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')`,
					partitionName(parent, d), parent, d.Format(time.DateOnly), d.AddDate(0, 0, 1).Format(time.DateOnly))); err != nil {
					return err
				}
				if statistics == "" {
					continue
				}
				if _, err := tx.Exec(ctx, `ALTER TABLE `+partitionName(parent, d)+` `+statistics); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `UPDATE whguard_partition_days SET first_day = $2, last_day = $3 WHERE parent = $1`, parent, first, end)
			return err
		})
		if err != nil {
			return fmt.Errorf("create the day partitions of %s: %w", parent, err)
		}
	}
	return nil
}

// dropDays drops parent's day partitions whose whole day ends at or before
// cutoff, oldest first, after moving the rows rowKept keeps (for the same
// cutoff) to the held partition. It returns how many rows the dropped
// partitions held and how many partitions it dropped.
func (p *Postgres) dropDays(ctx context.Context, parent string, cutoff time.Time) (rows, dropped int, err error) {
	moved := 0
	defer func() {
		if moved > 0 && err == nil {
			err = p.analyzeHeld(ctx, parent)
		}
	}()
	for {
		first, _, ok, err := dayRange(ctx, p.pool, parent)
		if err != nil {
			return rows, dropped, fmt.Errorf("read the day partitions of %s: %w", parent, err)
		}
		if !ok || first.AddDate(0, 0, 1).After(cutoff) {
			return rows, dropped, nil
		}
		n, m, err := p.dropDay(ctx, parent, first, cutoff)
		moved += m
		if err != nil {
			return rows, dropped, fmt.Errorf("drop %s: %w", partitionName(parent, first), err)
		}
		rows += n
		dropped++
	}
}

// statTables lists, for ANALYZE or VACUUM, whguard_events and the
// partitions of parents that exist and whose day has begun (and the held
// ones). A partition created ahead stays unanalyzed until its day: the
// planner then assumes it holds rows and probes its index, where, analyzed
// while empty, it would scan it, and a generic plan made that way would
// go on scanning it as it fills. Parents themselves are not named: on
// PostgreSQL before 17, analyzing one analyzes every partition.
func (p *Postgres) statTables(ctx context.Context, parents ...string) ([]string, error) {
	tables := []string{"whguard_events"}
	today := utcDay(p.now())
	for _, parent := range parents {
		tables = append(tables, parent+"_held")
		first, last, ok, err := dayRange(ctx, p.pool, parent)
		if err != nil {
			return nil, err
		}
		for d := first; ok && !d.After(last) && !d.After(today); d = d.AddDate(0, 0, 1) {
			tables = append(tables, partitionName(parent, d))
		}
	}
	return tables, nil
}

// analyzeHeld analyzes parent's held partition after rows moved there, so
// the hot statements' generic plans, made while it was small, are made
// again for its size (postgres_plans.go).
func (p *Postgres) analyzeHeld(ctx context.Context, parent string) error {
	_, err := p.pool.Exec(ctx, `ANALYZE `+parent+`_held`)
	return err
}

// dropDay moves the kept rows of parent's partition for day to the held
// partition and drops it; it returns how many rows it dropped and how many
// it moved.
func (p *Postgres) dropDay(ctx context.Context, parent string, day, cutoff time.Time) (dropped, moved int, err error) {
	part := partitionName(parent, day)
	// Most of the kept rows move in batches, each its own transaction,
	// while ingest goes on; the last ones move under the lock below.
	for {
		tag, err := p.pool.Exec(ctx, moveKeptSQL(parent, part, true), cutoff, cleanupBatch)
		if err != nil {
			return 0, moved, err
		}
		moved += int(tag.RowsAffected())
		if tag.RowsAffected() < cleanupBatch {
			break
		}
	}
	// Counted before the lock, which must stay short: an index-only count
	// of a partition nothing writes any more (its day is over).
	var n int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM `+part).Scan(&n); err != nil {
		return 0, moved, err
	}
	// The parent locked first, as every statement on it locks it: then
	// no statement reads or writes this day until it is gone.
	err = p.withParentLocked(ctx, parent, func(tx pgx.Tx, first, last time.Time, ok bool) error {
		if !ok || !first.Equal(day) {
			return errPartitionMoved // another replica dropped it
		}
		tag, err := tx.Exec(ctx, moveKeptSQL(parent, part, false), cutoff)
		if err != nil {
			return err
		}
		n -= int(tag.RowsAffected())
		moved += int(tag.RowsAffected())
		if _, err := tx.Exec(ctx, `DROP TABLE `+part); err != nil {
			return err
		}
		if day.Equal(last) {
			_, err = tx.Exec(ctx, `UPDATE whguard_partition_days SET first_day = NULL, last_day = NULL WHERE parent = $1`, parent)
		} else {
			_, err = tx.Exec(ctx, `UPDATE whguard_partition_days SET first_day = $2 WHERE parent = $1`, parent, day.AddDate(0, 0, 1))
		}
		return err
	})
	if errors.Is(err, errPartitionMoved) {
		return 0, moved, nil
	}
	return max(n, 0), moved, err
}

// withParentLocked runs fn in a transaction holding parent's exclusive
// lock (waiting at most the partition lock timeout), with its range of
// day partitions as it stands under that lock.
func (p *Postgres) withParentLocked(ctx context.Context, parent string, fn func(tx pgx.Tx, first, last time.Time, ok bool) error) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := p.setLockTimeout(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+parent+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			return err
		}
		first, last, ok, err := dayRange(ctx, tx, parent)
		if err != nil {
			return err
		}
		return fn(tx, first, last, ok)
	})
}

// errPartitionMoved ends a drop whose partition another replica dropped
// first.
var errPartitionMoved = errors.New("the partition was dropped meanwhile")

// moveKeptSQL moves rows of partition part that rowKept keeps (cutoff $1)
// to parent's held partition: at most $2 of them when batch.
func moveKeptSQL(parent, part string, batch bool) string {
	limit := ""
	if batch {
		limit = " LIMIT $2"
	}
	cols := partitionColumns[parent]
	return `
WITH kept AS (
    SELECT t.ctid FROM ` + part + ` t WHERE ` + rowKept + limit + `
), moved AS (
    DELETE FROM ` + part + ` t USING kept WHERE t.ctid = kept.ctid
    RETURNING ` + cols + `
)
INSERT INTO ` + parent + ` (` + cols + `, day)
SELECT ` + cols + `, ` + heldDay + ` FROM moved`
}
