package journal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeDialect serves the shared logic from memory, recording its calls: it
// tests the paging, walking and looping rules that the conformance suite
// can only see through a real store.
type fakeDialect struct {
	ids     []int64   // matching events, ascending
	batches [][]int64 // replayIDs calls
	filters []Filter  // listPage calls
	target  replayTarget
	stored  map[int64][]byte
	events  []int // cleanupEvents results, one per call
	cleaned []time.Time
	failAt  int // replayIDs call that fails, 1-based (0: none)
	payload storedPayload
	retried [][]int64        // retryIDs calls
	held    map[int64]string // Summary.Held by id
	// moves, when set, says which ids retryIDs moves (nil: all).
	moves func(id int64) bool
	// detail, when set, is getEvent's answer for every id.
	detail *Detail
}

func (d *fakeDialect) listPage(_ context.Context, f Filter, n int) ([]Summary, error) {
	d.filters = append(d.filters, f)
	var out []Summary
	for i := len(d.ids) - 1; i >= 0 && len(out) < n; i-- {
		if f.Before == 0 || d.ids[i] < f.Before {
			out = append(out, Summary{ID: d.ids[i], Held: d.held[d.ids[i]]})
		}
	}
	return out, nil
}

func (d *fakeDialect) replayEvent(context.Context, int64, string) (replayTarget, error) {
	return d.target, nil
}

func (d *fakeDialect) listConflicts(context.Context, int64) ([]storedConflict, error) {
	return nil, nil
}

func (d *fakeDialect) getEvent(_ context.Context, id int64) (*Detail, storedPayload, error) {
	if d.detail != nil {
		return d.detail, d.payload, nil
	}
	if id != 1 {
		return nil, storedPayload{}, ErrNotFound
	}
	return &Detail{Summary: Summary{ID: 1}}, d.payload, nil
}

func (d *fakeDialect) replayIDs(_ context.Context, ids []int64, _ string) (int, error) {
	d.batches = append(d.batches, ids)
	if len(d.batches) == d.failAt {
		return 0, errors.New("boom")
	}
	return len(ids), nil
}

func (d *fakeDialect) retryIDs(_ context.Context, ids []int64, _ string) (int, error) {
	d.retried = append(d.retried, ids)
	n := 0
	for _, id := range ids {
		if d.moves == nil || d.moves(id) {
			n++
		}
	}
	return n, nil
}

func (d *fakeDialect) eachBody(_ context.Context, ids []int64, fn func(id int64, body []byte) error) error {
	for _, id := range ids {
		if b, ok := d.stored[id]; ok {
			if err := fn(id, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *fakeDialect) cleanupEvents(_ context.Context, before time.Time, n int) (int, error) {
	d.cleaned = append(d.cleaned, before)
	r := d.events[0]
	d.events = d.events[1:]
	return r, nil
}

func (d *fakeDialect) StoredReply(context.Context, int64) (*Reply, error) { return nil, nil }

func (d *fakeDialect) timelineFacts(context.Context, int64) (timelineFacts, error) {
	return timelineFacts{}, nil
}

func (d *fakeDialect) cleanupPayloads(_ context.Context, before time.Time, n int) (int, error) {
	d.cleaned = append(d.cleaned, before)
	return n - 1, nil
}

func seq(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	return ids
}

func TestListEventsPages(t *testing.T) {
	d := &fakeDialect{ids: seq(5)}
	got, next, err := listEvents(context.Background(), d, Filter{Limit: 2})
	if err != nil || len(got) != 2 || got[0].ID != 5 || got[1].ID != 4 || next != 4 {
		t.Fatalf("first page %v, next %d, %v", got, next, err)
	}
	got, next, _ = listEvents(context.Background(), d, Filter{Limit: 2, Before: 2})
	if len(got) != 1 || got[0].ID != 1 || next != 0 {
		t.Fatalf("last page %v, next %d", got, next)
	}
}

func TestGetEventFillsTheDetail(t *testing.T) {
	ctx := context.Background()
	if _, err := getEvent(ctx, &fakeDialect{}, 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing event: %v", err)
	}
	d, err := getEvent(ctx, &fakeDialect{}, 1) // payload dropped by retention
	if err != nil || d.Headers == nil || len(d.Headers) != 0 || d.Body != "" || d.BodyBase64 != nil ||
		d.AttemptLog == nil || d.Replays == nil {
		t.Fatalf("event without payload: %+v, %v", d, err)
	}
	kept := storedPayload{kept: true, headers: `{"X-A":["1"]}`, body: []byte{0xff}}
	d, err = getEvent(ctx, &fakeDialect{payload: kept}, 1)
	if err != nil || d.Headers.Get("X-A") != "1" || d.Body != "" || string(d.BodyBase64) != "\xff" {
		t.Fatalf("event with a binary body: %+v, %v", d, err)
	}
	kept.headers = "not json"
	if _, err := getEvent(ctx, &fakeDialect{payload: kept}, 1); err == nil {
		t.Fatal("unreadable stored headers: no error")
	}
}

func TestBulkReplayWalk(t *testing.T) {
	for _, tc := range []struct {
		name        string
		events      int
		limit       int
		wantTotal   int
		wantSizes   []int
		failAt      int
		wantFailure bool
	}{
		{name: "all, ending on a short batch", events: 250, wantTotal: 250, wantSizes: []int{100, 100, 50}},
		{name: "all, a full last batch", events: 200, wantTotal: 200, wantSizes: []int{100, 100}},
		{name: "limit", events: 250, limit: 130, wantTotal: 130, wantSizes: []int{100, 30}},
		{name: "limit beyond", events: 20, limit: 130, wantTotal: 20, wantSizes: []int{20}},
		{name: "failure keeps the count", events: 250, failAt: 2, wantTotal: 100, wantSizes: []int{100, 100}, wantFailure: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDialect{ids: seq(tc.events), failAt: tc.failAt}
			n, err := bulkReplay(context.Background(), d, Filter{Provider: "p", Limit: tc.limit}, "why", false)
			if (err != nil) != tc.wantFailure || n != tc.wantTotal {
				t.Fatalf("replayed %d, %v; want %d", n, err, tc.wantTotal)
			}
			if len(d.batches) != len(tc.wantSizes) {
				t.Fatalf("%d batches, want %d", len(d.batches), len(tc.wantSizes))
			}
			seen := map[int64]bool{}
			for i, b := range d.batches {
				if len(b) != tc.wantSizes[i] {
					t.Fatalf("batch %d has %d events, want %d", i, len(b), tc.wantSizes[i])
				}
				for _, id := range b {
					if seen[id] {
						t.Fatalf("event %d replayed twice", id)
					}
					seen[id] = true
				}
			}
			for _, f := range d.filters {
				if f.Status != StatusDead || f.Provider != "p" || !f.WithPayload {
					t.Fatalf("listing filter %+v", f)
				}
			}
			// A dry run counts the same events and replays none.
			dry := &fakeDialect{ids: seq(tc.events)}
			if n, err := bulkReplay(context.Background(), dry, Filter{Provider: "p", Limit: tc.limit}, "", true); err != nil || len(dry.batches) != 0 ||
				(!tc.wantFailure && n != tc.wantTotal) {
				t.Fatalf("dry run: %d %v, %d batches", n, err, len(dry.batches))
			}
		})
	}
	if _, err := bulkReplay(context.Background(), &fakeDialect{}, Filter{Status: StatusRetry}, "x", false); !errors.Is(err, ErrNotReplayable) {
		t.Fatalf("bulk replay of retry events: %v", err)
	}
}

// TestMatchWindow: a body search reads at most MatchWindow candidates and
// then gives the cursor to go on from; results fill a page and give their
// own cursor; a search that runs out of candidates gives none.
func TestMatchWindow(t *testing.T) {
	n := MatchWindow + 500
	d := &fakeDialect{ids: seq(n), stored: map[int64][]byte{}}
	for _, id := range d.ids {
		d.stored[id] = []byte(`{"data":{"customer":"cus_other"}}`)
	}
	hit := int64(n - 3)
	d.stored[hit] = []byte(`{"data":{"customer":"cus_123","n":1.50,"ok":true}}`)
	d.stored[int64(n-5)] = []byte(`not json`)
	m := []Match{{Pointer: "/data/customer", Value: "cus_123"}}
	out, next, err := listEvents(context.Background(), d, Filter{Match: m, Limit: 5})
	if err != nil || len(out) != 1 || out[0].ID != hit {
		t.Fatalf("found %+v, %v", out, err)
	}
	if want := int64(n - MatchWindow + 1); next != want {
		t.Fatalf("cursor after the window %d, want %d", next, want)
	}
	out, next, err = listEvents(context.Background(), d, Filter{Match: m, Limit: 5, Before: next})
	if err != nil || len(out) != 0 || next != 0 {
		t.Fatalf("the rest: %+v %d %v", out, next, err)
	}
	for _, c := range []struct {
		m    Match
		want bool
	}{
		{Match{"/data/n", "1.50"}, true}, {Match{"/data/n", "1.5"}, false},
		{Match{"/data/ok", "true"}, true}, {Match{"/data", "x"}, false}, {Match{"/nope", ""}, false},
	} {
		if got := matchesBody(d.stored[hit], []Match{c.m}); got != c.want {
			t.Errorf("%+v: %v, want %v", c.m, got, c.want)
		}
	}
}

func TestReplayRefusals(t *testing.T) {
	for _, tc := range []struct {
		target replayTarget
		want   error
		says   string
	}{
		{replayTarget{replayed: true}, nil, ""},
		{replayTarget{}, ErrNotFound, ""},
		{replayTarget{found: true, status: StatusDone}, ErrNotReplayable, "payload was dropped"},
		{replayTarget{found: true, status: StatusRetry, hasPayload: true}, ErrNotReplayable, "event 7 is retry"},
	} {
		err := replayEvent(context.Background(), &fakeDialect{target: tc.target}, 7, "x")
		if !errors.Is(err, tc.want) || (tc.want != nil && !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%+v: %v, want %v saying %q", tc.target, err, tc.want, tc.says)
		}
	}
}

func TestCleanupLoopsUntilAShortBatch(t *testing.T) {
	keys, payloads := time.Unix(100, 0), time.Unix(200, 0)
	d := &fakeDialect{events: []int{cleanupBatch, cleanupBatch, 3}}
	c, err := cleanup(context.Background(), d, keys, payloads)
	if err != nil || c.Events != 2*cleanupBatch+3 || c.Payloads != cleanupBatch-1 {
		t.Fatalf("cleaned %+v, %v", c, err)
	}
	want := []time.Time{keys, keys, keys, payloads}
	if len(d.cleaned) != len(want) {
		t.Fatalf("%d statements, want %d", len(d.cleaned), len(want))
	}
	for i := range want {
		if !d.cleaned[i].Equal(want[i]) {
			t.Fatalf("statement %d cut at %v, want %v", i, d.cleaned[i], want[i])
		}
	}
}
