package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/promtest"
)

// The shipped dashboard, alert rules and runbook (deploy/observability,
// docs/runbook.md) against the real binary: every metric they name is in
// /metrics from start-up, with a series for each configured provider and
// backend, and a real Prometheus that scrapes whguard and loads the rules
// fires WhguardDeadEvents when an event goes dead.

const obsToken = "observability-token"

// observed is one whguard with every part whose metrics the dashboard
// reads: two providers on two backends (shop answers 400 to a body
// holding "poison"), shared limits in Redis, the breaker (on by
// default), and catch-up for stripe against a fake Stripe API.
type observed struct {
	t                     *testing.T
	listen, admin         string
	shopBackend, stripeBE *httptest.Server
	stripeAPI             *fakeStripe
	wh                    *standardwebhooks.Webhook
}

func startObserved(t *testing.T) *observed {
	t.Helper()
	backend := func() *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if strings.Contains(string(b), "poison") {
				http.Error(w, `{"error":"unknown field poison"}`, http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(s.Close)
		return s
	}
	o := &observed{t: t, listen: freePort(t), admin: freePort(t), shopBackend: backend(), stripeBE: backend(),
		stripeAPI: newFakeStripe(t, cuStripeKey, []string{"invoice.paid"})}
	var err error
	if o.wh, err = standardwebhooks.NewWebhook(e2eSecret); err != nil {
		t.Fatal(err)
	}
	// Catch-up's first pass brings in an event Stripe could not deliver.
	o.stripeAPI.add(stripeEvent{id: "evt_obs_missed", typ: "invoice.paid"})
	keyFile := filepath.Join(t.TempDir(), "stripe-key")
	if err := os.WriteFile(keyFile, []byte(cuStripeKey), 0o600); err != nil {
		t.Fatal(err)
	}
	rd := startRedis(t)
	start(t, binary, []string{
		"WHGUARD_DATABASE_URL=" + journalURL(t, "postgres"),
		"WHGUARD_LISTEN=" + o.listen, "WHGUARD_ADMIN_LISTEN=" + o.admin, "WHGUARD_ADMIN_TOKEN=" + obsToken,
		"WHGUARD_PROVIDERS=shop,stripe",
		"WHGUARD_SHOP_SCHEME=standard", "WHGUARD_SHOP_SECRET=" + e2eSecret, "WHGUARD_SHOP_BACKEND_URL=" + o.shopBackend.URL,
		"WHGUARD_STRIPE_SCHEME=stripe", "WHGUARD_STRIPE_SECRET=" + cuStripeSecret, "WHGUARD_STRIPE_BACKEND_URL=" + o.stripeBE.URL,
		"WHGUARD_STRIPE_CATCHUP=on", "WHGUARD_STRIPE_CATCHUP_TOKEN_FILE=" + keyFile,
		"WHGUARD_STRIPE_CATCHUP_API_URL=" + o.stripeAPI.srv.URL, "WHGUARD_STRIPE_CATCHUP_ENDPOINT=we_catchup",
		"WHGUARD_REDIS_URL=" + rd.url(),
		"WHGUARD_RETRY_BASE_DELAY=100ms", "WHGUARD_RETRY_MAX_DELAY=1s", "WHGUARD_SHUTDOWN_TIMEOUT=5s",
	})
	waitHTTP(t, "http://"+o.admin+"/readyz", 20*time.Second)
	return o
}

// sendShop posts one shop event signed with secret; it returns the status.
func (o *observed) sendShop(id, body string, wh *standardwebhooks.Webhook) int {
	o.t.Helper()
	now := time.Now()
	sig, err := wh.Sign(id, now, []byte(body))
	if err != nil {
		o.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+o.listen+"/webhooks/shop", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sample is one line of /metrics.
type sample struct {
	labels map[string]string
	value  float64
}

var labelPair = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrape reads /metrics into each sample name's samples.
func (o *observed) scrape() map[string][]sample {
	o.t.Helper()
	resp, err := http.Get("http://" + o.admin + "/metrics")
	if err != nil {
		o.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string][]sample{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		s := sample{labels: map[string]string{}}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			for _, m := range labelPair.FindAllStringSubmatch(rest[1:end], -1) {
				s.labels[m[1]] = m[2]
			}
			rest = rest[end+1:]
		}
		s.value, _ = strconv.ParseFloat(strings.Fields(rest)[0], 64)
		out[name] = append(out[name], s)
	}
	if err := sc.Err(); err != nil {
		o.t.Fatal(err)
	}
	return out
}

// sum adds the samples of name whose labels include want.
func sum(samples []sample, want map[string]string) float64 {
	total := 0.0
	for _, s := range samples {
		ok := true
		for k, v := range want {
			ok = ok && s.labels[k] == v
		}
		if ok {
			total += s.value
		}
	}
	return total
}

// checkServed fails the test for each metric the shipped files name that
// is not in got, or that lacks a series for a configured provider or
// backend (catch-up's for the providers that have it).
func (o *observed) checkServed(when string, got map[string][]sample) {
	o.t.Helper()
	used, err := promtest.UsedMetrics("../..")
	if err != nil {
		o.t.Fatal(err)
	}
	if len(used) < 20 {
		o.t.Fatalf("only %d metric names found in the shipped files", len(used))
	}
	backends := []string{forwarder.Origin(o.shopBackend.URL), forwarder.Origin(o.stripeBE.URL)}
	for name, file := range used {
		samples, ok := got[name]
		if !ok {
			o.t.Errorf("%s: %s names %s, which /metrics does not have", when, file, name)
			continue
		}
		seen := map[string]map[string]bool{"provider": {}, "backend": {}}
		for _, s := range samples {
			for label := range seen {
				if v, ok := s.labels[label]; ok {
					seen[label][v] = true
				}
			}
		}
		wantProviders := []string{"shop", "stripe"}
		if strings.HasPrefix(name, "whguard_catchup_") {
			wantProviders = []string{"stripe"}
		}
		if len(seen["provider"]) > 0 {
			for _, p := range wantProviders {
				if !seen["provider"][p] {
					o.t.Errorf("%s: %s has no series for provider %s", when, name, p)
				}
			}
		}
		if len(seen["backend"]) > 0 {
			for _, b := range backends {
				if !seen["backend"][b] {
					o.t.Errorf("%s: %s has no series for backend %s", when, name, b)
				}
			}
		}
	}
}

// Every metric the dashboard, the rules and the runbook name is served
// right after start-up (before any traffic) and after traffic of every
// kind the dashboard shows.
func TestE2EObservabilityMetricsExist(t *testing.T) {
	t.Parallel()
	o := startObserved(t)
	o.checkServed("at start-up", o.scrape())
	if t.Failed() {
		return
	}

	forger, err := standardwebhooks.NewWebhook("whsec_" + "bm90IHRoZSBzZWNyZXQgb2YgdGhpcyBzZW5kZXI=")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		id, body string
		wh       *standardwebhooks.Webhook
		want     int
	}{
		{"msg_obs_1", orderEvent("o1", "order.created"), o.wh, 202},
		{"msg_obs_2", orderEvent("o2", "order.created"), o.wh, 202},
		{"msg_obs_1", orderEvent("o1", "order.created"), o.wh, 200}, // a duplicate
		{"msg_obs_3", orderEvent("o3", "order.created"), forger, 401},
		{"msg_obs_4", `{"type":"order.created","poison":true}`, o.wh, 202},
	} {
		if got := o.sendShop(c.id, c.body, c.wh); got != c.want {
			t.Fatalf("request %d: %d, want %d", i, got, c.want)
		}
	}
	var m map[string][]sample
	waitFor(t, 30*time.Second, "two deliveries done, one dead, and catch-up's pass recorded and its event delivered", func() bool {
		m = o.scrape()
		d := m["whguard_deliveries_total"]
		return sum(d, map[string]string{"provider": "shop", "outcome": "done"}) == 2 &&
			sum(d, map[string]string{"provider": "shop", "outcome": "dead"}) == 1 &&
			sum(d, map[string]string{"provider": "stripe", "outcome": "done"}) == 1 &&
			sum(m["whguard_catchup_passes_total"], map[string]string{"provider": "stripe", "result": "ok"}) == 1
	})
	o.checkServed("after traffic", m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"whguard_ingress_requests_total", map[string]string{"provider": "shop", "result": "accepted"}, 3},
		{"whguard_ingress_requests_total", map[string]string{"provider": "shop", "result": "duplicate"}, 1},
		{"whguard_ingress_refusals_total", map[string]string{"provider": "shop", "reason": "signature_mismatch"}, 1},
		{"whguard_delivery_latency_seconds_count", map[string]string{"provider": "shop"}, 2},
		{"whguard_delivery_latency_seconds_count", map[string]string{"provider": "stripe"}, 1},
		{"whguard_catchup_events_total", map[string]string{"provider": "stripe", "action": "journaled"}, 1},
		{"whguard_catchup_passes_total", map[string]string{"provider": "stripe", "result": "ok"}, 1},
		{"whguard_journal_up", nil, 1},
		{"whguard_redis_up", nil, 1},
	} {
		if got := sum(m[c.name], c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// A real Prometheus scraping a real whguard, with the shipped rules: no
// alert while all is well, every dashboard query accepted, and
// WhguardDeadEvents firing for the provider once one of its events goes
// dead.
func TestE2EPrometheusFiresDeadEvents(t *testing.T) {
	t.Parallel()
	o := startObserved(t)
	prom := promtest.Start(t, promtest.Config{Targets: []string{o.admin}, RuleFiles: []string{"../../" + promtest.RulesFile}})
	// Settled: scraped as up, and the rules evaluated a few times since.
	var settled time.Time
	waitFor(t, 30*time.Second, "Prometheus to scrape whguard", func() bool {
		h, err := prom.Targets()
		if err == nil && h[o.admin] == "up" && settled.IsZero() {
			settled = time.Now()
		}
		return !settled.IsZero() && time.Since(settled) > 3*time.Second
	})
	alerts, err := prom.Alerts()
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) > 0 {
		t.Fatalf("alerts on a healthy whguard: %+v", alerts)
	}
	d, err := promtest.ReadDashboard("../../" + promtest.DashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	answered := 0
	for _, tg := range d.Targets() {
		res, err := prom.Query(promtest.Expand(tg.Expr))
		if err != nil {
			t.Errorf("panel %q: %v", tg.Panel, err)
		}
		if len(res) > 0 {
			answered++
		}
	}
	// Most panels have data at once; those that filter with > 0 (refusals,
	// holds, recoveries) have none yet.
	if answered < len(d.Targets())*2/3 {
		t.Errorf("only %d of %d dashboard queries returned data", answered, len(d.Targets()))
	}

	if got := o.sendShop("msg_obs_dead", `{"type":"order.created","poison":true}`, o.wh); got != 202 {
		t.Fatalf("poison event: %d", got)
	}
	var firing promtest.Alert
	waitFor(t, 60*time.Second, "WhguardDeadEvents to fire", func() bool {
		as, err := prom.Alerts()
		if err != nil {
			return false
		}
		for _, a := range as {
			if a.Labels["alertname"] == "WhguardDeadEvents" && a.State == "firing" {
				firing = a
				return true
			}
		}
		return false
	})
	want := map[string]string{"alertname": "WhguardDeadEvents", "job": "whguard", "provider": "shop", "severity": "warning"}
	for k, v := range want {
		if firing.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (alert %+v)", k, firing.Labels[k], v, firing)
		}
	}
	if !strings.HasSuffix(firing.Annotations["runbook_url"], "docs/runbook.md#whguarddeadevents") {
		t.Errorf("runbook_url %q", firing.Annotations["runbook_url"])
	}
	as, err := prom.Alerts()
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, a := range as {
		if a.Labels["alertname"] != "WhguardDeadEvents" || a.Labels["provider"] != "shop" {
			others = append(others, fmt.Sprintf("%s %s %v", a.Labels["alertname"], a.State, a.Labels))
		}
	}
	slices.Sort(others)
	if len(others) > 0 {
		t.Errorf("other alerts: %v", others)
	}
}
