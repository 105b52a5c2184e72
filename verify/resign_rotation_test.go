package verify

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripe "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
	svix "github.com/svix/svix-webhooks/go"
)

// Secrets of a rotation: the sender signs with the new one, whguard
// accepts both (SECRET=new, SECRET_PREVIOUS=old), and each backend holds
// one of them.
const (
	rotationOldSW     = "whsec_b2xkLXNlY3JldC1vZi10aGUtcm90YXRpb24tMDE="
	rotationNewSW     = "whsec_bmV3LXNlY3JldC1vZi10aGUtcm90YXRpb24tMDE="
	rotationOldStripe = "whsec_rotationOldStripeSecret0123"
	rotationNewStripe = "whsec_rotationNewStripeSecret0123"
)

// rotationCase is a multi-signature scheme during a rotation: sign makes
// the sender's request (signed with the new secret at ts), backendAccepts
// is a backend verifying with its official library and only secret.
type rotationCase struct {
	name     string
	scheme   string
	old, new string
	body     []byte
	sign     func(t *testing.T, ts time.Time) http.Header
	// backendAccepts verifies with the library's own check at its default
	// tolerance (it reads the real clock).
	backendAccepts func(secret string, h http.Header, body []byte) error
}

func rotationCases(t *testing.T) []rotationCase {
	stripeBody := []byte(`{"id":"evt_rotation","object":"event","type":"invoice.paid","api_version":"` + stripe.APIVersion + `"}`)
	swBody := []byte(`{"type":"user.created","data":{"id":"u_rot"}}`)
	standardSign := func(prefix string, newSigner func(string) (func(string, time.Time, []byte) (string, error), error)) func(*testing.T, time.Time) http.Header {
		return func(t *testing.T, ts time.Time) http.Header {
			sign, err := newSigner(rotationNewSW)
			if err != nil {
				t.Fatal(err)
			}
			sig, err := sign("msg_rotation", ts, swBody)
			if err != nil {
				t.Fatal(err)
			}
			return headers(prefix+"id", "msg_rotation", prefix+"timestamp", strconv.FormatInt(ts.Unix(), 10), prefix+"signature", sig)
		}
	}
	standardLib := func(secret string) (func(string, time.Time, []byte) (string, error), error) {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, err
		}
		return wh.Sign, nil
	}
	svixLib := func(secret string) (func(string, time.Time, []byte) (string, error), error) {
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			return nil, err
		}
		return wh.Sign, nil
	}
	return []rotationCase{
		{
			name: "stripe", scheme: SchemeStripe, old: rotationOldStripe, new: rotationNewStripe, body: stripeBody,
			sign: func(_ *testing.T, ts time.Time) http.Header {
				p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: stripeBody, Secret: rotationNewStripe, Timestamp: ts})
				return headers("Stripe-Signature", p.Header)
			},
			backendAccepts: func(secret string, h http.Header, body []byte) error {
				_, err := webhook.ConstructEvent(body, h.Get("Stripe-Signature"), secret)
				return err
			},
		},
		{
			name: "standard", scheme: SchemeStandard, old: rotationOldSW, new: rotationNewSW, body: swBody,
			sign: standardSign("webhook-", standardLib),
			backendAccepts: func(secret string, h http.Header, body []byte) error {
				wh, err := standardwebhooks.NewWebhook(secret)
				if err != nil {
					return err
				}
				return wh.Verify(body, h)
			},
		},
		{
			name: "svix", scheme: SchemeSvix, old: rotationOldSW, new: rotationNewSW, body: swBody,
			sign: standardSign("svix-", svixLib),
			backendAccepts: func(secret string, h http.Header, body []byte) error {
				wh, err := svix.NewWebhook(secret)
				if err != nil {
					return err
				}
				return wh.Verify(body, h)
			},
		},
	}
}

// During a rotation (the new secret current, the old one still accepted)
// a request the sender signed 10 minutes ago with the new secret is
// re-signed with both: a backend holding only the old secret and one
// holding only the new one both accept it with their official library,
// which refused the original (so the check can fail). With the new secret
// alone configured, the old-secret backend refuses the re-signed request.
func TestResignDuringRotationAcceptedByBothBackends(t *testing.T) {
	for _, tc := range rotationCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			h := tc.sign(t, now.Add(-resignAge))
			p := mustProvider(t, ProviderConfig{Name: tc.name, Scheme: tc.scheme, Secrets: []string{tc.new, tc.old}, Tolerance: wideTolerance})
			if _, err := p.Check(Input{Header: h, Body: tc.body}, now); err != nil {
				t.Fatalf("whguard refuses the sender's request: %v", err)
			}
			if err := tc.backendAccepts(tc.new, h, tc.body); err == nil {
				t.Fatal("the library accepts the 10-minute-old original: this test proves nothing")
			}
			resigned := h.Clone()
			p.Resign(resigned, tc.body, now)
			for _, secret := range []string{tc.old, tc.new} {
				if err := tc.backendAccepts(secret, resigned, tc.body); err != nil {
					t.Errorf("a backend holding only the %s secret refuses the re-signed request: %v\n%v", which(secret, tc.old), err, resigned)
				}
			}
			// Current first: the first signature is the new secret's.
			single := h.Clone()
			mustProvider(t, ProviderConfig{Name: tc.name, Scheme: tc.scheme, Secrets: []string{tc.new}, Tolerance: wideTolerance}).Resign(single, tc.body, now)
			if first, _ := firstSignature(tc.scheme, resigned); first != mustFirst(t, tc.scheme, single) {
				t.Errorf("the first signature is not the current secret's: %q", first)
			}
			if err := tc.backendAccepts(tc.old, single, tc.body); err == nil {
				t.Error("signed with the new secret alone, the old-secret backend accepts: the check proves nothing")
			}
		})
	}
}

// which names a rotation secret in a message.
func which(secret, old string) string {
	if secret == old {
		return "old"
	}
	return "new"
}

// firstSignature returns the first signature of a re-signed request's
// header, and how many it holds.
func firstSignature(scheme string, h http.Header) (string, int) {
	if scheme == SchemeStripe {
		var sigs []string
		for pair := range strings.SplitSeq(h.Get("Stripe-Signature"), ",") {
			if v, ok := strings.CutPrefix(pair, "v1="); ok {
				sigs = append(sigs, v)
			}
		}
		if len(sigs) == 0 {
			return "", 0
		}
		return sigs[0], len(sigs)
	}
	name := "Webhook-Signature"
	if h.Get("Svix-Signature") != "" {
		name = "Svix-Signature"
	}
	sigs := strings.Fields(h.Get(name))
	if len(sigs) == 0 {
		return "", 0
	}
	return sigs[0], len(sigs)
}

// mustFirst is firstSignature of a header that must hold exactly one.
func mustFirst(t *testing.T, scheme string, h http.Header) string {
	t.Helper()
	sig, n := firstSignature(scheme, h)
	if n != 1 {
		t.Fatalf("%d signatures with one secret configured: %v", n, h)
	}
	return sig
}

// The signatures are bounded: six accepted secrets give four signatures
// (the first four, current first), and a secret listed twice is signed
// with once.
func TestResignSignatureCountBounded(t *testing.T) {
	secrets := []string{"whsec_s1", "whsec_s1", "whsec_s2", "whsec_s3", "whsec_s4", "whsec_s5", "whsec_s6"}
	body := []byte(`{"id":"evt_bound","object":"event","type":"x"}`)
	p := mustProvider(t, ProviderConfig{Name: "b", Scheme: SchemeStripe, Secrets: secrets})
	h := http.Header{}
	now := time.Now()
	p.Resign(h, body, now)
	if _, n := firstSignature(SchemeStripe, h); n != maxResignSecrets {
		t.Fatalf("%d signatures, want %d: %v", n, maxResignSecrets, h)
	}
	for i, secret := range []string{"whsec_s1", "whsec_s2", "whsec_s3", "whsec_s4"} {
		if err := webhook.ValidatePayload(body, h.Get("Stripe-Signature"), secret); err != nil {
			t.Errorf("secret %d not among the signatures: %v", i+1, err)
		}
	}
	if err := webhook.ValidatePayload(body, h.Get("Stripe-Signature"), "whsec_s5"); err == nil {
		t.Error("the fifth distinct secret signed too: the bound is not applied")
	}
}

// With a backend secret, deliveries are signed with it alone, for every
// scheme that re-signs: the sender's secrets (current and previous) no
// longer verify the delivery, the backend secret does, and a slack backend
// verifying with slack-go accepts it.
func TestResignWithBackendSecret(t *testing.T) {
	const senderNew, senderOld, backend = "sender-new-0123456789", "sender-old-0123456789", "backend-secret-0123456789"
	body := []byte(slackEventBody)
	now := time.Now()
	ts := now.Add(-resignAge).Unix()
	p := mustProvider(t, ProviderConfig{Name: "s", Scheme: SchemeSlack, Secrets: []string{senderNew, senderOld},
		BackendSecret: backend, Tolerance: wideTolerance})
	if !p.BackendSigned() || !p.CanResign() {
		t.Fatalf("BackendSigned %v, CanResign %v", p.BackendSigned(), p.CanResign())
	}
	h := headers(slackHeaders(signSlack(senderOld, ts, slackEventBody), ts)...)
	if _, err := p.Check(Input{Header: h, Body: body}, now); err != nil {
		t.Fatalf("the sender's previous secret no longer verifies: %v", err)
	}
	p.Resign(h, body, now)
	slackAccepts := func(secret string) error {
		v, err := slack.NewSecretsVerifier(h, secret)
		if err != nil {
			return err
		}
		if _, err := v.Write(body); err != nil {
			return err
		}
		return v.Ensure()
	}
	if err := slackAccepts(backend); err != nil {
		t.Fatalf("slack-go with the backend secret refuses the delivery: %v", err)
	}
	for _, s := range []string{senderNew, senderOld} {
		if slackAccepts(s) == nil {
			t.Errorf("the delivery verifies with a sender's secret: it was not signed with the backend secret alone")
		}
	}

	// Standard: the backend secret is decoded as whsec_, and is the only
	// signature even while the sender's secrets rotate.
	sw := mustProvider(t, ProviderConfig{Name: "w", Scheme: SchemeStandard, Secrets: []string{rotationNewSW, rotationOldSW}, BackendSecret: swSecret})
	sh := headers("webhook-id", "msg_b", "webhook-timestamp", "1", "webhook-signature", "v1,x")
	sw.Resign(sh, body, now)
	if sigs := strings.Fields(sh.Get("Webhook-Signature")); len(sigs) != 1 {
		t.Fatalf("%d signatures with a backend secret, want 1", len(sigs))
	}
	wh, _ := standardwebhooks.NewWebhook(swSecret)
	if err := wh.Verify(body, sh); err != nil {
		t.Fatalf("the Standard Webhooks library refuses the backend-signed delivery: %v", err)
	}
}

// A backend secret is refused on a scheme that cannot re-sign, and when it
// does not decode as the scheme's secrets do; the error names the setting
// and never the value.
func TestBackendSecretRefused(t *testing.T) {
	cases := []struct {
		name string
		cfg  ProviderConfig
		want string
	}{
		{"github signs no timestamp", ProviderConfig{Scheme: SchemeGitHub, Secrets: []string{"s"}}, "does not re-sign"},
		{"discord public key", minimalConfig(SchemeDiscord), "does not re-sign"},
		{"hmac without timestamp", ProviderConfig{Scheme: SchemeHMAC, Secrets: []string{"s"}, HMAC: HMACConfig{SignatureHeader: "X-Sig"}}, "signed timestamp"},
		{"standard not whsec", ProviderConfig{Scheme: SchemeStandard, Secrets: []string{swSecret}}, "whsec_"},
		{"stripe API key", ProviderConfig{Scheme: SchemeStripe, Secrets: []string{stripeSecret}}, "API key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name = "p"
			cfg.BackendSecret = "sk_live_not!base64-backend-value"
			_, err := NewProvider(cfg)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != FieldBackendSecret {
				t.Fatalf("error %v, want a FieldError on %s", err, FieldBackendSecret)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), cfg.BackendSecret) {
				t.Errorf("error quotes the backend secret: %v", err)
			}
		})
	}
	// Every scheme that re-signs takes one.
	for _, s := range KnownSchemes() {
		if ResignSupport(s) != ResignYes {
			continue
		}
		cfg := minimalConfig(s)
		if s == SchemeHMAC {
			cfg.HMAC.TimestampHeader, cfg.HMAC.SignedContent = "X-Ts", "{timestamp}.{body}"
		}
		cfg.BackendSecret = minimalConfig(s).Secrets[0]
		if p, err := NewProvider(cfg); err != nil || !p.BackendSigned() || !p.CanResign() {
			t.Errorf("%s: a backend secret is refused or unused: %v", s, err)
		}
	}
}
