package verify

import (
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// senderConfig is a valid configuration of scheme with two secrets,
// current first, where the scheme takes secrets.
func senderConfig(scheme string) ProviderConfig {
	cfg := ProviderConfig{Name: scheme, Scheme: scheme,
		Secrets: []string{scheme + "-current-secret-0123", scheme + "-previous-secret-0123"}}
	switch scheme {
	case SchemeStandard, SchemeSvix:
		cfg.Secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("sender-current-key-of-32-bytes!!")),
			"whsec_" + base64.StdEncoding.EncodeToString([]byte("sender-previous-key-of-32-bytes!"))}
	case SchemeStripe:
		cfg.Secrets = []string{"whsec_senderCurrent0123456789", "whsec_senderPrevious0123456789"}
	case SchemeTwilio, SchemeSquare, SchemeHubSpot:
		cfg.PublicURL = "https://hooks.example.com/webhooks/" + scheme
	case SchemeMeta:
		cfg.VerifyToken = "meta-verify-token"
	case SchemePostmark:
		cfg.Secrets, cfg.BasicAuth = nil, "hooks:postmark-password"
	case SchemeOkta:
		cfg.Secrets = []string{"Bearer okta-current", "Bearer okta-previous"}
	case SchemeAdyen:
		cfg.Secrets = []string{"44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
			"0011223344556677889900112233445566778899001122334455667788990011"}
	case SchemeHMAC:
		cfg.IDHeader = "X-Acme-Id"
		cfg.HMAC = HMACConfig{Algorithm: "sha512", SignatureHeader: "X-Acme-Signature", Encoding: "base64", Prefix: "sha512=",
			TimestampHeader: "X-Acme-Timestamp", SignedContent: "{id}.{timestamp}.{body}"}
	case SchemeNone:
		cfg.Secrets = nil
	}
	return cfg
}

// currentOnly is cfg accepting its current secret alone.
func currentOnly(cfg ProviderConfig) ProviderConfig {
	if len(cfg.Secrets) > 1 {
		cfg.Secrets = cfg.Secrets[:1]
	}
	return cfg
}

// signedSample freshens sample at now and signs it as cfg's sender.
func signedSample(t *testing.T, cfg ProviderConfig, s Sample, now time.Time) *Request {
	t.Helper()
	snd, err := NewSender(cfg)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	h, body := s.Fresh(now)
	r := &Request{Header: h, Body: body}
	if err := snd.Sign(r, now); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return r
}

// Every scheme whguard can sign for has samples, and each one, freshened
// and signed as the sender, passes the scheme's own check with the current
// secret alone, yields a non-empty event id and the sample's type through
// the scheme's own extraction.
func TestSamplesPassTheirScheme(t *testing.T) {
	now := time.Now()
	for _, scheme := range KnownSchemes() {
		t.Run(scheme, func(t *testing.T) {
			ss := Samples(scheme)
			if SenderKeyHint(scheme) != "" {
				if len(ss) != 0 {
					t.Fatalf("%d samples for a scheme whguard cannot sign", len(ss))
				}
				return
			}
			if len(ss) == 0 {
				t.Fatal("no sample")
			}
			cfg := senderConfig(scheme)
			p := mustProvider(t, currentOnly(cfg))
			for _, s := range ss {
				t.Run(s.Name, func(t *testing.T) {
					if s.Scheme != scheme {
						t.Fatalf("Scheme %q", s.Scheme)
					}
					r := signedSample(t, cfg, s, now)
					ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
					if err != nil {
						t.Fatalf("Content-Type %q: %v", r.Header.Get("Content-Type"), err)
					}
					if strings.HasSuffix(ct, "json") {
						if _, err := parseJSON(r.Body); err != nil {
							t.Fatalf("body is not JSON: %v\n%s", err, r.Body)
						}
					}
					ev, err := p.Check(Input{Header: r.Header, Body: r.Body}, now)
					if err != nil {
						t.Fatalf("Check: %v\n%s", err, r.Body)
					}
					if ev.ID == "" || ev.Type != s.Type {
						t.Fatalf("event id %q type %q, want an id and type %q", ev.ID, ev.Type, s.Type)
					}
				})
			}
		})
	}
}

// A second freshening gives new ids; the copies are signed independently
// and both verify.
func TestSampleCopiesAreDistinctEvents(t *testing.T) {
	now := time.Now()
	for _, scheme := range KnownSchemes() {
		for _, s := range Samples(scheme) {
			cfg := senderConfig(scheme)
			p := mustProvider(t, cfg)
			seen := map[string]bool{}
			for range 3 {
				r := signedSample(t, cfg, s, now)
				ev, err := p.Check(Input{Header: r.Header, Body: r.Body}, now)
				if err != nil {
					t.Fatalf("%s/%s: %v", scheme, s.Name, err)
				}
				if seen[ev.ID] {
					t.Fatalf("%s/%s: event id %q made twice", scheme, s.Name, ev.ID)
				}
				seen[ev.ID] = true
			}
		}
	}
}

// A request signed as the sender of another secret is refused: the
// signature is really made with the configured secret.
func TestSenderOfAnotherSecretIsRefused(t *testing.T) {
	now := time.Now()
	for _, scheme := range KnownSchemes() {
		ss := Samples(scheme)
		if len(ss) == 0 || scheme == SchemeNone {
			continue
		}
		t.Run(scheme, func(t *testing.T) {
			cfg := senderConfig(scheme)
			other := cfg
			if scheme == SchemePostmark {
				other.BasicAuth = "hooks:another-password"
			} else {
				other.Secrets = cfg.Secrets[1:] // the previous secret alone
			}
			r := signedSample(t, other, ss[0], now)
			_, err := mustProvider(t, currentOnly(cfg)).Check(Input{Header: r.Header, Body: r.Body}, now)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("signed with another secret: %v, want ErrUnauthorized", err)
			}
		})
	}
}

// The schemes whose sender signs with a private key say so, and how to
// have the provider send a request instead.
func TestNewSenderProviderKey(t *testing.T) {
	for _, scheme := range []string{SchemeSendGrid, SchemeDiscord, SchemeSNS, SchemePubSub} {
		_, err := NewSender(ProviderConfig{Name: "p", Scheme: scheme})
		if !errors.Is(err, ErrProviderKey) {
			t.Fatalf("%s: %v, want ErrProviderKey", scheme, err)
		}
		if hint := SenderKeyHint(scheme); hint == "" || !strings.Contains(err.Error(), hint) {
			t.Fatalf("%s: %q does not say how to test it (%q)", scheme, err, hint)
		}
	}
	if _, err := NewSender(ProviderConfig{Name: "p", Scheme: SchemeStripe}); err == nil || errors.Is(err, ErrProviderKey) {
		t.Fatalf("stripe without a secret: %v, want NewProvider's error", err)
	}
	if _, err := NewSender(ProviderConfig{Name: "p", Scheme: "gitbub"}); err == nil {
		t.Fatal("unknown scheme accepted")
	}
}

// The sender signs with one secret, the current one, even where whguard
// re-signs deliveries with every accepted secret, and never with the
// backend secret.
func TestSenderSignsWithTheCurrentSecretOnly(t *testing.T) {
	now := time.Now()
	cfg := senderConfig(SchemeStripe)
	cfg.BackendSecret = "whsec_backendOnly0123456789"
	r := signedSample(t, cfg, Samples(SchemeStripe)[0], now)
	if sig := r.Header.Get("Stripe-Signature"); strings.Count(sig, "v1=") != 1 {
		t.Fatalf("Stripe-Signature %q, want one v1", sig)
	}
	for _, secret := range []string{cfg.Secrets[1], cfg.BackendSecret} {
		p := mustProvider(t, ProviderConfig{Name: "p", Scheme: SchemeStripe, Secrets: []string{secret}})
		if _, err := p.Check(Input{Header: r.Header, Body: r.Body}, now); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("verified with a secret other than the current one: %v", err)
		}
	}
}

// The schemes that sign the URL sign the public URL with the query the
// request is posted with.
func TestSenderSignsTheQuery(t *testing.T) {
	now := time.Now()
	for _, scheme := range []string{SchemeTwilio, SchemeSquare, SchemeHubSpot} {
		cfg := senderConfig(scheme)
		snd, err := NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h, body := Samples(scheme)[0].Fresh(now)
		r := &Request{Header: h, Body: body, RawQuery: "tenant=acme&x=%2F1"}
		if err := snd.Sign(r, now); err != nil {
			t.Fatal(err)
		}
		p := mustProvider(t, cfg)
		if _, err := p.Check(Input{Header: r.Header, Body: r.Body, RawQuery: r.RawQuery}, now); err != nil {
			t.Fatalf("%s with a query: %v", scheme, err)
		}
		if _, err := p.Check(Input{Header: r.Header, Body: r.Body}, now); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("%s: the query is not signed: %v", scheme, err)
		}
	}
}

// The configured ID header is set when the request lacks it, and the
// generic hmac scheme without a timestamp signs it as configured.
func TestSenderIDHeaderAndPlainHMAC(t *testing.T) {
	now := time.Now()
	cfg := ProviderConfig{Name: "acme", Scheme: SchemeHMAC, Secrets: []string{"acme-secret"}, IDHeader: "X-Acme-Delivery",
		HMAC: HMACConfig{SignatureHeader: "X-Acme-Signature", Prefix: "sha256=", SignedContent: "{id}:{body}"}}
	snd, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{Body: []byte(`{"type":"order.created"}`)}
	if err := snd.Sign(r, now); err != nil {
		t.Fatal(err)
	}
	id := r.Header.Get("X-Acme-Delivery")
	ev, err := mustProvider(t, cfg).Check(Input{Header: r.Header, Body: r.Body}, now)
	if err != nil || id == "" || ev.ID != id || ev.Type != "order.created" {
		t.Fatalf("event %+v, %v; id header %q", ev, err, id)
	}
}

// Bodies the in-body signers cannot read are refused with an error, not
// sent unsigned.
func TestSenderRefusesUnreadableBodies(t *testing.T) {
	for _, scheme := range []string{SchemeMailgun, SchemeMSGraph, SchemeAdyen} {
		snd, err := NewSender(senderConfig(scheme))
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{`not json`, `[1,2]`, `{}`} {
			if scheme == SchemeMailgun && body == `{}` {
				continue // a block is added to any object
			}
			r := &Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
			if err := snd.Sign(r, time.Now()); err == nil {
				t.Fatalf("%s signed %q", scheme, body)
			}
		}
	}
	snd, err := NewSender(senderConfig(SchemeTwilio))
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Sign(&Request{Header: http.Header{}, Body: []byte("a=%zz")}, time.Now()); err == nil {
		t.Fatal("twilio signed an unparseable form")
	}
}

// A legacy (form) Mailgun webhook gets its signature fields.
func TestSenderMailgunForm(t *testing.T) {
	now := time.Now()
	cfg := senderConfig(SchemeMailgun)
	snd, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte("event=delivered&recipient=alice%40example.com")}
	if err := snd.Sign(r, now); err != nil {
		t.Fatal(err)
	}
	ev, err := mustProvider(t, cfg).Check(Input{Header: r.Header, Body: r.Body}, now)
	if err != nil || ev.Type != "delivered" {
		t.Fatalf("event %+v, %v", ev, err)
	}
	if v, _ := url.ParseQuery(string(r.Body)); v.Get("recipient") != "alice@example.com" {
		t.Fatalf("form fields lost: %s", r.Body)
	}
}

// sdkRequest is r as an *http.Request to u, for the SDKs that take one.
func sdkRequest(u string, r *Request) *http.Request {
	req := httptest.NewRequest(http.MethodPost, u, strings.NewReader(string(r.Body)))
	req.Header = r.Header.Clone()
	return req
}
