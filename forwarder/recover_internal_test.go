package forwarder

import "testing"

// TestAfterAnswer: a 2xx after recoveryRun transient failures in a row is
// a recovery; other answers neither lengthen nor end the run.
func TestAfterAnswer(t *testing.T) {
	for _, c := range []struct {
		run, status int
		wantRun     int
		recovered   bool
	}{
		{0, 200, 0, false},
		{0, 503, 1, false},
		{0, 0, 1, false},   // no answer: a connection error, a timeout
		{2, 429, 2, false}, // asked for time: not an outage, its Retry-After is kept
		{recoveryRun, 429, recoveryRun, false},
		{1, 401, 2, false},               // the backend refuses whguard (a secret being rotated)
		{recoveryRun - 1, 200, 0, false}, // too short a run
		{recoveryRun, 200, 0, true},
		{recoveryRun + 5, 204, 0, true},
		{recoveryRun, 500, recoveryRun, false}, // about one event, not the backend
		{recoveryRun, 400, recoveryRun, false},
		{recoveryRun, 302, recoveryRun, false},
	} {
		run, recovered := afterAnswer(c.run, c.status)
		if run != c.wantRun || recovered != c.recovered {
			t.Errorf("afterAnswer(%d, %d) = %d, %v; want %d, %v", c.run, c.status, run, recovered, c.wantRun, c.recovered)
		}
	}
}
