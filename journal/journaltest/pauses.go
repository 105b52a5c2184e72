package journaltest

import (
	"context"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// Pauses are stored (surviving restarts: they are rows), a second pause of
// the same target keeps its since and takes the new reason, and resume
// removes it and makes the deliveries a pause held due at once.
func testPauses(t *testing.T, s journal.Store) {
	ctx := context.Background()
	if ps, err := s.Pauses(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("pauses of a new journal: %v, %v", ps, err)
	}
	if _, err := s.Pause(ctx, journal.Pause{Kind: "host", Name: "x"}); err == nil {
		t.Fatal("a pause of kind host accepted")
	}
	first, err := s.Pause(ctx, journal.Pause{Kind: journal.PauseBackend, Name: "http://b:80", Reason: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Since.IsZero() || time.Since(first.Since) > time.Minute {
		t.Fatalf("since %v", first.Since)
	}
	again, err := s.Pause(ctx, journal.Pause{Kind: journal.PauseBackend, Name: "http://b:80", Reason: "longer deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Since.Equal(first.Since) || again.Reason != "longer deploy" {
		t.Fatalf("paused again: %+v, first %+v", again, first)
	}
	if _, err := s.Pause(ctx, journal.Pause{Kind: journal.PauseProvider, Name: "acme", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Pauses(ctx)
	if err != nil || len(ps) != 2 || ps[0].Name != "http://b:80" || ps[0].Reason != "longer deploy" || ps[1].Kind != journal.PauseProvider {
		t.Fatalf("pauses: %+v, %v", ps, err)
	}

	r := AppendOne(t, s, Event("acme", "held-by-pause", "h"))
	ds, err := s.Lease(ctx, 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("lease: %v, %v", ds, err)
	}
	if n, err := s.Hold(ctx, []journal.Hold{{ID: r.ID, LeaseToken: ds[0].LeaseToken, For: time.Hour, Reason: journal.HoldPaused}}); err != nil || n != 1 {
		t.Fatalf("hold: %d, %v", n, err)
	}
	if ds, _ := s.Lease(ctx, 1, time.Minute); len(ds) != 0 {
		t.Fatal("a delivery held for an hour leased at once")
	}
	found, err := s.Resume(ctx, journal.PauseProvider, "acme")
	if err != nil || !found {
		t.Fatalf("resume: %v, %v", found, err)
	}
	if found, err := s.Resume(ctx, journal.PauseProvider, "acme"); err != nil || found {
		t.Fatalf("second resume: %v, %v", found, err)
	}
	ds, err = s.Lease(ctx, 1, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].ID != r.ID || ds[0].Attempt != 1 {
		t.Fatalf("lease after resume: %+v, %v (want the held event, attempt 1)", ds, err)
	}
	if ps, _ := s.Pauses(ctx); len(ps) != 1 {
		t.Fatalf("pauses after one resume: %+v", ps)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Undelivered["acme"] != 1 {
		t.Fatalf("stats: %+v, %v (want 1 undelivered acme event)", st, err)
	}
}
