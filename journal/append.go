package journal

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
)

// batchEntry is one distinct key of a batch, with the batch indexes that
// carry it.
type batchEntry struct {
	ev      *Event
	indexes []int
}

// groupByKey folds a batch by key (the first event of a key leads) and
// sorts the keys, so concurrent batches lock index entries in one order and
// cannot deadlock (ordered events excepted: see below).
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
		if c := cmp.Compare(a.ev.Provider, b.ev.Provider); c != 0 {
			return c
		}
		// Ordered events go in (and get their ids) in the order they were
		// received: the id is their place in line. They sort after the
		// unordered ones, by key then arrival. Two batches holding the
		// same two ordered events received in opposite orders could still
		// wait on each other; only resends of both at once do that, and
		// the database then fails one batch, whose senders retry.
		if a.ev.OrderKey != "" || b.ev.OrderKey != "" {
			return cmp.Or(cmp.Compare(a.ev.OrderKey, b.ev.OrderKey), cmp.Compare(a.indexes[0], b.indexes[0]))
		}
		return cmp.Compare(a.ev.EventID, b.ev.EventID)
	})
	return entries
}

type existingRow struct {
	id   int64
	hash string
	// replayOf: the row was found by the body guard, not by the key.
	replayOf bool
}

// judge sets the result of every event of the entry's key: the leader is
// Inserted when this batch created the row; every other copy is a
// Duplicate or a Conflict by its content hash against the stored row.
func (e *batchEntry) judge(results []Result, events []Event, ref existingRow, isNew bool) {
	for n, i := range e.indexes {
		if ref.replayOf {
			results[i] = Result{ID: ref.id, Outcome: Replayed}
			continue
		}
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
	h = rawHeaderValues(h)
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

// guardOf is the body_guard value of an event: its type and content hash
// when the event is body-guarded, else nothing (NULL). The type is part of
// it because senders send one body under several types (Shopify's
// orders/create and orders/paid carry the same order): those are distinct
// events, not replays.
func guardOf(e *Event) string {
	if e.BodyGuard {
		return e.EventType + "\x1f" + e.ContentHash // a type never holds a control character
	}
	return ""
}

// recordsCopy reports the outcomes whose payload is recorded beside the
// first event's: conflicts and replays.
func recordsCopy(o Outcome) bool { return o == Conflict || o == Replayed }

// maxCopies bounds the conflicting copies kept per event: the first ones
// show what went wrong; more would let a sender resending one body fill
// the disk.
const maxCopies = 10
