package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"
	svix "github.com/svix/svix-webhooks/go"
)

// A delivery made after a backlog: the sender signed 10 minutes ago.
const resignAge = 10 * time.Minute

// wideTolerance lets whguard accept the old signature, as it would have
// when the request arrived.
const wideTolerance = time.Hour

// resignCase is one scheme checked with its official SDK: sign builds the
// headers the sender sent at ts; sdkVerify is the SDK's own verifier at its
// default tolerance (against the real clock: the SDKs read time.Now).
type resignCase struct {
	name      string
	cfg       ProviderConfig
	body      []byte
	sign      func(t *testing.T, ts time.Time) http.Header
	sdkVerify func(h http.Header, body []byte) error
}

func sdkResignCases(t *testing.T) []resignCase {
	stripeBody := []byte(`{"id":"evt_resign","object":"event","type":"invoice.paid","pending_webhooks":1}`)
	swBody := []byte(`{"type":"user.created","data":{"id":"u_1"}}`)
	std, err := standardwebhooks.NewWebhook(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := svix.NewWebhook(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	standardHeaders := func(prefix string, sign func(string, time.Time, []byte) (string, error)) func(*testing.T, time.Time) http.Header {
		return func(t *testing.T, ts time.Time) http.Header {
			sig, err := sign("msg_resign", ts, swBody)
			if err != nil {
				t.Fatal(err)
			}
			return headers(prefix+"id", "msg_resign", prefix+"timestamp", strconv.FormatInt(ts.Unix(), 10), prefix+"signature", sig)
		}
	}
	return []resignCase{
		{
			name: "stripe", body: stripeBody,
			cfg: ProviderConfig{Scheme: SchemeStripe, Secrets: []string{stripeSecret}},
			sign: func(_ *testing.T, ts time.Time) http.Header {
				p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: stripeBody, Secret: stripeSecret, Timestamp: ts})
				return headers("Stripe-Signature", p.Header)
			},
			sdkVerify: func(h http.Header, body []byte) error {
				return webhook.ValidatePayload(body, h.Get("Stripe-Signature"), stripeSecret)
			},
		},
		{
			name: "standard", body: swBody,
			cfg:  ProviderConfig{Scheme: SchemeStandard, Secrets: []string{swSecret}},
			sign: standardHeaders("webhook-", std.Sign),
			sdkVerify: func(h http.Header, body []byte) error {
				return std.Verify(body, h)
			},
		},
		{
			name: "svix", body: swBody,
			cfg:  ProviderConfig{Scheme: SchemeSvix, Secrets: []string{swSecret}},
			sign: standardHeaders("svix-", sv.Sign),
			sdkVerify: func(h http.Header, body []byte) error {
				return sv.Verify(body, h)
			},
		},
		{
			// Svix's library also reads the webhook-* names: the new
			// signature goes under the names the request used.
			name: "svix with webhook-* headers", body: swBody,
			cfg:  ProviderConfig{Scheme: SchemeSvix, Secrets: []string{swSecret}},
			sign: standardHeaders("webhook-", sv.Sign),
			sdkVerify: func(h http.Header, body []byte) error {
				if h.Get("Svix-Signature") != "" {
					t.Error("svix-* headers added to a request that used webhook-*")
				}
				return sv.Verify(body, h)
			},
		},
		{
			// Slack has no signer in slack-go: signed as its docs say,
			// v0= hex(HMAC-SHA256(secret, "v0:{ts}:{body}")).
			name: "slack", body: []byte(slackEventBody),
			cfg: ProviderConfig{Scheme: SchemeSlack, Secrets: []string{slackSecret}},
			sign: func(_ *testing.T, ts time.Time) http.Header {
				return headers(slackHeaders(signSlack(slackSecret, ts.Unix(), slackEventBody), ts.Unix())...)
			},
			sdkVerify: func(h http.Header, body []byte) error {
				v, err := slack.NewSecretsVerifier(h, slackSecret)
				if err != nil {
					return err
				}
				if _, err := v.Write(body); err != nil {
					return err
				}
				return v.Ensure()
			},
		},
	}
}

// Signed by the official SDK 10 minutes ago, accepted by whguard with a wide
// tolerance, re-signed now: the SDK's own verifier at its default
// tolerance accepts the new headers, and refuses the original ones (so the
// check could fail).
func TestResignAcceptedBySDK(t *testing.T) {
	for _, tc := range sdkResignCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name, cfg.Tolerance = tc.name, wideTolerance
			p := mustProvider(t, cfg)
			if !p.CanResign() {
				t.Fatal("CanResign = false")
			}
			now := time.Now()
			h := tc.sign(t, now.Add(-resignAge))
			body := append([]byte(nil), tc.body...)
			if _, err := p.Check(Input{Header: h, Body: body}, now); err != nil {
				t.Fatalf("whguard refuses the SDK's signature: %v", err)
			}
			if err := tc.sdkVerify(h, body); err == nil {
				t.Fatal("the SDK accepts the 10-minute-old original: this test proves nothing")
			}

			resigned := h.Clone()
			resigned.Set("X-Other", "kept")
			p.Resign(resigned, body, now)
			if err := tc.sdkVerify(resigned, body); err != nil {
				t.Fatalf("the SDK refuses the re-signed headers: %v\n%v", err, resigned)
			}
			if !bytes.Equal(body, tc.body) {
				t.Fatal("Resign changed the body")
			}
			if resigned.Get("X-Other") != "kept" {
				t.Fatal("Resign dropped another header")
			}
			for name := range h {
				if _, ok := resigned[name]; !ok {
					t.Errorf("Resign dropped %s", name)
				}
			}
			// whguard accepts it at its own default tolerance too.
			cfg.Tolerance = 0
			if _, err := mustProvider(t, cfg).Check(Input{Header: resigned, Body: body}, now); err != nil {
				t.Fatalf("whguard refuses its own re-signature: %v", err)
			}
		})
	}
}

// The schemes without an SDK on the proxy (paddle, zoom) and generic hmac:
// an old request, re-signed now, verifies with whguard at a tight tolerance
// and with the current secret alone, although the sender signed with the
// previous one.
func TestResignRoundTrip(t *testing.T) {
	const current, previous = "secret-current-0123456789", "secret-previous-0123456789"
	hexMAC := func(secret string, parts ...string) string {
		return hex.EncodeToString(hmacSHA256([]byte(secret), parts...))
	}
	zoomBody := `{"event":"meeting.started","payload":{"object":{"id":"1"}}}`
	paddleBody := `{"event_id":"evt_01","event_type":"transaction.paid","data":{}}`
	hmacBody := `{"order":42}`
	cases := []struct {
		name string
		cfg  ProviderConfig
		body string
		sign func(ts string) http.Header
	}{
		{
			name: "paddle", body: paddleBody,
			cfg: ProviderConfig{Scheme: SchemePaddle},
			sign: func(ts string) http.Header {
				return headers("Paddle-Signature", "ts="+ts+";h1="+hexMAC(previous, ts, ":", paddleBody))
			},
		},
		{
			name: "zoom", body: zoomBody,
			cfg: ProviderConfig{Scheme: SchemeZoom},
			sign: func(ts string) http.Header {
				return headers("x-zm-request-timestamp", ts, "x-zm-signature", "v0="+hexMAC(previous, "v0:", ts, ":", zoomBody))
			},
		},
		{
			name: "hmac hex", body: hmacBody,
			cfg: ProviderConfig{Scheme: SchemeHMAC, IDHeader: "X-Id", HMAC: HMACConfig{SignatureHeader: "X-Sig", Prefix: "sha256=",
				TimestampHeader: "X-Ts", SignedContent: "{id}|{timestamp}|{body}"}},
			sign: func(ts string) http.Header {
				return headers("X-Id", "ord-42", "X-Ts", ts, "X-Sig", "sha256="+hexMAC(previous, "ord-42|", ts, "|", hmacBody))
			},
		},
		{
			name: "hmac sha512 base64", body: hmacBody,
			cfg: ProviderConfig{Scheme: SchemeHMAC, HMAC: HMACConfig{Algorithm: "sha512", Encoding: "base64", SignatureHeader: "X-Sig",
				TimestampHeader: "X-Ts", SignedContent: "{timestamp}.{body}"}},
			sign: func(ts string) http.Header {
				m := hmac.New(sha512.New, []byte(previous))
				m.Write([]byte(ts + "." + hmacBody))
				return headers("X-Ts", ts, "X-Sig", base64.StdEncoding.EncodeToString(m.Sum(nil)))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			old := strconv.FormatInt(now.Add(-resignAge).Unix(), 10)
			cfg := tc.cfg
			cfg.Name, cfg.Secrets, cfg.Tolerance = tc.name, []string{current, previous}, wideTolerance
			p := mustProvider(t, cfg)
			h := tc.sign(old)
			if _, err := p.Check(Input{Header: h, Body: []byte(tc.body)}, now); err != nil {
				t.Fatalf("original refused: %v", err)
			}
			if !p.CanResign() {
				t.Fatal("CanResign = false")
			}
			p.Resign(h, []byte(tc.body), now)

			cfg.Secrets, cfg.Tolerance = []string{current}, time.Second
			tight := mustProvider(t, cfg)
			if _, err := tight.Check(Input{Header: h, Body: []byte(tc.body)}, now); err != nil {
				t.Fatalf("re-signed request refused with the current secret at 1s tolerance: %v\n%v", err, h)
			}
			if _, err := tight.Check(Input{Header: h, Body: []byte(tc.body)}, now.Add(resignAge)); err == nil {
				t.Fatal("re-signed request accepted 10 minutes later at 1s tolerance: the check proves nothing")
			}
		})
	}
}

// CanResign agrees with the registry's ResignSupport; schemes that cannot
// re-sign leave the headers alone.
func TestCanResignMatchesRegistry(t *testing.T) {
	for _, s := range KnownSchemes() {
		cfg := minimalConfig(s)
		p := mustProvider(t, cfg)
		support := ResignSupport(s)
		switch {
		case s == SchemeHMAC:
			if support != ResignYes || p.CanResign() {
				t.Errorf("hmac: ResignSupport %q, CanResign without a timestamp header %v", support, p.CanResign())
			}
			cfg.HMAC.TimestampHeader, cfg.HMAC.SignedContent = "X-Ts", "{timestamp}.{body}"
			if !mustProvider(t, cfg).CanResign() {
				t.Error("hmac with a timestamp header: CanResign = false")
			}
		case p.CanResign() != (support == ResignYes):
			t.Errorf("%s: ResignSupport %q, CanResign %v", s, support, p.CanResign())
		}
		if !p.CanResign() {
			h := headers("X-Signature", "unchanged")
			p.Resign(h, []byte("{}"), time.Now())
			if len(h) != 1 || h.Get("X-Signature") != "unchanged" {
				t.Errorf("%s: Resign changed the headers of a scheme that cannot re-sign: %v", s, h)
			}
		}
	}
	if ResignSupport("nope") != "" {
		t.Error("ResignSupport of an unknown scheme is not empty")
	}
	for s, want := range map[string]string{SchemeGitHub: ResignNotNeeded, SchemeSendGrid: ResignPublicKey,
		SchemeDiscord: ResignPublicKey, SchemeLinear: ResignBodyTimestamp, SchemeStripe: ResignYes} {
		if got := ResignSupport(s); got != want {
			t.Errorf("ResignSupport(%q) = %q, want %q", s, got, want)
		}
	}
}
