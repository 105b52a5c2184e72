package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whguard/whguard/verify"
)

func TestParseTriggerArgs(t *testing.T) {
	cases := []struct {
		args          []string
		name, typ, to string
		count         int
		list          bool
		err           string
	}{
		{args: []string{"stripe"}, name: "stripe", count: 1},
		{args: []string{"Stripe", "invoice.paid", "-count", "3"}, name: "stripe", typ: "invoice.paid", count: 3},
		{args: []string{"-count", "2", "github", "-to", "https://hooks.example.com/gh?x=1", "push"}, name: "github", typ: "push", count: 2, to: "https://hooks.example.com/gh?x=1"},
		{args: []string{"-list"}, list: true, count: 1},
		{args: []string{}, err: "no provider name"},
		{args: []string{"-list", "stripe"}, err: "-list takes no provider name"},
		{args: []string{"a", "b", "c"}, err: `unexpected "c"`},
		{args: []string{"a", "-count", "0"}, err: "-count 0"},
		{args: []string{"a", "-count", "1001"}, err: "-count 1001"},
		{args: []string{"a", "-count", "x"}, err: "invalid value"},
		{args: []string{"a", "-to", "127.0.0.1:8080/webhooks/a"}, err: "absolute http(s) URL"},
		{args: []string{"a", "-to", "ftp://h/x"}, err: "absolute http(s) URL"},
		{args: []string{"a", "-bogus"}, err: "not defined"},
	}
	for _, tc := range cases {
		a, err := parseTriggerArgs(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		to := ""
		if a.to != nil {
			to = a.to.String()
		}
		if err != nil || a.name != tc.name || a.typ != tc.typ || a.count != tc.count || a.list != tc.list || to != tc.to {
			t.Errorf("%q: %+v (to %q), %v", tc.args, a, to, err)
		}
	}
}

func TestLocalIngress(t *testing.T) {
	cases := map[string]string{
		":8080":          "http://127.0.0.1:8080/webhooks/stripe",
		"0.0.0.0:9000":   "http://127.0.0.1:9000/webhooks/stripe",
		"[::]:9000":      "http://127.0.0.1:9000/webhooks/stripe",
		"10.1.2.3:8080":  "http://10.1.2.3:8080/webhooks/stripe",
		"[::1]:8080":     "http://[::1]:8080/webhooks/stripe",
		"localhost:8081": "http://localhost:8081/webhooks/stripe",
	}
	for listen, want := range cases {
		if got := localIngress(listen, "/webhooks/stripe").String(); got != want {
			t.Errorf("%s: %s, want %s", listen, got, want)
		}
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine([]byte("{\n  \"a\": 1\n}\n"), 100); got != `{ "a": 1 }` {
		t.Errorf("got %q", got)
	}
	if got := oneLine([]byte(strings.Repeat("x", 20)), 10); got != strings.Repeat("x", 10)+"…" {
		t.Errorf("got %q", got)
	}
}

// triggerEnv configures stripe (signable) and discord (signed with
// Discord's key) as serve would read them.
func triggerEnv(extra ...string) []string {
	return append([]string{
		"WHGUARD_PROVIDERS=stripe,discord",
		"WHGUARD_STRIPE_SCHEME=stripe",
		"WHGUARD_STRIPE_SECRET=whsec_triggerUnitTest0123456789",
		"WHGUARD_DISCORD_SCHEME=discord",
		"WHGUARD_DISCORD_PUBLIC_KEY=" + strings.Repeat("ab", 32),
		"WHGUARD_BACKEND_URL=http://127.0.0.1:1",
		"WHGUARD_LISTEN=127.0.0.1:1",
	}, extra...)
}

// fakeIngress verifies what it receives as whguard would (the same
// configuration) and answers with status when it verifies, 401 otherwise.
type fakeIngress struct {
	p      *verify.Provider
	status int
	mu     sync.Mutex
	ids    map[string]bool
}

func (f *fakeIngress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ev, err := f.p.Check(verify.Input{Header: r.Header, Body: body, RawQuery: r.URL.RawQuery}, time.Now())
	if err != nil {
		http.Error(w, `{"error":"`+err.Error()+`"}`, http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	f.ids[ev.ID] = true
	f.mu.Unlock()
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, "{\n  \"event_id\": \""+ev.ID+"\",\n  \"type\": \""+ev.Type+"\"\n}\n")
}

func TestTriggerCommand(t *testing.T) {
	cfg, _, err := loadConfig(triggerEnv())
	if err != nil {
		t.Fatal(err)
	}
	ing := &fakeIngress{p: findProvider(cfg, "stripe").provider, status: http.StatusAccepted, ids: map[string]bool{}}
	srv := httptest.NewServer(ing)
	defer srv.Close()

	code, out, errOut := runCmd([]string{"trigger", "stripe", "payment_intent.succeeded", "-count", "3", "-to", srv.URL + "/webhooks/stripe?tenant=1"}, triggerEnv()...)
	if code != 0 || strings.Count(out, " 202 { \"event_id\": \"evt_") != 3 || !strings.Contains(out, `"type": "payment_intent.succeeded" }`) || errOut != "" {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if len(ing.ids) != 3 {
		t.Fatalf("%d distinct events received, want 3", len(ing.ids))
	}

	ing.status = http.StatusInternalServerError
	if code, out, _ := runCmd([]string{"trigger", "stripe", "-to", srv.URL}, triggerEnv()...); code != 1 || !strings.Contains(out, "\n500 ") {
		t.Fatalf("a 500: exit %d, stdout %s; want 1", code, out)
	}
	// Signed with another secret than the one the ingress checks: 401.
	ing.status = http.StatusAccepted
	other := triggerEnv("WHGUARD_STRIPE_SECRET=whsec_anotherSecret0123456789")
	if code, out, _ := runCmd([]string{"trigger", "stripe", "-to", srv.URL}, other...); code != 1 || !strings.Contains(out, "\n401 ") {
		t.Fatalf("another secret: exit %d, stdout %s; want 1 and the 401", code, out)
	}
	// Nobody listening (WHGUARD_LISTEN is port 1).
	if code, _, errOut := runCmd([]string{"trigger", "stripe"}, triggerEnv()...); code != 1 || !strings.Contains(errOut, "http://127.0.0.1:1/webhooks/stripe") {
		t.Fatalf("nobody listening: exit %d, stderr %s; want 1 naming the URL", code, errOut)
	}
}

func TestTriggerRefusals(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"provider holds the key", []string{"trigger", "discord"}, triggerEnv(), "is signed with a key only the provider holds, so whguard cannot send its requests. " + verify.SenderKeyHint("discord")},
		{"unknown provider", []string{"trigger", "github"}, triggerEnv(), `no provider "github" is configured (WHGUARD_PROVIDERS: stripe, discord)`},
		{"unknown sample", []string{"trigger", "stripe", "charge.refunded"}, triggerEnv(), `scheme stripe has no sample "charge.refunded"; its samples: checkout.session.completed [default], payment_intent.succeeded`},
		{"bad flag", []string{"trigger", "stripe", "-count", "-1"}, triggerEnv(), "-count -1"},
		{"bad configuration", []string{"trigger", "stripe"}, triggerEnv("WHGUARD_STRIPE_SECRET=sk_live_oops"), "invalid configuration: WHGUARD_STRIPE_SECRET"},
		{"no provider configured", []string{"trigger", "stripe"}, []string{"WHGUARD_BACKEND_URL=http://b"}, "WHGUARD_PROVIDERS"},
	}
	for _, tc := range cases {
		code, out, errOut := runCmd(tc.args, tc.env...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.name, code, out, errOut, tc.want)
		}
		if strings.Contains(errOut, "sk_live_oops") {
			t.Errorf("%s: stderr shows the secret", tc.name)
		}
	}
}

func TestTriggerList(t *testing.T) {
	code, out, _ := runCmd([]string{"trigger", "-list"}, triggerEnv()...)
	if code != 0 || !strings.Contains(out, "stripe    stripe   checkout.session.completed [default], payment_intent.succeeded") ||
		!strings.Contains(out, "discord   discord  none: signed with a key only the provider holds") || strings.Contains(out, "github") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	code, out, _ = runCmd([]string{"trigger", "-list"}, "WHGUARD_PROVIDERS= , ")
	if code != 0 || !strings.Contains(out, "No provider configured") || strings.Count(out, "\n") != len(verify.KnownSchemes())+2 ||
		!strings.Contains(out, "shopify    orders-create (type orders/create) [default]") || !strings.Contains(out, "twilio     incoming-sms (no type) [default]") {
		t.Fatalf("every scheme: exit %d\n%s", code, out)
	}
	if code, out, _ := runCmd([]string{"trigger", "-h"}); code != 0 || !strings.Contains(out, "whguard trigger NAME [TYPE] [-count N] [-to URL]") {
		t.Fatalf("-h: exit %d\n%s", code, out)
	}
}
