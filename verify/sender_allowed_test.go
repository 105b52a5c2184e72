package verify

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Any AWS account can subscribe an endpoint to a topic of its own, and any
// Google account can push to one with any audience: with TOPIC_ARNS and
// SERVICE_ACCOUNTS set, a verified sender off the list is refused, an SNS
// topic before anything is fetched or confirmed.
func TestSendersOffTheListAreRefused(t *testing.T) {
	t.Run("sns topics", func(t *testing.T) {
		r := newSNSRig(t)
		r.p = mustProvider(t, ProviderConfig{Name: "orders", Scheme: SchemeSNS, KeyHosts: []string{r.ks.host}, CAFile: r.ks.caFile,
			TopicARNs: []string{"arn:aws:sns:*:123456789012:orders", " arn:aws:sns:us-east-1:123456789012:billing-* "}})
		other := r.message(t, "SubscriptionConfirmation", "2", nil, "TopicArn", "arn:aws:sns:us-east-1:999999999999:orders")
		if _, err := r.p.Check(Input{Body: []byte(other)}, r.now); !errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonNotAllowed {
			t.Fatalf("another account's topic: %v (%s), want 401 %s", err, Reason(err), ReasonNotAllowed)
		}
		if n := r.ks.hits.Load(); n != 0 || len(r.confirmed) != 0 {
			t.Fatalf("key host got %d requests (%d confirmations) for a topic off the list, want none", n, len(r.confirmed))
		}
		for _, topic := range []string{snsTestTopic, "arn:aws:sns:us-east-1:123456789012:billing-eu"} {
			if ev, err := r.p.Check(Input{Body: []byte(r.message(t, "Notification", "2", nil, "TopicArn", topic))}, r.now); err != nil || ev.Type != topic {
				t.Errorf("listed topic %s: %+v, %v", topic, ev, err)
			}
		}
		mustFail(t, ProviderConfig{Name: "o", Scheme: SchemeSNS, TopicARNs: []string{"orders"}})
		mustFail(t, ProviderConfig{Name: "o", Scheme: SchemeSNS, TopicARNs: []string{"arn:aws:sns:[:1:x"}})
	})
	t.Run("pubsub service accounts", func(t *testing.T) {
		r := newPubSubRig(t)
		r.p = mustProvider(t, ProviderConfig{Name: "photos", Scheme: SchemePubSub, Audience: pubsubAudience, KeyHosts: []string{r.ks.host}, CAFile: r.ks.caFile,
			ServiceAccounts: []string{"push@myproject.iam.gserviceaccount.com"}})
		head := map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"}
		if _, err := r.check(r.good, pubsubBody, 0); err != nil {
			t.Fatalf("listed account: %v", err)
		}
		for name, claims := range map[string]map[string]any{
			"another account":  googleClaims("email", "attacker@evil-project.iam.gserviceaccount.com"),
			"unverified email": googleClaims("email_verified", false),
			"no email":         googleClaims("email", nil),
		} {
			if _, err := r.check(signJWT(t, r.key1, head, claims), pubsubBody, 0); !errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonNotAllowed {
				t.Errorf("%s: %v (%s), want 401 %s", name, err, Reason(err), ReasonNotAllowed)
			}
		}
	})
}

// SigningCertURL must name a certificate once: no query or fragment (each
// would be fetched again), and on AWS's own hosts the path of AWS's
// certificates. Wildcards over hosts that serve anyone's content are refused.
func TestSNSCertURLShape(t *testing.T) {
	r := newSNSRig(t)
	for _, u := range []string{r.ks.URL + "/cert.pem?1", r.ks.URL + "/cert.pem#x"} {
		_, err := r.p.Check(Input{Body: []byte(r.message(t, "Notification", "2", nil, "SigningCertURL", u))}, r.now)
		if !errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonUntrustedKeyURL {
			t.Errorf("%s: %v, want %s", u, err, ReasonUntrustedKeyURL)
		}
	}
	if n := r.ks.hits.Load(); n != 0 {
		t.Errorf("key host got %d requests", n)
	}
	def := mustProvider(t, ProviderConfig{Name: "o", Scheme: SchemeSNS})
	_, err := def.Check(Input{Body: []byte(r.message(t, "Notification", "2", nil, "SigningCertURL", "https://sns.us-east-1.amazonaws.com/any.pem"))}, r.now)
	if !errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonUntrustedKeyURL {
		t.Errorf("an AWS host's other path: %v, want %s", err, ReasonUntrustedKeyURL)
	}
	for _, w := range []string{"*.amazonaws.com", "*.AmazonAWS.com.cn", "*.googleapis.com"} {
		if err := mustFail(t, ProviderConfig{Name: "o", Scheme: SchemeSNS, KeyHosts: []string{w}}); !strings.Contains(err.Error(), "anyone") {
			t.Errorf("%s: %v, want a refusal saying the suffix serves anyone's content", w, err)
		}
	}
}

// Precheck refuses another method than POST before the body is read, and
// lets a provider's declared GET handshake through.
func TestPrecheckMethods(t *testing.T) {
	gh := mustProvider(t, ProviderConfig{Name: "gh", Scheme: SchemeGitHub, Secrets: []string{"s"}})
	if err := gh.Precheck(http.Header{}, "", http.MethodGet, time.Now()); !errors.Is(err, ErrBadRequest) {
		t.Errorf("GET to github: %v, want 400 before the body", err)
	}
	meta := mustProvider(t, ProviderConfig{Name: "m", Scheme: SchemeMeta, Secrets: []string{"s"}, VerifyToken: "vt"})
	if err := meta.Precheck(http.Header{}, "hub.mode=subscribe&hub.challenge=1&hub.verify_token=vt", http.MethodGet, time.Now()); err != nil {
		t.Errorf("Meta's GET handshake: %v", err)
	}
}
