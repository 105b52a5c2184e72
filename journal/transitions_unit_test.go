package journal

import "testing"

// The two decisions the stores take in Go, as tables.
func TestAfterHold(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		attempts, base int
		failedBefore   bool
		want           Status
	}{
		{1, 0, false, StatusPending}, // the first attempt, handed back
		{2, 0, false, StatusRetry},   // a later attempt of the budget
		{1, 0, true, StatusRetry},    // the first, but something failed before (a replayed row)
		{4, 3, false, StatusPending}, // the first of a replay's fresh budget
		{5, 3, false, StatusRetry},
	} {
		if got := afterHold(c.attempts, c.base, c.failedBefore); got != c.want {
			t.Errorf("afterHold(%d, %d, %v) = %s, want %s", c.attempts, c.base, c.failedBefore, got, c.want)
		}
	}
}

func TestAfterReap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		attempts, base, max int
		holds, block        bool
		want                Status
		wantHolds           bool
	}{
		{1, 0, 5, false, false, StatusRetry, false},
		{5, 0, 5, false, false, StatusDead, false},
		{4, 0, 5, true, false, StatusRetry, true},   // retry keeps its key
		{5, 0, 5, true, false, StatusDead, false},   // dead releases it
		{5, 0, 5, true, true, StatusDead, true},     // unless its provider blocks
		{7, 3, 5, false, false, StatusRetry, false}, // a replay's budget counts from its base
		{8, 3, 5, false, false, StatusDead, false},
	} {
		st, holds := afterReap(c.attempts, c.base, c.max, c.holds, c.block)
		if st != c.want || holds != c.wantHolds {
			t.Errorf("afterReap(%d, %d, %d, %v, %v) = %s, %v; want %s, %v", c.attempts, c.base, c.max, c.holds, c.block, st, holds, c.want, c.wantHolds)
		}
	}
}
