package promtest

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`whguard_journal_up == 0`, []string{"whguard_journal_up"}},
		{`sum by (job, provider) (increase(whguard_deliveries_total{outcome="dead"}[15m])) > 0`, []string{"whguard_deliveries_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(whguard_delivery_latency_seconds_bucket{job=~"$job"}[$__rate_interval])))`,
			[]string{"whguard_delivery_latency_seconds_bucket"}},
		// Names inside strings are label values or regexps, not metrics.
		{`count({__name__=~"whguard_nothing.*", reason="whguard_x\"whguard_y"}) or whguard_b or whguard_a or whguard_b`,
			[]string{"whguard_a", "whguard_b"}},
		{`rate(go_gc_duration_seconds_count[1m]) and on (instance) whguard_redis_up:sum`, []string{"whguard_redis_up:sum"}},
		{"label_replace(up, `x`, 'whguard_q', \"y\", \"\")", nil},
	} {
		if got := MetricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("MetricNames(%s) = %v, want %v", c.expr, got, c.want)
		}
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`rate(x{job=~"$job", instance=~"${instance}"}[$__rate_interval])`: `rate(x{job=~".*", instance=~".*"}[1m])`,
		`increase(x[$__range]) / $__interval`:                             `increase(x[1h]) / 15s`,
		`whguard_up`:                                                      `whguard_up`,
	} {
		if got := Expand(in); got != want {
			t.Errorf("Expand(%s) = %s, want %s", in, got, want)
		}
	}
}
