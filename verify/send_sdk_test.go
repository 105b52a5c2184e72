package verify

import (
	"net/url"
	"testing"
	"time"

	"github.com/PagerDuty/go-pagerduty/webhookv3"
	"github.com/google/go-github/v89/github"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"
	svix "github.com/svix/svix-webhooks/go"
	twilioclient "github.com/twilio/twilio-go/client"
)

// What the sender signs, every sample of it, verifies with the provider's
// own library where one is in go.mod, with the current secret.
func TestSenderAgreesWithProviderSDKs(t *testing.T) {
	now := time.Now()
	checks := map[string]func(t *testing.T, cfg ProviderConfig, r *Request){
		SchemeStripe: func(t *testing.T, cfg ProviderConfig, r *Request) {
			ev, err := webhook.ConstructEvent(r.Body, r.Header.Get("Stripe-Signature"), cfg.Secrets[0])
			if err != nil || ev.ID == "" {
				t.Fatalf("stripe-go: %v", err)
			}
		},
		SchemeGitHub: func(t *testing.T, cfg ProviderConfig, r *Request) {
			if _, err := github.ValidatePayload(sdkRequest("https://hooks.example.com/webhooks/github", r), []byte(cfg.Secrets[0])); err != nil {
				t.Fatalf("go-github: %v", err)
			}
			if _, err := github.ParseWebHook(github.WebHookType(sdkRequest("https://hooks.example.com/", r)), r.Body); err != nil {
				t.Fatalf("go-github cannot parse the sample: %v", err)
			}
		},
		SchemeSlack: func(t *testing.T, cfg ProviderConfig, r *Request) {
			sv, err := slack.NewSecretsVerifier(r.Header, cfg.Secrets[0])
			if err != nil {
				t.Fatal(err)
			}
			_, _ = sv.Write(r.Body)
			if err := sv.Ensure(); err != nil {
				t.Fatalf("slack-go: %v", err)
			}
		},
		SchemeStandard: func(t *testing.T, cfg ProviderConfig, r *Request) {
			wh, err := standardwebhooks.NewWebhook(cfg.Secrets[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(r.Body, r.Header); err != nil {
				t.Fatalf("standard-webhooks: %v", err)
			}
		},
		SchemeSvix: func(t *testing.T, cfg ProviderConfig, r *Request) {
			wh, err := svix.NewWebhook(cfg.Secrets[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(r.Body, r.Header); err != nil {
				t.Fatalf("svix-webhooks: %v", err)
			}
		},
		SchemeTwilio: func(t *testing.T, cfg ProviderConfig, r *Request) {
			form, err := url.ParseQuery(string(r.Body))
			if err != nil {
				t.Fatal(err)
			}
			params := map[string]string{}
			for k := range form {
				params[k] = form.Get(k)
			}
			rv := twilioclient.NewRequestValidator(cfg.Secrets[0])
			if !rv.Validate(cfg.PublicURL, params, r.Header.Get("X-Twilio-Signature")) {
				t.Fatal("twilio-go refuses the signature")
			}
		},
		SchemePagerDuty: func(t *testing.T, cfg ProviderConfig, r *Request) {
			if err := webhookv3.VerifySignature(sdkRequest("https://hooks.example.com/", r), cfg.Secrets[0]); err != nil {
				t.Fatalf("go-pagerduty: %v", err)
			}
		},
	}
	for scheme, check := range checks {
		cfg := senderConfig(scheme)
		for _, s := range Samples(scheme) {
			t.Run(scheme+"/"+s.Name, func(t *testing.T) {
				check(t, cfg, signedSample(t, cfg, s, now))
			})
		}
	}
}
