package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// Statements is what PostgreSQL spent on one closed-loop run, statement
// by statement, read from pg_stat_statements for the run's own database
// (every run has a fresh one, so nothing else is counted). Only a server
// that loads the extension (shared_preload_libraries) has it: `make
// bench-statements` runs the closed loops on a throwaway PostgreSQL that
// does.
type Statements struct {
	// Events is the distinct events the run journaled: every figure per
	// event is over it, warm-up and the drain after the load included.
	Events int64 `json:"events"`
	// ExecMs is the execution time of every statement of the run.
	ExecMs     float64     `json:"exec_ms"`
	WALRecords int64       `json:"wal_records"`
	WALBytes   int64       `json:"wal_bytes"`
	Top        []Statement `json:"top"`
	// WAL is the whole server's WAL over the run by record type, read
	// with pg_walinspect: what the statements' totals are made of, commit
	// records, index splits, pruning and autovacuum included.
	WAL []WALType `json:"wal_by_type,omitempty"`
	// Tables are the run's row writes per table (pg_stat_user_tables),
	// HOT updates among them.
	Tables []TableWrites `json:"tables,omitempty"`
}

// TableWrites is one table's row writes over a run.
type TableWrites struct {
	Table      string `json:"table"`
	Inserts    int64  `json:"inserts"`
	Updates    int64  `json:"updates"`
	HOTUpdates int64  `json:"hot_updates"`
	Deletes    int64  `json:"deletes"`
}

// WALType is one WAL record type's count and size over a run.
type WALType struct {
	Type    string `json:"type"` // resource manager/record type, as pg_walinspect names it
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"` // records and full-page images
}

// Statement is one normalized statement's totals over a run.
type Statement struct {
	Query      string  `json:"query"` // whitespace collapsed, cut at 200 characters
	Calls      int64   `json:"calls"`
	Rows       int64   `json:"rows"`
	ExecMs     float64 `json:"exec_ms"`
	WALRecords int64   `json:"wal_records"`
	WALBytes   int64   `json:"wal_bytes"`
}

// statementTables are the tables a server journals its events in, the
// first one present counting the run's events.
var statementTables = []string{"whguard_events", "naive_events"}

var spaces = regexp.MustCompile(`\s+`)

// walPosition is the server's current WAL insert position, the start of
// a run's WAL by type, or "" when the server does not load
// pg_stat_statements (only the throwaway server of bench-statements,
// which nothing else writes to, is read this way).
func walPosition(ctx context.Context, dbURL string) string {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	var lsn string
	if err := conn.QueryRow(ctx, `SELECT CASE WHEN current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'
		THEN pg_current_wal_insert_lsn()::text ELSE '' END`).Scan(&lsn); err != nil {
		return ""
	}
	return lsn
}

// readStatements reads dbURL's statements, or nil when the server does
// not load pg_stat_statements; with walFrom set, also the WAL written
// since then by record type.
func readStatements(ctx context.Context, dbURL, walFrom string) (*Statements, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("read statements: %w", err)
	}
	defer conn.Close(ctx)
	var preload string
	if err := conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&preload); err != nil {
		return nil, fmt.Errorf("read statements: %w", err)
	}
	if !strings.Contains(preload, "pg_stat_statements") {
		return nil, nil
	}
	// The view reads shared memory: created now, it still shows the run.
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return nil, fmt.Errorf("read statements: %w", err)
	}
	st := &Statements{}
	for _, table := range statementTables {
		var n *int64
		if err := conn.QueryRow(ctx, `SELECT CASE WHEN to_regclass($1) IS NOT NULL THEN 0 END`, table).Scan(&n); err != nil {
			return nil, fmt.Errorf("read statements: %w", err)
		}
		if n == nil {
			continue
		}
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&st.Events); err != nil {
			return nil, fmt.Errorf("read statements: %w", err)
		}
		break
	}
	rows, err := conn.Query(ctx, `
		SELECT query, calls, rows, total_exec_time, wal_records, wal_bytes::bigint
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT ILIKE '%pg_stat_statements%'
		ORDER BY total_exec_time DESC`)
	if err != nil {
		return nil, fmt.Errorf("read statements: %w", err)
	}
	var s Statement
	_, err = pgx.ForEachRow(rows, []any{&s.Query, &s.Calls, &s.Rows, &s.ExecMs, &s.WALRecords, &s.WALBytes}, func() error {
		st.ExecMs += s.ExecMs
		st.WALRecords += s.WALRecords
		st.WALBytes += s.WALBytes
		if len(st.Top) < 6 {
			q := strings.TrimSpace(spaces.ReplaceAllString(s.Query, " "))
			if len(q) > 200 {
				q = q[:200]
			}
			s.Query = q
			st.Top = append(st.Top, s)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read statements: %w", err)
	}
	if walFrom != "" {
		if st.WAL, err = readWALTypes(ctx, conn, walFrom); err != nil {
			return nil, err
		}
	}
	// Statistics reach the view within a second of the server's exit.
	_, _ = conn.Exec(ctx, `SELECT pg_stat_force_next_flush(), pg_sleep(1)`)
	rows, err = conn.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
		FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY n_tup_ins + n_tup_upd DESC`)
	if err != nil {
		return nil, fmt.Errorf("read table writes: %w", err)
	}
	st.Tables, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (TableWrites, error) {
		var t TableWrites
		err := row.Scan(&t.Table, &t.Inserts, &t.Updates, &t.HOTUpdates, &t.Deletes)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read table writes: %w", err)
	}
	return st, nil
}

// readWALTypes is the WAL written since from, by record type, most
// records first.
func readWALTypes(ctx context.Context, conn *pgx.Conn, from string) ([]WALType, error) {
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		return nil, fmt.Errorf("read WAL by type: %w", err)
	}
	rows, err := conn.Query(ctx, `
		SELECT "resource_manager/record_type", count, combined_size
		FROM pg_get_wal_stats($1::pg_lsn, pg_current_wal_flush_lsn(), true)
		WHERE count > 0 ORDER BY count DESC`, from)
	if err != nil {
		return nil, fmt.Errorf("read WAL by type: %w", err)
	}
	var w WALType
	types, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WALType, error) {
		err := row.Scan(&w.Type, &w.Records, &w.Bytes)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("read WAL by type: %w", err)
	}
	return types, nil
}

// printStatements writes each closed-loop run's top statements, per
// distinct event, when PostgreSQL counted them.
func printStatements(w io.Writer, results []Result) {
	have := false
	for _, r := range results {
		have = have || r.Statements != nil
	}
	if !have {
		fmt.Fprintln(w, "\n(no statement table: this PostgreSQL does not load pg_stat_statements; `make bench-statements` runs one that does)")
		return
	}
	fmt.Fprintln(w, "\nPOSTGRESQL STATEMENTS (closed loop, pg_stat_statements of the run's database; per distinct event journaled)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tcalls\trows/call\texec ms\texec µs/event\tWAL records/event\tWAL B/event\tstatement\t")
	for _, r := range results {
		st := r.Statements
		if st == nil || st.Events == 0 {
			continue
		}
		ev := float64(st.Events)
		fmt.Fprintf(tw, "%s\t\t\t%.0f\t%.1f\t%.1f\t%.0f\t(all, %d events)\t\n", r.Server, st.ExecMs, 1000*st.ExecMs/ev,
			float64(st.WALRecords)/ev, float64(st.WALBytes)/ev, st.Events)
		for _, s := range st.Top {
			perCall := 0.0
			if s.Calls > 0 {
				perCall = float64(s.Rows) / float64(s.Calls)
			}
			q := s.Query
			if len(q) > 60 {
				q = q[:60] + "…"
			}
			fmt.Fprintf(tw, "\t%d\t%.1f\t%.0f\t%.1f\t%.1f\t%.0f\t%s\t\n", s.Calls, perCall, s.ExecMs, 1000*s.ExecMs/ev,
				float64(s.WALRecords)/ev, float64(s.WALBytes)/ev, q)
		}
	}
	tw.Flush()
	for _, r := range results {
		st := r.Statements
		if st == nil || st.Events == 0 || len(st.WAL) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nWAL BY RECORD TYPE, %s (the whole server over the run, per distinct event journaled)\n", r.Server)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "records/event\tbytes/event\ttype\t")
		var n, b int64
		for _, t := range st.WAL {
			n += t.Records
			b += t.Bytes
			if float64(t.Records)/float64(st.Events) >= 0.01 {
				fmt.Fprintf(tw, "%.2f\t%.0f\t%s\t\n", float64(t.Records)/float64(st.Events), float64(t.Bytes)/float64(st.Events), t.Type)
			}
		}
		fmt.Fprintf(tw, "%.2f\t%.0f\t(all)\t\n", float64(n)/float64(st.Events), float64(b)/float64(st.Events))
		tw.Flush()
		fmt.Fprintf(w, "ROW WRITES, %s\n", r.Server)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "table\tinserts\tupdates\tHOT updates\tdeletes\t")
		for _, t := range st.Tables {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", t.Table, t.Inserts, t.Updates, t.HOTUpdates, t.Deletes)
		}
		tw.Flush()
	}
}
