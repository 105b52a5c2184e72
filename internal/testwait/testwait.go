// Package testwait waits, in tests, for a condition to hold rather than
// for a fixed time: it polls the condition until it holds or a deadline
// passes. The polling interval is the only sleep, in one place. Tests
// whose clock can be faked use testing/synctest instead.
package testwait

import (
	"testing"
	"time"
)

// Poll is how often For checks its condition.
const Poll = 10 * time.Millisecond

// Until checks cond every interval until it holds, and reports whether it
// did within the time given (cond is checked once more at the deadline).
func Until(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(every)
	}
	return true
}

// For checks cond every Poll until it holds, and fails t, naming what it
// waited for, when it does not within the time given.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(within, Poll, cond) {
		t.Fatalf("waited %s for %s", within, what)
	}
}
