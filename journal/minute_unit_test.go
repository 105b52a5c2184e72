package journal

import (
	"testing"
	"time"
)

func TestPercentileInterpolatesInsideABucket(t *testing.T) {
	var m Minute
	if _, ok := m.Percentile(0.5); ok {
		t.Fatal("an empty histogram has no percentile")
	}
	for range 99 {
		m.ObserveLatency(3 * time.Millisecond) // (2 ms, 5 ms]
	}
	m.ObserveLatency(2 * time.Hour) // (1 h, 6 h]
	if p, _ := m.Percentile(0.5); p <= 2*time.Millisecond || p > 5*time.Millisecond {
		t.Errorf("p50 = %v, want in (2 ms, 5 ms]", p)
	}
	if p, _ := m.Percentile(0.995); p <= time.Hour || p > 6*time.Hour {
		t.Errorf("p99.5 = %v, want in (1 h, 6 h]", p)
	}
	m.ObserveLatency(24 * time.Hour)
	if p, _ := m.Percentile(1); p != 6*time.Hour {
		t.Errorf("max = %v, want the open bucket's lower bound", p)
	}
	h, err := parseLatency(latencyText(m.Latency))
	if err != nil || len(h) != len(m.Latency) || h[2] != 99 || h[len(h)-1] != 1 {
		t.Errorf("round trip: %v %v", h, err)
	}
}
