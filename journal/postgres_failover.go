package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// How the store follows a primary that moves (docs/operations.md, "HA
// PostgreSQL"). A URL may name several hosts with
// target_session_attrs=read-write; pgx then tries them in order for each
// new connection. What whguard adds:
//   - every connection attempt to one host, and every ping of an idle
//     connection, is bounded (hostConnectTimeout, pingTimeout), so a primary
//     that hangs with its sockets open costs seconds, not the TCP timeout;
//   - after a connection failure a probe opens a connection of its own to
//     find the primary now (failover.check); every connection on another
//     server (by the server's own address, the same through a pooler), or
//     every one when no host answers or accepts writes, is closed: its
//     socket first, which fails at once a statement waiting on a server
//     that does not answer, then by its pool. So no session left on an old
//     primary is used again, while a primary that was only slow, or a
//     server that answers with an error, keeps its sessions;
//   - the number of synchronous standbys is read every standbysEvery and
//     after each reset, reported, and warned about once per primary.

// ReplicatedStorage is WHGUARD_JOURNAL_REPLICATION's value for a database
// service that replicates below PostgreSQL: no synchronous standby is
// then nothing to warn about.
const ReplicatedStorage = "storage"

const (
	// hostConnectTimeout bounds one connection attempt to one host, unless
	// the URL sets connect_timeout.
	hostConnectTimeout = 2 * time.Second
	// pingTimeout bounds the liveness ping of a connection idle for over a
	// second before it is handed out.
	pingTimeout = time.Second
	// checkEvery is the shortest interval between two checks: the
	// statements failing together after one failure are checked once.
	checkEvery = time.Second
	// standbysEvery is how often the synchronous standbys are read.
	standbysEvery = 30 * time.Second
)

// failover drops the pools' connections after a connection failure and
// watches the primary's synchronous standbys. Its pools are set once by
// OpenPostgres before any statement runs; the rest is atomic or owned by
// the watch goroutine.
type failover struct {
	pools []*pgxpool.Pool
	log   *zap.Logger
	// probe is the configuration of the check's own connection; spawn
	// runs a check as the store's background work, bounded by ctx (both
	// set by OpenPostgres).
	probe     *pgx.ConnConfig
	spawn     func(func()) bool
	ctx       context.Context
	lastCheck atomic.Int64 // unix ns of the last check
	checking  atomic.Bool
	// pooled: a connection was refused for its start-up parameters, so
	// the URL is a pooler's (postgres_pooler.go).
	pooled atomic.Bool
	checks atomic.Int64
	resets atomic.Int64 // checks that closed connections
	// standbys is the last count read: -1 until read, or when the role
	// cannot read pg_stat_replication.
	standbys atomic.Int64
	// poke asks the watch loop for a read now (after a reset).
	poke chan struct{}
	// warned (watch goroutine only) holds the primaries already warned
	// about.
	warned map[string]bool
	once   sync.Once
	// conns (under connsMu) are the open connections of every pool and the
	// session ones (LISTEN, locks), with the identity of the server each
	// reaches (serverIdentity: through a pooler, the server behind it).
	connsMu sync.Mutex
	conns   map[*pgconn.PgConn]string
}

func newFailover(log *zap.Logger) *failover {
	f := &failover{log: log, poke: make(chan struct{}, 1), warned: map[string]bool{}, conns: map[*pgconn.PgConn]string{}}
	f.standbys.Store(-1)
	return f
}

// configure bounds a pool's connection attempts and pings and makes its
// statements report connection failures to f. hot says the pool runs
// only short statements, so that one timing out means a server that does
// not answer; the general pool's searches may time out on their own.
func (f *failover) configure(c *pgxpool.Config, hot bool) {
	if c.ConnConfig.ConnectTimeout == 0 { // the URL's connect_timeout wins
		c.ConnConfig.ConnectTimeout = hostConnectTimeout
	}
	c.PingTimeout = pingTimeout
	c.ConnConfig.Tracer = failureTracer{f: f, timeoutFails: hot}
	after := c.AfterConnect
	c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		return f.track(ctx, conn)
	}
}

// sqlServerIdentity names the PostgreSQL server a connection reaches, the
// same through a pooler as directly (a socket's remote address is the
// pooler's, or one of a rotating name's addresses).
const sqlServerIdentity = `
SELECT coalesce(host(inet_server_addr()), 'local') || ':' || coalesce(inet_server_port()::text, current_setting('port'))`

// track keeps a new connection, with its server's identity, until a check
// closes it or it is found closed (pruned once 64 are kept; one its pool
// is still closing may then go untracked). A connection its pool closes
// stays tracked meanwhile: pgx waits up to 15 s for the server to end the
// session, which a check cuts short.
func (f *failover) track(ctx context.Context, conn *pgx.Conn) error {
	var id string
	if err := conn.QueryRow(ctx, sqlServerIdentity).Scan(&id); err != nil {
		return fmt.Errorf("identify the server: %w", err)
	}
	c := conn.PgConn()
	f.connsMu.Lock()
	defer f.connsMu.Unlock()
	if len(f.conns) >= 64 {
		for old := range f.conns {
			if old.IsClosed() {
				delete(f.conns, old)
			}
		}
	}
	f.conns[c] = id
	return nil
}

// failed starts a check after a connection failure, unless one runs or
// ran less than checkEvery ago.
func (f *failover) failed(cause error) {
	now := time.Now().UnixNano()
	last := f.lastCheck.Load()
	if now-last < int64(checkEvery) || !f.lastCheck.CompareAndSwap(last, now) || !f.checking.CompareAndSwap(false, true) {
		return
	}
	if f.spawn == nil || !f.spawn(func() {
		defer f.checking.Store(false)
		f.check(cause)
	}) {
		f.checking.Store(false)
	}
}

// check finds the primary with a connection of its own (the URL's hosts
// in order, each bounded, and only one that accepts writes) and closes
// every tracked connection on another server. When no host answers at all
// or none accepts writes, it closes every one. When a host answers with a
// server error (too many connections, authentication), it cannot tell and
// closes nothing; nor does it when the primary has not moved (one that
// was only slow keeps its sessions).
func (f *failover) check(cause error) {
	f.checks.Add(1)
	hosts := time.Duration(1 + len(f.probe.Fallbacks))
	ctx, cancel := context.WithTimeout(f.ctx, hosts*f.probe.ConnectTimeout+time.Second)
	defer cancel()
	primary := ""
	conn, err := pgx.ConnectConfig(ctx, f.probe)
	var pgErr *pgconn.PgError
	switch {
	case f.ctx.Err() != nil:
		return // the store is closing
	case err == nil:
		err = conn.QueryRow(ctx, sqlServerIdentity).Scan(&primary)
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		ccancel()
		if err != nil {
			return // cannot tell
		}
	case errors.As(err, &pgErr):
		return // a server answered, but not as a usable primary: cannot tell
	}
	// Sockets first: a statement waiting on a server that does not answer
	// fails now (its pool then discards the connection), where a frozen
	// server would hold it until its deadline or forever; and a connection
	// its pool is already closing does not wait 15 s for the server's
	// goodbye. Closed outside the lock: a TLS close may wait.
	var stale []*pgconn.PgConn
	f.connsMu.Lock()
	for c, id := range f.conns {
		if id != primary {
			stale = append(stale, c)
			delete(f.conns, c)
		}
	}
	f.connsMu.Unlock()
	if len(stale) == 0 {
		return
	}
	for _, c := range stale {
		_ = c.Conn().Close()
	}
	f.resets.Add(1)
	if primary == "" {
		f.log.Warn("journal connection failed and no host accepts writes: dropped every connection", zap.String("cause", failureClass(cause)))
	} else {
		f.log.Warn("journal primary changed: dropped the connections to another server", zap.String("cause", failureClass(cause)), zap.String("primary", primary))
	}
	// The pools start afresh (their idle connections to the primary too:
	// a failover is rare, reconnecting cheap).
	for _, p := range f.pools {
		p.Reset()
	}
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// connectionFailed reports an error that says the session, or the server
// behind it, is gone or unusable for writes: anything pgx reports without
// a server error (broken socket, closed connection; a timeout when
// timeoutFails), and the server errors of a shutdown, a lost connection or
// a read-only (standby) server. A caller's own cancellation is not one.
func connectionFailed(err error, timeoutFails bool) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return timeoutFails
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08", // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, crash, cannot connect now
			pgErr.Code == "25006": // read-only transaction: a standby
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) && (timeoutFails || !netErr.Timeout()) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed)
}

// failureClass names a failure for the log without its text, which may
// name hosts and users.
func failureClass(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return "server error " + pgErr.Code
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "connection lost"
}

// failureTracer reports the statements that fail for a connection reason.
type failureTracer struct {
	f            *failover
	timeoutFails bool
}

// TraceQueryStart implements pgx.QueryTracer.
func (failureTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t failureTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if connectionFailed(data.Err, t.timeoutFails) {
		t.f.failed(data.Err)
	}
}

// TraceAcquireStart implements pgxpool.AcquireTracer.
func (failureTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return ctx
}

// TraceAcquireEnd implements pgxpool.AcquireTracer: a connection that
// could not be had (every host refused or timed out; an idle one that
// fails its ping is replaced by the pool, and counts only when that
// fails too) is a failure too.
func (t failureTracer) TraceAcquireEnd(_ context.Context, _ *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	t.f.notePooled(data.Err)
	if connectionFailed(data.Err, t.timeoutFails) && !refusedStartup(data.Err) {
		t.f.failed(data.Err)
	}
}

// sqlStandbys reads which server this is and its synchronous standbys;
// a role without pg_read_all_stats sees no replication state.
const sqlStandbys = `
SELECT coalesce(host(inet_server_addr()), 'local') || ':' || coalesce(inet_server_port(), 0),
       pg_has_role('pg_read_all_stats', 'USAGE'),
       (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))`

// watchStandbys reads the synchronous standbys every standbysEvery and
// after each reset until ctx ends. With none, it warns once per primary
// that acknowledged events do not survive the loss of its disk, unless
// storageReplicated says the service replicates below PostgreSQL.
func (f *failover) watchStandbys(ctx context.Context, pool *pgxpool.Pool, storageReplicated bool) {
	t := time.NewTicker(standbysEvery)
	defer t.Stop()
	for {
		f.readStandbys(ctx, pool, storageReplicated)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.poke:
		}
	}
}

func (f *failover) readStandbys(ctx context.Context, pool *pgxpool.Pool, storageReplicated bool) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var (
		server   string
		canRead  bool
		standbys int64
	)
	if err := pool.QueryRow(rctx, sqlStandbys).Scan(&server, &canRead, &standbys); err != nil {
		return // the journal is down: the next read, or the one after the reconnect, tells
	}
	switch {
	case !canRead:
		f.standbys.Store(-1)
		f.warnOnce(server+"/unreadable", "the journal's role cannot read pg_stat_replication (grant pg_read_all_stats or pg_monitor): whether acknowledged events survive a failover is unknown")
	case standbys == 0 && !storageReplicated:
		f.standbys.Store(0)
		f.warnOnce(server, "the journal's primary has no synchronous standby: events acknowledged since the last replication are lost if this primary's disk is lost (set synchronous_standby_names, or WHGUARD_JOURNAL_REPLICATION=storage for a service that replicates its storage)")
	default:
		f.standbys.Store(standbys)
	}
}

func (f *failover) warnOnce(key, msg string) {
	if f.warned[key] {
		return
	}
	f.warned[key] = true
	f.log.Warn(msg)
}

// SynchronousStandbys is the number of the primary's standbys in sync or
// quorum state at the last read: -1 before the first read, or when the
// role cannot read pg_stat_replication. Read only while WatchStandbys runs.
func (p *Postgres) SynchronousStandbys() int { return int(p.failover.standbys.Load()) }

// ConnectionChecks counts the checks for a new primary that connection
// failures started, and ConnectionResets those that closed connections
// (the primary had moved, or none answered).
func (p *Postgres) ConnectionChecks() int64 { return p.failover.checks.Load() }

// ConnectionResets: see ConnectionChecks.
func (p *Postgres) ConnectionResets() int64 { return p.failover.resets.Load() }

// WatchStandbys starts reading the primary's synchronous standbys in the
// background (every 30 s and after each reconnect) until Close; with
// storageReplicated (WHGUARD_JOURNAL_REPLICATION=storage) none is no
// warning. Called once, by the server (not by the CLI's short commands).
func (p *Postgres) WatchStandbys(storageReplicated bool) error {
	started := false
	p.failover.once.Do(func() {
		started = p.goBackground(func() { p.failover.watchStandbys(p.bg, p.pool, storageReplicated) })
	})
	if !started {
		return fmt.Errorf("watch standbys: already started, or the journal is closed")
	}
	return nil
}
