package observability

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/whguard/whguard/internal/promtest"
)

// The dashboard shows what it is for (each topic by the metric that
// tells it), per instance, provider and backend.
func TestDashboard(t *testing.T) {
	t.Parallel()
	d, err := promtest.ReadDashboard("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both are needed to import and link it", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" && v.AllValue != ".*" {
			t.Errorf("variable %s: allValue %q, want .* (the expressions match it with =~)", v.Name, v.AllValue)
		}
	}
	for name, typ := range map[string]string{"datasource": "datasource", "job": "query", "instance": "query", "provider": "query", "backend": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s: type %q, want %q", name, vars[name], typ)
		}
	}
	targets := d.Targets()
	if len(targets) < 20 {
		t.Fatalf("only %d queries", len(targets))
	}
	used := map[string]bool{}
	for _, tg := range targets {
		if !strings.Contains(tg.Expr, `instance=~"$instance"`) || !strings.Contains(tg.Expr, `job=~"$job"`) {
			t.Errorf("%s: %s does not follow the job and instance variables", tg.Panel, tg.Expr)
		}
		// A query that groups or reads by provider or backend follows
		// that variable too.
		for _, label := range []string{"provider", "backend"} {
			if strings.Contains(tg.Expr, label) && !strings.Contains(tg.Expr, label+`=~"$`+label+`"`) {
				t.Errorf("%s: %s names %s without following $%s", tg.Panel, tg.Expr, label, label)
			}
		}
		names := promtest.MetricNames(tg.Expr)
		if len(names) == 0 {
			t.Errorf("%s: %s reads no whguard metric", tg.Panel, tg.Expr)
		}
		for _, n := range names {
			used[n] = true
		}
	}
	for topic, metric := range map[string]string{
		"ingress by result":        "whguard_ingress_requests_total",
		"deliveries by outcome":    "whguard_deliveries_total",
		"ack-to-delivery latency":  "whguard_delivery_latency_seconds_bucket",
		"backlog":                  "whguard_events",
		"oldest pending age":       "whguard_oldest_pending_age_seconds",
		"breakers":                 "whguard_backend_breaker_state",
		"pauses":                   "whguard_backend_paused",
		"held deliveries":          "whguard_deliveries_held_total",
		"journal up":               "whguard_journal_up",
		"redis up":                 "whguard_redis_up",
		"catch-up":                 "whguard_catchup_passes_total",
		"refusals":                 "whguard_ingress_refusals_total",
		"attempt duration":         "whguard_delivery_duration_seconds_bucket",
		"journal commit durations": "whguard_journal_commit_duration_seconds_bucket",
	} {
		if !used[metric] {
			t.Errorf("no panel shows %s (%s)", topic, metric)
		}
	}
}

// Every metric the rules, the dashboard and the runbook name is in the
// metrics table of docs/operations.md.
func TestObservedMetricsAreDocumented(t *testing.T) {
	t.Parallel()
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(whguard_[a-z0-9_]+)").FindAllStringSubmatch(string(ops), -1) {
		documented[m[1]] = true
	}
	names, err := promtest.UsedMetrics("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 15 {
		t.Fatalf("only %d metric names found", len(names))
	}
	for n, where := range names {
		family := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && documented[base] {
				family = base
			}
		}
		if !documented[family] {
			t.Errorf("%s names %s, which docs/operations.md does not document", where, n)
		}
	}
}
