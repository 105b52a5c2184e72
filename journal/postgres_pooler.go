package journal

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Working through PgBouncer in transaction pooling mode, with its defaults
// (docs/operations.md, "Connection poolers"). Each transaction may run on
// another server session, so nothing may rely on session state:
//   - no start-up parameters but the standard ones: PgBouncer refuses
//     plan_cache_mode, jit and synchronous_commit. The first refusal is how
//     whguard finds out it is behind one (pooled); its connections are then
//     opened without them (the delivery-state pool then commits
//     synchronously, and statements are planned for their values);
//   - no named prepared statements: pooled connections describe each
//     statement once and run it unnamed (QueryExecModeCacheDescribe);
//   - session advisory locks (migrations, vacuum) and LISTEN need a
//     session: they use WHGUARD_DATABASE_LISTEN_URL, a direct connection,
//     when set; without it migrations lock per transaction, vacuum relies
//     on SKIP_LOCKED alone, and wake-ups fall back to polling.

// standardParams are the start-up parameters a pooler passes on.
var standardParams = map[string]bool{
	"application_name": true, "client_encoding": true, "DateStyle": true, "TimeZone": true,
	"standard_conforming_strings": true, "search_path": true,
}

// refusedStartup reports PgBouncer's refusal of a start-up parameter.
func refusedStartup(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unsupported startup parameter")
}

// poolerAware makes a pool open its connections the pooler's way once
// the store is known to be pooled.
func (f *failover) poolerAware(c *pgxpool.Config) {
	before := c.BeforeConnect
	c.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		if before != nil {
			if err := before(ctx, cc); err != nil {
				return err
			}
		}
		if f.pooled.Load() {
			forPooler(cc)
		}
		return nil
	}
}

// forPooler strips what a transaction-pooling PgBouncer refuses from a
// connection's configuration.
func forPooler(cc *pgx.ConnConfig) {
	for k := range cc.RuntimeParams {
		if !standardParams[k] {
			delete(cc.RuntimeParams, k)
		}
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	cc.StatementCacheCapacity = 0
}

// notePooled records that a connection was refused for its start-up
// parameters: the store is behind a pooler from now on.
func (f *failover) notePooled(err error) {
	if refusedStartup(err) && f.pooled.CompareAndSwap(false, true) {
		f.log.Info("the journal is behind a connection pooler (it refused a start-up parameter): connecting without them, " +
			"with unnamed statements and no session state (set WHGUARD_DATABASE_LISTEN_URL to a direct connection for LISTEN and the session locks)")
	}
}

// Pooled reports whether the store found itself behind a connection
// pooler.
func (p *Postgres) Pooled() bool { return p.failover.pooled.Load() }

// sessionConn is a connection for what needs a session (a session
// advisory lock, LISTEN): on WHGUARD_DATABASE_LISTEN_URL when set, else
// on the main URL with only its own parameters. The caller closes it.
func (p *Postgres) sessionConn(ctx context.Context) (*pgx.Conn, error) {
	cc := p.listenConfig
	if cc == nil {
		cc = p.failover.probe
	}
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		p.failover.notePooled(err)
		return nil, fmt.Errorf("connect for a session: %w", err)
	}
	// Closed with the pools' connections when the primary moves.
	if err := p.failover.track(ctx, conn); err != nil {
		closeSession(ctx, conn)
		return nil, fmt.Errorf("connect for a session: %w", err)
	}
	return conn, nil
}

// closeSession closes a session connection, bounded: pgx waits for the
// server to end the session, which a frozen one never does.
func closeSession(ctx context.Context, conn *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = conn.Close(cctx)
}

// hasSession reports whether session state can be had: a direct
// connection is configured, or the main URL is not a pooler's.
func (p *Postgres) hasSession() bool { return p.listenConfig != nil || !p.Pooled() }

// logNoSession says once why wake-ups are polled.
func (p *Postgres) logNoSession() {
	if p.warnedNoSession.CompareAndSwap(false, true) {
		p.log.Info("behind a connection pooler without WHGUARD_DATABASE_LISTEN_URL: other replicas' new events are found by polling",
			zap.String("set", "WHGUARD_DATABASE_LISTEN_URL"))
	}
}
