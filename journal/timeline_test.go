package journal

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Stored headers give back both views: as forwarded (what the ingress set
// included) and exactly as received, whatever the bytes.
func TestStoredHeadersKeepWhatWasReceived(t *testing.T) {
	for _, c := range []struct {
		name                string
		headers, was        http.Header
		forwarded, received http.Header
	}{
		{"nothing set", http.Header{"A": {"1"}}, nil, http.Header{"A": {"1"}}, http.Header{"A": {"1"}}},
		{"added and appended",
			http.Header{"A": {"1"}, "X-Forwarded-For": {"10.0.0.1, 127.0.0.1"}, "X-Forwarded-Proto": {"http"}},
			http.Header{"X-Forwarded-For": {"10.0.0.1"}, "X-Forwarded-Proto": {}},
			http.Header{"A": {"1"}, "X-Forwarded-For": {"10.0.0.1, 127.0.0.1"}, "X-Forwarded-Proto": {"http"}},
			http.Header{"A": {"1"}, "X-Forwarded-For": {"10.0.0.1"}}},
		{"received bytes that are not UTF-8",
			http.Header{"Forwarded": {"for=x"}},
			http.Header{"Forwarded": {"for=\xff", "\x00"}, "X-Forwarded-Host": nil},
			http.Header{"Forwarded": {"for=x"}},
			http.Header{"Forwarded": {"for=\xff", "\x00"}}},
		{"no headers of its own", http.Header{}, http.Header{"X-Forwarded-For": {}}, http.Header{}, http.Header{}},
		{"no proxy in front",
			http.Header{"A": {"1"}, "X-Forwarded-For": {"127.0.0.1"}, "X-Forwarded-Proto": {"http"}, "Forwarded": {"for=127.0.0.1"}},
			http.Header{"X-Forwarded-For": {}, "X-Forwarded-Proto": nil, "Forwarded": {}},
			http.Header{"A": {"1"}, "X-Forwarded-For": {"127.0.0.1"}, "X-Forwarded-Proto": {"http"}, "Forwarded": {"for=127.0.0.1"}},
			http.Header{"A": {"1"}}},
	} {
		b, err := marshalHeaders(c.headers, c.was)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fwd, recv, err := decodeStoredHeaders(string(b))
		if err != nil || !reflect.DeepEqual(fwd, c.forwarded) || !reflect.DeepEqual(recv, c.received) {
			t.Errorf("%s: stored %s: forwarded %q, received %q, %v; want %q and %q", c.name, b, fwd, recv, err, c.forwarded, c.received)
		}
		if plain, err := decodeHeaders(string(b)); err != nil || !reflect.DeepEqual(plain, c.forwarded) {
			t.Errorf("%s: decodeHeaders %q, %v; want the forwarded view", c.name, plain, err)
		}
	}
}

// The headers the ingress set without a proxy in front are stored as one
// list of names, not a key each; rows written with a key each (an empty
// list: absent when received) read the same.
func TestStoredHeadersAbsentAsOneList(t *testing.T) {
	h := http.Header{"A": {"1"}, "X-Forwarded-For": {"127.0.0.1"}, "Forwarded": {"for=127.0.0.1"}}
	b, err := marshalHeaders(h, http.Header{"X-Forwarded-For": {}, "Forwarded": {}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `":received:":[`) || strings.Contains(string(b), `":received:X`) {
		t.Errorf("stored %s: want the absent headers as one list", b)
	}
	old := `{"A":["1"],"X-Forwarded-For":["127.0.0.1"],"Forwarded":["for=127.0.0.1"],":received:X-Forwarded-For":[],":received:Forwarded":[]}`
	for _, stored := range []string{string(b), old} {
		fwd, recv, err := decodeStoredHeaders(stored)
		if err != nil || !reflect.DeepEqual(fwd, h) || !reflect.DeepEqual(recv, http.Header{"A": {"1"}}) {
			t.Errorf("stored %s: forwarded %q, received %q, %v", stored, fwd, recv, err)
		}
	}
}

// A delta that changes nothing is stored as nothing; any other comes back
// as it was, bytes included.
func TestHeaderDeltaRoundTrip(t *testing.T) {
	if s := (HeaderDelta{Set: http.Header{}}).encode(); s != "" {
		t.Fatalf("an empty delta is stored as %q", s)
	}
	for _, d := range []HeaderDelta{
		{Set: http.Header{"Webhook-Signature": {"v1,abc v1,def"}}},
		{Del: []string{"Stripe-Signature"}},
		{Set: http.Header{"X-Odd": {"\xff\x00"}}, Del: []string{"A", "B"}},
	} {
		got, err := decodeDelta(d.encode())
		if err != nil || !reflect.DeepEqual(got, d) {
			t.Errorf("%+v came back as %+v, %v", d, got, err)
		}
	}
}

// The latest MaxReceipts duplicates are kept, oldest first.
func TestAppendReceiptKeepsTheLatest(t *testing.T) {
	var last []storedReceipt
	for i := range MaxReceipts + 3 {
		last = appendReceipt(last, storedReceipt{answer: i})
	}
	if len(last) != MaxReceipts || last[0].answer != 3 || last[MaxReceipts-1].answer != MaxReceipts+2 {
		t.Fatalf("kept %+v", last)
	}
}

// Duplicates recorded out of order (each is recorded once answered) are
// kept, and numbered, in the order they came in.
func TestReceiptsInTheOrderTheyCameIn(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	var last []storedReceipt
	for _, ms := range []int{10, 30, 20} {
		last = appendReceipt(last, storedReceipt{at: t0.Add(time.Duration(ms) * time.Millisecond), answer: ms})
	}
	tl := buildTimeline(&Detail{Summary: Summary{ReceivedAt: t0}}, timelineFacts{duplicates: 3, last: last})
	var got []string
	for _, e := range tl {
		if e.Kind == TimelineDuplicate {
			got = append(got, fmt.Sprintf("#%d@%d", e.Number, e.Answer))
		}
	}
	if strings.Join(got, " ") != "#1@10 #2@20 #3@30" {
		t.Fatalf("duplicates %v, want #1@10 #2@20 #3@30", got)
	}
	// A list stored out of order before is read in order too.
	unsorted := []storedReceipt{{at: t0.Add(30 * time.Millisecond), answer: 30}, {at: t0.Add(20 * time.Millisecond), answer: 20}}
	tl = buildTimeline(&Detail{Summary: Summary{ReceivedAt: t0}}, timelineFacts{duplicates: 2, last: unsorted})
	if tl[1].At.After(tl[2].At) || tl[1].Number != 1 {
		t.Fatalf("read out of order: %+v", tl)
	}
}
