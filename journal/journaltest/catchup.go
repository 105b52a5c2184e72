package journaltest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// testCatchupSources: an event catch-up journaled and a webhook copy of
// it are one event whatever their contents differ in (Duplicate, no copy
// recorded), in either order and in one batch; an event whose redelivery
// catch-up asked for is journaled as catch-up's, another as a webhook.
func testCatchupSources(t *testing.T, s journal.Store) {
	ctx := context.Background()
	api := Event("stripe", "evt_1", "api-rendering")
	api.Source = journal.SourceCatchup
	first := AppendOne(t, s, api)
	if first.Outcome != journal.Inserted {
		t.Fatalf("catch-up event: %v, want Inserted", first.Outcome)
	}
	if got := AppendOne(t, s, Event("stripe", "evt_1", "webhook-rendering")); got.Outcome != journal.Duplicate || got.ID != first.ID {
		t.Fatalf("webhook copy of a catch-up event: %+v, want Duplicate of %d", got, first.ID)
	}
	d := Get(t, s, first.ID)
	if d.Source != journal.SourceCatchup || d.Conflicts != 0 {
		t.Fatalf("catch-up event: source %q, %d conflicting copies; want catchup, 0", d.Source, d.Conflicts)
	}

	// The webhook first, then catch-up (a pass racing the sender).
	hook := AppendOne(t, s, Event("stripe", "evt_2", "webhook-rendering"))
	late := api
	late.EventID = "evt_2"
	if got := AppendOne(t, s, late); got.Outcome != journal.Duplicate || got.ID != hook.ID {
		t.Fatalf("catch-up copy of a webhook event: %+v, want Duplicate of %d", got, hook.ID)
	}
	if d := Get(t, s, hook.ID); d.Source != journal.SourceWebhook || d.Conflicts != 0 {
		t.Fatalf("webhook event: source %q, %d conflicting copies; want webhook, 0", d.Source, d.Conflicts)
	}
	// Two webhook copies that differ are still a conflict.
	if got := AppendOne(t, s, Event("stripe", "evt_2", "other")); got.Outcome != journal.Conflict {
		t.Fatalf("differing webhook copy: %v, want Conflict", got.Outcome)
	}

	// In one batch: the catch-up event leads, its webhook copy follows.
	batch := []journal.Event{api, Event("stripe", "evt_3", "webhook-rendering")}
	batch[0].EventID = "evt_3"
	rs, err := s.Append(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != journal.Inserted || rs[1].Outcome != journal.Duplicate {
		t.Fatalf("one batch: %v, %v; want Inserted, Duplicate", rs[0].Outcome, rs[1].Outcome)
	}

	// Redeliveries: only the GUID asked for is catch-up's.
	if err := s.SaveCatchupRequest(ctx, "github", journal.CatchupRequest{GUID: "guid-asked", DeliveryID: 7, Requests: 1, LastAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for guid, want := range map[string]string{"guid-asked": journal.SourceCatchup, "guid-not": journal.SourceWebhook} {
		e := Event("github", guid, "h")
		e.CatchupAsked = true
		r := AppendOne(t, s, e)
		if d := Get(t, s, r.ID); d.Source != want {
			t.Errorf("%s: source %q, want %q", guid, d.Source, want)
		}
		if sm, _, err := s.List(ctx, journal.Filter{Provider: "github", EventID: guid}); err != nil || len(sm) != 1 || sm[0].Source != want {
			t.Errorf("%s listed: %+v (%v), want source %q", guid, sm, err, want)
		}
	}

	known, err := s.Known(ctx, "stripe", []string{"evt_1", "evt_2", "evt_9"})
	if err != nil {
		t.Fatal(err)
	}
	if !known["evt_1"] || !known["evt_2"] || known["evt_9"] || len(known) != 2 {
		t.Fatalf("Known: %v, want evt_1 and evt_2", known)
	}
	if known, err := s.Known(ctx, "github", []string{"evt_1"}); err != nil || len(known) != 0 {
		t.Fatalf("Known of another provider: %v (%v), want none", known, err)
	}
}

// testCatchupLease: one pass at a time whoever asks, none before it is
// due unless forced, an expired lease is taken over, and what a pass did
// is kept for the API.
func testCatchupLease(t *testing.T, s journal.Store) {
	ctx := context.Background()
	// Three replicas ask at once: one gets it.
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got []string
	)
	for _, owner := range []string{"a", "b", "c"} {
		wg.Go(func() {
			ok, err := s.ClaimCatchup(ctx, "stripe", owner, time.Minute, false)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				got = append(got, owner)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 1 {
		t.Fatalf("claimed by %v, want exactly one", got)
	}
	owner := got[0]
	if ok, err := s.ClaimCatchup(ctx, "stripe", "x", time.Minute, true); err != nil || ok {
		t.Fatalf("forced claim of a held pass: %v (%v), want refused", ok, err)
	}
	// Another owner cannot end it.
	if err := s.EndCatchup(ctx, "stripe", "x", nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.ClaimCatchup(ctx, "stripe", "x", time.Minute, true); ok {
		t.Fatal("a pass ended by another owner was given away")
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	pass := &journal.CatchupPass{Started: now.Add(-time.Second), Finished: now, Since: now.Add(-72 * time.Hour), Listed: 5, Missing: 2, Journaled: 2}
	if err := s.EndCatchup(ctx, "stripe", owner, pass, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.ClaimCatchup(ctx, "stripe", "b", time.Minute, false); ok {
		t.Fatal("a pass not due yet was claimed")
	}
	states, err := s.CatchupStates(ctx)
	if err != nil || len(states) != 1 {
		t.Fatalf("states: %+v (%v)", states, err)
	}
	st := states[0]
	if st.Provider != "stripe" || !st.NextPass.Equal(now.Add(time.Hour)) || !st.LastSuccess.Equal(now) ||
		st.LastPass == nil || st.LastPass.Journaled != 2 || st.LastPass.Listed != 5 || st.LastError != nil {
		t.Fatalf("state after a good pass: %+v (last pass %+v)", st, st.LastPass)
	}

	// Forced (the API's run now), then failed: the error is kept, the
	// last success too.
	if ok, err := s.ClaimCatchup(ctx, "stripe", "b", time.Minute, true); err != nil || !ok {
		t.Fatalf("forced claim of a free pass: %v (%v)", ok, err)
	}
	failed := &journal.CatchupPass{Started: now.Add(time.Second), Finished: now.Add(2 * time.Second), Error: "list the events: Stripe answered 401"}
	if err := s.EndCatchup(ctx, "stripe", "b", failed, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	states, _ = s.CatchupStates(ctx)
	st = states[0]
	if st.LastError == nil || st.LastError.Error != failed.Error || !st.LastError.At.Equal(failed.Finished) ||
		!st.LastSuccess.Equal(now) || st.LastPass.Error != failed.Error {
		t.Fatalf("state after a failed pass: %+v, last error %+v", st, st.LastError)
	}

	// A lease that ran out (its owner died) is taken over.
	if ok, _ := s.ClaimCatchup(ctx, "github", "dead", time.Millisecond, true); !ok {
		t.Fatal("first claim of github refused")
	}
	waitFor(t, 5*time.Second, "the expired lease to be taken over", func() bool {
		ok, err := s.ClaimCatchup(ctx, "github", "b", time.Minute, true)
		return err == nil && ok
	})
}

// testCatchupRequests: the redeliveries asked for are kept, updated, and
// forgotten when they arrive or leave the window.
func testCatchupRequests(t *testing.T, s journal.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i, g := range []string{"g1", "g2", "g3"} {
		r := journal.CatchupRequest{GUID: g, DeliveryID: int64(i + 1), Requests: 1, LastAt: now.Add(-time.Duration(i) * time.Hour)}
		if err := s.SaveCatchupRequest(ctx, "github", r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveCatchupRequest(ctx, "github", journal.CatchupRequest{GUID: "g1", DeliveryID: 9, Requests: 3, LastAt: now, GaveUp: true}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.CatchupRequests(ctx, "github")
	if err != nil || len(rs) != 3 {
		t.Fatalf("requests: %+v (%v)", rs, err)
	}
	if r := rs[0]; r.GUID != "g1" || r.DeliveryID != 9 || r.Requests != 3 || !r.GaveUp || !r.LastAt.Equal(now) {
		t.Fatalf("updated request: %+v", r)
	}
	if other, _ := s.CatchupRequests(ctx, "other"); len(other) != 0 {
		t.Fatalf("another provider's requests: %+v", other)
	}
	// g2 arrived; g3 was asked for 2 h ago, out of a 90 min window.
	if err := s.ForgetCatchupRequests(ctx, "github", []string{"g2"}, now.Add(-90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	rs, _ = s.CatchupRequests(ctx, "github")
	if len(rs) != 1 || rs[0].GUID != "g1" {
		t.Fatalf("after forgetting: %+v, want g1 alone", rs)
	}
}
