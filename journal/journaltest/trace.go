package journaltest

import (
	"context"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// The trace context an event was received under comes back with every
// lease of it: the first, a retry, a replay. An event stored without one
// (traces off) comes back without one; a duplicate does not replace it.
// Events with and without one share a batch.
func testTraceContextKept(t *testing.T, s journal.Store) {
	ctx := context.Background()
	const (
		plain = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		state = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00\nvendor=a b,other=x"
	)
	none, first, second := Event("p", "t0", "h"), Event("p", "t1", "h"), Event("p", "t2", "h")
	first.TraceContext, second.TraceContext = plain, state
	rs, err := s.Append(ctx, []journal.Event{none, first, second})
	if err != nil {
		t.Fatal(err)
	}
	dup := Event("p", "t1", "h")
	dup.TraceContext = "00-11111111111111111111111111111111-2222222222222222-01"
	if r := AppendOne(t, s, dup); r.Outcome != journal.Duplicate {
		t.Fatalf("duplicate: %+v", r)
	}
	want := map[int64]string{rs[0].ID: "", rs[1].ID: plain, rs[2].ID: state}
	check := func(when string, ds []journal.Delivery) {
		t.Helper()
		if len(ds) != len(want) {
			t.Fatalf("%s: leased %d events, want %d", when, len(ds), len(want))
		}
		for _, d := range ds {
			if d.TraceContext != want[d.ID] {
				t.Fatalf("%s: event %s leased with trace context %q, want %q", when, d.EventID, d.TraceContext, want[d.ID])
			}
		}
	}
	ds := LeaseAll(t, s, time.Minute)
	check("first lease", ds)
	fs := make([]journal.Finish, len(ds))
	for i, d := range ds {
		fs[i] = Finish(d, journal.StatusRetry, 503)
	}
	if _, err := CompleteN(s, fs); err != nil {
		t.Fatal(err)
	}
	ds = LeaseAll(t, s, time.Minute)
	check("retry", ds)
	for i, d := range ds {
		fs[i] = Finish(d, journal.StatusDead, 400)
	}
	if _, err := CompleteN(s, fs); err != nil {
		t.Fatal(err)
	}
	for id := range want {
		if err := s.Replay(ctx, id, "fixed"); err != nil {
			t.Fatal(err)
		}
	}
	check("replay", LeaseAll(t, s, time.Minute))
}
