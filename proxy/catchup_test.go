package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// TestInjectAppliesTheRoute: an event catch-up read from the API is
// journaled as if it had arrived on its provider's path: marked as
// catch-up's, JSON, the type filter and the order key applied; a second
// injection of it is not new; an unknown provider is refused.
func TestInjectAppliesTheRoute(t *testing.T) {
	t.Parallel()
	j := testdb.OpenStore(t, "sqlite", true)
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "stripe", Scheme: "stripe", Secrets: []string{stripeSecret}})
	if err != nil {
		t.Fatal(err)
	}
	order, err := proxy.ParseOrderKey("/data/object/customer")
	if err != nil {
		t.Fatal(err)
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes:  []proxy.Route{{Path: "/webhooks/stripe", Provider: p, EventTypes: []string{"invoice.*"}, Order: order, MaxBodyBytes: 4096}},
		Intake:  newIntake(t, j, nil),
		Metrics: proxy.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := func(id, typ string) []byte {
		return []byte(`{"id":"` + id + `","object":"event","type":"` + typ + `","data":{"object":{"customer":"cus_1"}}}`)
	}
	for _, c := range []struct {
		id, typ string
		status  journal.Status
	}{
		{"evt_paid", "invoice.paid", journal.StatusPending},
		{"evt_customer", "customer.created", journal.StatusIgnored},
	} {
		isNew, err := in.Inject(ctx, "stripe", c.id, c.typ, body(c.id, c.typ))
		if err != nil || !isNew {
			t.Fatalf("inject %s: %v %v", c.id, isNew, err)
		}
		evs, _, err := j.List(ctx, journal.Filter{Provider: "stripe", EventID: c.id})
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: %+v %v", c.id, evs, err)
		}
		d, err := j.Get(ctx, evs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Source != journal.SourceCatchup || d.Status != c.status || d.Path != "/webhooks/stripe" || d.RawQuery != "" ||
			d.Headers.Get("Content-Type") != "application/json; charset=utf-8" || d.Scheme != "stripe" || d.Body != string(body(c.id, c.typ)) {
			t.Errorf("%s journaled as %+v", c.id, d)
		}
		if c.status == journal.StatusPending && d.OrderKey == "" {
			t.Errorf("%s: no order key, want the customer's", c.id)
		}
	}
	if isNew, err := in.Inject(ctx, "stripe", "evt_paid", "invoice.paid", body("evt_paid", "invoice.paid")); err != nil || isNew {
		t.Errorf("a second injection: new %v, %v", isNew, err)
	}
	if _, err := in.Inject(ctx, "github", "x", "", []byte(`{}`)); !errors.Is(err, proxy.ErrNoRoute) {
		t.Errorf("an unknown provider: %v, want ErrNoRoute", err)
	}
	// Ids the webhook path refuses are refused here too (found: an id
	// with a line break was journaled, then every attempt failed on the
	// header carrying it); a type that is not printable is dropped.
	for _, id := range []string{"", "evt_\nX-Injected: 1", strings.Repeat("e", verify.MaxEventIDLength+1)} {
		if isNew, err := in.Inject(ctx, "stripe", id, "invoice.paid", body("evt_bad", "invoice.paid")); !errors.Is(err, verify.ErrBadRequest) || isNew {
			t.Errorf("id %.20q: new %v, %v; want refused", id, isNew, err)
		}
	}
	if isNew, err := in.Inject(ctx, "stripe", "evt_big", "invoice.paid", body("evt_big", strings.Repeat("x", 4096))); !errors.Is(err, verify.ErrBadRequest) || isNew {
		t.Errorf("a body past the path's MAX_BODY_BYTES: new %v, %v; want refused", isNew, err)
	}
	if isNew, err := in.Inject(ctx, "stripe", "evt_odd_type", "invoice.paid\x1b[2J", body("evt_odd_type", "x")); err != nil || !isNew {
		t.Fatalf("an event with an odd type: new %v, %v", isNew, err)
	}
	if evs, _, err := j.List(ctx, journal.Filter{Provider: "stripe", EventID: "evt_odd_type"}); err != nil || len(evs) != 1 || evs[0].EventType != "" {
		t.Errorf("the odd type kept: %+v %v", evs, err)
	}
}

// TestInjectTellsHowWebhooksArrive: an event catch-up journals carries the
// X-Forwarded-Proto and -Host of the provider's last verified webhook, as
// a webhook's delivery does (found: none, so a backend redirecting to
// HTTPS, Rails' force_ssl, answered 301 to every caught-up event until it
// went dead); before any webhook, none.
func TestInjectTellsHowWebhooksArrive(t *testing.T) {
	t.Parallel()
	j := testdb.OpenStore(t, "sqlite", true)
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "stripe", Scheme: "stripe", Secrets: []string{stripeSecret}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{{Path: "/webhooks/stripe", Provider: p}},
		Intake: newIntake(t, j, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	headersOf := func(id string) http.Header {
		t.Helper()
		evs, _, err := j.List(ctx, journal.Filter{Provider: "stripe", EventID: id})
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: %+v %v", id, evs, err)
		}
		d, err := j.Get(ctx, evs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return d.Headers
	}
	if _, err := in.Inject(ctx, "stripe", "evt_before", "invoice.paid", []byte(`{"id":"evt_before"}`)); err != nil {
		t.Fatal(err)
	}
	if h := headersOf("evt_before"); h.Get("X-Forwarded-Proto") != "" || h.Get("X-Forwarded-Host") != "" {
		t.Errorf("before any webhook: %v", h)
	}
	body := `{"id":"evt_webhook","object":"event","type":"invoice.paid"}`
	req := httptest.NewRequest(http.MethodPost, "http://10.0.0.5:8080/webhooks/stripe", strings.NewReader(body))
	req.Header = signStripe(time.Now(), body)
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", "hooks.example.com")
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("webhook: %d %s", rec.Code, rec.Body)
	}
	if _, err := in.Inject(ctx, "stripe", "evt_after", "invoice.paid", []byte(`{"id":"evt_after"}`)); err != nil {
		t.Fatal(err)
	}
	if h := headersOf("evt_after"); h.Get("X-Forwarded-Proto") != "https" || h.Get("X-Forwarded-Host") != "hooks.example.com" {
		t.Errorf("after a webhook by https://hooks.example.com: %v", h)
	}
}
