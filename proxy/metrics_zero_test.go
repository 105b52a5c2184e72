package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Zero makes each configured provider's series exist before any request,
// with every label the counters take (a missing label value panics).
func TestMetricsZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.Zero([]string{"stripe", "github"})
	if n := testutil.CollectAndCount(m.refusals, "whguard_ingress_refusals_total"); n != 2*len(refusalReasons) {
		t.Errorf("refusal series at start-up: %d, want %d (each provider × reason, diagnosis none)", n, 2*len(refusalReasons))
	}
	if v := testutil.ToFloat64(m.refusals.WithLabelValues("stripe", refusalReasons[0], "none")); v != 0 {
		t.Errorf("a zeroed series reads %v", v)
	}
	if n := testutil.CollectAndCount(m.requests, "whguard_ingress_requests_total"); n != 1+2*len(results) {
		t.Errorf("request series at start-up: %d, want %d", n, 1+2*len(results))
	}
}
