package journaltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/whguard/whguard/journal"
)

// later is a cutoff that every row written now is older than, on either
// store: PostgreSQL frees payloads and attempts a whole UTC day at a time,
// once the day their event was received is over before the cutoff.
func later() time.Time { return time.Now().Add(48 * time.Hour) }

// Retention deletes old done events (their keys are forgotten), drops old
// done payloads earlier, never touches dead or undelivered events, and a
// done event without its payload cannot be replayed.
func testRetentionCleanup(t *testing.T, s journal.Store) {
	ctx := context.Background()
	for _, id := range []string{"done-old", "dead", "pending"} {
		AppendOne(t, s, Event("p", id, "h"))
	}
	ds := LeaseAll(t, s, time.Minute)
	byID := map[string]journal.Delivery{}
	for _, d := range ds {
		byID[d.EventID] = d
	}
	if _, err := CompleteN(s, []journal.Finish{Finish(byID["done-old"], journal.StatusDone, 200), Finish(byID["dead"], journal.StatusDead, 422)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, []int64{byID["pending"].ID}, []uuid.UUID{byID["pending"].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	past, future := time.Now().Add(-time.Hour), later()

	// Nothing is old enough yet.
	c, err := s.Cleanup(ctx, past, past)
	if err != nil || c != (journal.Cleaned{}) {
		t.Fatalf("cleanup with nothing old: %+v %v", c, err)
	}
	// Payloads first: the done event keeps its key, loses its body.
	c, err = s.Cleanup(ctx, past, future)
	if err != nil || c.Events != 0 || c.Payloads != 1 {
		t.Fatalf("payload cleanup: %+v %v", c, err)
	}
	doneID := byID["done-old"].ID
	if d := Get(t, s, doneID); d.Status != journal.StatusDone || d.Body != "" {
		t.Fatalf("after payload cleanup: %+v body %q", d.Summary, d.Body)
	}
	if r := AppendOne(t, s, Event("p", "done-old", "h")); r.Outcome != journal.Duplicate {
		t.Fatalf("resend while the key is kept: %v, want duplicate", r.Outcome)
	}
	if err := s.Replay(ctx, doneID, "x"); !errors.Is(err, journal.ErrNotReplayable) {
		t.Fatalf("replay without payload: %v", err)
	}
	if n, err := s.BulkReplay(ctx, journal.Filter{Status: journal.StatusDone}, "x"); err != nil || n != 0 {
		t.Fatalf("bulk replay of payload-less done events: %d %v", n, err)
	}
	// Then keys: the done event goes, dead and pending stay.
	c, err = s.Cleanup(ctx, future, future)
	if err != nil || c.Events != 1 {
		t.Fatalf("key cleanup: %+v %v", c, err)
	}
	if _, err := s.Get(ctx, doneID); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("done event after key cleanup: %v", err)
	}
	if n := Count(t, s, journal.Filter{}); n != 2 {
		t.Fatalf("%d events left, want dead and pending", n)
	}
	if d := Get(t, s, byID["dead"].ID); d.Status != journal.StatusDead || d.Body == "" {
		t.Fatalf("dead event touched by retention: %+v", d.Summary)
	}
	if r := AppendOne(t, s, Event("p", "done-old", "h")); r.Outcome != journal.Inserted {
		t.Fatalf("resend after the key expired: %v, want a new event", r.Outcome)
	}
}

// An ignored event is journaled, answered like any other on a resend,
// listed and counted, but never leased nor counted as undelivered; it is
// replayed only on purpose (one by one, or in bulk when status ignored is
// asked for), and then delivered like any replayed event.
func testIgnoredEvents(t *testing.T, s journal.Store) {
	ctx := context.Background()
	ign := Event("q", "ign-1", "h")
	ign.Ignored = true
	// Ignored wins over a claim: the receiver must not deliver it.
	ign.LeaseFor, ign.LeaseToken = time.Minute, uuid.New()
	r := AppendOne(t, s, ign)
	if r.Outcome != journal.Inserted {
		t.Fatalf("ignored event: %v", r.Outcome)
	}
	ign2 := Event("q", "ign-2", "h")
	ign2.Ignored = true
	r2 := AppendOne(t, s, ign2)
	AppendOne(t, s, Event("p", "kept", "h"))

	if d := Get(t, s, r.ID); d.Status != journal.StatusIgnored || d.Attempts != 0 || d.Body == "" {
		t.Fatalf("ignored event stored as %+v body %q", d.Summary, d.Body)
	}
	// A resend is judged against the stored row, whatever it says now.
	if dup := AppendOne(t, s, Event("q", "ign-1", "h")); dup.Outcome != journal.Duplicate || dup.ID != r.ID {
		t.Fatalf("resend of an ignored event: %+v", dup)
	}
	if c := AppendOne(t, s, Event("q", "ign-1", "other")); c.Outcome != journal.Conflict || c.ID != r.ID {
		t.Fatalf("conflicting resend of an ignored event: %+v", c)
	}
	if d := Get(t, s, r.ID); d.Status != journal.StatusIgnored {
		t.Fatalf("resends changed the ignored event: %+v", d.Summary)
	}

	ds := LeaseAll(t, s, time.Minute)
	if len(ds) != 1 || ds[0].EventID != "kept" {
		t.Fatalf("leased %+v, want only the kept event", ds)
	}
	if r, err := s.ReapExpired(ctx, 3); err != nil || len(r) != 0 {
		t.Fatalf("reap: %+v %v", r, err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[journal.StatusIgnored] != 2 {
		t.Fatalf("by status %v, want 2 ignored", st.ByStatus)
	}
	if _, ok := st.OldestUndelivered["q"]; ok || st.Undelivered["q"] != 0 {
		t.Fatalf("ignored events counted as undelivered: %v %v", st.OldestUndelivered, st.Undelivered)
	}
	if n := Count(t, s, journal.Filter{Status: journal.StatusIgnored}); n != 2 {
		t.Fatalf("listed %d ignored events, want 2", n)
	}

	// Bulk replay leaves ignored events alone unless they are asked for.
	if n, err := s.BulkReplay(ctx, journal.Filter{}, "dead ones"); err != nil || n != 0 {
		t.Fatalf("bulk replay of dead events: %d %v", n, err)
	}
	if n, err := s.CountReplayable(ctx, journal.Filter{Status: journal.StatusIgnored, Provider: "q"}); err != nil || n != 2 {
		t.Fatalf("would replay %d ignored events (%v), want 2", n, err)
	}

	if err := s.Replay(ctx, r.ID, "we want this one after all"); err != nil {
		t.Fatal(err)
	}
	got := Get(t, s, r.ID)
	if got.Status != journal.StatusRetry || len(got.Replays) != 1 || got.Replays[0].FromStatus != journal.StatusIgnored {
		t.Fatalf("after replay: %+v %+v", got.Summary, got.Replays)
	}
	d := LeaseAll(t, s, time.Minute)
	if len(d) != 1 || d[0].ID != r.ID || d[0].Attempt != 1 || string(d[0].Body) != `{"id":"ign-1","h":"h"}` {
		t.Fatalf("replayed ignored event leased as %+v", d)
	}

	if n, err := s.BulkReplay(ctx, journal.Filter{Status: journal.StatusIgnored}, "all of them"); err != nil || n != 1 {
		t.Fatalf("bulk replay of ignored events: %d %v", n, err)
	}
	if got := Get(t, s, r2.ID); got.Status != journal.StatusRetry || len(got.Replays) != 1 ||
		got.Replays[0].FromStatus != journal.StatusIgnored || got.Replays[0].Reason != "all of them" {
		t.Fatalf("after bulk replay: %+v %+v", got.Summary, got.Replays)
	}
}

// Retention treats ignored events like done ones: payloads go first, then
// the keys.
func testIgnoredRetention(t *testing.T, s journal.Store) {
	ctx := context.Background()
	e := Event("q", "ign-old", "h")
	e.Ignored = true
	id := AppendOne(t, s, e).ID
	past, future := time.Now().Add(-time.Hour), later()
	c, err := s.Cleanup(ctx, past, future)
	if err != nil || c.Payloads != 1 || c.Events != 0 {
		t.Fatalf("payload cleanup: %+v %v", c, err)
	}
	if err := s.Replay(ctx, id, "x"); !errors.Is(err, journal.ErrNotReplayable) {
		t.Fatalf("replay of an ignored event without payload: %v", err)
	}
	c, err = s.Cleanup(ctx, future, future)
	if err != nil || c.Events != 1 {
		t.Fatalf("key cleanup: %+v %v", c, err)
	}
	if _, err := s.Get(ctx, id); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("ignored event after key cleanup: %v", err)
	}
}
