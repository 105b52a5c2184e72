package verify

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PagerDuty/go-pagerduty/webhookv3"
)

// The go-pagerduty test vector (webhookv3/webhookv3_test.go, v1.8.0).
const (
	pdSDKSecret    = "lDQHScfUeXUKaQRNF+8XIiDKZ7XX3itBAYzwU0TARw8lJqRnkKl2iB1anSb0Z+IK"
	pdSDKSignature = "v1=0c0b9495b893a39e70d1fea2fe11fbe0a825f88b9f67846f6cc07dd2bc5476cd"
	pdSDKBody      = `{"event":{"id":"01BWDWL3NYY7LUFPZCC28QUCMK","event_type":"incident.priority_updated","resource_type":"incident","occurred_at":"2021-04-26T17:36:27.458Z","agent":{"html_url":"https://acme.pagerduty.com/users/PLH1HKV","id":"PLH1HKV","self":"https://api.pagerduty.com/users/PLH1HKV","summary":"Tenex Engineer","type":"user_reference"},"client":null,"data":{"id":"PGR0VU2","type":"incident","self":"https://api.pagerduty.com/incidents/PGR0VU2","html_url":"https://acme.pagerduty.com/incidents/PGR0VU2","number":2,"status":"triggered","title":"A little bump in the road","service":{"html_url":"https://acme.pagerduty.com/services/PF9KMXH","id":"PF9KMXH","self":"https://api.pagerduty.com/services/PF9KMXH","summary":"API Service","type":"service_reference"},"assignees":[{"html_url":"https://acme.pagerduty.com/users/PTUXL6G","id":"PTUXL6G","self":"https://api.pagerduty.com/users/PTUXL6G","summary":"User 123","type":"user_reference"}],"escalation_policy":{"html_url":"https://acme.pagerduty.com/escalation_policies/PUS0KTE","id":"PUS0KTE","self":"https://api.pagerduty.com/escalation_policies/PUS0KTE","summary":"Default","type":"escalation_policy_reference"},"teams":[{"html_url":"https://acme.pagerduty.com/teams/PFCVPS0","id":"PFCVPS0","self":"https://api.pagerduty.com/teams/PFCVPS0","summary":"Engineering","type":"team_reference"}],"priority":{"html_url":"https://acme.pagerduty.com/account/incident_priorities","id":"PSO75BM","self":"https://api.pagerduty.com/priorities/PSO75BM","summary":"P1","type":"priority_reference"},"urgency":"high","conference_bridge":{"conference_number":1000,"conference_url":"https://example.com"},"resolve_reason":null}}}`
)

const (
	pdSecret      = "pd-webhook-secret-current"
	pdOtherSecret = "pd-webhook-secret-previous"
	pdBody        = `{"event":{"id":"01DEN4B1TS8QD2XMWGRH7SQAK3","event_type":"incident.triggered","resource_type":"incident","occurred_at":"2023-11-14T22:13:20.000Z","data":{"id":"PGR0VU2","type":"incident","title":"Disk full"}}}`
	pdWebhookID   = "c2b8a1d4-0f4e-4b41-9f57-6b2f5e0b1d77"
)

// signPagerDuty returns one "v1=<hex>" entry.
func signPagerDuty(secret, body string) string {
	return "v1=" + hex.EncodeToString(hmacSHA256([]byte(secret), body))
}

func pdRequest(t *testing.T, header, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, "https://whguard.example/webhooks/pagerduty", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-PagerDuty-Signature", header)
	return r
}

func TestPagerDutySDKVector(t *testing.T) {
	if got := signPagerDuty(pdSDKSecret, pdSDKBody); got != pdSDKSignature {
		t.Fatalf("test signer gives %s, go-pagerduty's test %s", got, pdSDKSignature)
	}
	p := mustProvider(t, ProviderConfig{Name: "pd", Scheme: SchemePagerDuty, Secrets: []string{pdSDKSecret}})
	ev, err := p.Check(Input{Header: headers("X-PagerDuty-Signature", pdSDKSignature), Body: []byte(pdSDKBody)}, time.Now())
	if err != nil {
		t.Fatalf("go-pagerduty's vector refused: %v", err)
	}
	if ev.Type != "incident.priority_updated" {
		t.Errorf("Type = %q", ev.Type)
	}
}

func TestPagerDutyCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	good := signPagerDuty(pdSecret, pdBody)
	prev := signPagerDuty(pdOtherSecret, pdBody)
	h := func(sig string) []string { return []string{"X-PagerDuty-Signature", sig, "X-Webhook-Id", pdWebhookID} }
	many := func(n int, last string) string {
		parts := make([]string, 0, n)
		for range n - 1 {
			parts = append(parts, prev)
		}
		return strings.Join(append(parts, last), ",")
	}
	const typ = "incident.triggered"
	base := ProviderConfig{Name: "pd", Scheme: SchemePagerDuty, Secrets: []string{pdSecret}}
	runCasesB(t, base, []caseB{
		{name: "valid", header: headers(h(good)...), body: pdBody, now: now, wantID: pdWebhookID, wantType: typ},
		{name: "no timestamp: any clock", header: headers(h(good)...), body: pdBody, now: time.Unix(0, 0), wantID: pdWebhookID, wantType: typ},
		{name: "no X-Webhook-Id: content digest", header: headers("X-PagerDuty-Signature", good), body: pdBody, now: now, wantID: "digest", wantType: typ},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{pdOtherSecret} },
			header: headers(h(good)...), body: pdBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered body", header: headers(h(good)...), body: strings.Replace(pdBody, "Disk full", "Disk empty", 1), now: now, wantErr: ErrUnauthorized},
		{name: "rotated: second configured secret matches", cfg: func(c *ProviderConfig) { c.Secrets = []string{pdOtherSecret, pdSecret} },
			header: headers(h(good)...), body: pdBody, now: now, wantID: pdWebhookID, wantType: typ},
		{name: "two signatures, second matches", header: headers(h(prev + "," + good)...), body: pdBody, now: now, wantID: pdWebhookID, wantType: typ},
		{name: "two signatures, first matches", header: headers(h(good + "," + prev)...), body: pdBody, now: now, wantID: pdWebhookID, wantType: typ},
		{name: "spaces after commas", header: headers(h(prev + ", " + good)...), body: pdBody, now: now, wantID: pdWebhookID, wantType: typ},
		{name: "16th signature is tried", header: headers(h(many(16, good))...), body: pdBody, now: now, wantID: pdWebhookID, wantType: typ},
		{name: "17th is not", header: headers(h(many(17, good))...), body: pdBody, now: now, wantErr: ErrUnauthorized},
		{name: "other versions and bad entries skipped", header: headers(h("v0=" + strings.TrimPrefix(good, "v1=") + ",v1=zz,junk," + good)...),
			body: pdBody, now: now, wantID: pdWebhookID, wantType: typ},
		{name: "uppercase hex", header: headers(h("v1=" + strings.ToUpper(strings.TrimPrefix(good, "v1=")))...), body: pdBody, now: now,
			wantID: pdWebhookID, wantType: typ},
		{name: "v2 only", header: headers(h("v2=" + strings.TrimPrefix(good, "v1="))...), body: pdBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "no well-formed v1"},
		{name: "no prefix", header: headers(h(strings.TrimPrefix(good, "v1="))...), body: pdBody, now: now, wantErr: ErrUnauthorized},
		{name: "short hex", header: headers(h(good[:len(good)-2])...), body: pdBody, now: now, wantErr: ErrUnauthorized},
		{name: "bad hex", header: headers(h("v1=" + strings.Repeat("x", 64))...), body: pdBody, now: now, wantErr: ErrUnauthorized},
		{name: "only commas", header: headers(h(",,,")...), body: pdBody, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: headers(h(good + "," + strings.Repeat("v1=00,", 700))...), body: pdBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "missing header", header: headers("X-Webhook-Id", pdWebhookID), body: pdBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-PagerDuty-Signature header"},
		{name: "body not JSON: no type", header: headers(h(signPagerDuty(pdSecret, "ping"))...), body: "ping", now: now, wantID: pdWebhookID},
		{name: "event without event_type", header: headers(h(signPagerDuty(pdSecret, `{"event":{"id":"x"}}`))...), body: `{"event":{"id":"x"}}`, now: now,
			wantID: pdWebhookID},
	})
}

// TestPagerDutySDK: go-pagerduty's verifier accepts what our test signer
// signs, and our scheme agrees with its verdicts, one secret or two.
func TestPagerDutySDK(t *testing.T) {
	now := time.Now()
	good := signPagerDuty(pdSecret, pdBody)
	prev := signPagerDuty(pdOtherSecret, pdBody)
	for _, tc := range []struct {
		name, header, body string
		secrets            []string
		want               bool
	}{
		{"one secret", good, pdBody, []string{pdSecret}, true},
		{"two signatures, current secret", prev + "," + good, pdBody, []string{pdSecret}, true},
		{"two signatures, previous secret", prev + "," + good, pdBody, []string{pdOtherSecret}, true},
		{"wrong secret", good, pdBody, []string{"nope"}, false},
		{"tampered body", good, pdBody + " ", []string{pdSecret}, false},
		{"skipped junk entries", "v0=00,v1=zz," + good, pdBody, []string{pdSecret}, true},
		{"no v1", "v0=" + strings.TrimPrefix(good, "v1="), pdBody, []string{pdSecret}, false},
		{"go-pagerduty's vector", pdSDKSignature, pdSDKBody, []string{pdSDKSecret}, true},
		{"go-pagerduty's vector, wrong secret", pdSDKSignature, pdSDKBody, []string{pdSecret}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, secret := range tc.secrets {
				err := webhookv3.VerifySignature(pdRequest(t, tc.header, tc.body), secret)
				if (err == nil) != tc.want {
					t.Fatalf("go-pagerduty with one secret: %v, want accepted=%v", err, tc.want)
				}
			}
			p := mustProvider(t, ProviderConfig{Name: "pd", Scheme: SchemePagerDuty, Secrets: tc.secrets})
			_, err := p.Check(Input{Header: headers("X-PagerDuty-Signature", tc.header), Body: []byte(tc.body)}, now)
			if (err == nil) != tc.want {
				t.Errorf("Check: %v, go-pagerduty accepted=%v", err, tc.want)
			}
			if err != nil && !errors.Is(err, ErrUnauthorized) {
				t.Errorf("err = %v, want ErrUnauthorized", err)
			}
		})
	}
	// Both secrets configured, as during a rotation: each signature alone
	// verifies, with us and with go-pagerduty.
	p := mustProvider(t, ProviderConfig{Name: "pd", Scheme: SchemePagerDuty, Secrets: []string{pdSecret, pdOtherSecret}})
	for i, sig := range []string{good, prev} {
		secret := []string{pdSecret, pdOtherSecret}[i]
		if err := webhookv3.VerifySignature(pdRequest(t, sig, pdBody), secret); err != nil {
			t.Errorf("go-pagerduty refuses signature %d: %v", i, err)
		}
		if _, err := p.Check(Input{Header: headers("X-PagerDuty-Signature", sig), Body: []byte(pdBody)}, now); err != nil {
			t.Errorf("Check refuses signature %d: %v", i, err)
		}
	}
}

func TestParsePagerDutySignatures(t *testing.T) {
	sig := strings.Repeat("ab", 32)
	sigs, err := parsePagerDutySignatures("v1=" + sig + ", v1=" + strings.ToUpper(sig) + ",v0=00")
	if err != nil || len(sigs) != 2 || sigs[0] != sigs[1] || sigs[0][0] != 0xab {
		t.Fatalf("got %x, %v", sigs, err)
	}
	for _, h := range []string{"", ",", "v1=", "v1=" + sig[:62], "V1=" + sig, "v1:" + sig, "v1=" + sig + "00"} {
		if _, err := parsePagerDutySignatures(h); err == nil {
			t.Errorf("%q: no error", h)
		}
	}
}

func TestPagerDutyConstructorErrors(t *testing.T) {
	for _, secrets := range [][]string{nil, {pdSecret, ""}} {
		if _, err := NewProvider(ProviderConfig{Name: "pd", Scheme: SchemePagerDuty, Secrets: secrets}); err == nil ||
			!strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), pdSecret) {
			t.Errorf("secrets %d: err = %v", len(secrets), err)
		}
	}
}
