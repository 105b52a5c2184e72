package verify

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// The Slack docs vector ("Verifying requests from Slack"): a slash command,
// so a form post.
const (
	slackDocSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackDocTS     = int64(1531420618)
	slackDocBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackDocSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

	slackSecret      = "slack-signing-secret-0123456789ab"
	slackOtherSecret = "slack-signing-secret-previous-000"
	slackEventBody   = `{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention","user":"U123","text":"hi","ts":"1515449522.000016","channel":"C123"},"type":"event_callback","event_id":"Ev123ABC456","event_time":1515449522}`
)

// signSlack returns an X-Slack-Signature value, computed here independently
// of the package (and checked against slack-go in TestSlackSDK).
func signSlack(secret string, ts int64, body string) string {
	return "v0=" + hex.EncodeToString(hmacSHA256([]byte(secret), "v0:", strconv.FormatInt(ts, 10), ":", body))
}

func slackHeaders(sig string, ts int64, kv ...string) []string {
	return append([]string{"X-Slack-Signature", sig, "X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10)}, kv...)
}

func TestSlackPublishedVector(t *testing.T) {
	if got := signSlack(slackDocSecret, slackDocTS, slackDocBody); got != slackDocSig {
		t.Fatalf("test signer gives %s, Slack docs %s", got, slackDocSig)
	}
	p := mustProvider(t, ProviderConfig{Name: "slack", Scheme: SchemeSlack, Secrets: []string{slackDocSecret}})
	h := headers(slackHeaders(slackDocSig, slackDocTS, "Content-Type", "application/x-www-form-urlencoded")...)
	ev, err := p.Check(Input{Header: h, Body: []byte(slackDocBody)}, time.Unix(slackDocTS, 0))
	if err != nil {
		t.Fatalf("published vector refused: %v", err)
	}
	// A slash command has no id of its own: the key is the digest of its
	// parameters sorted by name.
	form, err := url.ParseQuery(slackDocBody)
	if err != nil {
		t.Fatal(err)
	}
	want := Event{ID: sha256Hex(form.Encode()), ContentHash: sha256Hex(form.Encode())}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("event = %+v, want %+v", ev, want)
	}
	if _, err := p.Check(Input{Header: h, Body: []byte(slackDocBody + "&x=1")}, time.Unix(slackDocTS, 0)); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("tampered vector: err = %v, want ErrUnauthorized", err)
	}
}

func TestSlackCheck(t *testing.T) {
	const ts = int64(1700000000)
	now := time.Unix(ts, 0)
	good := signSlack(slackSecret, ts, slackEventBody)
	hdr := func(sig string) http.Header { return headers(slackHeaders(sig, ts)...) }
	base := ProviderConfig{Name: "slack", Scheme: SchemeSlack, Secrets: []string{slackSecret}}
	const wantID = "Ev123ABC456"
	noID := `{"type":"event_callback","event":{"type":"message"}}`
	runCheckCases(t, base, []checkCase{
		{name: "valid", header: hdr(good), body: slackEventBody, now: now, wantID: wantID},
		{name: "uppercase hex", header: hdr("v0=" + strings.ToUpper(good[3:])), body: slackEventBody, now: now, wantID: wantID},
		{name: "no event_id: body digest", header: hdr(signSlack(slackSecret, ts, noID)), body: noID, now: now,
			wantID: sha256Hex(`{"event":{"type":"message"},"type":"event_callback"}`)},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{slackOtherSecret} },
			header: hdr(good), body: slackEventBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "secret taken verbatim (trailing space)", cfg: func(c *ProviderConfig) { c.Secrets = []string{slackSecret + " "} },
			header: hdr(good), body: slackEventBody, now: now, wantErr: ErrUnauthorized},
		{name: "tampered body", header: hdr(good), body: strings.Replace(slackEventBody, `"hi"`, `"ho"`, 1), now: now, wantErr: ErrUnauthorized},
		{name: "tampered timestamp", header: headers(slackHeaders(good, ts+1)...), body: slackEventBody, now: now, wantErr: ErrUnauthorized},
		{name: "rotated: second secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{slackOtherSecret, slackSecret} },
			header: hdr(good), body: slackEventBody, now: now, wantID: wantID},
		{name: "rotated: first secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{slackSecret, slackOtherSecret} },
			header: hdr(good), body: slackEventBody, now: now, wantID: wantID},
		{name: "missing signature header", header: headers("X-Slack-Request-Timestamp", "1700000000"), body: slackEventBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Slack-Signature header"},
		{name: "missing timestamp header", header: headers("X-Slack-Signature", good), body: slackEventBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Slack-Request-Timestamp header"},
		{name: "no prefix", header: hdr(good[3:]), body: slackEventBody, now: now, wantErr: ErrUnauthorized, wantMsg: "prefix"},
		{name: "v1 prefix", header: hdr("v1=" + good[3:]), body: slackEventBody, now: now, wantErr: ErrUnauthorized},
		{name: "bad hex", header: hdr("v0=" + strings.Repeat("zz", 32)), body: slackEventBody, now: now, wantErr: ErrUnauthorized, wantMsg: "64 hex"},
		{name: "short", header: hdr(good[:len(good)-2]), body: slackEventBody, now: now, wantErr: ErrUnauthorized},
		{name: "two signatures", header: hdr(good + "," + good), body: slackEventBody, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: hdr(good + strings.Repeat("0", maxSignatureHeaderLen)), body: slackEventBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "non-numeric timestamp", header: headers("X-Slack-Signature", good, "X-Slack-Request-Timestamp", "now"), body: slackEventBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "malformed X-Slack-Request-Timestamp"},
		{name: "negative timestamp", header: headers("X-Slack-Signature", good, "X-Slack-Request-Timestamp", "-1700000000"), body: slackEventBody, now: now,
			wantErr: ErrUnauthorized},
		{name: "timestamp with a space", header: headers("X-Slack-Signature", good, "X-Slack-Request-Timestamp", "1700000000 "), body: slackEventBody, now: now,
			wantErr: ErrUnauthorized},
		{name: "stale", header: hdr(good), body: slackEventBody, now: now.Add(5*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: hdr(good), body: slackEventBody, now: now.Add(-5*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "within tolerance", header: hdr(good), body: slackEventBody, now: now.Add(-4 * time.Minute), wantID: wantID},
		{name: "configured tolerance", cfg: func(c *ProviderConfig) { c.Tolerance = time.Minute },
			header: hdr(good), body: slackEventBody, now: now.Add(2 * time.Minute), wantErr: ErrUnauthorized},
	})
}

func TestSlackEventType(t *testing.T) {
	const ts = int64(1700000000)
	p := mustProvider(t, ProviderConfig{Name: "slack", Scheme: SchemeSlack, Secrets: []string{slackSecret}})
	for _, tc := range []struct{ body, wantID, wantType string }{
		{slackEventBody, "Ev123ABC456", "app_mention"},
		{`{"type":"event_callback","event_id":"Ev1","event":{"user":"U1"}}`, "Ev1", "event_callback"},
		{`{"type":"app_rate_limited","minute_rate_limited":1518467820}`, "", "app_rate_limited"},
		{`{"event_id":12,"event":"x"}`, "", ""},
	} {
		ev, err := p.Check(Input{Header: headers(slackHeaders(signSlack(slackSecret, ts, tc.body), ts)...), Body: []byte(tc.body)}, time.Unix(ts, 0))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if tc.wantID != "" && ev.ID != tc.wantID {
			t.Errorf("%s: ID = %q, want %q", tc.body, ev.ID, tc.wantID)
		}
		if tc.wantID == "" && !strings.HasPrefix(ev.ID, "sha256:") {
			t.Errorf("%s: ID = %q, want the body digest", tc.body, ev.ID)
		}
		if ev.Type != tc.wantType {
			t.Errorf("%s: Type = %q, want %q", tc.body, ev.Type, tc.wantType)
		}
	}
}

func TestSlackURLVerification(t *testing.T) {
	const ts = int64(1700000000)
	now := time.Unix(ts, 0)
	// The Events API docs' example handshake.
	const body = `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	const want = `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`
	p := mustProvider(t, ProviderConfig{Name: "slack", Scheme: SchemeSlack, Secrets: []string{slackOtherSecret, slackSecret}})
	check := func(h http.Header, body string, at time.Time) (Event, error) {
		return p.Check(Input{Header: h, Body: []byte(body)}, at)
	}

	ev, err := check(headers(slackHeaders(signSlack(slackSecret, ts, body), ts)...), body, now)
	if err != nil {
		t.Fatalf("signed handshake refused: %v", err)
	}
	if !reflect.DeepEqual(ev, Event{Handshake: []byte(want)}) {
		t.Errorf("event = %+v (handshake %s), want only the handshake %s", ev, ev.Handshake, want)
	}

	// A challenge needing escapes is echoed as valid JSON.
	const odd = `{"type":"url_verification","challenge":"a\"b\\c\u00e9\n"}`
	ev, err = check(headers(slackHeaders(signSlack(slackSecret, ts, odd), ts)...), odd, now)
	if err != nil || string(ev.Handshake) != `{"challenge":"a\"b\\cé\n"}` {
		t.Errorf("escaped challenge: %s, %v", ev.Handshake, err)
	}

	for _, tc := range []struct {
		name    string
		header  http.Header
		body    string
		at      time.Time
		wantErr error
	}{
		{"unsigned", headers(), body, now, ErrBadRequest},
		{"no timestamp", headers("X-Slack-Signature", signSlack(slackSecret, ts, body)), body, now, ErrBadRequest},
		{"forged (unknown secret)", headers(slackHeaders(signSlack("attacker", ts, body), ts)...), body, now, ErrUnauthorized},
		{"signature of another body", headers(slackHeaders(signSlack(slackSecret, ts, slackEventBody), ts)...), body, now, ErrUnauthorized},
		{"stale", headers(slackHeaders(signSlack(slackSecret, ts, body), ts)...), body, now.Add(time.Hour), ErrUnauthorized},
		{"no challenge", headers(slackHeaders(signSlack(slackSecret, ts, `{"type":"url_verification"}`), ts)...), `{"type":"url_verification"}`, now, ErrBadRequest},
		{"numeric challenge", headers(slackHeaders(signSlack(slackSecret, ts, `{"type":"url_verification","challenge":1}`), ts)...),
			`{"type":"url_verification","challenge":1}`, now, ErrBadRequest},
	} {
		ev, err := check(tc.header, tc.body, tc.at)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.wantErr)
		}
		if ev.Handshake != nil {
			t.Errorf("%s: handshake %s answered", tc.name, ev.Handshake)
		}
	}
}

// TestSlackSDK checks the test signer with slack-go's verifier (an
// independent implementation) and that the scheme accepts exactly what
// slack-go accepts for the same requests.
func TestSlackSDK(t *testing.T) {
	now := time.Now()
	ts := now.Unix()
	p := mustProvider(t, ProviderConfig{Name: "slack", Scheme: SchemeSlack, Secrets: []string{slackSecret}})
	good := signSlack(slackSecret, ts, slackEventBody)
	for _, tc := range []struct {
		name   string
		sig    string
		ts     int64
		body   string
		accept bool
	}{
		{"signed", good, ts, slackEventBody, true},
		{"form post", signSlack(slackSecret, ts, slackDocBody), ts, slackDocBody, true},
		{"empty body", signSlack(slackSecret, ts, ""), ts, "", true},
		{"tampered body", good, ts, slackEventBody + " ", false},
		{"other secret", signSlack(slackOtherSecret, ts, slackEventBody), ts, slackEventBody, false},
		{"other timestamp", good, ts - 1, slackEventBody, false},
		{"stale", signSlack(slackSecret, ts-600, slackEventBody), ts - 600, slackEventBody, false},
		{"future", signSlack(slackSecret, ts+600, slackEventBody), ts + 600, slackEventBody, false},
	} {
		h := headers(slackHeaders(tc.sig, tc.ts)...)
		sdkErr := func() error {
			sv, err := slack.NewSecretsVerifier(h, slackSecret)
			if err != nil {
				return err
			}
			if _, err := sv.Write([]byte(tc.body)); err != nil {
				return err
			}
			return sv.Ensure()
		}()
		if (sdkErr == nil) != tc.accept {
			t.Errorf("%s: slack-go error = %v, want accepted %v", tc.name, sdkErr, tc.accept)
		}
		_, err := p.Check(Input{Header: h, Body: []byte(tc.body)}, now)
		if (err == nil) != tc.accept {
			t.Errorf("%s: Check error = %v, want accepted %v", tc.name, err, tc.accept)
		}
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: err = %v, want ErrUnauthorized", tc.name, err)
		}
	}
}

// TestErrorsNeverEchoSecretsOrSignaturesSetA: the errors of the slack,
// zoom, shopify, paddle, linear, intercom and twilio schemes are shown to
// the sender; none may contain a secret or a received signature value,
// whatever is wrong with the request.
func TestErrorsNeverEchoSecretsOrSignaturesSetA(t *testing.T) {
	const ts = int64(1700000000)
	const body = `{"id":"1","event_id":"e1","webhookTimestamp":1700000000000}`
	now := time.Unix(ts, 0)
	type attempt struct {
		scheme, secret string
		sigValue       string      // the signature value that must not be echoed
		headers        http.Header // a request signed with another secret
	}
	wrong := "attacker-secret-123456"
	slackSig := signSlack(wrong, ts, body)
	zoomSig := signZoom(wrong, ts, body)
	shopifySig := signShopify(wrong, body)
	paddleSig := signPaddle(wrong, ts, body)
	linearSig := signLinear(wrong, body)
	intercomSig := signIntercom(wrong, body)
	twilioSig := signTwilio(wrong, twilioURL, nil)
	attempts := []attempt{
		{SchemeSlack, slackSecret, slackSig[3:], headers(slackHeaders(slackSig, ts)...)},
		{SchemeSlack, slackSecret, slackSig[3:], headers(slackHeaders(slackSig+"x", ts)...)},
		{SchemeSlack, slackSecret, slackSig[3:], headers(slackHeaders(slackSig, ts+3600)...)},
		{SchemeZoom, zoomSecret, zoomSig[3:], zoomHeaders(zoomSig, ts)},
		{SchemeZoom, zoomSecret, zoomSig[3:], zoomHeaders("v1="+zoomSig[3:], ts)},
		{SchemeShopify, shopifySecret, shopifySig, headers("X-Shopify-Hmac-Sha256", shopifySig)},
		{SchemeShopify, shopifySecret, shopifySig, headers("X-Shopify-Hmac-Sha256", shopifySig+"A")},
		{SchemePaddle, paddleSecret, paddleSig, headers("Paddle-Signature", fmt.Sprintf("ts=%d;h1=%s", ts, paddleSig))},
		{SchemePaddle, paddleSecret, paddleSig, headers("Paddle-Signature", "h1="+paddleSig)},
		{SchemePaddle, paddleSecret, paddleSig, headers("Paddle-Signature", fmt.Sprintf("ts=%d;h1=%s;bad", ts, paddleSig))},
		{SchemeLinear, linearSecret, linearSig, headers("Linear-Signature", linearSig)},
		{SchemeLinear, linearSecret, linearSig, headers("Linear-Signature", "sha256="+linearSig)},
		{SchemeIntercom, intercomSecret, intercomSig[5:], headers("X-Hub-Signature", intercomSig)},
		{SchemeIntercom, intercomSecret, intercomSig[5:], headers("X-Hub-Signature", intercomSig+"0")},
		{SchemeTwilio, twilioToken, twilioSig, headers("X-Twilio-Signature", twilioSig)},
		{SchemeTwilio, twilioToken, twilioSig, headers("X-Twilio-Signature", twilioSig+"=")},
	}
	for _, a := range attempts {
		p := mustProvider(t, ProviderConfig{Name: a.scheme, Scheme: a.scheme, Secrets: []string{a.secret}, PublicURL: twilioURL})
		_, err := p.Check(Input{Header: a.headers, Body: []byte(body)}, now)
		if err == nil {
			t.Fatalf("%s: %v accepted", a.scheme, a.headers)
		}
		if msg := err.Error(); strings.Contains(msg, a.sigValue) || strings.Contains(msg, a.secret) || strings.Contains(msg, wrong) {
			t.Errorf("%s: error %q echoes a secret or signature", a.scheme, msg)
		}
	}
}
