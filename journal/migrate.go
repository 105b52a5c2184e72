package journal

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// The two stores' migrations share one numbering: migration N is the same
// change on both, and a change that concerns one store only is a file of
// comments on the other (TestMigrationsAligned holds them to it).
//
//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// migrationLockKey is the advisory lock that serializes migrations across
// processes, so replicas starting together do not race. Arbitrary but fixed:
// the bytes of "whguard" as an integer.
const migrationLockKey int64 = 0x776867756172

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns PostgreSQL's embedded migrations in version order.
func migrations() ([]migration, error) { return loadMigrations(postgresMigrations) }

// The folders of each store's migrations.
const (
	postgresMigrations = "migrations/postgres"
	sqliteMigrations   = "migrations/sqlite"
)

// loadMigrations reads the migrations of one directory in version order.
// File names are NNNN_name.sql.
func loadMigrations(dir string) ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %q: name must start with a number", e.Name())
		}
		b, err := migrationFiles.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// LatestVersion is the schema version this binary needs, on either store.
func LatestVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate applies every embedded migration not yet applied, each in its own
// transaction, holding a session advisory lock for the whole run (taken on
// WHGUARD_DATABASE_LISTEN_URL's direct connection when set). Behind a
// transaction pooler with no direct connection, each migration's
// transaction takes a transaction advisory lock instead and checks again
// that its migration is not applied. It is safe to call from several
// processes at once and to call again.
func (p *Postgres) Migrate(ctx context.Context) (applied []int, err error) {
	applied, err = p.migrate(ctx)
	if err != nil {
		return applied, err
	}
	// The day partitions from today on; when their lock cannot be had now
	// (a busy journal), rows go to the held partitions until the next
	// cleanup creates them.
	if err := p.ensurePartitions(ctx, p.now()); err != nil {
		p.log.Warn("migrate: day partitions not created yet", zap.Error(err))
	}
	return applied, nil
}

// migrate applies the migrations (Migrate).
func (p *Postgres) migrate(ctx context.Context) (applied []int, err error) {
	switch {
	case p.listenConfig != nil:
		conn, err := p.sessionConn(ctx)
		if err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		defer closeSession(ctx, conn)
		return migrateOn(ctx, conn, true)
	case p.Pooled():
		return migrateOn(ctx, p.pool, false)
	}
	conn, err := p.pool.Acquire(ctx)
	if refusedStartup(err) {
		// The first connection found the pooler (the tracer noted it).
		p.failover.notePooled(err)
		return p.migrate(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	return migrateOn(ctx, conn, true)
}

// migrationDB is a connection, or a pool when no session can be had.
type migrationDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// migrateOn applies the migrations on db: under a session lock held for
// the run when session, else under a transaction lock per migration.
func migrateOn(ctx context.Context, db migrationDB, session bool) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	if session {
		if _, err := db.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLockKey); err != nil {
			return nil, fmt.Errorf("migrate: take advisory lock: %w", err)
		}
		defer func() {
			// Unlock on a fresh context: the caller's may be cancelled already.
			_, _ = db.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLockKey)
		}()
	}
	// lock is taken first in each transaction when there is no session.
	lock := func(tx pgx.Tx) error {
		if session {
			return nil
		}
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey)
		return err
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := lock(tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS whguard_schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("migrate: create version table: %w", err)
	}
	rows, err := db.Query(ctx, `SELECT version FROM whguard_schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied versions: %w", err)
	}
	done := map[int]bool{}
	for _, v := range versions {
		done[v] = true
	}
	var applied []int
	for _, m := range ms {
		if done[m.version] {
			continue
		}
		ran := false
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := lock(tx); err != nil {
				return err
			}
			if !session {
				// Another process may have applied it while this one
				// waited for the lock.
				var there bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM whguard_schema_migrations WHERE version = $1)`, m.version).Scan(&there); err != nil || there {
					return err
				}
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			ran = true
			_, err := tx.Exec(ctx, `INSERT INTO whguard_schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migrate: apply %s: %w", m.name, err)
		}
		if ran {
			applied = append(applied, m.version)
		}
	}
	return applied, nil
}

// renumbering maps the versions under which migrations were recorded to
// the versions their files have now, for those that differ. A migration is
// known by its name after the number ("0005_hold_reason.sql" is
// hold_reason): the embedded journal's files were once numbered apart
// from PostgreSQL's, and a journal migrated then records them under their
// old numbers.
func renumbering(recorded map[int]string, files []migration) map[int]int {
	now := make(map[string]int, len(files))
	for _, m := range files {
		now[migrationName(m.name)] = m.version
	}
	out := map[int]int{}
	for v, name := range recorded {
		if want, ok := now[migrationName(name)]; ok && want != v {
			out[v] = want
		}
	}
	return out
}

// migrationName is a migration file's name without its number.
func migrationName(file string) string {
	_, name, _ := strings.Cut(file, "_")
	return name
}
