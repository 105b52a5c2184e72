package journal

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// NotifyChannel is the LISTEN/NOTIFY channel on which a commit of new rows
// is announced, once per batch (never per row, and never by a trigger).
const NotifyChannel = "whguard_events"

// PostgresConfig configures the PostgreSQL store.
type PostgresConfig struct {
	// URL is a postgres:// connection string (WHGUARD_DATABASE_URL).
	URL string
	// MaxConns bounds the pool; 0 means 16.
	MaxConns int32
	// Logger receives the store's logs; nil means no logs.
	Logger *zap.Logger
	// ListenURL (WHGUARD_DATABASE_LISTEN_URL) is a direct connection to the
	// same database for what needs a session (LISTEN, the session locks of
	// migrations and vacuum) when URL is a transaction pooler's; empty:
	// the URL serves for those too.
	ListenURL string
	// AlwaysVacuum makes Cleanup vacuum the hot tables even when the
	// server's autovacuum is on (by default whguard only does it itself
	// when autovacuum is off).
	AlwaysVacuum bool
	// Now is the clock that says which day it is, for the day partitions
	// created ahead (postgres_partitions.go); nil means time.Now.
	Now func() time.Time
}

// Postgres is the PostgreSQL journal. It is safe for concurrent use.
type Postgres struct {
	// pool runs everything but the hot statements, with custom plans.
	pool *pgxpool.Pool
	// ingest runs appends, with generic plans (postgres_plans.go).
	ingest *pgxpool.Pool
	// queue runs the forwarder's delivery-state statements (lease,
	// complete, release, reap) with synchronous_commit=off: they do not
	// wait for the WAL flush, which ingest commits need and would
	// otherwise queue behind. A PostgreSQL crash can forget the last
	// fraction of a second of them; the rows then return to their previous
	// state and are delivered again: a repeat, never a loss, the same
	// window as a crash of whguard itself. Generic plans, like ingest.
	queue *pgxpool.Pool
	log   *zap.Logger
	// failover resets the pools after a connection failure and watches
	// the synchronous standbys (postgres_failover.go).
	failover *failover
	// listenConfig is WHGUARD_DATABASE_LISTEN_URL's, nil when unset;
	// warnedNoSession: see logNoSession (postgres_pooler.go).
	listenConfig    *pgx.ConnConfig
	warnedNoSession atomic.Bool
	// instance tags this process's NOTIFYs so its own LISTEN ignores them
	// (the ingress already woke the local forwarder in process).
	instance string
	// lastNotify (unix ns) debounces NOTIFY: every NOTIFY takes a global
	// lock at commit, so under load one per notifyEvery is plenty.
	lastNotify atomic.Int64
	// alwaysVacuum and warnedVacuum: see vacuumIfNeeded.
	alwaysVacuum bool
	warnedVacuum atomic.Bool
	// now is PostgresConfig.Now.
	now func() time.Time
	// lockTimeout, when set (ns), replaces partitionLockTimeout (tests).
	lockTimeout atomic.Int64
	// growth re-plans the hot statements as the journal grows (postgres_plans.go).
	growth growth
	// bg bounds background work (stopBG ends it); bgWork waits for it;
	// bgClosed (under bgMu) refuses new work once Close has begun.
	bg       context.Context
	stopBG   context.CancelFunc
	bgWork   sync.WaitGroup
	bgMu     sync.Mutex
	bgClosed bool
}

var _ Store = (*Postgres)(nil)

// notifyEvery is the shortest interval between two NOTIFYs of a process.
const notifyEvery = 10 * time.Millisecond

// OpenPostgres connects (lazily: an unreachable server is not an error here,
// so whguard can start and answer 503 until the database comes back).
func OpenPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's message may contain the password: do not wrap it verbatim.
		return nil, errors.New("parse WHGUARD_DATABASE_URL: not a valid postgres connection string")
	}
	pc.MaxConns = cmp.Or(cfg.MaxConns, 16)
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	fo := newFailover(log)
	fo.probe = pc.ConnConfig.Copy() // before configure: the probe reports to no one
	if fo.probe.ConnectTimeout == 0 {
		fo.probe.ConnectTimeout = hostConnectTimeout
	}
	if fo.probe.ValidateConnect == nil {
		// The check looks for the primary, whatever the URL asks of hosts.
		fo.probe.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	fo.configure(pc, false)
	fo.poolerAware(pc)
	var listenConfig *pgx.ConnConfig
	if cfg.ListenURL != "" {
		if listenConfig, err = pgx.ParseConfig(cfg.ListenURL); err != nil {
			return nil, errors.New("parse WHGUARD_DATABASE_LISTEN_URL: not a valid postgres connection string")
		}
		if listenConfig.ConnectTimeout == 0 {
			listenConfig.ConnectTimeout = hostConnectTimeout
		}
	}
	// The hot pools run generic plans, the general pool custom ones
	// (postgres_plans.go says why), and the hot pools never JIT-compile; a
	// plan_cache_mode or jit in WHGUARD_DATABASE_URL wins in every pool.
	_, urlSetsPlans := pc.ConnConfig.RuntimeParams["plan_cache_mode"]
	_, urlSetsJIT := pc.ConnConfig.RuntimeParams["jit"]
	hotConfig := func(conns int32) *pgxpool.Config {
		c := pc.Copy()
		c.MaxConns = conns
		// Only short statements: one that times out means a server that
		// does not answer.
		c.ConnConfig.Tracer = failureTracer{f: fo, timeoutFails: true}
		if !urlSetsPlans {
			c.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
		}
		if !urlSetsJIT {
			// A generic plan costs LIMIT $1 as a tenth of the table, so
			// past about 80 000 waiting rows the lease's cost crosses
			// jit_above_cost and every lease was JIT-compiled: tens of
			// milliseconds of PostgreSQL's CPU for a statement that runs
			// in half of one (postgres_plans.go).
			c.ConnConfig.RuntimeParams["jit"] = "off"
		}
		return c
	}
	if !urlSetsPlans {
		pc.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	// Appends need a handful of connections: the group committer keeps
	// at most two commits in flight.
	ingest, err := pgxpool.NewWithConfig(ctx, hotConfig(4))
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres ingest pool: %w", err)
	}
	qc := hotConfig(max(pc.MaxConns/2, 4))
	qc.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	queue, err := pgxpool.NewWithConfig(ctx, qc)
	if err != nil {
		ingest.Close()
		pool.Close()
		return nil, fmt.Errorf("open postgres queue pool: %w", err)
	}
	fo.pools = []*pgxpool.Pool{pool, ingest, queue}
	var b [8]byte
	_, _ = rand.Read(b[:])
	p := &Postgres{pool: pool, ingest: ingest, queue: queue, log: log, failover: fo, listenConfig: listenConfig, instance: hex.EncodeToString(b[:]), alwaysVacuum: cfg.AlwaysVacuum, now: cfg.Now}
	if p.now == nil {
		p.now = time.Now
	}
	p.bg, p.stopBG = context.WithCancel(context.Background())
	fo.ctx, fo.spawn = p.bg, p.goBackground
	return p, nil
}

// Close stops the store's background work and releases every connection.
func (p *Postgres) Close() {
	p.bgMu.Lock()
	p.bgClosed = true
	p.bgMu.Unlock()
	p.stopBG()
	p.bgWork.Wait()
	p.queue.Close()
	p.ingest.Close()
	p.pool.Close()
}

// Pool exposes the connection pool to the forwarder's LISTEN loop and tests.
func (p *Postgres) Pool() *pgxpool.Pool { return p.pool }

// SchemaVersion is the latest migration applied to this journal (0 when
// none is).
func (p *Postgres) SchemaVersion(ctx context.Context) (int, error) {
	var v *int
	if err := p.pool.QueryRow(ctx, `SELECT max(version) FROM whguard_schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// Ready reports whether the database answers, carries this binary's
// schema version and can commit (it commits one small write);
// ErrNotMigrated when it answers but is behind.
func (p *Postgres) Ready(ctx context.Context) error {
	var v *int
	err := p.pool.QueryRow(ctx, `SELECT max(version) FROM whguard_schema_migrations`).Scan(&v)
	if err != nil {
		if isUndefinedTable(err) {
			return ErrNotMigrated
		}
		return fmt.Errorf("check schema version: %w", err)
	}
	if v == nil || *v < LatestVersion() {
		return ErrNotMigrated
	}
	// A read answers on a full or read-only disk; a commit does not.
	if _, err := p.pool.Exec(ctx, `INSERT INTO whguard_ready_probe (id, at) VALUES (1, now())
		ON CONFLICT (id) DO UPDATE SET at = excluded.at`); err != nil {
		return fmt.Errorf("commit a readiness probe: %w", err)
	}
	return nil
}

// goBackground runs fn in the background unless the store is closing.
func (p *Postgres) goBackground(fn func()) bool {
	p.bgMu.Lock()
	defer p.bgMu.Unlock()
	if p.bgClosed {
		return false
	}
	p.bgWork.Add(1)
	go func() {
		defer p.bgWork.Done()
		fn()
	}()
	return true
}

// isUndefinedTable reports a PostgreSQL "relation does not exist" error.
func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

// isUniqueViolation reports a PostgreSQL unique_violation.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// isDataError reports a PostgreSQL data exception (SQLSTATE class 22: a
// value the database refuses, such as an invalid byte sequence).
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22"
}

// pgUUID converts a token to pgx's own UUID type: a uuid.UUID goes through
// its driver.Valuer (a string, parsed again, with an error built and
// discarded per element), which was ~6 % of whguard's CPU under load.
func pgUUID(u uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: u, Valid: true} }

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Identity is the database cluster's system identifier (kept by its
// physical standbys, so unchanged by a failover) and the database's name.
func (p *Postgres) Identity(ctx context.Context) (string, error) {
	var id string
	err := p.pool.QueryRow(ctx, `SELECT 'postgres ' || system_identifier::text || ' ' || current_database() FROM pg_control_system()`).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("read the journal's identity: %w", err)
	}
	return id, nil
}
