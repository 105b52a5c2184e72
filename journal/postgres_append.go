package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.uber.org/zap"
)

// Append journals a batch of events in one transaction and says, for each
// event, whether it was new, a duplicate or a conflict. Only the unique
// constraint decides: an INSERT of the keys the statement does not see,
// run again as INSERT … ON CONFLICT DO NOTHING when the constraint refuses
// it, then the existing rows' content hashes for the keys that were not
// inserted. Nothing is committed when an error is returned, and then no
// event may be acknowledged.
//
// The batch is sorted by key and in-batch duplicates are folded before the
// statement, so concurrent batches take index locks in the same order and
// cannot deadlock.
func (p *Postgres) Append(ctx context.Context, events []Event) ([]Result, error) {
	if len(events) == 0 {
		return nil, nil
	}
	return appendScreened(ctx, events, p.appendBatch)
}

// appendBatch is Append of events whose values are storable.
func (p *Postgres) appendBatch(ctx context.Context, events []Event) ([]Result, error) {
	entries := groupByKey(events)
	n := len(entries)
	providers, ids, types, hashes := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	paths, queries := make([]string, n), make([]string, n)
	headers, bodies := make([][]byte, n), make([][]byte, n)
	received := make([]time.Time, n)
	leaseSecs, tokens := make([]float64, n), make([]pgtype.UUID, n)
	guards, orderKeys, orderBlock := make([]string, n), make([]string, n), make([]bool, n)
	ignored, schemes, answers := make([]bool, n), make([]string, n), make([]int32, n)
	// sources stays empty while every event is a plain webhook (nearly
	// always): unnest pads it with NULLs, read as webhook, and the batch
	// encodes no array for it.
	var sources []string
	// traces likewise stays empty while no event has a trace context
	// (traces off): NULLs, and no array encoded.
	var traces []string
	claimsOnly := true // no new row will be pending: nobody else need hear of them
	now := time.Now()
	for i, e := range entries {
		leaseSecs[i], tokens[i], guards[i] = e.ev.LeaseFor.Seconds(), pgUUID(e.ev.LeaseToken), guardOf(e.ev)
		ignored[i], schemes[i], answers[i] = e.ev.Ignored, e.ev.Scheme, int32(e.ev.Answer)
		if arg := e.ev.sourceArg(); arg != SourceWebhook {
			if sources == nil {
				sources = make([]string, n)
				for j := range i {
					sources[j] = SourceWebhook
				}
			}
			sources[i] = arg
		} else if sources != nil {
			sources[i] = arg
		}
		if e.ev.TraceContext != "" && traces == nil {
			traces = make([]string, n)
		}
		if traces != nil {
			traces[i] = e.ev.TraceContext
		}
		if !e.ev.Ignored {
			// An ignored event takes no place in its key's line: it is
			// never delivered unless replayed, so it must not hold a key.
			orderKeys[i], orderBlock[i] = e.ev.OrderKey, e.ev.OrderBlock
		}
		// An ordered event may end up pending behind its key's holder.
		claimsOnly = claimsOnly && (e.ev.LeaseFor > 0 && orderKeys[i] == "" || e.ev.Ignored)
		providers[i], ids[i], types[i], hashes[i] = e.ev.Provider, e.ev.EventID, e.ev.EventType, e.ev.ContentHash
		paths[i], queries[i], bodies[i] = e.ev.Path, e.ev.RawQuery, nonNil(e.ev.Body)
		h, err := marshalHeaders(e.ev.Headers, e.ev.AsReceived)
		if err != nil {
			return nil, err
		}
		headers[i] = h
		received[i] = e.ev.ReceivedAt
		if received[i].IsZero() {
			received[i] = now
		}
	}
	// At most one NOTIFY per notifyEvery, counting only batches that
	// inserted something (a batch of duplicates must not use up the window
	// of the real batch after it).
	notify, notifyAt := "", time.Now().UnixNano()
	if !claimsOnly && notifyAt-p.lastNotify.Load() >= int64(notifyEvery) {
		notify = p.instance
	}

	// One statement, one round trip, one commit: insert the new events
	// and their payloads, announce them, and read back the stored row of
	// every key that was not new. Under load the CPU is shared with
	// PostgreSQL and every round trip waits its turn, so this is what
	// bounds ingest.
	args := []any{providers, ids, types, hashes, received, headers, bodies, paths, queries,
		NotifyChannel, notify, leaseSecs, tokens, guards, orderKeys, orderBlock, ignored, schemes, sources, answers, traces}
	stmts := sqlAppend
	if slices.ContainsFunc(orderKeys, func(k string) bool { return k != "" }) {
		stmts = sqlAppendOrdered
	}
	ins, err := p.insertBatch(ctx, stmts.insert, providers, orderKeys, received, entries, args)
	if isUniqueViolation(err) {
		// A concurrent batch committed one of these keys after this
		// statement's snapshot: the constraint refused the plain insert
		// (nothing of it is committed). The same batch with ON CONFLICT
		// DO NOTHING waits for no one and sorts new keys from old.
		ins, err = p.insertBatch(ctx, stmts.onConflict, providers, orderKeys, received, entries, args)
	}
	if err != nil {
		return p.appendFailed(ctx, events, err)
	}
	refs, isNew, behind, inserted := ins.refs, ins.isNew, ins.behind, ins.inserted

	if inserted > 0 && notify != "" {
		p.lastNotify.Store(notifyAt)
	}
	if inserted > 0 {
		p.grew(inserted)
	}

	// Rare: a key neither inserted nor visible to that statement's snapshot
	// was committed by a concurrent batch while ours waited on the unique
	// index. A new statement (READ COMMITTED: a new snapshot) sees it.
	var lookProv, lookID []string
	for i, r := range refs {
		if r.id == 0 {
			lookProv, lookID = append(lookProv, providers[i]), append(lookID, ids[i])
		}
	}
	// The batch is committed: a failure from here on must not fail it (its
	// new events would be answered 503), only the events it concerns,
	// which are answered as not stored (Unrecorded) and retried by their
	// senders.
	unresolved := map[int]bool{}
	if len(lookProv) > 0 {
		found, err := p.existingByKey(ctx, lookProv, lookID)
		if err != nil {
			p.log.Warn("look up existing events failed", zap.Error(err))
		}
		for i, r := range refs {
			if r.id != 0 {
				continue
			}
			f, ok := found[[2]string{providers[i], ids[i]}]
			if !ok && err == nil && guards[i] != "" {
				// Not the key: the body guard refused it (a replay).
				gerr := p.ingest.QueryRow(ctx, sqlExistingByGuard, providers[i], guards[i]).Scan(&f.id, &f.hash)
				if gerr != nil && !errors.Is(gerr, pgx.ErrNoRows) {
					p.log.Warn("look up the event a copy repeats failed", zap.Error(gerr))
				}
				f.replayOf, ok = gerr == nil, gerr == nil
			}
			if !ok {
				// Deleted between the two statements (retention), or the
				// look-up failed.
				unresolved[i] = true
				continue
			}
			refs[i] = f
		}
	}

	results := make([]Result, len(events))
	for i, e := range entries {
		if unresolved[i] {
			for _, j := range e.indexes {
				results[j] = Result{Outcome: Unrecorded}
			}
			continue
		}
		e.judge(results, events, refs[i], isNew[i])
		if isNew[i] && behind[i] {
			results[e.indexes[0]].Behind = true
		}
	}
	// Record every conflicting payload for inspection (rare). The batch
	// is already committed: a copy that cannot be recorded is answered as
	// not stored (Unrecorded) and fails nothing else, or the new events
	// committed with it would be answered 503 as well.
	for i := range events {
		if !recordsCopy(results[i].Outcome) {
			continue
		}
		h, err := marshalHeaders(events[i].Headers, events[i].AsReceived)
		if err == nil {
			_, err = p.ingest.Exec(ctx, sqlInsertConflict, results[i].ID, events[i].ContentHash, h, nonNil(events[i].Body), maxCopies)
		}
		if err != nil {
			p.log.Warn("record conflicting copy failed", zap.String("provider", events[i].Provider), zap.Error(err))
			results[i].Outcome = Unrecorded
		}
	}
	return results, nil
}

// insertedBatch is what one run of the append's statement found: for each
// entry of the batch, its row (zero when the statement saw none), whether
// the statement inserted it, and whether it waits behind its order key.
type insertedBatch struct {
	refs          []existingRow
	isNew, behind []bool
	inserted      int
}

// insertBatch runs stmt (one of sqlAppend's or sqlAppendOrdered's) over the
// batch's arguments and commits it, in a transaction holding the batch's
// order-key locks when it has ordered events, which also records the
// holds of those inserted behind their key (received: each entry's
// receipt time). An error means nothing of it is committed.
func (p *Postgres) insertBatch(ctx context.Context, stmt string, providers, orderKeys []string, received []time.Time,
	entries []*batchEntry, args []any) (insertedBatch, error) {
	n := len(entries)
	out := insertedBatch{refs: make([]existingRow, n), isNew: make([]bool, n), behind: make([]bool, n)}
	var q interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	} = p.ingest
	tx, err := p.lockOrderKeys(ctx, providers, orderKeys)
	if err != nil {
		return out, err
	}
	if tx != nil {
		q = tx
		// A no-op once committed; before any retry otherwise, whose
		// order-key locks this one would hold.
		defer tx.Rollback(context.WithoutCancel(ctx))
	}
	rows, err := q.Query(ctx, stmt, args...)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	var (
		ord          int64
		newID, oldID *int64
		oldHash      *string
		waits        bool
		catchup      bool
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &newID, &oldID, &oldHash, &waits, &catchup}, func() error {
		i := ord - 1
		switch {
		case newID != nil:
			out.inserted++
			out.behind[i] = waits
			out.refs[i], out.isNew[i] = existingRow{id: *newID, hash: entries[i].ev.ContentHash, catchup: catchup}, true
		case oldID != nil:
			out.refs[i] = existingRow{id: *oldID, hash: *oldHash, catchup: catchup}
		}
		return nil
	})
	if err == nil && tx != nil {
		var ids []int64
		var at []time.Time
		for i, b := range out.behind {
			if b && out.isNew[i] {
				ids, at = append(ids, out.refs[i].id), append(at, received[i])
			}
		}
		if len(ids) > 0 {
			_, err = tx.Exec(ctx, sqlOrderHolds, ids, at)
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
	}
	return out, err
}

// existingByKey reads the stored id and content hash of keys.
func (p *Postgres) existingByKey(ctx context.Context, provs, ids []string) (map[[2]string]existingRow, error) {
	found := map[[2]string]existingRow{}
	rows, err := p.ingest.Query(ctx, sqlExistingByKey, provs, ids)
	if err != nil {
		return nil, fmt.Errorf("look up existing events: %w", err)
	}
	var (
		rowID      int64
		prov, evID string
		hash       string
		source     string
	)
	_, err = pgx.ForEachRow(rows, []any{&rowID, &prov, &evID, &hash, &source}, func() error {
		found[[2]string{prov, evID}] = existingRow{id: rowID, hash: hash, catchup: source == SourceCatchup}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up existing events: %w", err)
	}
	return found, nil
}

// appendFailed answers a batch whose statement or commit failed with err.
// A data exception is about a request's values, not the database:
// retrying the batch cannot help, so alone the event is Refused, and in a
// batch each event is appended alone, so that only the culprit is refused
// and the rest go on. Any other error fails the batch (nothing of it is
// committed).
func (p *Postgres) appendFailed(ctx context.Context, events []Event, err error) ([]Result, error) {
	if !isDataError(err) {
		return nil, fmt.Errorf("append %d events: %w", len(events), err)
	}
	if len(events) == 1 {
		p.log.Warn("journal refused an event's data", zap.String("provider", events[0].Provider), zap.Error(err))
		return []Result{{Outcome: Refused}}, nil
	}
	return p.appendOneByOne(ctx, events)
}

// appendOneByOne appends each event in its own statement (an event whose
// data the database refuses comes back Refused). Used after a data error
// poisoned a batch.
func (p *Postgres) appendOneByOne(ctx context.Context, events []Event) ([]Result, error) {
	out := make([]Result, len(events))
	for i := range events {
		r, err := p.Append(ctx, events[i:i+1])
		if err != nil {
			if i == 0 {
				return nil, err // nothing committed yet
			}
			// The ones before are committed: only this one is not.
			p.log.Warn("append one event failed", zap.String("provider", events[i].Provider), zap.Error(err))
			out[i] = Result{Outcome: Unrecorded}
			continue
		}
		out[i] = r[0]
	}
	return out, nil
}

// lockOrderKeys, for a batch with ordered events, begins the append's
// transaction and takes a lock per order key (released at its commit), in
// one sorted order. The append decides whether an ordered event may be
// claimed from the rows of its key it can see; two appends of one key
// committing at the same time (two commits in flight, or two replicas)
// would not see each other and both claim, delivering two events of the
// key at once. With the lock the second waits for the first's commit and
// then, in a new statement (a new snapshot), sees its row. Batches without
// ordered events take no lock and keep their single implicit transaction.
func (p *Postgres) lockOrderKeys(ctx context.Context, providers, orderKeys []string) (pgx.Tx, error) {
	var keys []string
	for i, k := range orderKeys {
		if k != "" {
			keys = append(keys, providers[i]+"\x1f"+k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	tx, err := p.ingest.Begin(ctx)
	if err != nil {
		return nil, err
	}
	// unnest yields the sorted array in order, so the locks are taken in
	// that order whatever the batch (no two batches wait on each other).
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) AS k`, keys); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("lock order keys: %w", err)
	}
	return tx, nil
}
