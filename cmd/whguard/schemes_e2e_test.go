package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PagerDuty/go-pagerduty/webhookv3"
	"github.com/bwmarrin/discordgo"
	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"
	twilioclient "github.com/twilio/twilio-go/client"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/verify"
)

// TestE2EEveryScheme starts the real binary once with every scheme (the
// README's provider table) configured as its own provider, purely through
// WHGUARD_* variables, and drives each one as its sender would: a signed
// event (202, or Discord's interaction response), the same request again
// (200, byte-identical body), a forgery (401), the sender handshakes
// (answered, verified, never journaled), and finally checks that the
// backend received every accepted event exactly once with the exact bytes.
//
// The signers below are written from each provider's own documentation,
// independently of the verify package; where an official SDK in go.mod signs (stripe-go, the
// Standard Webhooks library) it is used, and where one only verifies
// (slack-go, twilio-go, sendgrid-go, go-pagerduty, discordgo) the hand-made
// signature is first checked with it, so a wrong signer cannot agree with a
// wrong verifier.
func TestE2EEveryScheme(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, drop, err := testdb.Create(ctx, "schemes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)

	rec := &deliveryRecorder{}
	backend := httptest.NewServer(rec)
	t.Cleanup(backend.Close)

	listen, admin := freePort(t), freePort(t)
	const adminToken = "schemes-admin-token"
	k := newSchemeKeys(t)
	ring := newRingKeys(t)
	cases := append(everySchemeCase(t, listen, k), secondRingCases(t, listen, ring)...)

	names := make([]string, len(cases))
	env := []string{
		"WHGUARD_DATABASE_URL=" + db,
		"WHGUARD_LISTEN=" + listen,
		"WHGUARD_ADMIN_LISTEN=" + admin,
		"WHGUARD_ADMIN_TOKEN=" + adminToken,
		"WHGUARD_BACKEND_URL=" + backend.URL,
		"WHGUARD_RETRY_BASE_DELAY=100ms",
		"WHGUARD_RETRY_MAX_DELAY=1s",
		"WHGUARD_FORWARD_TIMEOUT=5s",
		"WHGUARD_SHUTDOWN_TIMEOUT=5s",
	}
	for i, c := range cases {
		names[i] = c.name
		env = append(env, "WHGUARD_"+strings.ToUpper(c.name)+"_SCHEME="+c.name)
		env = append(env, c.env...)
	}
	env = append(env, "WHGUARD_PROVIDERS="+strings.Join(names, ","))
	// The same configuration in process: the providers that re-sign, to
	// check what the backend receives.
	cfg, _, err := loadConfig(env)
	if err != nil {
		t.Fatal(err)
	}
	resigners := map[string]*verify.Provider{}
	for _, p := range cfg.providers {
		if p.resign {
			resigners[p.name] = p.provider
		}
	}
	wh := start(t, binary, env)
	waitHTTP(t, "http://"+admin+"/readyz", 20*time.Second)

	client := &http.Client{Timeout: 10 * time.Second}
	post := func(t *testing.T, name string, r wireReq) (int, []byte) {
		t.Helper()
		u := "http://" + listen + "/webhooks/" + name
		if r.query != "" {
			u += "?" + r.query
		}
		method := r.method
		if method == "" {
			method = http.MethodPost
		}
		req, err := http.NewRequest(method, u, bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		for h, vs := range r.header {
			req.Header[h] = vs
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	listed := func(t *testing.T, provider string) []listedEvent {
		t.Helper()
		return adminEvents(t, client, admin, adminToken, "provider="+url.QueryEscape(provider))
	}
	wantUnauthorized := func(t *testing.T, code int, body []byte) {
		t.Helper()
		var e struct {
			Error *string `json:"error"`
		}
		if code != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401; body %s", code, body)
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || *e.Error == "" {
			t.Fatalf("401 body %q is not {\"error\":\"…\"}", body)
		}
		for _, s := range append(k.secrets(), ring.secrets()...) {
			if strings.Contains(string(body), s) {
				t.Fatalf("401 body %q echoes a secret", body)
			}
		}
	}

	// accepted[name] is the event each provider accepted (one per provider).
	accepted := map[string]wireReq{}
	acceptedID := map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.build(time.Now())
			if r.sdkCheck != nil {
				r.sdkCheck(t, r.event)
			}
			wantStatus, wantBody := http.StatusAccepted,
				fmt.Sprintf(`{"status":"accepted","provider":%q,"event_id":%q}`, c.name, r.wantID)
			if r.reply != "" {
				wantStatus, wantBody = http.StatusOK, r.reply
			}

			ok := t.Run("valid", func(t *testing.T) {
				code, body := post(t, c.name, r.event)
				if code != wantStatus || string(body) != wantBody {
					t.Fatalf("got %d %s\nwant %d %s", code, body, wantStatus, wantBody)
				}
			})
			if !ok {
				return
			}
			accepted[c.name], acceptedID[c.name] = r.event, r.wantID

			t.Run("duplicate", func(t *testing.T) {
				code, body := post(t, c.name, r.event)
				if code != http.StatusOK || string(body) != wantBody {
					t.Fatalf("got %d %s\nwant 200 %s", code, body, wantBody)
				}
			})

			t.Run("forged", func(t *testing.T) {
				if r.forged == nil {
					t.Skip("scheme none verifies nothing: there is nothing to forge")
				}
				code, body := post(t, c.name, *r.forged)
				wantUnauthorized(t, code, body)
			})

			for _, hs := range r.handshakes {
				t.Run("handshake_"+hs.name, func(t *testing.T) {
					code, body := post(t, c.name, hs.req)
					if code != http.StatusOK {
						t.Fatalf("handshake: %d %s, want 200", code, body)
					}
					hs.check(t, body)
					if hs.forged.method == "" && hs.forged.header == nil && hs.forged.query == "" {
						return // proven by nothing but its shape: nothing to forge
					}
					code, body = post(t, c.name, hs.forged)
					if hs.forgedStatus != 0 {
						if code != hs.forgedStatus {
							t.Fatalf("forged handshake: %d %s, want %d", code, body, hs.forgedStatus)
						}
						return
					}
					wantUnauthorized(t, code, body)
				})
			}

			t.Run("journal", func(t *testing.T) {
				// Only the accepted event: no duplicate row, no forgery,
				// no handshake.
				evs := listed(t, c.name)
				if len(evs) != 1 || evs[0].Provider != c.name || evs[0].EventID != r.wantID {
					t.Fatalf("journal holds %+v for %s, want exactly event %q", evs, c.name, r.wantID)
				}
			})
		})
	}
	if len(accepted) != len(cases) {
		t.Fatalf("only %d of %d providers accepted their event; not checking delivery", len(accepted), len(cases))
	}

	// Delivery: wait until the journal records every event done (the
	// forwarder recorded the backend's 2xx, so nothing more will be sent),
	// then check the backend saw each exactly once.
	var done []listedEvent
	if !testwait.Until(15*time.Second, 50*time.Millisecond, func() bool {
		done = adminEvents(t, client, admin, adminToken, "status=done")
		return len(done) == len(cases)
	}) {
		all := adminEvents(t, client, admin, adminToken, "")
		t.Fatalf("%d of %d events done after 15s; journal: %+v; backend got %d requests",
			len(done), len(cases), all, len(rec.all()))
	}
	got := rec.all()
	if len(got) != len(cases) {
		t.Errorf("backend received %d requests, want %d (one per accepted event)", len(got), len(cases))
	}
	byProvider := map[string][]recordedDelivery{}
	for _, d := range got {
		p := d.header.Get("X-Whguard-Provider")
		byProvider[p] = append(byProvider[p], d)
	}
	keys := map[string]string{}
	for _, c := range cases {
		ds := byProvider[c.name]
		if len(ds) != 1 {
			t.Errorf("%s: backend received %d deliveries, want exactly 1", c.name, len(ds))
			continue
		}
		d, sent := ds[0], accepted[c.name]
		if !bytes.Equal(d.body, sent.body) {
			t.Errorf("%s: backend body %q, want the exact received bytes %q", c.name, d.body, sent.body)
		}
		if d.path != "/webhooks/"+c.name || d.query != sent.query {
			t.Errorf("%s: delivered to %s?%s, want /webhooks/%s?%s", c.name, d.path, d.query, c.name, sent.query)
		}
		key := d.header.Get("Idempotency-Key")
		if key == "" {
			t.Errorf("%s: delivery without Idempotency-Key", c.name)
		} else if other, dup := keys[key]; dup {
			t.Errorf("%s and %s deliveries share the Idempotency-Key %q", other, c.name, key)
		}
		keys[key] = c.name
		// The sender's own headers pass through (docs/delivery.md, "The
		// delivery request"), so a backend that verifies keeps working.
		// The signature headers of a scheme that is re-signed are made
		// afresh instead, and must verify now at the default tolerance.
		resigned := map[string]bool{}
		if p := resigners[c.name]; p != nil {
			probe := sent.header.Clone()
			p.Resign(probe, sent.body, time.Unix(1, 0))
			for h := range probe {
				if strings.Join(probe.Values(h), "\n") != strings.Join(sent.header.Values(h), "\n") {
					resigned[textproto.CanonicalMIMEHeaderKey(h)] = true
				}
			}
			if len(resigned) == 0 {
				t.Errorf("%s: re-signing changes no header", c.name)
			}
			if _, err := p.Check(verify.Input{Header: d.header, Body: d.body, RawQuery: d.query}, time.Now()); err != nil {
				t.Errorf("%s: the re-signed delivery does not verify: %v", c.name, err)
			}
		}
		for h, vs := range sent.header {
			if resigned[textproto.CanonicalMIMEHeaderKey(h)] {
				continue
			}
			if got := d.header.Values(h); strings.Join(got, "\n") != strings.Join(vs, "\n") {
				t.Errorf("%s: backend header %s = %q, want %q", c.name, h, got, vs)
			}
		}
	}

	out := wh.out.String()
	if !strings.Contains(out, "sns subscription confirmed: topic arn:aws:sns:us-east-2:123456789012:orders") {
		t.Errorf("the SNS subscription confirmation is not logged with its topic\n%s", tail(out, 2000))
	}
	if strings.Contains(out, "unknown variable") {
		t.Errorf("whguard warned about an unknown variable: the test's configuration has a typo\n%s", tail(out, 2000))
	}
	for _, s := range append(k.secrets(), ring.secrets()...) {
		if strings.Contains(out, s) {
			t.Errorf("whguard's logs contain a configured secret (%.8s…)", s)
		}
	}
}

// wireReq is one request as a sender puts it on the wire.
type wireReq struct {
	method string // "" is POST
	query  string // without "?"
	header http.Header
	body   []byte
}

// handshake is a sender handshake: a signed challenge answered with 200 and
// never journaled, and its forgery, refused.
type handshake struct {
	name   string
	req    wireReq
	check  func(t *testing.T, body []byte)
	forged wireReq
	// forgedStatus is the forgery's answer when not 401 (Meta's wrong
	// verify token: 403; a CRC token not shaped like X's: 400).
	forgedStatus int
}

// schemeCase is one provider, named after its scheme.
type schemeCase struct {
	name  string
	env   []string // WHGUARD_<NAME>_* settings besides SCHEME
	build func(now time.Time) schemeReqs
}

type schemeReqs struct {
	event  wireReq
	wantID string
	// reply, when set, is the exact 200 body expected instead of the 202
	// accepted body (Discord interactions).
	reply      string
	forged     *wireReq // nil: nothing to forge (scheme none)
	handshakes []handshake
	// sdkCheck, when set, checks event's signature with the provider's
	// official SDK verifier before it is sent.
	sdkCheck func(t *testing.T, event wireReq)
}

// schemeKeys holds every secret and key pair of the test.
type schemeKeys struct {
	standardCur, standardPrev, svix string
	stripeCur, stripePrev           string
	github, slack                   string
	shopifyCur, shopifyPrev         string
	twilioCur, twilioPrev           string
	paddle, linear                  string
	intercomCur, intercomPrev       string
	zoom, square                    string
	pagerDutyCur, pagerDutyPrev     string
	gitlab                          string
	hmacCur, hmacPrev               string

	sendgrid, sendgridOther       *ecdsa.PrivateKey
	sendgridPublicB64             string // WHGUARD_SENDGRID_PUBLIC_KEY
	discordPub                    ed25519.PublicKey
	discordPriv, discordOtherPriv ed25519.PrivateKey
	discordPublicHex              string // WHGUARD_DISCORD_PUBLIC_KEY
}

func newSchemeKeys(t *testing.T) *schemeKeys {
	t.Helper()
	k := &schemeKeys{
		standardCur:   whsecOf("standard-current-key-32-bytes!!!"),
		standardPrev:  whsecOf("standard-previous-key-32-bytes!!"),
		svix:          whsecOf("svix-signing-key-of-32-bytes...."),
		stripeCur:     "whsec_stripeCurrentSecret0123456789",
		stripePrev:    "whsec_stripePreviousSecret987654321",
		github:        "It's a Secret to Everybody (schemes e2e)",
		slack:         "8f742231b10e8888abcd99yyyzzz85a5-e2e",
		shopifyCur:    "shpss_current_client_secret_e2e",
		shopifyPrev:   "shpss_previous_client_secret_e2e",
		twilioCur:     "twilio-auth-token-current-e2e",
		twilioPrev:    "twilio-auth-token-previous-e2e",
		paddle:        "pdl_ntfset_01h_e2e_secret_key_xyz",
		linear:        "lin_wh_e2e_signing_secret",
		intercomCur:   "intercom-client-secret-current-e2e",
		intercomPrev:  "intercom-client-secret-previous-e2e",
		zoom:          "zoom-secret-token-e2e",
		square:        "Ibxx_5AKakO-3qeNVR61Dw-e2e",
		pagerDutyCur:  "pagerduty-secret-current-e2e",
		pagerDutyPrev: "pagerduty-secret-previous-e2e",
		gitlab:        "gitlab-secret-token-e2e",
		hmacCur:       "acme in-house secret (current)",
		hmacPrev:      "acme in-house secret (previous)",
	}
	var err error
	if k.sendgrid, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if k.sendgridOther, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.sendgrid.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	k.sendgridPublicB64 = base64.StdEncoding.EncodeToString(der)
	if k.discordPub, k.discordPriv, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	if _, k.discordOtherPriv, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	k.discordPublicHex = hex.EncodeToString(k.discordPub)
	return k
}

// secrets lists the configured values that must never be echoed or logged.
func (k *schemeKeys) secrets() []string {
	return []string{k.standardCur, k.standardPrev, k.svix, k.stripeCur, k.stripePrev, k.github, k.slack,
		k.shopifyCur, k.shopifyPrev, k.twilioCur, k.twilioPrev, k.paddle, k.linear, k.intercomCur,
		k.intercomPrev, k.zoom, k.square, k.pagerDutyCur, k.pagerDutyPrev, k.gitlab, k.hmacCur, k.hmacPrev}
}

func macOf(newHash func() hash.Hash, key string, parts ...string) []byte {
	m := hmac.New(newHash, []byte(key))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func hexMAC(newHash func() hash.Hash, key string, parts ...string) string {
	return hex.EncodeToString(macOf(newHash, key, parts...))
}

func b64MAC(newHash func() hash.Hash, key string, parts ...string) string {
	return base64.StdEncoding.EncodeToString(macOf(newHash, key, parts...))
}

// digestID is the id of an event that carries none (docs/ingress.md, "The
// event key"): "sha256:" + hex of the canonical bytes, written out by hand
// in each case.
func digestID(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func ptr[T any](v T) *T { return &v }

// exactBody returns a handshake check that wants exactly these bytes.
func exactBody(want string) func(*testing.T, []byte) {
	return func(t *testing.T, body []byte) {
		t.Helper()
		if string(body) != want {
			t.Fatalf("handshake answer %s, want %s", body, want)
		}
	}
}

func everySchemeCase(t *testing.T, listen string, k *schemeKeys) []schemeCase {
	t.Helper()
	const jsonCT = "application/json"
	twilioURL := "http://" + listen + "/webhooks/twilio"
	squareURL := "http://" + listen + "/webhooks/square"

	standardSigner := func(secret string) *standardwebhooks.Webhook {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		return wh
	}
	standardSign := func(secret, id string, now time.Time, body string) string {
		sig, err := standardSigner(secret).Sign(id, now, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}

	return []schemeCase{
		{
			name: "standard",
			env:  []string{"WHGUARD_STANDARD_SECRET=" + k.standardCur, "WHGUARD_STANDARD_SECRET_PREVIOUS=" + k.standardPrev},
			build: func(now time.Time) schemeReqs {
				const id = "msg_2mV8bWQ2ZGh0c3RhbmRhcmQ"
				body := `{"type":"invoice.paid","data":{"invoice":"in_1","amount":4200}}`
				ts := fmt.Sprint(now.Unix())
				// Rotation: signed with the previous secret only.
				h := func(secret, b string) http.Header {
					return hdr("Content-Type", jsonCT, "webhook-id", id, "webhook-timestamp", ts,
						"webhook-signature", standardSign(secret, id, now, b))
				}
				return schemeReqs{
					event:  wireReq{header: h(k.standardPrev, body), body: []byte(body)},
					wantID: id,
					forged: &wireReq{header: h(whsecOf("an attacker's key of 32 bytes..."), body), body: []byte(body)},
				}
			},
		},
		{
			name: "svix",
			env:  []string{"WHGUARD_SVIX_SECRET=" + k.svix},
			build: func(now time.Time) schemeReqs {
				// svix-webhooks is not in go.mod; Svix signs exactly as
				// Standard Webhooks does, under svix-* header names.
				const id = "msg_p5jXN8AQM9LWM0D4loKWxJek"
				body := `{"type":"user.created","data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC"},"object":"event"}`
				h := hdr("Content-Type", jsonCT, "svix-id", id, "svix-timestamp", fmt.Sprint(now.Unix()),
					"svix-signature", standardSign(k.svix, id, now, body))
				tampered := strings.Replace(body, "user_29w", "user_30w", 1)
				return schemeReqs{
					event:  wireReq{header: h, body: []byte(body)},
					wantID: id,
					forged: &wireReq{header: h, body: []byte(tampered)},
				}
			},
		},
		{
			name: "stripe",
			env:  []string{"WHGUARD_STRIPE_SECRET=" + k.stripeCur, "WHGUARD_STRIPE_SECRET_PREVIOUS=" + k.stripePrev},
			build: func(now time.Time) schemeReqs {
				const id = "evt_1NG8Du2eZvKYlo2CUI79vXWy"
				body := `{"id":"` + id + `","object":"event","type":"payment_intent.succeeded","pending_webhooks":1,"data":{"object":{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","amount":2000}}}`
				sign := func(secret string) http.Header {
					sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: now})
					return hdr("Content-Type", "application/json; charset=utf-8", "Stripe-Signature", sp.Header)
				}
				return schemeReqs{
					event:  wireReq{header: sign(k.stripePrev), body: []byte(body)},
					wantID: id,
					forged: &wireReq{header: sign("whsec_notTheEndpointSecret"), body: []byte(body)},
				}
			},
		},
		{
			name: "github",
			env:  []string{"WHGUARD_GITHUB_SECRET=" + k.github},
			build: func(time.Time) schemeReqs {
				const delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
				body := `{"action":"opened","number":1347,"repository":{"full_name":"octo/hello"}}`
				h := func(b string) http.Header {
					return hdr("Content-Type", jsonCT, "X-GitHub-Event", "pull_request", "X-GitHub-Delivery", delivery,
						"X-Hub-Signature-256", "sha256="+hexMAC(sha256.New, k.github, b))
				}
				return schemeReqs{
					event:  wireReq{header: h(body), body: []byte(body)},
					wantID: delivery,
					// Signed for another body.
					forged: &wireReq{header: h(body), body: []byte(strings.Replace(body, "1347", "1348", 1))},
				}
			},
		},
		{
			name: "slack",
			env:  []string{"WHGUARD_SLACK_SECRET=" + k.slack},
			build: func(now time.Time) schemeReqs {
				ts := fmt.Sprint(now.Unix())
				sign := func(secret, b string) wireReq {
					return wireReq{header: hdr("Content-Type", jsonCT, "X-Slack-Request-Timestamp", ts,
						"X-Slack-Signature", "v0="+hexMAC(sha256.New, secret, "v0:", ts, ":", b)), body: []byte(b)}
				}
				body := `{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention","text":"hi","ts":"1515449522.000016"},"type":"event_callback","event_id":"Ev123ABC456","event_time":1515449522}`
				const challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
				hs := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"` + challenge + `","type":"url_verification"}`
				return schemeReqs{
					event:  sign(k.slack, body),
					wantID: "Ev123ABC456",
					forged: ptr(sign("not the signing secret", body)),
					handshakes: []handshake{{
						name:   "url_verification",
						req:    sign(k.slack, hs),
						check:  exactBody(`{"challenge":"` + challenge + `"}`),
						forged: sign("not the signing secret", hs),
					}},
					sdkCheck: func(t *testing.T, ev wireReq) {
						sv, err := slack.NewSecretsVerifier(ev.header, k.slack)
						if err != nil {
							t.Fatal(err)
						}
						sv.Write(ev.body)
						if err := sv.Ensure(); err != nil {
							t.Fatalf("slack-go refuses the test's signature: %v", err)
						}
					},
				}
			},
		},
		{
			name: "shopify",
			env:  []string{"WHGUARD_SHOPIFY_SECRET=" + k.shopifyCur, "WHGUARD_SHOPIFY_SECRET_PREVIOUS=" + k.shopifyPrev},
			build: func(time.Time) schemeReqs {
				const webhookID = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
				body := `{"id":820982911946154508,"email":"jon@example.com","total_price":"403.00"}`
				h := func(secret string) http.Header {
					return hdr("Content-Type", jsonCT, "X-Shopify-Topic", "orders/create",
						"X-Shopify-Shop-Domain", "shop.myshopify.com", "X-Shopify-Webhook-Id", webhookID,
						"X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5",
						"X-Shopify-Hmac-SHA256", b64MAC(sha256.New, secret, body))
				}
				return schemeReqs{
					// Rotation: Shopify may sign with the old secret for an hour.
					event:  wireReq{header: h(k.shopifyPrev), body: []byte(body)},
					wantID: webhookID,
					forged: &wireReq{header: h("shpss_someone_elses_secret"), body: []byte(body)},
				}
			},
		},
		{
			name: "twilio",
			env: []string{"WHGUARD_TWILIO_SECRET=" + k.twilioCur, "WHGUARD_TWILIO_SECRET_PREVIOUS=" + k.twilioPrev,
				"WHGUARD_TWILIO_PUBLIC_URL=" + twilioURL},
			build: func(time.Time) schemeReqs {
				// A form post whose parameters arrive unsorted, on a URL
				// with a query (signed as part of the URL).
				const query = "foo=1&bar=2"
				body := "To=%2B18005551212&From=%2B14158675310&CallSid=CA1234567890ABCDE&Digits=1234&Body=hello+world"
				params := map[string]string{"To": "+18005551212", "From": "+14158675310", "CallSid": "CA1234567890ABCDE",
					"Digits": "1234", "Body": "hello world"}
				names := make([]string, 0, len(params))
				for n := range params {
					names = append(names, n)
				}
				sort.Strings(names)
				signed := twilioURL + "?" + query
				for _, n := range names {
					signed += n + params[n]
				}
				h := func(token string) http.Header {
					return hdr("Content-Type", "application/x-www-form-urlencoded",
						"X-Twilio-Signature", b64MAC(sha1.New, token, signed))
				}
				return schemeReqs{
					event: wireReq{query: query, header: h(k.twilioPrev), body: []byte(body)},
					// No I-Twilio-Idempotency-Token: keyed by the sorted,
					// re-encoded parameters (docs/ingress.md).
					wantID: digestID("Body=hello+world&CallSid=CA1234567890ABCDE&Digits=1234&From=%2B14158675310&To=%2B18005551212"),
					forged: &wireReq{query: query, header: h("not the auth token"), body: []byte(body)},
					sdkCheck: func(t *testing.T, ev wireReq) {
						rv := twilioclient.NewRequestValidator(k.twilioPrev)
						if !rv.Validate(twilioURL+"?"+query, params, ev.header.Get("X-Twilio-Signature")) {
							t.Fatal("twilio-go refuses the test's signature")
						}
					},
				}
			},
		},
		{
			name: "paddle",
			env:  []string{"WHGUARD_PADDLE_SECRET=" + k.paddle},
			build: func(now time.Time) schemeReqs {
				const id = "evt_01hv8x2acma2gz2wd9pkbm8fzx"
				ts := fmt.Sprint(now.Unix())
				body := `{"event_id":"` + id + `","event_type":"transaction.completed","occurred_at":"2026-01-01T10:00:00.000Z","notification_id":"ntf_01hv8x2aec9yr0ykxrscqgf8fy","data":{"id":"txn_01hv8wptq8987qeep44cyrewp9"}}`
				h := func(secret string) http.Header {
					return hdr("Content-Type", jsonCT, "Paddle-Signature", "ts="+ts+";h1="+hexMAC(sha256.New, secret, ts, ":", body))
				}
				return schemeReqs{
					event:  wireReq{header: h(k.paddle), body: []byte(body)},
					wantID: id,
					forged: &wireReq{header: h("pdl_ntfset_not_ours"), body: []byte(body)},
				}
			},
		},
		{
			name: "linear",
			env:  []string{"WHGUARD_LINEAR_SECRET=" + k.linear},
			build: func(now time.Time) schemeReqs {
				const delivery = "234d1a4e-b617-4388-90fe-adc3633d6b72"
				body := fmt.Sprintf(`{"action":"create","type":"Issue","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Bug"},"url":"https://linear.app/x/issue/X-1","webhookTimestamp":%d}`, now.UnixMilli())
				h := hdr("Content-Type", jsonCT, "Linear-Delivery", delivery, "Linear-Event", "Issue",
					"Linear-Signature", hexMAC(sha256.New, k.linear, body))
				return schemeReqs{
					event:  wireReq{header: h, body: []byte(body)},
					wantID: delivery,
					forged: &wireReq{header: h, body: []byte(strings.Replace(body, `"Bug"`, `"Feature"`, 1))},
				}
			},
		},
		{
			name: "intercom",
			env:  []string{"WHGUARD_INTERCOM_SECRET=" + k.intercomCur, "WHGUARD_INTERCOM_SECRET_PREVIOUS=" + k.intercomPrev},
			build: func(time.Time) schemeReqs {
				const id = "notif_ccd8a4d2-3b5c-4ee9-9c4c-0b3f0b5b8c1e"
				body := `{"type":"notification_event","app_id":"abc123","data":{"item":{"type":"conversation","id":"1"}},"id":"` + id + `","topic":"conversation.user.created","delivery_attempts":1,"first_sent_at":1700000000}`
				h := func(secret string) http.Header {
					return hdr("Content-Type", jsonCT, "X-Hub-Signature", "sha1="+hexMAC(sha1.New, secret, body))
				}
				return schemeReqs{
					event:  wireReq{header: h(k.intercomPrev), body: []byte(body)},
					wantID: id,
					forged: &wireReq{header: h("not the client secret"), body: []byte(body)},
				}
			},
		},
		{
			name: "zoom",
			env:  []string{"WHGUARD_ZOOM_SECRET=" + k.zoom},
			build: func(now time.Time) schemeReqs {
				ts := fmt.Sprint(now.Unix())
				sign := func(secret, b string) wireReq {
					return wireReq{header: hdr("Content-Type", jsonCT, "x-zm-request-timestamp", ts,
						"x-zm-signature", "v0="+hexMAC(sha256.New, secret, "v0:", ts, ":", b)), body: []byte(b)}
				}
				// Zoom has no event id: keyed by the canonical body, so
				// whitespace and member order are normalized.
				body := "{\"payload\": {\"object\": {\"id\": \"85746065432\", \"topic\": \"standup\"}, \"account_id\": \"AAAAAABBBB\"},\n \"event\": \"meeting.started\", \"event_ts\": 1700000000000}"
				canonical := `{"event":"meeting.started","event_ts":1700000000000,"payload":{"account_id":"AAAAAABBBB","object":{"id":"85746065432","topic":"standup"}}}`
				const plain = "qgg8vlvZRS6UYooatFL8Aw"
				hs := `{"payload":{"plainToken":"` + plain + `"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
				return schemeReqs{
					event:  sign(k.zoom, body),
					wantID: digestID(canonical),
					forged: ptr(sign("not the secret token", body)),
					handshakes: []handshake{{
						name: "url_validation",
						req:  sign(k.zoom, hs),
						check: func(t *testing.T, b []byte) {
							var got map[string]string
							if err := json.Unmarshal(b, &got); err != nil {
								t.Fatalf("answer %s: %v", b, err)
							}
							want := map[string]string{"plainToken": plain, "encryptedToken": hexMAC(sha256.New, k.zoom, plain)}
							if fmt.Sprint(got) != fmt.Sprint(want) {
								t.Fatalf("answer %s, want %v", b, want)
							}
						},
						forged: sign("not the secret token", hs),
					}},
				}
			},
		},
		{
			name: "square",
			env:  []string{"WHGUARD_SQUARE_SECRET=" + k.square, "WHGUARD_SQUARE_PUBLIC_URL=" + squareURL},
			build: func(time.Time) schemeReqs {
				const id = "ac3ac95b-f97d-458c-a6e6-18981597e05f"
				body := `{"merchant_id":"MLEFBHHSJGVHD","type":"payment.created","event_id":"` + id + `","created_at":"2026-01-13T20:30:59.037339943Z","data":{"type":"payment","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
				h := func(key string) http.Header {
					return hdr("Content-Type", jsonCT, "x-square-hmacsha256-signature", b64MAC(sha256.New, key, squareURL, body))
				}
				return schemeReqs{
					event:  wireReq{header: h(k.square), body: []byte(body)},
					wantID: id,
					forged: &wireReq{header: h("not the signature key"), body: []byte(body)},
				}
			},
		},
		{
			name: "sendgrid",
			env:  []string{"WHGUARD_SENDGRID_PUBLIC_KEY=" + k.sendgridPublicB64},
			build: func(now time.Time) schemeReqs {
				ts := fmt.Sprint(now.Unix())
				// An array of events, ending with CRLF as SendGrid sends it.
				body := `[{"email":"hello@world.com","event":"delivered","sg_event_id":"ZGVsaXZlcmVkLTAtMjQ","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filter-1","timestamp":1700000000}]` + "\r\n"
				sign := func(key *ecdsa.PrivateKey) http.Header {
					sum := sha256.Sum256([]byte(ts + body))
					sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
					if err != nil {
						t.Fatal(err)
					}
					return hdr("Content-Type", jsonCT, "X-Twilio-Email-Event-Webhook-Timestamp", ts,
						"X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig))
				}
				return schemeReqs{
					event: wireReq{header: sign(k.sendgrid), body: []byte(body)},
					// No request id (each item has its own): keyed by the
					// canonical body, the trailing CRLF being whitespace.
					wantID: digestID(strings.TrimSuffix(body, "\r\n")),
					forged: &wireReq{header: sign(k.sendgridOther), body: []byte(body)},
					sdkCheck: func(t *testing.T, ev wireReq) {
						pk, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(k.sendgridPublicB64)
						if err != nil {
							t.Fatal(err)
						}
						ok, err := eventwebhook.VerifySignature(pk, ev.body,
							ev.header.Get(eventwebhook.VerificationHTTPHeader), ev.header.Get(eventwebhook.TimestampHTTPHeader))
						if err != nil || !ok {
							t.Fatalf("sendgrid-go refuses the test's signature: %v %v", ok, err)
						}
					},
				}
			},
		},
		{
			name: "pagerduty",
			env:  []string{"WHGUARD_PAGERDUTY_SECRET=" + k.pagerDutyCur, "WHGUARD_PAGERDUTY_SECRET_PREVIOUS=" + k.pagerDutyPrev},
			build: func(time.Time) schemeReqs {
				const webhookID = "04b4dd59-2f0e-4a3f-9d3c-7e8f0b1c2d3e"
				body := `{"event":{"id":"01DEN0B0B4NAM2IF4IQFAQ2WGQ","event_type":"incident.triggered","resource_type":"incident","occurred_at":"2026-01-01T00:00:00.000Z","data":{"id":"PGR0VU2","type":"incident"}}}`
				// One signature per subscription secret, as PagerDuty sends
				// while a secret rotates: an unknown one and the previous one.
				sig := "v1=" + hexMAC(sha256.New, "a secret we never had", body) + ",v1=" + hexMAC(sha256.New, k.pagerDutyPrev, body)
				h := hdr("Content-Type", jsonCT, "X-Webhook-Id", webhookID, "X-Webhook-Subscription", "PY1OYTU",
					"X-PagerDuty-Signature", sig)
				forgedH := h.Clone()
				forgedH.Set("X-PagerDuty-Signature", "v1="+hexMAC(sha256.New, "a secret we never had", body))
				return schemeReqs{
					event:  wireReq{header: h, body: []byte(body)},
					wantID: webhookID,
					forged: &wireReq{header: forgedH, body: []byte(body)},
					sdkCheck: func(t *testing.T, ev wireReq) {
						r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(ev.body))
						r.Header = ev.header.Clone()
						if err := webhookv3.VerifySignature(r, k.pagerDutyPrev); err != nil {
							t.Fatalf("go-pagerduty refuses the test's signature: %v", err)
						}
					},
				}
			},
		},
		{
			name: "discord",
			env:  []string{"WHGUARD_DISCORD_PUBLIC_KEY=" + k.discordPublicHex},
			build: func(now time.Time) schemeReqs {
				ts := fmt.Sprint(now.Unix())
				sign := func(key ed25519.PrivateKey, b string) wireReq {
					sig := ed25519.Sign(key, []byte(ts+b))
					return wireReq{header: hdr("Content-Type", jsonCT, "X-Signature-Timestamp", ts,
						"X-Signature-Ed25519", hex.EncodeToString(sig)), body: []byte(b)}
				}
				const id = "1187343459348185098"
				command := `{"application_id":"1187340000000000000","data":{"id":"1187340000000000001","name":"blep","type":1},"id":"` + id + `","token":"aW50ZXJhY3Rpb246MTE4NzM0MzQ1OTM0ODE4NTA5ODp0b2tlbg","type":2,"version":1}`
				ping := `{"application_id":"1187340000000000000","id":"1187343459348185099","token":"cGluZw","type":1,"version":1}`
				return schemeReqs{
					event:  sign(k.discordPriv, command),
					wantID: id,
					reply:  `{"type":5}`,
					forged: ptr(sign(k.discordOtherPriv, command)),
					handshakes: []handshake{{
						name:   "ping",
						req:    sign(k.discordPriv, ping),
						check:  exactBody(`{"type":1}`),
						forged: sign(k.discordOtherPriv, ping),
					}},
					sdkCheck: func(t *testing.T, ev wireReq) {
						r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(ev.body))
						r.Header = ev.header.Clone()
						if !discordgo.VerifyInteraction(r, k.discordPub) {
							t.Fatal("discordgo refuses the test's signature")
						}
					},
				}
			},
		},
		{
			name: "gitlab",
			env:  []string{"WHGUARD_GITLAB_SECRET=" + k.gitlab},
			build: func(time.Time) schemeReqs {
				const uuid = "3ba8a9b4-9c2b-4ad2-8c39-4f0e5e0b6e7d"
				body := `{"object_kind":"push","ref":"refs/heads/main","checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7","project":{"id":15}}`
				h := func(token string) http.Header {
					return hdr("Content-Type", jsonCT, "X-Gitlab-Event", "Push Hook", "X-Gitlab-Event-UUID", uuid,
						"X-Gitlab-Instance", "https://gitlab.example.com", "X-Gitlab-Token", token)
				}
				return schemeReqs{
					event:  wireReq{header: h(k.gitlab), body: []byte(body)},
					wantID: uuid,
					forged: &wireReq{header: h("a guessed token"), body: []byte(body)},
				}
			},
		},
		{
			name: "hmac",
			env: []string{"WHGUARD_HMAC_SECRET=" + k.hmacCur, "WHGUARD_HMAC_SECRET_PREVIOUS=" + k.hmacPrev,
				"WHGUARD_HMAC_HMAC_ALGORITHM=sha512", "WHGUARD_HMAC_SIGNATURE_HEADER=X-Acme-Signature",
				"WHGUARD_HMAC_SIGNATURE_ENCODING=base64", "WHGUARD_HMAC_SIGNATURE_PREFIX=sha512=",
				"WHGUARD_HMAC_TIMESTAMP_HEADER=X-Acme-Timestamp", "WHGUARD_HMAC_ID_HEADER=X-Acme-Id",
				"WHGUARD_HMAC_SIGNED_CONTENT={id}.{timestamp}.{body}"},
			build: func(now time.Time) schemeReqs {
				const id = "acme-evt-000042"
				ts := fmt.Sprint(now.Unix())
				body := `{"type":"shipment.dispatched","shipment":{"id":"shp_9","carrier":"dhl"}}`
				h := func(secret string) http.Header {
					return hdr("Content-Type", jsonCT, "X-Acme-Id", id, "X-Acme-Timestamp", ts,
						"X-Acme-Signature", "sha512="+b64MAC(sha512.New, secret, id, ".", ts, ".", body))
				}
				return schemeReqs{
					event:  wireReq{header: h(k.hmacPrev), body: []byte(body)},
					wantID: id,
					forged: &wireReq{header: h(k.hmacPrev), body: []byte(strings.Replace(body, "dhl", "ups", 1))},
				}
			},
		},
		{
			name: "none",
			build: func(time.Time) schemeReqs {
				// Numbers are keyed by exact value: 1.50 is 1.5, 1e2 is 100.
				body := `{"type":"ping", "n":1e2, "amount":1.50}`
				return schemeReqs{
					event:  wireReq{header: hdr("Content-Type", jsonCT), body: []byte(body)},
					wantID: digestID(`{"amount":1.5,"n":100,"type":"ping"}`),
				}
			},
		},
	}
}

func whsecOf(seed string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(seed)) }

// listedEvent is an event as GET /api/events lists it.
type listedEvent struct {
	ID       int64  `json:"id"`
	Provider string `json:"provider"`
	EventID  string `json:"event_id"`
	Status   string `json:"status"`
}

// adminEvents lists up to 500 events matching the query (e.g. "status=done").
func adminEvents(t *testing.T, client *http.Client, admin, token, query string) []listedEvent {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+admin+"/api/events?limit=500&"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Events []listedEvent `json:"events"`
		Next   *int64        `json:"next"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /api/events?%s: %d %s", query, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.Next != nil {
		t.Fatalf("GET /api/events?%s: more than 500 events", query)
	}
	return v.Events
}

// deliveryRecorder is the backend: it records every request and answers 200.
type deliveryRecorder struct {
	mu  sync.Mutex
	got []recordedDelivery
}

type recordedDelivery struct {
	path, query string
	header      http.Header
	body        []byte
}

func (r *deliveryRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, recordedDelivery{path: req.URL.Path, query: req.URL.RawQuery, header: req.Header.Clone(), body: b})
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (r *deliveryRecorder) all() []recordedDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedDelivery(nil), r.got...)
}
