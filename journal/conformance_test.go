package journal_test

import (
	"testing"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/journal/journaltest"
)

// TestConformance runs the store suite (journaltest) on both stores.
func TestConformance(t *testing.T) {
	t.Parallel()
	testdb.ForEachStoreParallel(t, func(t *testing.T, store string) {
		journaltest.Run(t, journaltest.Harness{
			Open: func(t *testing.T, migrated bool) journal.Store {
				return testdb.OpenStore(t, store, migrated)
			},
			BlockCommits: blockCommits,
		})
	})
}

// The suite's helpers, for this package's other tests.
var (
	ev         = journaltest.Event
	appendOne  = journaltest.AppendOne
	leaseAll   = journaltest.LeaseAll
	get        = journaltest.Get
	count      = journaltest.Count
	finish     = journaltest.Finish
	reapOne    = journaltest.ReapOne
	ordered    = journaltest.Ordered
	wantLeased = journaltest.WantLeased
	complete   = journaltest.Complete
	completeN  = journaltest.CompleteN
)
