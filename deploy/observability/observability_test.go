// Package observability holds the tests of the shipped observability
// files: the Prometheus alert rules (promtool check and its unit tests),
// the Grafana dashboard, the Prometheus Operator's PodMonitor, and their
// agreement with docs/runbook.md and docs/operations.md. That every
// metric they name is served by a running whguard is tested end to end in
// cmd/whguard (TestE2EObservabilityMetricsExist).
package observability

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/whguard/whguard/internal/promtest"
)

// alerts are the alert names, as the runbook heads its sections.
var alerts = []string{"WhguardDeadEvents", "WhguardBacklogAge", "WhguardBreakerOpen", "WhguardJournalDown",
	"WhguardRedisDown", "WhguardCatchupFailing", "WhguardRefusalsSurging"}

// runbookBase starts every runbook_url: the runbook on the project's
// GitHub (alerts.yml's header says how to point it elsewhere).
const runbookBase = "https://github.com/whguard/whguard/blob/main/docs/runbook.md#"

func promtool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(promtest.Tool(t, "promtool"), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !bytes.Contains(out, []byte("SUCCESS")) {
		t.Fatalf("promtool %s said no SUCCESS:\n%s", strings.Join(args, " "), out)
	}
}

func TestAlertRulesCheck(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "rules", "alerts.yml")
}

// The unit tests beside the rules: a firing and a quiet case per alert.
func TestAlertRulesUnitTests(t *testing.T) {
	t.Parallel()
	promtool(t, "test", "rules", "alerts_test.yml")
}

// The rules are the seven alerts, each with a severity, a summary, and a
// runbook_url to its own section of docs/runbook.md.
func TestAlertRulesAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	rules, err := promtest.Rules("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
		switch r.Labels["severity"] {
		case "critical", "warning":
		default:
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
		}
		if r.For == "" {
			t.Errorf("%s: no for: (write for: 0m where it fires at once)", r.Alert)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: a summary and a description are needed", r.Alert)
		}
		if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
	if !slices.Equal(names, alerts) {
		t.Fatalf("alerts %v, want %v", names, alerts)
	}
	runbook, err := os.ReadFile("../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := regexp.MustCompile(`(?m)^## (Whguard\w+)$`).FindAllStringSubmatch(string(runbook), -1)
	var sections []string
	for _, h := range headings {
		sections = append(sections, h[1])
	}
	if !slices.Equal(sections, alerts) {
		t.Errorf("docs/runbook.md's alert sections are %v, want %v in that order", sections, alerts)
	}
}

// Each alert has a case where it fires and one where it stays quiet.
func TestEveryAlertHasFiringAndQuietCases(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !firing[a] || !quiet[a] {
			t.Errorf("%s: firing case %v, quiet case %v; want both", a, firing[a], quiet[a])
		}
	}
}
