package journal_test

import (
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after within: for
// what takes real time to happen (a lease to expire, a retry to come
// due), instead of sleeping for a guess of that time.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
