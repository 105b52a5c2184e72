package proxy

import (
	"fmt"
	"net/http"
	"strings"
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

// A refusal record keeps the first header names, sorted, in a slice of
// their own: past the bound, the request's other names (one of 60 KiB
// here, sorting last) must not stay reachable through the backing array
// (found: a record kept every name of the request).
func TestHeaderNamesKeepNothingPastTheBound(t *testing.T) {
	h := http.Header{}
	for i := range maxRecordedHeaders + 8 {
		h[fmt.Sprintf("A%02d", i)] = []string{"v"}
	}
	h["Z"+strings.Repeat("z", 60<<10)] = []string{"v"}
	names := headerNames(h)
	if len(names) != maxRecordedHeaders || cap(names) != maxRecordedHeaders {
		t.Fatalf("%d names in a slice of capacity %d, want %d in %d", len(names), cap(names), maxRecordedHeaders, maxRecordedHeaders)
	}
	if names[0] != "A00" || names[len(names)-1] != fmt.Sprintf("A%02d", maxRecordedHeaders-1) {
		t.Fatalf("names %v, want the first %d sorted", names, maxRecordedHeaders)
	}
}
