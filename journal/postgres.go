package journal

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
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
}

// Postgres is the PostgreSQL journal. It is safe for concurrent use.
type Postgres struct {
	pool *pgxpool.Pool
	log  *zap.Logger
}

// OpenPostgres connects (lazily: an unreachable server is not an error here,
// so whguard can start and answer 503 until the database comes back).
func OpenPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's message may contain the password: do not wrap it verbatim.
		return nil, errors.New("parse WHGUARD_DATABASE_URL: not a valid postgres connection string")
	}
	pc.MaxConns = cmp.Or(cfg.MaxConns, 16)
	pc.ConnConfig.ConnectTimeout = cmp.Or(pc.ConnConfig.ConnectTimeout, 5*time.Second)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Postgres{pool: pool, log: log}, nil
}

// Close releases every connection.
func (p *Postgres) Close() { p.pool.Close() }

// Pool exposes the connection pool to the forwarder's LISTEN loop and tests.
func (p *Postgres) Pool() *pgxpool.Pool { return p.pool }

// Ready reports whether the database answers and carries this binary's
// schema version; ErrNotMigrated when it answers but is behind.
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
	return nil
}

// batchEntry is one distinct key of a batch, with the batch indexes that
// carry it.
type batchEntry struct {
	ev      *Event
	indexes []int
}

// groupByKey folds a batch by key (the first event of a key leads) and
// sorts the keys, so concurrent batches lock index entries in one order and
// cannot deadlock.
func groupByKey(events []Event) []*batchEntry {
	byKey := map[[2]string]*batchEntry{}
	var entries []*batchEntry
	for i := range events {
		k := [2]string{events[i].Provider, events[i].EventID}
		if e, ok := byKey[k]; ok {
			e.indexes = append(e.indexes, i)
			continue
		}
		e := &batchEntry{ev: &events[i], indexes: []int{i}}
		byKey[k] = e
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b *batchEntry) int {
		return cmp.Or(cmp.Compare(a.ev.Provider, b.ev.Provider), cmp.Compare(a.ev.EventID, b.ev.EventID))
	})
	return entries
}

// Append journals a batch of events in one transaction and says, for each
// event, whether it was new, a duplicate or a conflict. Only the unique
// constraint decides: INSERT … ON CONFLICT DO NOTHING, then the existing
// rows' content hashes for the keys that were not inserted. Nothing is
// committed when an error is returned, and then no event may be
// acknowledged.
//
// The batch is sorted by key and in-batch duplicates are folded before the
// statement, so concurrent batches take index locks in the same order and
// cannot deadlock.
func (p *Postgres) Append(ctx context.Context, events []Event) ([]Result, error) {
	if len(events) == 0 {
		return nil, nil
	}
	entries := groupByKey(events)
	n := len(entries)
	providers, ids, types, hashes := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	received := make([]time.Time, n)
	now := time.Now()
	for i, e := range entries {
		providers[i], ids[i], types[i], hashes[i] = e.ev.Provider, e.ev.EventID, e.ev.EventType, e.ev.ContentHash
		received[i] = e.ev.ReceivedAt
		if received[i].IsZero() {
			received[i] = now
		}
	}

	results := make([]Result, len(events))
	// READ COMMITTED is required, whatever the server default: the lookup
	// after ON CONFLICT DO NOTHING must see the row a concurrent batch just
	// committed (it waited for it), which a REPEATABLE READ snapshot hides.
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlInsertEvents, providers, ids, types, hashes, received)
		if err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		inserted := map[[2]string]int64{}
		var (
			rowID      int64
			prov, evID string
		)
		_, err = pgx.ForEachRow(rows, []any{&rowID, &prov, &evID}, func() error {
			inserted[[2]string{prov, evID}] = rowID
			return nil
		})
		if err != nil {
			return fmt.Errorf("insert events: %w", err)
		}

		// Payloads of the new rows; the other keys are looked up.
		var (
			payRowIDs            []int64
			payHeaders           [][]byte
			payBodies            [][]byte
			payPaths, payQueries []string
			lookupProv, lookupID []string
		)
		for _, e := range entries {
			id, ok := inserted[[2]string{e.ev.Provider, e.ev.EventID}]
			if !ok {
				lookupProv, lookupID = append(lookupProv, e.ev.Provider), append(lookupID, e.ev.EventID)
				continue
			}
			h, err := marshalHeaders(e.ev.Headers)
			if err != nil {
				return err
			}
			payRowIDs = append(payRowIDs, id)
			payHeaders = append(payHeaders, h)
			payBodies = append(payBodies, nonNil(e.ev.Body))
			payPaths = append(payPaths, e.ev.Path)
			payQueries = append(payQueries, e.ev.RawQuery)
		}
		if len(payRowIDs) > 0 {
			if _, err := tx.Exec(ctx, sqlInsertPayloads, payRowIDs, payHeaders, payBodies, payPaths, payQueries); err != nil {
				return fmt.Errorf("insert payloads: %w", err)
			}
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, NotifyChannel); err != nil {
				return fmt.Errorf("notify new events: %w", err)
			}
		}

		existing := map[[2]string]existingRow{}
		if len(lookupProv) > 0 {
			rows, err := tx.Query(ctx, sqlExistingByKey, lookupProv, lookupID)
			if err != nil {
				return fmt.Errorf("look up existing events: %w", err)
			}
			var hash string
			_, err = pgx.ForEachRow(rows, []any{&rowID, &prov, &evID, &hash}, func() error {
				existing[[2]string{prov, evID}] = existingRow{id: rowID, hash: hash}
				return nil
			})
			if err != nil {
				return fmt.Errorf("look up existing events: %w", err)
			}
		}

		// Every index of a key is judged against the stored content: the
		// leader's own when this batch inserted it, the old row's otherwise.
		for _, e := range entries {
			k := [2]string{e.ev.Provider, e.ev.EventID}
			ref, isNew := existingRow{}, false
			if id, ok := inserted[k]; ok {
				ref, isNew = existingRow{id: id, hash: e.ev.ContentHash}, true
			} else if ex, ok := existing[k]; ok {
				ref = ex
			} else {
				// Not inserted yet not found: only if the row was deleted
				// between the two statements. Fail the batch; senders retry.
				return fmt.Errorf("event %s/%s neither inserted nor found", k[0], k[1])
			}
			e.judge(results, events, ref, isNew)
		}
		// Record every conflicting payload for inspection.
		for i := range events {
			if results[i].Outcome != Conflict {
				continue
			}
			h, err := marshalHeaders(events[i].Headers)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, sqlInsertConflict, results[i].ID, events[i].ContentHash, h, nonNil(events[i].Body)); err != nil {
				return fmt.Errorf("record conflict: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("append %d events: %w", len(events), err)
	}
	return results, nil
}

type existingRow struct {
	id   int64
	hash string
}

// judge sets the result of every event of the entry's key: the leader is
// Inserted when this batch created the row; every other copy is a
// Duplicate or a Conflict by its content hash against the stored row.
func (e *batchEntry) judge(results []Result, events []Event, ref existingRow, isNew bool) {
	for n, i := range e.indexes {
		if n == 0 && isNew {
			results[i] = Result{ID: ref.id, Outcome: Inserted}
			continue
		}
		results[i] = Result{ID: ref.id, Outcome: outcomeFor(ref.hash, events[i].ContentHash)}
	}
}

func outcomeFor(storedHash, hash string) Outcome {
	if storedHash == hash {
		return Duplicate
	}
	return Conflict
}

func marshalHeaders(h http.Header) ([]byte, error) {
	if h == nil {
		h = http.Header{}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	return b, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

const sqlInsertEvents = `
INSERT INTO whguard_events (provider, event_id, event_type, content_hash, received_at, next_attempt_at)
SELECT p, e, t, h, r, now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS b(p, e, t, h, r)
ON CONFLICT (provider, event_id) DO NOTHING
RETURNING id, provider, event_id`

const sqlInsertPayloads = `
INSERT INTO whguard_payloads (event_row_id, headers, body, path, raw_query)
SELECT * FROM unnest($1::bigint[], $2::jsonb[], $3::bytea[], $4::text[], $5::text[])`

const sqlExistingByKey = `
SELECT ev.id, ev.provider, ev.event_id, ev.content_hash
FROM whguard_events ev
JOIN unnest($1::text[], $2::text[]) AS k(p, e) ON ev.provider = k.p AND ev.event_id = k.e`

const sqlInsertConflict = `
INSERT INTO whguard_conflicts (event_row_id, content_hash, headers, body) VALUES ($1, $2, $3, $4)`
