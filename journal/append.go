package journal

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
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
	// catchup: the stored row came in by catch-up.
	catchup bool
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
		o := outcomeFor(ref.hash, events[i].ContentHash)
		if o == Conflict && (ref.catchup || events[i].Source == SourceCatchup) {
			// The API's rendering of an event and its webhook's differ
			// (pending_webhooks, key order, whitespace): one event, not a
			// conflict, and no copy recorded.
			o = Duplicate
		}
		results[i] = Result{ID: ref.id, Outcome: o}
	}
}

// sourceArg is how an event's source is written: its Source, or "asked"
// when the store is to look up whether catch-up asked for it.
func (e *Event) sourceArg() string {
	switch {
	case e.Source == SourceCatchup:
		return SourceCatchup
	case e.CatchupAsked:
		return "asked"
	}
	return SourceWebhook
}

func outcomeFor(storedHash, hash string) Outcome {
	if storedHash == hash {
		return Duplicate
	}
	return Conflict
}

// marshalHeaders encodes an event's headers as stored: h, and for each
// header of was (Event.AsReceived) its received values under
// receivedPrefix. The two are encoded apart and joined, so the common
// event costs no copy of its headers.
func marshalHeaders(h, was http.Header) ([]byte, error) {
	if h == nil {
		h = http.Header{}
	}
	b, err := json.Marshal(rawHeaderValues(h))
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	if len(was) == 0 {
		return b, nil
	}
	m, err := receivedMarks(was)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	if len(b) == 2 { // {}
		return m, nil
	}
	return append(append(b[:len(b)-1], ','), m[1:]...), nil
}

// receivedMarks encodes was: the names of the headers that were absent
// when received as one list under receivedPrefix alone, and each received
// one's values under receivedPrefix and its name. The common case, headers
// none of which was received (no proxy in front), is written directly:
// most events carry it, and one list costs about half the bytes of a key
// per header. (Rows written before hold a key per header, "[]" when it was
// absent; both are read.)
func receivedMarks(was http.Header) ([]byte, error) {
	plain := true
	for name, vs := range was {
		if len(vs) > 0 || !plainName(name) {
			plain = false
			break
		}
	}
	if plain {
		m := make([]byte, 0, 16+len(was)*20)
		m = append(m, `{"`+receivedPrefix+`":[`...)
		first := true
		for name := range was {
			if !first {
				m = append(m, ',')
			}
			first = false
			m = append(append(append(m, '"'), name...), '"')
		}
		return append(m, "]}"...), nil
	}
	marks := make(http.Header, len(was))
	var absent []string
	for name, vs := range was {
		if len(vs) == 0 {
			absent = append(absent, name)
			continue
		}
		marks[receivedPrefix+name] = vs
	}
	if absent != nil {
		marks[receivedPrefix] = absent
	}
	return json.Marshal(rawHeaderValues(marks))
}

// plainName reports whether a header name needs no escaping in JSON.
func plainName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return name != ""
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

// unstorable says why an event's values cannot be stored as they are by
// either store, or returns nil. Every field of an Event comes from a
// request, and one value a column refuses (a NUL, invalid UTF-8: PostgreSQL
// refuses both in text, SQLSTATE 22021) would fail the whole group commit
// it shares with other senders' events. Such an event is Refused alone,
// before any statement; the values checked here are those the ingress
// cannot escape without changing what they mean (the key, the path, the
// query). Header values are kept byte for byte (rawHeaderValues), bodies
// are bytes, and order keys arrive as digests (OrderKeyDigest).
func unstorable(e *Event) error {
	for _, f := range [...]struct{ name, v string }{
		{"provider", e.Provider}, {"event id", e.EventID}, {"event type", e.EventType},
		{"content hash", e.ContentHash}, {"path", e.Path}, {"query", e.RawQuery}, {"order key", e.OrderKey},
	} {
		if !storableField(f.v) {
			return fmt.Errorf("the %s holds a NUL or is not valid UTF-8", f.name)
		}
	}
	for name := range e.Headers {
		if !storableField(name) || strings.HasPrefix(name, rawPrefix) {
			return errors.New("a header name is not storable")
		}
	}
	return nil
}

// storableField reports whether s fits a text column of both stores as it
// is: valid UTF-8 without NUL.
func storableField(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// appendScreened refuses the events whose values cannot be stored
// (unstorable) and appends the rest with appendFn, so that one event's
// bytes never fail another's commit. A batch that holds none costs one
// pass over its fields.
func appendScreened(ctx context.Context, events []Event, appendFn func(context.Context, []Event) ([]Result, error)) ([]Result, error) {
	bad := -1
	for i := range events {
		if unstorable(&events[i]) != nil {
			bad = i
			break
		}
	}
	if bad < 0 {
		return appendFn(ctx, events)
	}
	results := make([]Result, len(events))
	kept := make([]Event, 0, len(events)-1)
	at := make([]int, 0, len(events)-1)
	for i := range events {
		if i >= bad && unstorable(&events[i]) != nil {
			results[i] = Result{Outcome: Refused}
			continue
		}
		kept, at = append(kept, events[i]), append(at, i)
	}
	if len(kept) == 0 {
		return results, nil
	}
	got, err := appendFn(ctx, kept)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		results[i] = got[k]
	}
	return results, nil
}

// OrderKeyDigest is the form in which an order key value is stored,
// locked and indexed: "sha256:" and the hex SHA-256 of the value, a fixed
// 71 bytes whatever the sender put in it (NUL, invalid UTF-8, 60 KB). ""
// stays "" (unordered).
func OrderKeyDigest(v string) string {
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return orderKeyPrefix + hex.EncodeToString(sum[:])
}

const orderKeyPrefix = "sha256:"
