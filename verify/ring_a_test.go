package verify

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The computed vectors' inputs (no provider publishes one for these
// schemes but Razorpay; each was also recomputed with `openssl dgst`).
const (
	ringASecret      = "whguard-2nd-ring-secret"
	ringAOtherSecret = "whguard-2nd-ring-previous"
	ringABody        = `{"id":"evt_1","type":"test.event"}`
)

// bodyHMACFixture is one body-HMAC scheme as its provider documents it, and
// a realistic request of it.
type bodyHMACFixture struct {
	scheme, header, prefix string
	newHash                func() hash.Hash
	base64                 bool
	doc                    string // the provider's page the vector follows
	vector                 string // header value for ringASecret over ringABody
	vectorID               string // Check's id for the vector ("" = body digest)
	body                   string // a realistic event
	kv                     []string
	wantID, wantType       string // for body with kv ("" id = body digest)
	idSigned               bool
	getAccepted            bool // a GET handshake is declared
}

var bodyHMACFixtures = []bodyHMACFixture{
	{scheme: SchemeTypeform, header: "Typeform-Signature", prefix: "sha256=", newHash: sha256.New, base64: true,
		doc: "https://www.typeform.com/developers/webhooks/secure-your-webhooks/", vector: "sha256=IjmX75/wTCzi2Gv1rtAKskFj4b1prj7o2omB5CnISvc=",
		body: `{"event_id":"01HV2N8J3K","event_type":"form_response","form_response":{"form_id":"lT4Z3j"}}`, wantID: "01HV2N8J3K", wantType: "form_response", idSigned: true},
	{scheme: SchemeRazorpay, header: "X-Razorpay-Signature", newHash: sha256.New,
		doc: "https://razorpay.com/docs/webhooks/validate-test/", vector: "223997ef9ff04c2ce2d86bf5aed00ab24163e1bd69ae3ee8da8981e429c84af7",
		body: `{"entity":"event","event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_1"}}}}`,
		kv:   []string{"X-Razorpay-Event-Id", "KfVwZ2ZJd1zr9x"}, wantID: "KfVwZ2ZJd1zr9x", wantType: "payment.captured"},
	{scheme: SchemeVercel, header: "X-Vercel-Signature", newHash: sha1.New,
		doc: "https://vercel.com/docs/webhooks", vector: "2f11a7543c9077270ccdaa13f9e4ec7e98248b03", vectorID: "evt_1",
		body: `{"id":"uEh4ZQm3yOn6ykxS4aFZ9t","type":"deployment.created","payload":{}}`, wantID: "uEh4ZQm3yOn6ykxS4aFZ9t", wantType: "deployment.created", idSigned: true},
	{scheme: SchemeBitbucket, header: "X-Hub-Signature", prefix: "sha256=", newHash: sha256.New,
		doc: "https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/", vector: "sha256=223997ef9ff04c2ce2d86bf5aed00ab24163e1bd69ae3ee8da8981e429c84af7",
		body:   `{"push":{"changes":[]},"repository":{"full_name":"team/repo"}}`,
		kv:     []string{"X-Request-UUID", "9d1c1f3e-0b1a-4c4e-8f3a-6a1b2c3d4e5f", "X-Event-Key", "repo:push", "X-Hook-UUID", "h-1", "X-Attempt-Number", "2"},
		wantID: "9d1c1f3e-0b1a-4c4e-8f3a-6a1b2c3d4e5f", wantType: "repo:push"},
	{scheme: SchemeAtlassian, header: "X-Hub-Signature", prefix: "sha256=", newHash: sha256.New,
		doc: "https://developer.atlassian.com/cloud/jira/platform/webhooks/", vector: "sha256=223997ef9ff04c2ce2d86bf5aed00ab24163e1bd69ae3ee8da8981e429c84af7",
		body: `{"timestamp":1700000000000,"webhookEvent":"jira:issue_updated","issue":{"key":"TEST-1"}}`,
		kv:   []string{"X-Atlassian-Webhook-Identifier", "1700000000000-7", "X-Atlassian-Webhook-Retry", "1"}, wantID: "1700000000000-7", wantType: "jira:issue_updated"},
	{scheme: SchemeMeta, header: "X-Hub-Signature-256", prefix: "sha256=", newHash: sha256.New,
		doc: "https://developers.facebook.com/docs/graph-api/webhooks/getting-started/", vector: "sha256=223997ef9ff04c2ce2d86bf5aed00ab24163e1bd69ae3ee8da8981e429c84af7",
		body:     `{"object":"page","entry":[{"id":"123","time":1700000000,"changes":[{"field":"feed","value":{"item":"status"}}]}]}`,
		wantType: "page.feed", idSigned: true, getAccepted: true},
	{scheme: SchemeSentry, header: "Sentry-Hook-Signature", newHash: sha256.New,
		doc: "https://docs.sentry.io/integrations/integration-platform/webhooks/", vector: "223997ef9ff04c2ce2d86bf5aed00ab24163e1bd69ae3ee8da8981e429c84af7",
		body: `{"action":"created","data":{"issue":{"id":"1"}},"installation":{"uuid":"7a485448"}}`,
		// A Sentry-Hook-Timestamp years old: not signed, so not looked at.
		kv:     []string{"Request-ID", "0b5a3f9e-1b61-4b44-a2a8-3c5d0e1f2a3b", "Sentry-Hook-Resource", "issue", "Sentry-Hook-Timestamp", "1"},
		wantID: "0b5a3f9e-1b61-4b44-a2a8-3c5d0e1f2a3b", wantType: "issue.created"},
	{scheme: SchemePaystack, header: "X-Paystack-Signature", newHash: sha512.New,
		doc: "https://paystack.com/docs/payments/webhooks/", vector: "c882f299b48464ba3d6e9313f23b6d3eafbd3ca6431550768d38d43f3772e8c5e2e026e305be767783713653408f12440462cc433db15bafd95017b72b94d0a1",
		body: `{"event":"charge.success","data":{"id":302961,"reference":"qTPrJoy9Bx"}}`, wantType: "charge.success", idSigned: true},
	{scheme: SchemeTwitter, header: "X-Twitter-Webhooks-Signature", prefix: "sha256=", newHash: sha256.New, base64: true,
		doc: "https://docs.x.com/x-api/webhooks/quickstart", vector: "sha256=IjmX75/wTCzi2Gv1rtAKskFj4b1prj7o2omB5CnISvc=",
		body: `{"for_user_id":"2244994945","tweet_create_events":[{"id_str":"1"}]}`, wantType: "tweet_create_events", idSigned: true, getAccepted: true},
}

// sign is the fixture's signature of body under secret, computed here.
func (f bodyHMACFixture) sign(secret, body string) string {
	return signGenericHMAC(f.newHash, f.base64, f.prefix, secret, body)
}

// config is a provider configuration of the fixture's scheme with secrets.
func (f bodyHMACFixture) config(secrets ...string) ProviderConfig {
	cfg := minimalConfig(f.scheme)
	cfg.Name, cfg.Secrets = f.scheme, secrets
	return cfg
}

// canonicalDigest is the id Check gives a JSON body with no id of its own.
func canonicalDigest(t *testing.T, body string) string {
	t.Helper()
	c, err := Canonicalize([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return sha256Hex(string(c))
}

// TestBodyHMACVectors: the computed vectors verify through the public path,
// and the test's own signer agrees with them.
func TestBodyHMACVectors(t *testing.T) {
	for _, f := range bodyHMACFixtures {
		t.Run(f.scheme, func(t *testing.T) {
			if got := f.sign(ringASecret, ringABody); got != f.vector {
				t.Fatalf("test signer %s, vector %s (%s)", got, f.vector, f.doc)
			}
			ev, err := mustProvider(t, f.config(ringASecret)).Check(Input{Header: headers(f.header, f.vector), Body: []byte(ringABody)}, time.Now())
			wantID := f.vectorID
			if wantID == "" {
				wantID = canonicalDigest(t, ringABody)
			}
			if err != nil || ev.ID != wantID || ev.ContentHash != canonicalDigest(t, ringABody) {
				t.Fatalf("vector: %+v, %v; want id %s", ev, err, wantID)
			}
		})
	}
}

// TestBodyHMACCheck: each scheme's table through NewProvider and Check:
// valid, tampered, wrong secret, rotation, missing and malformed headers.
func TestBodyHMACCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, f := range bodyHMACFixtures {
		t.Run(f.scheme, func(t *testing.T) {
			good := f.sign(ringASecret, f.body)
			value := strings.TrimPrefix(good, f.prefix)
			with := func(sig string, kv ...string) http.Header {
				return headers(append(append([]string{f.header, sig}, f.kv...), kv...)...)
			}
			wantID := f.wantID
			if wantID == "" {
				wantID = canonicalDigest(t, f.body)
			}
			var otherEncoding string
			if f.base64 {
				otherEncoding = hex.EncodeToString(mustDecodeBase64(t, value))
			} else {
				otherEncoding = base64.StdEncoding.EncodeToString(mustDecodeHex(t, value))
			}
			cases := []checkCase{
				{name: "valid", header: with(good), body: f.body, now: now, wantID: wantID},
				{name: "no timestamp: any clock", header: with(good), body: f.body, now: time.Unix(0, 0), wantID: wantID},
				{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{ringAOtherSecret} },
					header: with(good), body: f.body, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
				{name: "secret taken verbatim", cfg: func(c *ProviderConfig) { c.Secrets = []string{ringASecret + " "} },
					header: with(good), body: f.body, now: now, wantErr: ErrUnauthorized},
				{name: "tampered body", header: with(good), body: f.body + " ", now: now, wantErr: ErrUnauthorized},
				{name: "rotation: old secret still verifies", cfg: func(c *ProviderConfig) { c.Secrets = []string{ringAOtherSecret, ringASecret} },
					header: with(good), body: f.body, now: now, wantID: wantID},
				{name: "rotation: new secret verifies", cfg: func(c *ProviderConfig) { c.Secrets = []string{ringASecret, ringAOtherSecret} },
					header: with(good), body: f.body, now: now, wantID: wantID},
				{name: "missing header", header: headers(f.kv...), body: f.body, now: now, wantErr: ErrBadRequest, wantMsg: "missing " + f.header + " header"},
				{name: "other encoding", header: with(f.prefix + otherEncoding), body: f.body, now: now, wantErr: ErrUnauthorized},
				{name: "short", header: with(good[:len(good)-1]), body: f.body, now: now, wantErr: ErrUnauthorized},
				{name: "two signatures", header: with(good + "," + good), body: f.body, now: now, wantErr: ErrUnauthorized},
				{name: "space before", header: with(" x" + good), body: f.body, now: now, wantErr: ErrUnauthorized},
				{name: "too long", header: with(good + strings.Repeat("0", maxSignatureHeaderLen)), body: f.body, now: now,
					wantErr: ErrUnauthorized, wantMsg: "longer than"},
			}
			if f.prefix != "" {
				cases = append(cases,
					checkCase{name: "no prefix", header: with(value), body: f.body, now: now, wantErr: ErrUnauthorized, wantMsg: "prefix"},
					checkCase{name: "sha1 prefix", header: with("sha1=" + value), body: f.body, now: now, wantErr: ErrUnauthorized, wantMsg: "prefix"})
			} else {
				cases = append(cases, checkCase{name: "unexpected prefix", header: with("sha256=" + value), body: f.body, now: now, wantErr: ErrUnauthorized})
			}
			if !f.base64 {
				cases = append(cases,
					checkCase{name: "uppercase hex", header: with(f.prefix + strings.ToUpper(value)), body: f.body, now: now, wantID: wantID},
					checkCase{name: "not hex", header: with(f.prefix + strings.Repeat("z", len(value))), body: f.body, now: now, wantErr: ErrUnauthorized})
			} else {
				cases = append(cases, checkCase{name: "unpadded", header: with(strings.TrimRight(good, "=")), body: f.body, now: now, wantErr: ErrUnauthorized})
			}
			runCheckCases(t, f.config(ringASecret), cases)

			p := mustProvider(t, f.config(ringASecret))
			ev, err := p.Check(Input{Header: with(good), Body: []byte(f.body)}, now)
			if err != nil || ev.Type != f.wantType {
				t.Errorf("event %+v, %v; want type %q", ev, err, f.wantType)
			}
			if _, err := p.Check(Input{Header: with(f.sign(ringAOtherSecret, f.body)), Body: []byte(f.body)}, now); Reason(err) != ReasonSignatureMismatch {
				t.Errorf("wrong signature: reason %q", Reason(err))
			}
			if err := p.Precheck(headers(f.kv...), "", "", now); Reason(err) != ReasonMissingHeader {
				t.Errorf("Precheck without the signature header: %v", err)
			}
		})
	}
}

// TestBodyHMACProperties: what the registry and the Provider say of each
// scheme: no tolerance, nothing to re-sign (Resign leaves the received
// signature as it is), which ids are signed, and which methods come.
func TestBodyHMACProperties(t *testing.T) {
	for _, f := range bodyHMACFixtures {
		p := mustProvider(t, f.config(ringASecret))
		if DefaultTolerance(f.scheme) != 0 || ResignSupport(f.scheme) != ResignNotNeeded || EventTypeSource(f.scheme) == "" {
			t.Errorf("%s: tolerance %v, resign %q, type from %q", f.scheme, DefaultTolerance(f.scheme), ResignSupport(f.scheme), EventTypeSource(f.scheme))
		}
		good := f.sign(ringASecret, f.body)
		h := headers(append([]string{f.header, good}, f.kv...)...)
		before := h.Clone()
		p.Resign(h, []byte(f.body), time.Now())
		p.SignUnsigned(h, []byte(f.body), time.Now())
		p.Unsign(h)
		if p.CanResign() || h.Get(f.header) != good || len(h) != len(before) {
			t.Errorf("%s: CanResign %v; headers after Resign/Unsign %v", f.scheme, p.CanResign(), h)
		}
		if p.IDSigned() != f.idSigned {
			t.Errorf("%s: IDSigned = %v, want %v", f.scheme, p.IDSigned(), f.idSigned)
		}
		if !p.Accepts(http.MethodPost) || p.Accepts(http.MethodGet) != f.getAccepted || p.Accepts(http.MethodPut) {
			t.Errorf("%s: Accepts POST %v, GET %v (want %v), PUT %v", f.scheme, p.Accepts(http.MethodPost), p.Accepts(http.MethodGet), f.getAccepted, p.Accepts(http.MethodPut))
		}
		// A GET carrying no handshake is refused, whatever the scheme.
		ev, err := p.Check(Input{Header: h, Body: nil, Method: http.MethodGet, RawQuery: "hub.mode=subscribe&x=1"}, time.Now())
		if err == nil || Reason(err) != ReasonUnsupportedEvent || ev.Handshake != nil {
			t.Errorf("%s: GET without a challenge: %+v, %v", f.scheme, ev, err)
		}
	}
}

// mustDecodeHex decodes a hex signature of the test.
func mustDecodeHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustDecodeBase64 decodes a base64 signature of the test.
func mustDecodeBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
