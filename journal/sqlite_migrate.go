package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Migrate applies the embedded SQLite migrations not yet applied, all in
// one transaction. The file lock already makes this process the only one.
//
// Migrations run with foreign keys off, as SQLite's procedure for changing
// a table's definition requires (migration 0010 rebuilds whguard_events:
// with foreign keys on, dropping the old table would cascade into every
// table that refers to it). The pragma does nothing inside a transaction,
// so it is set around it on the writer's one connection, checked inside,
// and PRAGMA foreign_key_check must find nothing before the commit.
func (s *SQLite) Migrate(ctx context.Context) (_ []int, err error) {
	ms, err := loadMigrations(sqliteMigrations)
	if err != nil {
		return nil, err
	}
	if err := s.setForeignKeys(ctx, false); err != nil {
		return nil, fmt.Errorf("migrate embedded journal: %w", err)
	}
	defer func() {
		if ferr := s.setForeignKeys(ctx, true); ferr != nil && err == nil {
			err = fmt.Errorf("migrate embedded journal: %w", ferr)
		}
	}()
	var applied []int
	err = s.write(ctx, func(tx sqliteTx) error {
		var fk int
		if err := tx.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
			return fmt.Errorf("read foreign_keys: %w", err)
		}
		if fk != 0 {
			return errors.New("foreign keys are still enforced on the migrating connection")
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS whguard_schema_migrations (
			version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("create version table: %w", err)
		}
		recorded := map[int]string{}
		rows, err := tx.QueryContext(ctx, `SELECT version, name FROM whguard_schema_migrations`)
		if err != nil {
			return fmt.Errorf("read applied versions: %w", err)
		}
		var v int
		var name string
		if err := eachRow(rows, func() error {
			recorded[v] = name
			return nil
		}, &v, &name); err != nil {
			return fmt.Errorf("read applied versions: %w", err)
		}
		done, err := renumber(ctx, tx, recorded, ms)
		if err != nil {
			return fmt.Errorf("renumber applied versions: %w", err)
		}
		for _, m := range ms {
			if done[m.version] {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("apply %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO whguard_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, s.now().UnixNano()); err != nil {
				return err
			}
			applied = append(applied, m.version)
		}
		if len(applied) == 0 {
			return nil
		}
		rows, err = tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
		if err != nil {
			return fmt.Errorf("check foreign keys: %w", err)
		}
		defer rows.Close()
		if rows.Next() {
			var table string
			_ = rows.Scan(&table)
			return fmt.Errorf("check foreign keys: a row of %s refers to a missing row", table)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("migrate embedded journal: %w", err)
	}
	return applied, nil
}

// renumber records each applied migration under its file's version now
// (see renumbering), in two steps so that no two rows ever share a
// version, and returns the applied versions.
func renumber(ctx context.Context, tx sqliteTx, recorded map[int]string, files []migration) (map[int]bool, error) {
	moves := renumbering(recorded, files)
	for from := range moves {
		if _, err := tx.ExecContext(ctx, `UPDATE whguard_schema_migrations SET version = ? WHERE version = ?`, -from, from); err != nil {
			return nil, err
		}
	}
	names := map[int]string{}
	for _, m := range files {
		names[m.version] = m.name
	}
	for from, to := range moves {
		if _, err := tx.ExecContext(ctx, `UPDATE whguard_schema_migrations SET version = ?, name = ? WHERE version = ?`, to, names[to], -from); err != nil {
			return nil, err
		}
	}
	done := map[int]bool{}
	for v := range recorded {
		if to, ok := moves[v]; ok {
			v = to
		}
		done[v] = true
	}
	return done, nil
}

// SchemaVersion is the latest migration applied to this journal (0 when
// none is).
func (s *SQLite) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT max(version) FROM whguard_schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// setForeignKeys turns foreign-key enforcement on or off on the writer's
// connection, between transactions (never cancelled half way: its state
// would be unknown).
func (s *SQLite) setForeignKeys(ctx context.Context, on bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	v := "OFF"
	if on {
		v = "ON"
	}
	if _, err := s.w.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = "+v); err != nil {
		return fmt.Errorf("set foreign_keys=%s: %w", v, err)
	}
	return nil
}
