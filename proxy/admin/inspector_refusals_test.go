package admin_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/proxy/admin"
	"github.com/whguard/whguard/verify"
)

// noIntake refuses every event: the requests here are all refused before
// they would reach it.
type noIntake struct{}

func (noIntake) Accept(context.Context, journal.Event, bool) (forwarder.Accepted, error) {
	return forwarder.Accepted{}, errors.New("no journal in this test")
}

// The inspector's Refused card in a real browser: requests refused by a
// real ingress (another provider's secret, a path with a typo, a stale
// timestamp) are listed newest first with their time, provider, status,
// reason, diagnosis, detail and header names; no secret, signature or
// body content reaches the page.
func TestInspectorRefusedInBrowser(t *testing.T) {
	t.Parallel()
	const (
		secretA = "whsec_inspectorStripeA"
		secretB = "whsec_inspectorStripeB"
		marker  = "INSPECTOR-BODY-MARKER-2d7b"
	)
	provider := func(name, secret string) proxy.Route {
		p, err := verify.NewProvider(verify.ProviderConfig{Name: name, Scheme: verify.SchemeStripe, Secrets: []string{secret}})
		if err != nil {
			t.Fatal(err)
		}
		return proxy.Route{Path: "/webhooks/" + name, Provider: p}
	}
	ring := proxy.NewRefusals(0)
	in, err := proxy.NewIngress(proxy.IngressConfig{Routes: []proxy.Route{provider("stripe-a", secretA), provider("stripe-b", secretB)},
		Intake: noIntake{}, Refusals: ring})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"evt_1","note":"` + marker + `"}`
	var sigs []string
	send := func(path, secret string, at time.Time) {
		t.Helper()
		ts := strconv.FormatInt(at.Unix(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + body))
		sig := hex.EncodeToString(mac.Sum(nil))
		sigs = append(sigs, sig)
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Stripe-Signature", "t="+ts+",v1="+sig)
		rec := httptest.NewRecorder()
		in.ServeHTTP(rec, req)
		if rec.Code < 400 {
			t.Fatalf("%s: %d", path, rec.Code)
		}
	}
	send("/webhooks/stripe-a", secretB, time.Now())
	send("/webhooks/strpe-a", secretA, time.Now())
	send("/webhooks/stripe-b", secretB, time.Now().Add(-time.Hour))

	f := newFixture(t, "sqlite")
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: f.j.Ready, Gatherer: prometheus.NewRegistry(), Token: "browser-token",
		API: admin.NewAPI(admin.APIConfig{Store: f.j, Refusals: ring}),
	}))
	defer srv.Close()
	ctx, waitJS := openInspector(t, srv.URL, "browser-token")
	waitJS("three refusals", `document.querySelectorAll("tr.refusal").length === 3`)
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("tr.refusal")].map(tr => tr.dataset.diagnosis + " | " + tr.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{
		{"clock_skew", "stripe-b", "401", "timestamp_outside_tolerance", "seconds behind", "Stripe-Signature", "ago"},
		{"wrong_path", "–", "404", "not_found", "/webhooks/strpe-a", `provider "stripe-a"`},
		{"wrong_path", "stripe-a", "401", "signature_mismatch", `secret of provider "stripe-b"`, "Stripe-Signature", "50 bytes"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i], w) {
				t.Errorf("row %d %q lacks %q", i, rows[i], w)
			}
		}
	}
	// Filtered by reason.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("rfReason"), "not_found"),
		chromedp.Click(chromedp.CSS(`#refusedFilters button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS("one refusal", `document.querySelectorAll("tr.refusal").length === 1 && document.querySelector("tr.refusal").dataset.reason === "not_found"`)
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range append(sigs, secretA, secretB, marker, "evt_1") {
		if strings.Contains(page, secret) {
			t.Errorf("the page holds %q", secret)
		}
	}
}
