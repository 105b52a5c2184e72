package proxy

import (
	"testing"
	"time"
)

// The diagnosis ration: a bucket of diagnosesPerSecond on the given clock,
// refilled at that rate, and at most diagnosesAtOnce running whatever the
// bucket holds; a clock that goes back refills nothing.
func TestDiagnosisGate(t *testing.T) {
	var g diagnosisGate
	t0 := time.Unix(1_000, 0)
	if !g.enter(t0) || !g.enter(t0) {
		t.Fatal("the first two are refused")
	}
	if g.enter(t0) {
		t.Fatal("a third runs while two do")
	}
	g.leave()
	g.leave()
	n := 2
	for g.enter(t0) {
		g.leave()
		n++
	}
	if n != diagnosesPerSecond {
		t.Fatalf("%d diagnoses in an instant, want %d", n, diagnosesPerSecond)
	}
	if g.enter(t0.Add(-time.Hour)) {
		t.Fatal("a clock gone back refilled the bucket")
	}
	if !g.enter(t0.Add(time.Second / diagnosesPerSecond)) {
		t.Fatal("no refill after a tenth of a second")
	}
	g.leave()
	if g.enter(t0.Add(time.Second / diagnosesPerSecond)) {
		t.Fatal("more than the refill")
	}
}
