package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewProviderErrors(t *testing.T) {
	const secret = "s3cr3t-value!!"
	cases := []struct {
		name string
		cfg  ProviderConfig
		want string // substring of the error
	}{
		{"unknown scheme", ProviderConfig{Name: "x", Scheme: "hmac-md5", Secrets: []string{secret}}, `unknown scheme "hmac-md5"`},
		{"empty scheme", ProviderConfig{Name: "x", Secrets: []string{secret}}, "unknown scheme"},
		{"scheme case", ProviderConfig{Name: "x", Scheme: "Stripe", Secrets: []string{secret}}, "unknown scheme"},
		{"no secret", ProviderConfig{Name: "x", Scheme: SchemeStripe}, "no secret configured"},
		{"empty secret", ProviderConfig{Name: "x", Scheme: SchemeGitHub, Secrets: []string{"ok", ""}}, "secret 2 of 2 is empty"},
		{"standard secret not base64", ProviderConfig{Name: "x", Scheme: SchemeStandard, Secrets: []string{"whsec_" + secret}},
			`secret 1 of 1: not base64 after the "whsec_" prefix (bad byte at offset 12); expected whsec_ followed by the base64 key`},
		{"standard secret without prefix not base64", ProviderConfig{Name: "x", Scheme: SchemeSvix, Secrets: []string{secret}},
			"not base64 (bad byte at offset 6); expected whsec_ followed by the base64 key, as the sender shows it, or the base64 key alone"},
		{"standard secret empty after prefix", ProviderConfig{Name: "x", Scheme: SchemeStandard, Secrets: []string{"whsec_"}}, "empty key"},
		{"stripe secret API key", ProviderConfig{Name: "x", Scheme: SchemeStripe, Secrets: []string{"sk_test_51Habc0123456789"}}, "Stripe API key (sk_…), not a webhook signing secret"},
		{"stripe restricted key", ProviderConfig{Name: "x", Scheme: SchemeStripe, Secrets: []string{"whsec_currentSigningSecret", "rk_live_51Habc0123456789"}}, "secret 2 of 2: this is a Stripe API key (rk_…)"},
		{"stripe publishable key", ProviderConfig{Name: "x", Scheme: SchemeStripe, Secrets: []string{"pk_live_51Habc0123456789"}}, "expected the endpoint's signing secret, whsec_…"},
		{"standard secret with a space", ProviderConfig{Name: "x", Scheme: SchemeStandard, Secrets: []string{swSecret + " "}}, "not base64"},
		{"negative tolerance", ProviderConfig{Name: "x", Scheme: SchemeStripe, Secrets: []string{secret}, Tolerance: -time.Second}, "negative tolerance"},
		{"bad id header", ProviderConfig{Name: "x", Scheme: SchemeNone, IDHeader: "X Id"}, "not a valid header name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewProvider(tc.cfg)
			if err == nil {
				t.Fatalf("NewProvider accepted %+v", tc.cfg)
			}
			if p != nil {
				t.Errorf("provider returned with an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
			if !strings.Contains(msg, `provider "x"`) {
				t.Errorf("error %q does not name the provider", msg)
			}
			for _, s := range tc.cfg.Secrets {
				if len(s) > 6 && strings.Contains(msg, strings.TrimPrefix(s, "whsec_")) {
					t.Errorf("error %q contains the secret", msg)
				}
			}
		})
	}
}

func TestNewProviderAccepts(t *testing.T) {
	for _, cfg := range []ProviderConfig{
		{Name: "a", Scheme: SchemeStandard, Secrets: []string{swSecret, otherSWSecret}},
		{Name: "b", Scheme: SchemeSvix, Secrets: []string{strings.TrimPrefix(swSecret, "whsec_")}},
		{Name: "c", Scheme: SchemeStripe, Secrets: []string{" spaced secret "}, Tolerance: time.Minute},
		{Name: "d", Scheme: SchemeGitHub, Secrets: []string{"x"}, IDHeader: "X-Request-Id"},
		{Name: "e", Scheme: SchemeNone},
	} {
		p, err := NewProvider(cfg)
		if err != nil {
			t.Errorf("%+v: %v", cfg.Scheme, err)
			continue
		}
		if p.Name() != cfg.Name || p.SchemeName() != cfg.Scheme {
			t.Errorf("Name, SchemeName = %q, %q; want %q, %q", p.Name(), p.SchemeName(), cfg.Name, cfg.Scheme)
		}
	}
}

func TestKnownSchemesAndTolerance(t *testing.T) {
	got := KnownSchemes()
	if want := []string{"standard", "svix", "stripe", "github", "slack", "shopify", "twilio", "paddle", "linear",
		"intercom", "zoom", "square", "sendgrid", "pagerduty", "discord", "gitlab",
		"typeform", "razorpay", "vercel", "bitbucket", "atlassian", "meta", "sentry", "paystack", "twitter",
		"twitch", "calendly", "zendesk", "workos", "hubspot", "mailgun",
		"postmark", "telegram", "okta", "msgraph", "adyen", "sns", "pubsub", "hmac", "none"}; !slices.Equal(got, want) {
		t.Fatalf("KnownSchemes = %q, want %q", got, want)
	}
	got[0] = "changed"
	if KnownSchemes()[0] != "standard" {
		t.Error("KnownSchemes shares its slice")
	}
	for scheme, want := range map[string]time.Duration{
		"standard": 5 * time.Minute, "svix": 5 * time.Minute, "stripe": 5 * time.Minute,
		"github": 0, "none": 0, "nope": 0, "slack": 5 * time.Minute, "linear": time.Minute,
		"shopify": 0, "twilio": 0, "gitlab": 0, "pagerduty": 0, "square": 0, "intercom": 0,
		"sns": time.Hour, "pubsub": time.Minute,
	} {
		if d := DefaultTolerance(scheme); d != want {
			t.Errorf("DefaultTolerance(%q) = %v, want %v", scheme, d, want)
		}
	}
	for _, s := range KnownSchemes() {
		cfg := minimalConfig(s)
		if _, err := NewProvider(cfg); err != nil {
			t.Errorf("known scheme %q refused: %v", s, err)
		}
	}
}

func TestNoneScheme(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "internal", Scheme: SchemeNone})
	body := `{ "b": 1, "a": [true, null] }`
	ev, err := p.Check(Input{Header: headers("X-Anything", "1"), Body: []byte(body)}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := sha256Hex(`{"a":[true,null],"b":1}`)
	if ev.ID != want || ev.ContentHash != want || ev.Type != "" {
		t.Errorf("event = %+v, want id and content hash %s", ev, want)
	}
	ev, err = p.Check(Input{Body: []byte("plain text")}, time.Time{})
	if err != nil || ev.ID != sha256Hex("plain text") {
		t.Errorf("raw body: %+v, %v", ev, err)
	}
	if _, err := p.Check(Input{Body: []byte(`{"a":1,"a":2}`)}, time.Time{}); !errors.Is(err, ErrBadRequest) || !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("duplicate keys: err = %v, want ErrBadRequest wrapping ErrDuplicateKey", err)
	}
}

func TestIDHeader(t *testing.T) {
	base := ProviderConfig{Name: "n", Scheme: SchemeNone, IDHeader: "X-Request-Id"}
	body := `{"x":1}`
	runCheckCases(t, base, []checkCase{
		{name: "present", header: headers("X-Request-Id", "req-42"), body: body, wantID: "req-42"},
		{name: "canonical header case", header: headers("x-request-id", "req-43"), body: body, wantID: "req-43"},
		{name: "missing", header: headers(), body: body, wantErr: ErrBadRequest, wantMsg: "missing X-Request-Id header"},
		{name: "empty", header: headers("X-Request-Id", ""), body: body, wantErr: ErrBadRequest},
		{name: "max length", header: headers("X-Request-Id", strings.Repeat("a", MaxEventIDLength)), body: body},
		{name: "too long", header: headers("X-Request-Id", strings.Repeat("a", MaxEventIDLength+1)), body: body,
			wantErr: ErrBadRequest, wantMsg: "longer than"},
		{name: "control character", header: headers("X-Request-Id", "a\x00b"), body: body, wantErr: ErrBadRequest},
		{name: "invalid UTF-8", header: headers("X-Request-Id", "a\xffb"), body: body, wantErr: ErrBadRequest},
		{name: "unicode", header: headers("X-Request-Id", "évènement-1"), body: body, wantID: "évènement-1"},
	})
	// The id header wins over the scheme's own id.
	gh := mustProvider(t, ProviderConfig{Name: "gh", Scheme: SchemeGitHub, Secrets: []string{ghSecret}, IDHeader: "X-Request-Id"})
	in := Input{Header: headers("X-Hub-Signature-256", ghSignature, "X-GitHub-Delivery", "delivery", "X-Request-Id", "req"), Body: []byte(ghPayload)}
	if ev, err := gh.Check(in, time.Now()); err != nil || ev.ID != "req" {
		t.Errorf("id header over X-GitHub-Delivery: %+v, %v", ev, err)
	}
	// The signature is checked before the id header.
	in.Header.Del("X-Request-Id")
	in.Body = []byte("tampered")
	if _, err := gh.Check(in, time.Now()); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("tampered body without id header: err = %v, want ErrUnauthorized", err)
	}
}

func TestEventTypeSanitized(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "gh", Scheme: SchemeGitHub, Secrets: []string{ghSecret}})
	for typ, want := range map[string]string{
		"push":                   "push",
		"pull_request":           "pull_request",
		"a\x01b":                 "",
		strings.Repeat("t", 257): "",
		strings.Repeat("t", 256): strings.Repeat("t", 256),
		"\xff":                   "",
	} {
		ev, err := p.Check(Input{Header: headers("X-Hub-Signature-256", ghSignature, "X-GitHub-Event", typ), Body: []byte(ghPayload)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != want {
			t.Errorf("type %q → %q, want %q", typ, ev.Type, want)
		}
	}
}

// TestErrorsNeverEchoSecretsOrSignatures: Check's errors are shown to the
// sender; none may contain a secret or a received signature value.
func TestErrorsNeverEchoSecretsOrSignatures(t *testing.T) {
	const body = `{"id":"evt_1"}`
	sig := signStripe(stripeOtherSecret, stripeTS, body)
	p := mustProvider(t, ProviderConfig{Name: "s", Scheme: SchemeStripe, Secrets: []string{stripeSecret}})
	for _, h := range []string{"t=1700000000,v1=" + sig, "t=x,v1=" + sig, "v1=" + sig, "t=1,v1=" + sig} {
		_, err := p.Check(Input{Header: headers("Stripe-Signature", h), Body: []byte(body)}, time.Unix(stripeTS, 0))
		if err == nil {
			t.Fatalf("%q accepted", h)
		}
		if msg := err.Error(); strings.Contains(msg, sig) || strings.Contains(msg, stripeSecret) || strings.Contains(msg, "MfKQ9r8") {
			t.Errorf("error %q echoes a secret or signature", msg)
		}
	}
}

// A verified event whose key comes from a header is accepted even when its
// body cannot be canonicalized; resends are then compared by raw bytes.
// Only where the key itself needs the body is such a body refused.
func TestUncanonicalBodyWithHeaderKey(t *testing.T) {
	secret := "It's a Secret to Everybody"
	p := mustProvider(t, ProviderConfig{Name: "gh", Scheme: SchemeGitHub, Secrets: []string{secret}})
	body := `{"a":1,"a":2}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	h := headers("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)), "X-GitHub-Delivery", "d-1")
	ev, err := p.Check(Input{Header: h, Body: []byte(body)}, time.Now())
	if err != nil {
		t.Fatalf("verified event with a header id refused: %v", err)
	}
	if ev.ID != "d-1" || ev.ContentHash != sha256Hex(body) {
		t.Fatalf("event %+v, want id d-1 and the raw-bytes hash", ev)
	}
	h.Del("X-GitHub-Delivery")
	if _, err := p.Check(Input{Header: h, Body: []byte(body)}, time.Now()); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("digest-keyed event with duplicate keys: %v, want ErrBadRequest", err)
	}
}

func TestFormErrorDoesNotEchoBody(t *testing.T) {
	_, err := Digest(headers("Content-Type", "application/x-www-form-urlencoded"), []byte("a=%zzSECRETISH"))
	if !errors.Is(err, ErrBadRequest) || strings.Contains(err.Error(), "zz") {
		t.Fatalf("err %v", err)
	}
}

func TestEventTypeFromJSONBody(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "n", Scheme: SchemeNone})
	ev, err := p.Check(Input{Header: headers("Content-Type", "application/json"), Body: []byte(`{"type":"order.paid"}`)}, time.Now())
	if err != nil || ev.Type != "order.paid" {
		t.Fatalf("%+v %v", ev, err)
	}
}

// TestIDSigned: the schemes whose id comes from an unsigned header, and a
// configured id header, are reported as such; hmac's {id} signs it.
func TestIDSigned(t *testing.T) {
	mk := func(cfg ProviderConfig) *Provider {
		t.Helper()
		p, err := NewProvider(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		cfg  ProviderConfig
		want bool
	}{
		{ProviderConfig{Name: "a", Scheme: SchemeGitHub, Secrets: []string{"s"}}, false},
		{ProviderConfig{Name: "a", Scheme: SchemeShopify, Secrets: []string{"s"}}, false},
		{ProviderConfig{Name: "a", Scheme: SchemePagerDuty, Secrets: []string{"s"}}, false},
		{ProviderConfig{Name: "a", Scheme: SchemeStripe, Secrets: []string{"whsec_x"}}, true},
		{ProviderConfig{Name: "a", Scheme: SchemeStandard, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, true},
		{ProviderConfig{Name: "a", Scheme: SchemeStripe, Secrets: []string{"whsec_x"}, IDHeader: "X-Id"}, false},
		{ProviderConfig{Name: "a", Scheme: SchemeHMAC, Secrets: []string{"s"}, IDHeader: "X-Id",
			HMAC: HMACConfig{SignatureHeader: "X-Sig", SignedContent: "{id}.{body}"}}, true},
		{ProviderConfig{Name: "a", Scheme: SchemeHMAC, Secrets: []string{"s"}, IDHeader: "X-Id",
			HMAC: HMACConfig{SignatureHeader: "X-Sig"}}, false},
		{ProviderConfig{Name: "a", Scheme: SchemeNone}, true},
	} {
		if got := mk(c.cfg).IDSigned(); got != c.want {
			t.Errorf("%s (id header %q): IDSigned %v, want %v", c.cfg.Scheme, c.cfg.IDHeader, got, c.want)
		}
	}
}

// minimalConfig is the smallest valid configuration of a scheme: a secret,
// and the key, URL or header the scheme also requires.
func minimalConfig(scheme string) ProviderConfig {
	cfg := ProviderConfig{Name: "k", Scheme: scheme, Secrets: []string{swSecret}}
	switch scheme {
	case SchemeSendGrid:
		cfg.PublicKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	case SchemeDiscord:
		cfg.PublicKey = strings.Repeat("ab", 32)
	case SchemeTwilio, SchemeSquare, SchemeHubSpot:
		cfg.PublicURL = "https://example.com/hook"
	case SchemeHMAC:
		cfg.HMAC.SignatureHeader = "X-Signature"
	case SchemeMeta:
		cfg.VerifyToken = "meta-verify-token"
	case SchemePostmark:
		cfg.Secrets, cfg.BasicAuth = nil, pmBasicAuth
	case SchemeAdyen:
		cfg.Secrets = []string{adyenKey}
	case SchemePubSub:
		cfg.Audience = "https://example.com/push"
	}
	return cfg
}
