// Package promtest is for tests of the shipped observability files
// (deploy/observability): it finds Prometheus's own programs, promtool and
// prometheus, runs a real Prometheus server, and reads the PromQL
// expressions of the alert rules and the Grafana dashboard and the metric
// names they use.
//
// The programs come from Debian's prometheus package, unpacked rather
// than installed (.ci/with-services.sh does it): installing it starts a
// server on :9090, whguard's default admin address.
package promtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// EnvDir names a directory holding promtool and prometheus, looked in
// before PATH.
const EnvDir = "WHGUARD_TEST_PROMETHEUS"

// Tool returns the path of promtool or prometheus: in $WHGUARD_TEST_PROMETHEUS,
// else on PATH. Missing, it fails the test under CI (CI set) and skips it
// elsewhere.
func Tool(t testing.TB, name string) string {
	t.Helper()
	if dir := os.Getenv(EnvDir); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := fmt.Sprintf("no %s: run the tests through ./.ci/with-services.sh (it unpacks Debian's prometheus package), or set %s to a directory holding promtool and prometheus", name, EnvDir)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Rule is one alert rule as the rules file writes it.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Rules reads the alert rules of a Prometheus rules file, in order.
func Rules(path string) ([]Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// Target is one query of a dashboard panel.
type Target struct {
	Panel string
	Expr  string
}

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Query    any    `json:"query"`
			AllValue string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []Panel `json:"panels"`
}

// Panel is a dashboard panel (a row holds others when collapsed).
type Panel struct {
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []Panel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// ReadDashboard reads a Grafana dashboard's JSON.
func ReadDashboard(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// Targets lists every panel query, rows' panels included.
func (d *Dashboard) Targets() []Target {
	var out []Target
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Target{Panel: p.Title, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// Grafana's variables as the tests substitute them: every template
// variable matches anything; the built-in intervals get fixed values.
var builtins = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h")

// Expand replaces the dashboard's variables in expr so that Prometheus can
// run it: $__rate_interval and the like by durations, every other $name
// (the template variables, used as label regexps) by .*.
func Expand(expr string) string {
	return regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`).ReplaceAllString(builtins.Replace(expr), ".*")
}

var (
	// quoted is a PromQL string: "…", '…' (with escapes) or `…`.
	quoted = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	ident  = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// MetricNames lists the whguard_ metric names an expression reads, each
// once, sorted: its identifiers starting with whguard_, outside strings
// (label values, regexps). A histogram's series keep their suffix
// (_bucket, _sum, _count), as /metrics writes them.
func MetricNames(expr string) []string {
	var out []string
	for _, id := range ident.FindAllString(quoted.ReplaceAllString(expr, `""`), -1) {
		if strings.HasPrefix(id, "whguard_") && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// DocMetrics lists the metric names written in a Markdown page's code
// spans, each once, in order.
func DocMetrics(markdown string) []string {
	var out []string
	for _, span := range regexp.MustCompile("`[^`]+`").FindAllString(markdown, -1) {
		for _, n := range MetricNames(strings.Trim(span, "`")) {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// The shipped files whose metric names UsedMetrics reads, from the
// repository's root.
const (
	RulesFile     = "deploy/observability/alerts.yml"
	DashboardFile = "deploy/observability/grafana-dashboard.json"
	RunbookFile   = "docs/runbook.md"
)

// UsedMetrics maps every metric name the alert rules, the dashboard and
// the runbook use to the file that names it (the first of them that
// does); root is the repository's root.
func UsedMetrics(root string) (map[string]string, error) {
	names := map[string]string{}
	add := func(file string, ns []string) {
		for _, n := range ns {
			if _, ok := names[n]; !ok {
				names[n] = file
			}
		}
	}
	rules, err := Rules(filepath.Join(root, RulesFile))
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		add(RulesFile, MetricNames(r.Expr))
	}
	d, err := ReadDashboard(filepath.Join(root, DashboardFile))
	if err != nil {
		return nil, err
	}
	for _, tg := range d.Targets() {
		add(DashboardFile, MetricNames(tg.Expr))
	}
	runbook, err := os.ReadFile(filepath.Join(root, RunbookFile))
	if err != nil {
		return nil, err
	}
	add(RunbookFile, DocMetrics(string(runbook)))
	return names, nil
}
