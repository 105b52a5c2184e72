package journal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// testMinuteFigures: each replica's row for a minute is replaced by its
// next write, rows of two replicas both stay (the overview adds them), and
// figures older than the retention are dropped.
func testMinuteFigures(t *testing.T, s journal.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute)
	m := func(at time.Time, provider string, delivered int64, lat time.Duration) journal.Minute {
		x := journal.Minute{Minute: at, Provider: provider, Delivered: delivered, Failed: 1}
		for range delivered {
			x.ObserveLatency(lat)
		}
		return x
	}
	if err := s.RecordMinutes(ctx, "a", []journal.Minute{m(now, "stripe", 1, time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	// a's second write for the same minute replaces its first.
	if err := s.RecordMinutes(ctx, "a", []journal.Minute{m(now, "stripe", 3, 30*time.Millisecond), m(now.Add(-time.Minute), "github", 2, time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordMinutes(ctx, "b", []journal.Minute{m(now, "stripe", 5, 30*time.Millisecond), m(now.Add(-26*time.Hour), "stripe", 9, time.Second)}); err != nil {
		t.Fatal(err)
	}
	// The next write drops what is past the retention (b's 26 h old row).
	if err := s.RecordMinutes(ctx, "b", nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Minutes(ctx, now.Add(-30*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("want 3 rows (github a, stripe a, stripe b), got %+v", got)
	}
	if got[0].Provider != "github" || !got[0].Minute.Equal(now.Add(-time.Minute)) || got[0].Delivered != 2 {
		t.Errorf("oldest row: %+v", got[0])
	}
	var sum journal.Minute
	for _, r := range got[1:] {
		if !r.Minute.Equal(now) || r.Provider != "stripe" {
			t.Errorf("row %+v", r)
		}
		sum.Add(r)
	}
	if sum.Delivered != 8 || sum.Failed != 2 {
		t.Errorf("stripe this minute, both replicas: %+v", sum)
	}
	if p50, ok := sum.Percentile(0.5); !ok || p50 <= 20*time.Millisecond || p50 > 50*time.Millisecond {
		t.Errorf("p50 %v %v, want within the 20-50 ms bucket", p50, ok)
	}
	if got, _ := s.Minutes(ctx, now); len(got) != 2 {
		t.Errorf("since this minute: %d rows, want 2", len(got))
	}
}

// testSearchStopsAtItsBound: a search past its time bound answers
// ErrSearchTooSlow (its statement cancelled), not a database error; one
// cancelled by its caller answers the caller's error.
func testSearchStopsAtItsBound(t *testing.T, s journal.Store) {
	for i := range 300 {
		appendOne(t, s, ev("p", fmt.Sprintf("slow-%03d", i), "h"))
	}
	f := journal.Filter{Match: []journal.Match{{Pointer: "/nothing", Value: "here"}}, Limit: 10}
	if _, _, err := journal.ListBounded(context.Background(), s, f, time.Microsecond); !errors.Is(err, journal.ErrSearchTooSlow) {
		t.Fatalf("past its bound: %v, want ErrSearchTooSlow", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := journal.ListBounded(ctx, s, f, time.Minute); err == nil || errors.Is(err, journal.ErrSearchTooSlow) {
		t.Fatalf("cancelled by the caller: %v", err)
	}
	if got, _, err := journal.ListBounded(context.Background(), s, journal.Filter{Limit: 10}, time.Minute); err != nil || len(got) != 10 {
		t.Fatalf("within its bound: %d %v", len(got), err)
	}
}
