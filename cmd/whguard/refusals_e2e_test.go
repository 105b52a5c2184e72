package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/proxy"
)

// TestE2ERefusalsExplained drives the real binary with requests its
// providers refuse, each for a cause whguard can tell (another provider's
// secret, base64 for hex, a stale timestamp, a re-formatted body, a typo
// in the path), and reads them back with `whguard refusals` (table,
// -json, filters) and from the metrics; neither the CLI's output, the
// admin API nor the process's log holds a secret, a signature or body
// content.
func TestE2ERefusalsExplained(t *testing.T) {
	t.Parallel()
	const (
		secretA = "whsec_e2eRefusalsStripeA"
		secretB = "whsec_e2eRefusalsStripeB"
		secretG = "e2e-refusals-github-secret"
		token   = "refusals-admin-token"
		marker  = "E2E-REFUSALS-BODY-MARKER-c3a0"
	)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(backend.Close)
	listen, adminAddr := freePort(t), freePort(t)
	env := []string{
		"WHGUARD_DATABASE_URL=" + journalURL(t, "sqlite"),
		"WHGUARD_LISTEN=" + listen,
		"WHGUARD_ADMIN_LISTEN=" + adminAddr,
		"WHGUARD_ADMIN_TOKEN=" + token,
		"WHGUARD_BACKEND_URL=" + backend.URL,
		"WHGUARD_PROVIDERS=stripea,stripeb,gh",
		"WHGUARD_STRIPEA_SCHEME=stripe", "WHGUARD_STRIPEA_SECRET=" + secretA,
		"WHGUARD_STRIPEB_SCHEME=stripe", "WHGUARD_STRIPEB_SECRET=" + secretB,
		"WHGUARD_GH_SCHEME=github", "WHGUARD_GH_SECRET=" + secretG,
		"WHGUARD_LOG_LEVEL=debug",
		"WHGUARD_SHUTDOWN_TIMEOUT=5s",
	}
	wh := start(t, binary, env)
	waitHTTP(t, "http://"+adminAddr+"/readyz", 20*time.Second)

	mac := func(secret string, parts ...string) []byte {
		m := hmac.New(sha256.New, []byte(secret))
		for _, p := range parts {
			m.Write([]byte(p))
		}
		return m.Sum(nil)
	}
	body := `{"id":"evt_e2e_refused","type":"charge.refunded","note":"` + marker + `"}`
	var signatures []string
	stripe := func(secret string, at time.Time, signed string) http.Header {
		ts := strconv.FormatInt(at.Unix(), 10)
		sig := hex.EncodeToString(mac(secret, ts, ".", signed))
		signatures = append(signatures, sig)
		return http.Header{"Stripe-Signature": {"t=" + ts + ",v1=" + sig}}
	}
	ghSig := base64.StdEncoding.EncodeToString(mac(secretG, body))
	signatures = append(signatures, ghSig)
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, []byte(body), "", "  ")

	for _, c := range []struct {
		path   string
		header http.Header
		body   string
		status int
	}{
		{"/webhooks/stripea", stripe(secretB, time.Now(), body), body, 401},
		{"/webhooks/gh", http.Header{"X-Hub-Signature-256": {"sha256=" + ghSig}}, body, 401},
		{"/webhooks/stripeb", stripe(secretB, time.Now().Add(-time.Hour), body), body, 401},
		{"/webhooks/stripeb", stripe(secretB, time.Now(), body), pretty.String(), 401},
		{"/webhooks/stripe", stripe(secretA, time.Now(), body), body, 404},
	} {
		req, err := http.NewRequest(http.MethodPost, "http://"+listen+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Fatalf("%s: %d, want %d", c.path, resp.StatusCode, c.status)
		}
	}

	cli := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(args, []string{"WHGUARD_ADMIN_URL=http://" + adminAddr, "WHGUARD_ADMIN_TOKEN=" + token}, &out, &errb); code != 0 {
			t.Fatalf("whguard %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		return out.String()
	}
	var list struct {
		Refusals []proxy.Refusal `json:"refusals"`
	}
	waitFor(t, 10*time.Second, "five refusals kept", func() bool {
		return json.Unmarshal([]byte(cli("refusals", "-json")), &list) == nil && len(list.Refusals) == 5
	})
	want := []struct{ provider, reason, diagnosis string }{ // newest first
		{"", "not_found", "wrong_path"},
		{"stripeb", "signature_mismatch", "body_reserialized"},
		{"stripeb", "timestamp_outside_tolerance", "clock_skew"},
		{"gh", "malformed_header", "encoding_base64"},
		{"stripea", "signature_mismatch", "wrong_path"},
	}
	for i, w := range want {
		r := list.Refusals[i]
		if r.Provider != w.provider || r.Reason != w.reason || r.Diagnosis != w.diagnosis || r.Detail == "" {
			t.Errorf("refusal %d: %+v, want %+v", i, r, w)
		}
	}
	table := cli("refusals")
	for _, s := range []string{"DIAGNOSIS", "DETAIL", "body_reserialized", `secret of provider "stripeb"`, "seconds behind", "POST /webhooks/stripe "} {
		if !strings.Contains(table, s) {
			t.Errorf("the table lacks %q:\n%s", s, table)
		}
	}
	filtered := cli("refusals", "-provider", "stripeb", "-reason", "timestamp_outside_tolerance")
	if strings.Count(filtered, "\n") != 2 || !strings.Contains(filtered, "clock_skew") {
		t.Errorf("filtered table:\n%s", filtered)
	}
	var metrics string
	waitFor(t, 5*time.Second, "the diagnosis label", func() bool {
		resp, err := http.Get("http://" + adminAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return strings.Contains(metrics, `whguard_ingress_refusals_total{diagnosis="encoding_base64",provider="gh",reason="malformed_header"} 1`)
	})
	logs := wh.out.String()
	for _, secret := range append(signatures, secretA, secretB, secretG, marker, "charge.refunded") {
		for where, text := range map[string]string{"-json": cli("refusals", "-json"), "table": table, "log": logs, "metrics": metrics} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q", where, secret)
			}
		}
	}
}
