package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-github/v89/github"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/whguard/whguard/internal/testdb"
)

// Catch-up end to end: the whguard binary, fake Stripe and GitHub APIs
// (catchup_fakes_test.go) paged through by stripe-go and go-github, and a
// backend that verifies every delivery with the providers' own SDKs.

const (
	cuStripeSecret = "whsec_catchupE2EStripeSecret0123"
	cuStripeKey    = "rk_test_catchupE2EKey0123456789abcd"
	cuGitHubSecret = "catchup-e2e-github-secret"
	cuGitHubToken  = "ghp_catchupE2EToken0123456789abcdef"
	cuHook         = "repos/acme/app/hooks/42"
	cuToken        = "catchup-admin-token"
)

// cuBackend verifies and counts deliveries per provider and event id.
type cuBackend struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      map[string]int // "stripe/evt_…", "github/guid"
	types    map[string]string
	rejected int
}

func newCuBackend(t *testing.T) *cuBackend {
	b := &cuBackend{got: map[string]int{}, types: map[string]string{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var key string
		switch r.Header.Get("X-Whguard-Provider") {
		case "stripe":
			// stripe-go's check, at its default tolerance.
			if err := webhook.ValidatePayload(body, r.Header.Get("Stripe-Signature"), cuStripeSecret); err != nil {
				b.reject(w, err)
				return
			}
			key = "stripe/" + r.Header.Get("X-Whguard-Source-Event-Id")
		case "github":
			if err := github.ValidateSignature(r.Header.Get("X-Hub-Signature-256"), body, []byte(cuGitHubSecret)); err != nil {
				b.reject(w, err)
				return
			}
			key = "github/" + r.Header.Get("X-GitHub-Delivery")
		}
		b.mu.Lock()
		b.got[key]++
		b.types[key] = r.Header.Get("X-Whguard-Provider")
		b.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *cuBackend) reject(w http.ResponseWriter, err error) {
	b.mu.Lock()
	b.rejected++
	b.mu.Unlock()
	http.Error(w, err.Error(), http.StatusBadRequest)
}

func (b *cuBackend) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got[key]
}

// cuWhguard is one whguard process with catch-up on for stripe and github.
type cuWhguard struct {
	t                    *testing.T
	listen, admin, dbURL string
	env                  []string
	proc                 *proc
}

func newCuWhguard(t *testing.T, dbURL string, st *fakeStripe, gh *fakeGitHub, backend string, interval string, extra ...string) *cuWhguard {
	keyFile := filepath.Join(t.TempDir(), "stripe-key")
	if err := os.WriteFile(keyFile, []byte(cuStripeKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &cuWhguard{t: t, listen: freePort(t), admin: freePort(t), dbURL: dbURL}
	w.env = append([]string{
		"WHGUARD_DATABASE_URL=" + dbURL,
		"WHGUARD_LISTEN=" + w.listen,
		"WHGUARD_ADMIN_LISTEN=" + w.admin,
		"WHGUARD_ADMIN_TOKEN=" + cuToken,
		"WHGUARD_BACKEND_URL=" + backend,
		"WHGUARD_PROVIDERS=stripe,github",
		"WHGUARD_STRIPE_SCHEME=stripe", "WHGUARD_STRIPE_SECRET=" + cuStripeSecret,
		"WHGUARD_STRIPE_CATCHUP=on", "WHGUARD_STRIPE_CATCHUP_TOKEN_FILE=" + keyFile,
		"WHGUARD_STRIPE_CATCHUP_API_URL=" + st.srv.URL, "WHGUARD_STRIPE_CATCHUP_ENDPOINT=we_catchup",
		"WHGUARD_STRIPE_CATCHUP_INTERVAL=" + interval,
		"WHGUARD_GITHUB_SCHEME=github", "WHGUARD_GITHUB_SECRET=" + cuGitHubSecret,
		"WHGUARD_GITHUB_CATCHUP=on", "WHGUARD_GITHUB_CATCHUP_TOKEN=" + cuGitHubToken,
		"WHGUARD_GITHUB_CATCHUP_API_URL=" + gh.srv.URL, "WHGUARD_GITHUB_CATCHUP_HOOK=" + cuHook,
		"WHGUARD_GITHUB_CATCHUP_INTERVAL=" + interval,
		"WHGUARD_RETRY_BASE_DELAY=100ms", "WHGUARD_RETRY_MAX_DELAY=1s", "WHGUARD_SHUTDOWN_TIMEOUT=5s",
		"WHGUARD_LOG_LEVEL=debug",
	}, extra...)
	gh.ingress = "http://" + w.listen + "/webhooks/github"
	return w
}

func (w *cuWhguard) start() {
	w.proc = start(w.t, binary, w.env)
	waitHTTP(w.t, "http://"+w.admin+"/readyz", 20*time.Second)
}

func (w *cuWhguard) stop() {
	_ = w.proc.cmd.Process.Signal(syscall.SIGTERM)
	if err := w.proc.wait(w.t, 15*time.Second); err != nil {
		w.t.Fatalf("whguard did not stop cleanly: %v", err)
	}
}

// sendStripe posts a signed Stripe webhook of body, as Stripe does.
func (w *cuWhguard) sendStripe(body []byte) int {
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: cuStripeSecret, Timestamp: time.Now()})
	req, _ := http.NewRequest(http.MethodPost, "http://"+w.listen+"/webhooks/stripe", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", signed.Header)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// cli runs the whguard CLI against this process's admin API.
func (w *cuWhguard) cli(args ...string) (int, string) {
	var out bytes.Buffer
	code := run(args, []string{"WHGUARD_ADMIN_URL=http://" + w.admin, "WHGUARD_ADMIN_TOKEN=" + cuToken}, &out, &out)
	return code, out.String()
}

// metric reads the sum of a metric's samples whose labels hold every one
// of labels ("provider=\"stripe\"").
func (w *cuWhguard) metric(name string, labels ...string) float64 {
	resp, err := http.Get("http://" + w.admin + "/metrics")
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			sum += v
		}
	}
	return sum
}

type cuPass struct {
	Listed              int    `json:"listed"`
	Missing             int    `json:"missing"`
	Journaled           int    `json:"journaled"`
	RedeliveryRequested int    `json:"redelivery_requested"`
	Error               string `json:"error"`
}

type cuStatus struct {
	Providers []struct {
		Provider    string     `json:"provider"`
		Window      string     `json:"window"`
		NextPass    *time.Time `json:"next_pass"`
		LastSuccess *time.Time `json:"last_success"`
		LastPass    *cuPass    `json:"last_pass"`
		LastError   *struct {
			At    time.Time `json:"at"`
			Error string    `json:"error"`
		} `json:"last_error"`
		Unarrived []string `json:"unarrived"`
	} `json:"providers"`
}

func (w *cuWhguard) status(provider string) (p struct {
	LastPass  *cuPass
	LastError string
	Unarrived []string
	Raw       cuStatus
}) {
	var st cuStatus
	adminGet(w.t, w.admin, cuToken, "/api/catchup", &st)
	p.Raw = st
	for _, s := range st.Providers {
		if s.Provider == provider {
			p.LastPass, p.Unarrived = s.LastPass, s.Unarrived
			if s.LastError != nil {
				p.LastError = s.LastError.Error
			}
		}
	}
	return p
}

// TestE2ECatchupBringsBackWhatWasMissed: whguard is down while Stripe
// gains 30 undelivered events and GitHub records 20 failed deliveries;
// once it is back, every event reaches the backend exactly once, within
// two intervals, signed so that the providers' SDKs accept it. Redelivery
// is asked for exactly the 20 GUIDs; the webhook copies of caught-up
// Stripe events that come later are duplicates; types the endpoint is not
// enabled for are never brought in; a dry run journals nothing.
func TestE2ECatchupBringsBackWhatWasMissed(t *testing.T) {
	testdb.ForEachStore(t, testCatchupBringsBack)
}

func testCatchupBringsBack(t *testing.T, store string) {
	const interval = 15 * time.Second
	st := newFakeStripe(t, cuStripeKey, []string{"invoice.paid", "invoice.payment_failed"})
	gh := newFakeGitHub(t, cuGitHubToken, cuGitHubSecret, cuHook)
	be := newCuBackend(t)
	w := newCuWhguard(t, journalURL(t, store), st, gh, be.srv.URL, interval.String())
	w.start()
	// The passes at start-up run first: one that ran while the events
	// below are being set up could bring an event in before its webhook
	// (which would then be answered as a duplicate).
	waitFor(t, 20*time.Second, "the start-up passes", func() bool {
		return w.status("stripe").LastPass != nil && w.status("github").LastPass != nil
	})

	// Up: deliveries as usual. One Stripe event whguard acknowledged is
	// still listed as undelivered (Stripe's attempt timed out before the
	// answer); two GitHub GUIDs failed once, then got through.
	for i := range 5 {
		e := stripeEvent{id: fmt.Sprintf("evt_ok_%d", i), typ: "invoice.paid", delivered: i != 0}
		st.add(e)
		if code := w.sendStripe(e.webhookRendering()); code != http.StatusAccepted {
			t.Fatalf("stripe webhook: %d", code)
		}
	}
	for i := range 5 {
		guid := fmt.Sprintf("ok-%d", i)
		if i < 2 {
			gh.record(guid, 0, false)
		}
		if code := gh.deliver(guid, i < 2); code != http.StatusAccepted {
			t.Fatalf("github webhook: %d", code)
		}
	}
	waitFor(t, 20*time.Second, "the 10 webhooks to be delivered", func() bool {
		n := 0
		for i := range 5 {
			n += min(be.count(fmt.Sprintf("stripe/evt_ok_%d", i)), 1) + min(be.count(fmt.Sprintf("github/ok-%d", i)), 1)
		}
		return n == 10
	})

	// Down: what the senders could not deliver.
	w.stop()
	var missed []stripeEvent
	for i := range 30 {
		e := stripeEvent{id: fmt.Sprintf("evt_missed_%02d", i), typ: []string{"invoice.paid", "invoice.payment_failed"}[i%2],
			created: time.Now().Add(-time.Duration(30-i) * time.Minute).Unix()}
		missed = append(missed, e)
		st.add(e)
	}
	for i := range 5 { // not enabled on the endpoint: never brought in
		st.add(stripeEvent{id: fmt.Sprintf("evt_other_%d", i), typ: "customer.created"})
	}
	var lost []string
	for i := range 20 {
		guid := fmt.Sprintf("lost-%02d", i)
		lost = append(lost, guid)
		gh.record(guid, 0, false)
	}

	back := time.Now()
	w.start()
	waitFor(t, 2*interval+10*time.Second, "every missed event to reach the backend", func() bool {
		for _, e := range missed {
			if be.count("stripe/"+e.id) == 0 {
				return false
			}
		}
		for _, g := range lost {
			if be.count("github/"+g) == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("caught up %s after the restart", time.Since(back).Round(time.Millisecond))

	// Webhook copies of caught-up events arrive late, rendered otherwise.
	for _, e := range missed[:5] {
		if code := w.sendStripe(e.webhookRendering()); code != http.StatusOK {
			t.Fatalf("late webhook copy of %s: %d, want 200 (a duplicate)", e.id, code)
		}
	}
	if n := w.metric("whguard_ingress_requests_total", `provider="stripe"`, `result="duplicate"`); n < 5 {
		t.Errorf("late copies counted as duplicates: %v, want 5", n)
	}
	for _, e := range missed[:5] {
		var list struct {
			Events []struct {
				ID       int64  `json:"id"`
				Source   string `json:"source"`
				Status   string `json:"status"`
				Attempts int    `json:"attempts"`
			} `json:"events"`
		}
		adminGet(t, w.admin, cuToken, "/api/events?provider=stripe&event_id="+e.id, &list)
		if len(list.Events) != 1 || list.Events[0].Source != "catchup" || list.Events[0].Attempts != 1 {
			t.Fatalf("%s: %+v, want one catch-up event delivered at its first attempt", e.id, list.Events)
		}
		var detail struct {
			Source    string `json:"source"`
			Conflicts int    `json:"conflicts"`
			Path      string `json:"path"`
		}
		adminGet(t, w.admin, cuToken, fmt.Sprintf("/api/events/%d", list.Events[0].ID), &detail)
		if detail.Source != "catchup" || detail.Conflicts != 0 || detail.Path != "/webhooks/stripe" {
			t.Fatalf("%s: %+v, want source catchup, no conflicting copy, the provider's path", e.id, detail)
		}
	}

	// Exactly once each; nothing else; every signature accepted.
	be.mu.Lock()
	for k, n := range be.got {
		if n != 1 {
			t.Errorf("%s delivered %d times, want once", k, n)
		}
		if strings.HasPrefix(k, "stripe/evt_other") {
			t.Errorf("%s brought in, though the endpoint is not enabled for its type", k)
		}
	}
	if want := 5 + 30 + 5 + 20; len(be.got) != want {
		t.Errorf("backend got %d distinct events, want %d", len(be.got), want)
	}
	if be.rejected != 0 {
		t.Errorf("the backend's SDKs refused %d deliveries", be.rejected)
	}
	be.mu.Unlock()
	asked := gh.asked()
	slices.Sort(asked)
	if !slices.Equal(asked, lost) {
		t.Errorf("redelivery asked for %v, want exactly %v", asked, lost)
	}
	var gev struct {
		Events []struct {
			Source string `json:"source"`
		} `json:"events"`
	}
	adminGet(t, w.admin, cuToken, "/api/events?provider=github&event_id=lost-00", &gev)
	if len(gev.Events) != 1 || gev.Events[0].Source != "catchup" {
		t.Errorf("a redelivered GUID: %+v, want source catchup", gev.Events)
	}
	adminGet(t, w.admin, cuToken, "/api/events?provider=github&event_id=ok-0", &gev)
	if len(gev.Events) != 1 || gev.Events[0].Source != "webhook" {
		t.Errorf("a GUID GitHub delivered itself: %+v, want source webhook", gev.Events)
	}
	if n := w.metric("whguard_catchup_events_total", `provider="stripe"`, `action="journaled"`); n != 30 {
		t.Errorf("stripe events journaled by catch-up: %v, want 30", n)
	}
	if n := w.metric("whguard_catchup_events_total", `provider="github"`, `action="redelivery_requested"`); n != 20 {
		t.Errorf("github redeliveries requested: %v, want 20", n)
	}
	if p := w.status("stripe"); p.LastPass == nil || p.LastPass.Error != "" || p.LastPass.Journaled != 30 {
		t.Errorf("stripe's last pass: %+v", p.LastPass)
	}

	// A dry run reports what is missing and journals nothing; a run does.
	for i := range 3 {
		st.add(stripeEvent{id: fmt.Sprintf("evt_late_%d", i), typ: "invoice.paid"})
	}
	code, out := w.cli("catchup", "run", "stripe", "-dry-run")
	if code != 0 || !strings.Contains(out, "missing 3") || !strings.Contains(out, "journaled 0") {
		t.Fatalf("catchup run -dry-run: %d %q", code, out)
	}
	if n := w.metric("whguard_catchup_events_total", `provider="stripe"`, `action="journaled"`); n != 30 {
		t.Errorf("a dry run was counted: %v journaled", n)
	}
	var none struct {
		Events []any `json:"events"`
	}
	adminGet(t, w.admin, cuToken, "/api/events?provider=stripe&event_id=evt_late_0", &none)
	if len(none.Events) != 0 {
		t.Fatalf("a dry run journaled %+v", none.Events)
	}
	code, out = w.cli("catchup", "run", "stripe", "-since", "2h")
	if code != 0 || !strings.Contains(out, "journaled 3") {
		t.Fatalf("catchup run: %d %q", code, out)
	}
	code, out = w.cli("catchup", "status")
	if code != 0 || !strings.Contains(out, "stripe") || !strings.Contains(out, "github") {
		t.Fatalf("catchup status: %d %q", code, out)
	}
	if c := adminCall(t, w.admin, cuToken, http.MethodPost, "/api/catchup/stripe", `{"since":"800h"}`, nil); c != http.StatusBadRequest {
		t.Errorf("since beyond Stripe's 30 days: %d, want 400", c)
	}
	if c := adminCall(t, w.admin, cuToken, http.MethodPost, "/api/catchup/nope", ``, nil); c != http.StatusNotFound {
		t.Errorf("an unknown provider: %d, want 404", c)
	}
	// The credentials never show.
	for _, secret := range []string{cuStripeKey, cuGitHubToken, cuStripeKey[len(cuStripeKey)-4:] + `"`} {
		if strings.Contains(w.proc.out.String(), secret) || strings.Contains(out, secret) {
			t.Errorf("a credential (or Stripe's masked rendering of it) appears in the logs or the CLI")
		}
	}
}

// TestE2ECatchupFailures: each way the APIs fail ends the pass with its
// reason recorded and shown (never the credential, not even as Stripe
// masks it), loses nothing, and the next pass succeeds.
func TestE2ECatchupFailures(t *testing.T) {
	t.Parallel()
	st := newFakeStripe(t, cuStripeKey, []string{"*"})
	gh := newFakeGitHub(t, cuGitHubToken, cuGitHubSecret, cuHook)
	be := newCuBackend(t)
	// A long interval: the passes here are the ones run by hand.
	w := newCuWhguard(t, "sqlite:"+filepath.Join(t.TempDir(), "journal.db"), st, gh, be.srv.URL, "1h")
	w.start()
	waitFor(t, 20*time.Second, "the first scheduled passes", func() bool {
		return w.status("stripe").LastPass != nil && w.status("github").LastPass != nil
	})
	st.add(stripeEvent{id: "evt_kept", typ: "invoice.paid"})
	gh.record("guid-kept", 0, false)

	run := func(provider string) cuPass {
		t.Helper()
		var p cuPass
		if code := adminCall(t, w.admin, cuToken, http.MethodPost, "/api/catchup/"+provider, "", &p); code != http.StatusOK {
			t.Fatalf("POST /api/catchup/%s: %d", provider, code)
		}
		return p
	}
	for _, c := range []struct {
		provider, fault, want string
	}{
		{"stripe", fault401, "401"},
		{"stripe", fault404, "404"},
		{"stripe", fault429, "429"},
		{"stripe", fault500, "500"},
		{"stripe", faultHang, "did not answer in time"},
		{"github", fault401, "401"},
		{"github", fault404, "404"},
		{"github", fault429, "rate limit is spent until"},
		{"github", faultSecondary, "secondary rate limit: try again in 1m0s"},
		{"github", fault500, "500"},
		// Under a fifth of the rate limit left: nothing asked for, and
		// the pass says so (found: it was recorded as a success).
		{"github", faultLowRate, "under a fifth of GitHub's rate limit is left (900 of 5000)"},
		// (A hang is the same client timeout as Stripe's above: 30 s.)
	} {
		set := st.setFault
		if c.provider == "github" {
			set = gh.setFault
		}
		set(c.fault)
		p := run(c.provider)
		set(faultNone)
		if !strings.Contains(p.Error, c.want) || p.Journaled+p.RedeliveryRequested != 0 {
			t.Errorf("%s %s: pass %+v, want an error with %q", c.provider, c.fault, p, c.want)
		}
		s := w.status(c.provider)
		if s.LastPass == nil || s.LastPass.Error != p.Error || s.LastError != p.Error {
			t.Errorf("%s %s: GET /api/catchup shows %+v, last error %q; want the pass's error", c.provider, c.fault, s.LastPass, s.LastError)
		}
	}
	if n := w.metric("whguard_catchup_passes_total", `provider="stripe"`, `result="error"`); n != 5 {
		t.Errorf("stripe passes counted as errors: %v, want 5", n)
	}
	// Nothing was lost: the next passes bring both in.
	if p := run("stripe"); p.Error != "" || p.Journaled != 1 {
		t.Errorf("stripe after the failures: %+v, want evt_kept journaled", p)
	}
	if p := run("github"); p.Error != "" || p.RedeliveryRequested != 1 {
		t.Errorf("github after the failures: %+v, want guid-kept asked for", p)
	}
	waitFor(t, 20*time.Second, "both to reach the backend", func() bool {
		return be.count("stripe/evt_kept") == 1 && be.count("github/guid-kept") == 1
	})
	if s := w.status("stripe"); s.LastPass.Error != "" || s.LastError == "" {
		t.Errorf("after a good pass: last pass %+v, last error %q (kept, for the record)", s.LastPass, s.LastError)
	}
	// An endpoint pinned to another API version than the events are
	// listed in: they are not journaled (a backend checking the version
	// would refuse each), and the pass says why; once the versions agree
	// they are (found: journaled as listed, every one went dead and its
	// webhook copy, arriving later, was a duplicate).
	st.setEndpointVersion("2025-03-31.basil")
	st.add(stripeEvent{id: "evt_other_version", typ: "invoice.paid"})
	if p := run("stripe"); !strings.Contains(p.Error, "API version") || p.Journaled != 0 || p.Missing != 1 {
		t.Errorf("events in another version than the endpoint's: pass %+v", p)
	}
	st.setEndpointVersion("2024-06-20")
	if p := run("stripe"); p.Error != "" || p.Journaled != 1 {
		t.Errorf("events in the endpoint's version: pass %+v, want evt_other_version journaled", p)
	}
	out := w.proc.out.String()
	for _, secret := range []string{cuStripeKey, cuGitHubToken, "****" + cuStripeKey[len(cuStripeKey)-4:]} {
		if strings.Contains(out, secret) {
			t.Errorf("the logs hold a credential, or Stripe's masked rendering of one")
		}
	}
	var st2 cuStatus
	raw := adminCall(t, w.admin, cuToken, http.MethodGet, "/api/catchup", "", &st2)
	if raw != http.StatusOK {
		t.Fatal(raw)
	}
	for _, p := range st2.Providers {
		if p.LastError != nil && (strings.Contains(p.LastError.Error, "****") || strings.Contains(p.LastError.Error, "Invalid API Key")) {
			t.Errorf("a recorded reason quotes Stripe's message: %q", p.LastError.Error)
		}
	}
}

// TestE2ECatchupOnePassAcrossReplicas: three replicas on one journal make
// one pass per interval between them, not three.
func TestE2ECatchupOnePassAcrossReplicas(t *testing.T) {
	t.Parallel()
	st := newFakeStripe(t, cuStripeKey, []string{"*"})
	gh := newFakeGitHub(t, cuGitHubToken, cuGitHubSecret, cuHook)
	be := newCuBackend(t)
	u, drop, err := testdb.Create(t.Context(), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	const interval = time.Second
	var ws []*cuWhguard
	for range 3 {
		w := newCuWhguard(t, u, st, gh, be.srv.URL, interval.String())
		w.start()
		ws = append(ws, w)
	}
	began, before := time.Now(), st.listCalls()
	waitFor(t, 30*time.Second, "eight passes", func() bool { return st.listCalls()-before >= 8 })
	took := time.Since(began)
	passes := st.listCalls() - before
	// One pass per interval at most (plus the one under way), however
	// many replicas; three uncoordinated replicas would make three.
	if most := int(took/interval) + 2; passes > most {
		t.Errorf("%d passes in %s with a %s interval: the replicas did not take turns (at most %d)", passes, took.Round(time.Millisecond), interval, most)
	}
	// Every replica shows the shared state.
	for i, w := range ws {
		if s := w.status("stripe"); s.LastPass == nil {
			t.Errorf("replica %d shows no last pass", i)
		}
	}
}
