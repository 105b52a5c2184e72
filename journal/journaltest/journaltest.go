// Package journaltest is the behaviour every journal.Store must have,
// as a suite any store's tests run: Run(t, harness). The PostgreSQL and
// SQLite stores run it on every change (journal's TestConformance); a new
// store is done when it passes.
//
// The suite is split by concern: append.go (appends, claims, group
// commit, readiness), delivery.go (leases, outcomes, holds, the reaper,
// sync replies, figures), transitions.go (every entry of
// journal.Transitions), replay.go, retrynow.go, inspect.go (listing and
// finding), retention.go, pauses.go, order.go (per-key order) and
// timeline.go (an event's whole story). Every
// test runs on a journal of its own, in parallel with the others.
package journaltest

import (
	"testing"

	"github.com/whguard/whguard/journal"
)

// Harness is what the suite needs of a store's tests.
type Harness struct {
	// Open returns a fresh journal for one test, closed when the test
	// ends: migrated, or (migrated false) with no schema at all.
	Open func(t *testing.T, migrated bool) journal.Store
	// BlockCommits holds every commit to s (as a full disk or a lock
	// would) until release is called.
	BlockCommits func(t *testing.T, s journal.Store) (release func())
}

// test is one behaviour, run on a migrated journal of its own.
type test struct {
	name string
	fn   func(t *testing.T, s journal.Store)
}

// suite lists the behaviours by concern.
func suite(h Harness) []struct {
	concern string
	tests   []test
} {
	return []struct {
		concern string
		tests   []test
	}{
		{"Append", []test{
			{"Outcomes", testAppendOutcomes},
			{"Batch", testAppendBatch},
			{"ConcurrentSameKey", testAppendConcurrentSameKey},
			{"ConcurrentBatches", testAppendConcurrentBatches},
			{"Claimed", testAppendClaimed},
			{"GroupCommit", testGroupCommit},
			{"HeadersKeepTheirBytes", testHeadersKeepTheirBytes},
			{"BodyGuardCatchesReplays", testBodyGuardCatchesReplays},
			{"ReadyFollowsCommits", func(t *testing.T, s journal.Store) { testReadyFollowsCommits(t, s, h) }},
		}},
		{"Delivery", []test{
			{"LeaseCompleteAndAttempts", testLeaseCompleteAndAttempts},
			{"LeaseIsExclusive", testLeaseIsExclusive},
			{"LateWorkerCannotFinish", testLateWorkerCannotFinish},
			{"ReapToDeadWhenBudgetSpent", testReapToDeadWhenBudgetSpent},
			{"ReleaseKeepsTheAttempt", testReleaseKeepsTheAttempt},
			{"RetryDueLater", testRetryDueLater},
			{"HoldSpendsNoAttempt", testHoldSpendsNoAttempt},
			{"CompleteStoresAnyExcerpt", testCompleteStoresAnyExcerpt},
			{"SyncReplies", testSyncReplies},
			{"Stats", testStats},
			{"MinuteFigures", testMinuteFigures},
			{"TraceContextKept", testTraceContextKept},
		}},
		{"Transitions", transitionTests()},
		{"Replay", []test{
			{"FreshBudget", testReplayFreshBudget},
			{"ReapCountsTheReplayBudget", testReapCountsTheReplayBudget},
			{"BulkTerminates", testBulkReplayTerminates},
			{"SearchAndFiltered", testSearchAndFilteredReplay},
		}},
		{"RetryNow", []test{
			{"Refusals", testRetryNowRefusals},
			{"BulkAndDryRun", testBulkRetryNow},
			{"RecoveryOfProviders", testRetryDueForProviders},
		}},
		{"Inspect", []test{
			{"ListFiltersAndCursor", testListFiltersAndCursor},
			{"FindByEventIDAndConflicts", testFindByEventIDAndConflicts},
			{"TypeMatchesLikeTheListFilter", testTypeMatchesLikeTheListFilter},
		}},
		{"Retention", []test{
			{"Cleanup", testRetentionCleanup},
			{"IgnoredEvents", testIgnoredEvents},
			{"IgnoredRetention", testIgnoredRetention},
		}},
		{"Pauses", []test{{"PauseAndResume", testPauses}}},
		{"Timeline", []test{
			{"Story", testTimelineStory},
			{"ReceiptsKeepTheLatest", testTimelineReceiptsKeepTheLatest},
			{"Holds", testTimelineHolds},
			{"CopiesAndDelivered", testTimelineCopiesAndDelivered},
		}},
		{"Catchup", []test{
			{"Sources", testCatchupSources},
			{"Lease", testCatchupLease},
			{"Requests", testCatchupRequests},
		}},
		{"Order", []test{
			{"OneAtATimePerKey", testOrderOneAtATimePerKey},
			{"ClaimOnlyFirstInLine", testOrderClaimOnlyFirstInLine},
			{"DeadReleasesUnderSkip", testOrderDeadReleasesUnderSkip},
			{"DeadBlocksUntilSkipped", testOrderDeadBlocksUntilSkipped},
			{"ReplayTakesItsTurnBack", testOrderReplayTakesItsTurnBack},
			{"ReapedDeadKeepsBlocking", testOrderReapedDeadKeepsBlocking},
			{"IgnoredHoldsNoKey", testOrderIgnoredHoldsNoKey},
			{"ConcurrentClaimsOfOneKey", testOrderConcurrentClaimsOfOneKey},
		}},
	}
}

// Run runs the whole suite on journals from h.Open, each test in
// parallel on a journal of its own.
func Run(t *testing.T, h Harness) {
	t.Helper()
	t.Run("Migrate/TwiceAndReady", func(t *testing.T) {
		t.Parallel()
		testMigrateTwiceAndReady(t, h.Open(t, false))
	})
	for _, c := range suite(h) {
		for _, tc := range c.tests {
			t.Run(c.concern+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, h.Open(t, true))
			})
		}
	}
}
