package journal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// A search past its time bound answers ErrSearchTooSlow, on every store
// (the bound is the test's choice: journaltest cannot set it).
func TestSearchStopsAtItsBound(t *testing.T) {
	t.Parallel()
	testdb.ForEachStoreParallel(t, func(t *testing.T, store string) {
		testSearchStopsAtItsBound(t, testdb.OpenStore(t, store, true))
	})
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
