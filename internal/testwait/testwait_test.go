package testwait

import (
	"testing"
	"testing/synctest"
	"time"
)

// Until returns as soon as the condition holds, and false once the time
// given has passed without it.
func TestUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		if !Until(time.Second, Poll, func() bool { n++; return n == 3 }) {
			t.Fatal("a condition that came to hold was not seen")
		}
		if took := time.Since(start); took != 2*Poll {
			t.Errorf("took %s, want two polls", took)
		}
		start = time.Now()
		if Until(time.Second, Poll, func() bool { return false }) {
			t.Fatal("a condition that never held was reported")
		}
		if took := time.Since(start); took < time.Second || took > time.Second+Poll {
			t.Errorf("gave up after %s, want the second given", took)
		}
	})
}
