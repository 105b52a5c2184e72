package journal_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// hostileEvent builds an event whose every field a sender controls holds
// the given values.
func hostileEvent(id, typ, path, query, orderKey, header, value string, body []byte) journal.Event {
	return journal.Event{
		Provider: "p", EventID: id, EventType: typ, ContentHash: "h-" + id,
		Headers: http.Header{header: {value}, "Content-Type": {"application/json; " + value}},
		Body:    body, Path: path, RawQuery: query, OrderKey: orderKey,
	}
}

// checkHostileBatch appends a genuine event and a hostile one in one batch:
// the genuine one is inserted, the hostile one gets a definite outcome
// (never a failed batch), and a hostile event that was stored keeps its
// header value byte for byte.
func checkHostileBatch(t *testing.T, s journal.Store, n int64, hostile journal.Event) {
	t.Helper()
	genuine := ev("p", fmt.Sprintf("genuine-%d", n), "g")
	res, err := s.Append(context.Background(), []journal.Event{hostile, genuine})
	if err != nil {
		t.Fatalf("a batch failed over one event's values: %v (event %+q)", err, hostile.EventID)
	}
	if res[1].Outcome != journal.Inserted {
		t.Fatalf("genuine event: %v", res[1].Outcome)
	}
	switch res[0].Outcome {
	case journal.Refused, journal.Duplicate, journal.Conflict:
	case journal.Inserted:
		d, err := s.Get(context.Background(), res[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range hostile.Headers {
			if got := d.Headers[name]; len(got) != 1 || got[0] != want[0] {
				t.Fatalf("header %q stored as %q, want %q", name, got, want)
			}
		}
	default:
		t.Fatalf("hostile event: %v", res[0].Outcome)
	}
}

// TestHostileFieldsAreRefusedAlone: on both stores, every field of an
// event made of NUL, invalid UTF-8 or control characters is either stored
// (headers byte for byte) or the event alone is Refused, and the events
// beside it in its batch are inserted.
func TestHostileFieldsAreRefusedAlone(t *testing.T) {
	testdb.ForEachStoreParallel(t, func(t *testing.T, store string) {
		s := testdb.OpenStore(t, store, true)
		var n int64
		for i, v := range []string{"\x00", "a\x00b", "\xff\xfe", "\xed\xa0\x80", "\x01\x1b[31m", "\x7f"} {
			base := hostileEvent(fmt.Sprintf("ok-%d", i), "t", "/webhooks/p", "q=1", journal.OrderKeyDigest(v), "X-Entity", v, []byte(v))
			checkHostileBatch(t, s, n, base)
			n++
			for _, mutate := range []func(*journal.Event){
				func(e *journal.Event) { e.EventID += v },
				func(e *journal.Event) { e.EventType = v },
				func(e *journal.Event) { e.Path += v },
				func(e *journal.Event) { e.RawQuery = v },
				func(e *journal.Event) { e.OrderKey = v },
				func(e *journal.Event) { e.Headers[v] = []string{"x"} },
			} {
				e := hostileEvent(fmt.Sprintf("m-%d-%d", i, n), "t", "/webhooks/p", "", "", "X-Entity", v, nil)
				mutate(&e)
				checkHostileBatch(t, s, n, e)
				n++
			}
		}
	})
}

// FuzzHostileFields: whatever a sender puts in any field, a batch never
// fails over it (run on the embedded store, and on PostgreSQL when the
// fuzzer is asked for it: go test -run '^$' -fuzz FuzzHostileFields
// ./journal/ with TEST_FUZZ_STORE=postgres).
func FuzzHostileFields(f *testing.F) {
	f.Add("evt_1", "invoice.paid", "/webhooks/p", "a=1", "sub_1", "X-Entity", "v", []byte(`{"a":1}`))
	f.Add("evt\x00", "t\xff", "/w\x00", "q=\xff", "\xff\xfe", "X\x00", "\x00", []byte{0, 0xff})
	f.Add("\xed\xa0\x80", "\x01", "/", "", "k", "Content-Type", "\xc3\x28", []byte(nil))
	store := "sqlite"
	if v := os.Getenv("TEST_FUZZ_STORE"); v != "" {
		store = v
	}
	s := testdb.OpenStore(f, store, true)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, id, typ, path, query, orderKey, header, value string, body []byte) {
		if header == "" {
			header = "X-Empty"
		}
		checkHostileBatch(t, s, n.Add(1), hostileEvent(id, typ, path, query, orderKey, header, value, body))
	})
}
