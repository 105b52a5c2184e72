package journal

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestBulkRetryNowWalk: a bulk retry walks the events in retry in batches,
// leaves out those waiting for their order key (their turn decides),
// stops at its limit, counts the same events in a dry run, and refuses
// another status.
func TestBulkRetryNowWalk(t *testing.T) {
	for _, tc := range []struct {
		name      string
		events    int
		waiting   []int64
		limit     int
		wantTotal int
		wantSizes []int
	}{
		{name: "all", events: 250, wantTotal: 250, wantSizes: []int{100, 100, 50}},
		{name: "order-waiting left out", events: 120, waiting: []int64{5, 119}, wantTotal: 118, wantSizes: []int{99, 19}},
		{name: "limit", events: 250, limit: 130, wantTotal: 130, wantSizes: []int{100, 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := map[int64]string{}
			for _, id := range tc.waiting {
				held[id] = HeldOrder
			}
			d := &fakeDialect{ids: seq(tc.events), held: held}
			n, err := bulkRetryNow(context.Background(), d, Filter{Provider: "p", Limit: tc.limit}, "why", false)
			if err != nil || n != tc.wantTotal {
				t.Fatalf("retried %d, %v; want %d", n, err, tc.wantTotal)
			}
			if len(d.retried) != len(tc.wantSizes) {
				t.Fatalf("%d batches, want %d", len(d.retried), len(tc.wantSizes))
			}
			seen := map[int64]bool{}
			for i, b := range d.retried {
				if len(b) != tc.wantSizes[i] {
					t.Fatalf("batch %d has %d events, want %d", i, len(b), tc.wantSizes[i])
				}
				for _, id := range b {
					if seen[id] || held[id] != "" {
						t.Fatalf("event %d retried twice, or while waiting for its turn", id)
					}
					seen[id] = true
				}
			}
			for _, f := range d.filters {
				if f.Status != StatusRetry || f.Provider != "p" {
					t.Fatalf("listing filter %+v", f)
				}
			}
			dry := &fakeDialect{ids: seq(tc.events), held: held}
			if n, err := bulkRetryNow(context.Background(), dry, Filter{Provider: "p", Limit: tc.limit}, "", true); err != nil || n != tc.wantTotal || len(dry.retried) != 0 {
				t.Fatalf("dry run: %d %v, %d batches", n, err, len(dry.retried))
			}
		})
	}
	if _, err := bulkRetryNow(context.Background(), &fakeDialect{}, Filter{Status: StatusDead}, "x", false); !errors.Is(err, ErrNotRetryable) {
		t.Fatalf("bulk retry of dead events: %v", err)
	}
}

// TestRetryNowRefusals: an event that did not move is looked at, and the
// refusal says its status, or what it waits for.
func TestRetryNowRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		detail *Detail
		want   error
		says   string
	}{
		{"moved", nil, nil, ""},
		{"done", &Detail{Summary: Summary{Status: StatusDone}}, ErrNotRetryable, "event 7 is done"},
		{"processing", &Detail{Summary: Summary{Status: StatusProcessing}}, ErrNotRetryable, "event 7 is processing"},
		{"waiting for its turn", &Detail{Summary: Summary{Status: StatusRetry}, WaitingFor: 3}, ErrNotRetryable, "event 3 holds its order key"},
		// Waiting when looked at, yet never moved: taken by a lease each time.
		{"leased meanwhile", &Detail{Summary: Summary{Status: StatusRetry}}, ErrNotRetryable, "event 7 is processing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDialect{detail: tc.detail, moves: func(int64) bool { return tc.detail == nil }}
			err := retryNow(context.Background(), d, 7, "x")
			if !errors.Is(err, tc.want) || (tc.want != nil && !strings.Contains(err.Error(), tc.says)) {
				t.Fatalf("%v, want %v saying %q", err, tc.want, tc.says)
			}
			var nr *NotRetryable
			if tc.want != nil && (!errors.As(err, &nr) || nr.ID != 7) {
				t.Fatalf("%v is no *NotRetryable of event 7", err)
			}
		})
	}
	if err := retryNow(context.Background(), &fakeDialect{moves: func(int64) bool { return false }}, 9, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing event: %v", err)
	}
}
