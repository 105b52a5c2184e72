package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/journal"
)

// A migrated journal is cloned, not migrated, for each test: PostgreSQL
// copies a template database (CREATE DATABASE … TEMPLATE), SQLite copies a
// migrated file.
//
// The PostgreSQL template is shared by every test binary of a run (go test
// ./... runs several at once) and by later runs: its name carries a hash of
// the migrations (migrationsHash), so a changed migration gets a template
// of its own, and branches with different migrations can test on one
// server. It is built once, under an advisory lock, as whguard_tpl_<hash>_build, and
// renamed to its final name only when migrated and closed to connections;
// a database of that name is therefore always complete. A build that died
// half-way leaves the _build database, which the next build drops.
// Templates of older migrations stay on the server (a few MB each); drop
// them with DROP DATABASE after ALTER DATABASE … IS_TEMPLATE false.

// templateLockKey serializes template builds across test processes. It
// differs from the journal's migration lock: the bytes of "whgtpl".
const templateLockKey int64 = 0x77686774706c

// templateLayout changes when the way templates are built changes, so that
// templates built the old way are not used.
const templateLayout = "1"

var pgTemplate struct {
	once sync.Once
	name string
	err  error
}

// migratedTemplate returns the name of the PostgreSQL template database
// holding this source tree's migrations, building it if needed.
func migratedTemplate() (string, error) {
	pgTemplate.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pgTemplate.name, pgTemplate.err = ensureTemplate(ctx)
	})
	return pgTemplate.name, pgTemplate.err
}

func ensureTemplate(ctx context.Context) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "whguard_tpl_" + sum[:16]
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return "", fmt.Errorf("connect to test server (is PostgreSQL running? use `make test`): %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	exists := func() (bool, error) {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n)
		return n > 0, err
	}
	if ok, err := exists(); err != nil || ok {
		return name, err
	}
	// Session lock: released when conn closes, even if this process dies.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLockKey); err != nil {
		return "", fmt.Errorf("template %s: take advisory lock: %w", name, err)
	}
	if ok, err := exists(); err != nil || ok { // built while we waited
		return name, err
	}
	build := name + "_build"
	for _, q := range []string{
		`DROP DATABASE IF EXISTS ` + ident(build) + ` WITH (FORCE)`,
		`CREATE DATABASE ` + ident(build) + ` TEMPLATE template0`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("template %s: %s: %w", name, q, err)
		}
	}
	u, err := databaseURL(build)
	if err != nil {
		return "", err
	}
	if err := migrate(ctx, u); err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	// No connections from now on: PostgreSQL refuses to copy a database
	// anyone is connected to. RENAME waits (up to 5 s) for the migration's
	// sessions to finish exiting.
	for _, q := range []string{
		`ALTER DATABASE ` + ident(build) + ` WITH ALLOW_CONNECTIONS false IS_TEMPLATE true`,
		`ALTER DATABASE ` + ident(build) + ` RENAME TO ` + ident(name),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("template %s: %s: %w", name, q, err)
		}
	}
	return name, nil
}

// migrate applies the journal's migrations to the database at u, with the
// journal's own code, and closes every connection it opened.
func migrate(ctx context.Context, u string) error {
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		return err
	}
	defer pg.Close()
	_, err = pg.Migrate(ctx)
	return err
}

// migrationsHash hashes what decides the migrated schema, read from the
// source tree the tests run in: the migration files (names and contents)
// and the code that applies them (it creates the version table).
func migrationsHash() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(root, "journal", "migrations", "postgres", "*.sql"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no migrations in %s (%v)", filepath.Join(root, "journal", "migrations", "postgres"), err)
	}
	sort.Strings(files)
	files = append(files, filepath.Join(root, "journal", "migrate.go"), filepath.Join(root, "journal", "postgres_partitions.go"))
	h := sha256.New()
	fmt.Fprintf(h, "layout %s\n", templateLayout)
	// Migrating creates the journal's day partitions from the day it runs:
	// a template built on another day would have none for today.
	fmt.Fprintf(h, "day %s\n", time.Now().UTC().Format(time.DateOnly))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// moduleRoot finds whguard's go.mod above the working directory (a test
// binary runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(b) == "github.com/whguard/whguard" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testdb: no whguard go.mod above the working directory")
		}
		dir = parent
	}
}

// modulePath is the path on a go.mod's module line.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

var sqliteTemplate struct {
	once sync.Once
	file []byte
	err  error
}

// migratedSQLite returns the bytes of a migrated SQLite journal, built once
// per test process (it takes about as long as one migration; writing the
// bytes out for a test takes a fraction of a millisecond, migrating about
// 45 ms).
func migratedSQLite() ([]byte, error) {
	sqliteTemplate.once.Do(func() {
		sqliteTemplate.file, sqliteTemplate.err = buildSQLite()
	})
	return sqliteTemplate.file, sqliteTemplate.err
}

func buildSQLite() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "whguard-testdb-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "journal.db")
	s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
	if err != nil {
		return nil, err
	}
	_, err = s.Migrate(ctx)
	s.Close()
	if err != nil {
		return nil, fmt.Errorf("sqlite template: %w", err)
	}
	// Closing the last connection checkpoints the write-ahead log into the
	// file and removes the log: the file alone is then the whole journal.
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return nil, errors.New("sqlite template: the write-ahead log was not checkpointed at close")
	}
	return os.ReadFile(path)
}
