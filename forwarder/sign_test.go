package forwarder_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/verify"
)

// TestSignsOnlyWhatItVerified: a delivery is signed for the backend (here
// re-signed in Stripe's scheme, checked with stripe-go) only when the event
// was verified under the provider's scheme; one journaled under none or
// under another scheme goes without the provider's signature header.
func TestSignsOnlyWhatItVerified(t *testing.T) {
	t.Parallel()
	const secret = "whsec_signOnlyVerified0123456789"
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "pay", Scheme: "stripe", Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	target := forwarder.Target{BackendURL: "http://127.0.0.1:1", Scheme: "stripe", Resign: p.Resign, Unsign: p.Unsign}
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid"}`)
	for _, tc := range []struct {
		scheme string
		signed bool
	}{
		{"stripe", true},
		{"", true}, // journaled before whguard recorded the scheme
		{"none", false},
		{"standard", false},
	} {
		d := journal.Delivery{ID: 1, Provider: "pay", EventID: "evt_1", Attempt: 1, Body: body, Path: "/webhooks/pay",
			Headers: http.Header{"Stripe-Signature": {"t=1,v1=forged"}, "Content-Type": {"application/json"}}, Scheme: tc.scheme}
		req, err := forwarder.BuildRequest(context.Background(), target, d, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		sig := req.Header.Get("Stripe-Signature")
		verifies := webhook.ValidatePayload(body, sig, secret) == nil
		switch {
		case tc.signed && !verifies:
			t.Errorf("verified under %q: signature %q does not verify", tc.scheme, sig)
		case !tc.signed && sig != "":
			t.Errorf("journaled under %q: sent with Stripe-Signature %q", tc.scheme, sig)
		}
	}
}
