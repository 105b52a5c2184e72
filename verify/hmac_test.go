package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// caseB is one row of the table tests of the square, sendgrid, pagerduty,
// discord, gitlab and hmac schemes: like checkCase, plus the received query
// and the event's type, reply and handshake.
type caseB struct {
	name    string
	cfg     func(*ProviderConfig) // changes to the base config, may be nil
	header  http.Header
	body    string
	query   string // Input.RawQuery
	now     time.Time
	wantErr error  // nil: must verify
	wantMsg string // a substring of the error, when set
	// Checked when wantErr is nil: ID when non-empty ("digest" means the
	// content digest), Type always, Reply and Handshake always (nil when "").
	wantID        string
	wantType      string
	wantReply     string
	wantHandshake string
}

// runCasesB runs the rows against NewProvider(base with the row's changes).
// Besides the verdict it checks that an error wraps exactly one sentinel
// and never contains a secret, the public key or a long header value (a
// signature or token).
func runCasesB(t *testing.T, base ProviderConfig, cases []caseB) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Secrets = append([]string(nil), base.Secrets...)
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p := mustProvider(t, cfg)
			ev, err := p.Check(Input{Header: tc.header, Body: []byte(tc.body), RawQuery: tc.query}, tc.now)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Check: unexpected error %v", err)
				}
				checkEventB(t, ev, tc)
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Check error = %v, want %v", err, tc.wantErr)
			}
			checkSchemeError(t, err)
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
			if !reflect.DeepEqual(ev, Event{}) {
				t.Errorf("event %+v returned with an error", ev)
			}
			assertNoLeakB(t, err, cfg, tc.header)
		})
	}
}

func checkEventB(t *testing.T, ev Event, tc caseB) {
	t.Helper()
	if tc.wantHandshake != "" {
		want := Event{Handshake: []byte(tc.wantHandshake)}
		if !reflect.DeepEqual(ev, want) {
			t.Errorf("event = %+v, want only the handshake %s", ev, tc.wantHandshake)
		}
		return
	}
	if ev.Handshake != nil {
		t.Errorf("unexpected handshake %q", ev.Handshake)
	}
	if !strings.HasPrefix(ev.ContentHash, "sha256:") {
		t.Errorf("ContentHash = %q, want a sha256: digest", ev.ContentHash)
	}
	switch tc.wantID {
	case "":
	case "digest":
		want, err := Digest(tc.header, []byte(tc.body))
		if err != nil {
			t.Fatalf("Digest: %v", err)
		}
		if ev.ID != want {
			t.Errorf("ID = %q, want the content digest %q", ev.ID, want)
		}
	default:
		if ev.ID != tc.wantID {
			t.Errorf("ID = %q, want %q", ev.ID, tc.wantID)
		}
	}
	if ev.Type != tc.wantType {
		t.Errorf("Type = %q, want %q", ev.Type, tc.wantType)
	}
	if (tc.wantReply == "") != (ev.Reply == nil) || string(ev.Reply) != tc.wantReply {
		t.Errorf("Reply = %q, want %q", ev.Reply, tc.wantReply)
	}
}

// assertNoLeakB fails when err's text holds a secret, the public key, or
// any received header value of 16 bytes or more.
func assertNoLeakB(t *testing.T, err error, cfg ProviderConfig, h http.Header) {
	t.Helper()
	msg := err.Error()
	for _, s := range cfg.Secrets {
		if len(s) >= 6 && strings.Contains(msg, s) {
			t.Errorf("error %q contains a secret", msg)
		}
	}
	if cfg.PublicKey != "" && strings.Contains(msg, cfg.PublicKey) {
		t.Errorf("error %q contains the public key", msg)
	}
	for _, vs := range h {
		for _, v := range vs {
			if len(v) >= 16 && strings.Contains(msg, v) {
				t.Errorf("error %q echoes a header value", msg)
			}
		}
	}
}

// signGenericHMAC computes the generic scheme's signature independently of the
// package.
func signGenericHMAC(newHash func() hash.Hash, b64 bool, prefix, secret string, parts ...string) string {
	m := hmac.New(newHash, []byte(secret))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	if b64 {
		return prefix + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return prefix + hex.EncodeToString(m.Sum(nil))
}

const (
	hmacSecret      = "in-house shared secret"
	hmacOtherSecret = "the previous in-house secret"
	hmacBodyText    = `{"kind":"order.created","order":{"id":42,"total":"19.90"}}`
)

func TestHMACAlgorithmsAndEncodings(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, alg := range []struct {
		name    string
		newHash func() hash.Hash
	}{{"", sha256.New}, {"sha256", sha256.New}, {"SHA256", sha256.New}, {"sha512", sha512.New}, {"sha1", sha1.New}} {
		for _, enc := range []string{"", "hex", "base64"} {
			b64 := enc == "base64"
			good := signGenericHMAC(alg.newHash, b64, "", hmacSecret, hmacBodyText)
			wrong := signGenericHMAC(alg.newHash, b64, "", hmacOtherSecret, hmacBodyText)
			other := sha256.New
			if alg.name == "" || strings.EqualFold(alg.name, "sha256") {
				other = sha512.New
			}
			otherAlg := signGenericHMAC(other, b64, "", hmacSecret, hmacBodyText)
			base := ProviderConfig{Name: "inhouse", Scheme: SchemeHMAC, Secrets: []string{hmacSecret},
				HMAC: HMACConfig{Algorithm: alg.name, Encoding: enc, SignatureHeader: "X-Signature"}}
			t.Run("alg="+alg.name+",enc="+enc, func(t *testing.T) {
				cases := []caseB{
					{name: "valid", header: headers("X-Signature", good), body: hmacBodyText, now: now, wantID: "digest"},
					{name: "wrong secret", header: headers("X-Signature", wrong), body: hmacBodyText, now: now,
						wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
					{name: "other algorithm", header: headers("X-Signature", otherAlg), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
					{name: "tampered body", header: headers("X-Signature", good), body: hmacBodyText + " ", now: now, wantErr: ErrUnauthorized},
					{name: "rotated: previous secret configured second", cfg: func(c *ProviderConfig) { c.Secrets = []string{hmacOtherSecret, hmacSecret} },
						header: headers("X-Signature", good), body: hmacBodyText, now: now},
					{name: "truncated", header: headers("X-Signature", good[:len(good)-4]), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
					{name: "two signatures", header: headers("X-Signature", wrong+","+good), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
					{name: "two signatures, space", header: headers("X-Signature", wrong+" "+good), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
					{name: "missing header", header: headers("X-Other", good), body: hmacBodyText, now: now,
						wantErr: ErrBadRequest, wantMsg: "missing X-Signature header"},
					{name: "no timestamp configured: any clock", header: headers("X-Signature", good), body: hmacBodyText, now: time.Unix(0, 0)},
				}
				if b64 {
					cases = append(cases,
						caseB{name: "hex where base64 expected", header: headers("X-Signature", signGenericHMAC(alg.newHash, false, "", hmacSecret, hmacBodyText)),
							body: hmacBodyText, now: now, wantErr: ErrUnauthorized, wantMsg: "base64"},
						caseB{name: "unpadded base64", header: headers("X-Signature", strings.TrimRight(good, "=")), body: hmacBodyText, now: now,
							wantErr: ErrUnauthorized},
					)
				} else {
					cases = append(cases,
						caseB{name: "uppercase hex", header: headers("X-Signature", strings.ToUpper(good)), body: hmacBodyText, now: now},
						caseB{name: "base64 where hex expected", header: headers("X-Signature", signGenericHMAC(alg.newHash, true, "", hmacSecret, hmacBodyText)),
							body: hmacBodyText, now: now, wantErr: ErrUnauthorized, wantMsg: "hex digits"},
						caseB{name: "bad hex", header: headers("X-Signature", strings.Repeat("g", len(good))), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
					)
				}
				runCasesB(t, base, cases)
			})
		}
	}
}

func TestHMACPrefixTimestampAndID(t *testing.T) {
	const ts = int64(1700000000)
	tsStr := strconv.FormatInt(ts, 10)
	now := time.Unix(ts, 0)
	const id = "evt_0001"

	t.Run("prefix", func(t *testing.T) {
		good := signGenericHMAC(sha256.New, false, "sha256=", hmacSecret, hmacBodyText)
		base := ProviderConfig{Name: "inhouse", Scheme: SchemeHMAC, Secrets: []string{hmacSecret},
			HMAC: HMACConfig{SignatureHeader: "X-Hub-Signature-256", Prefix: "sha256="}}
		runCasesB(t, base, []caseB{
			{name: "valid", header: headers("X-Hub-Signature-256", good), body: hmacBodyText, now: now},
			{name: "prefix missing", header: headers("X-Hub-Signature-256", strings.TrimPrefix(good, "sha256=")), body: hmacBodyText, now: now,
				wantErr: ErrUnauthorized, wantMsg: "prefix"},
			{name: "other prefix", header: headers("X-Hub-Signature-256", "sha1="+strings.TrimPrefix(good, "sha256=")), body: hmacBodyText, now: now,
				wantErr: ErrUnauthorized},
			{name: "prefix case differs", header: headers("X-Hub-Signature-256", "SHA256="+strings.TrimPrefix(good, "sha256=")), body: hmacBodyText, now: now,
				wantErr: ErrUnauthorized},
			{name: "prefix not configured, present", cfg: func(c *ProviderConfig) { c.HMAC.Prefix = "" },
				header: headers("X-Hub-Signature-256", good), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
			{name: "same as the github scheme", cfg: func(c *ProviderConfig) { c.Secrets = []string{ghSecret} },
				header: headers("X-Hub-Signature-256", ghSignature), body: ghPayload, now: now},
		})
	})

	t.Run("timestamp", func(t *testing.T) {
		good := signGenericHMAC(sha256.New, false, "", hmacSecret, tsStr, ".", hmacBodyText)
		base := ProviderConfig{Name: "inhouse", Scheme: SchemeHMAC, Secrets: []string{hmacSecret},
			HMAC: HMACConfig{SignatureHeader: "X-Signature", TimestampHeader: "X-Timestamp", SignedContent: "{timestamp}.{body}"}}
		h := func(sig, ts string) http.Header { return headers("X-Signature", sig, "X-Timestamp", ts) }
		runCasesB(t, base, []caseB{
			{name: "valid", header: h(good, tsStr), body: hmacBodyText, now: now, wantID: "digest"},
			{name: "within tolerance", header: h(good, tsStr), body: hmacBodyText, now: now.Add(-4 * time.Minute)},
			{name: "stale", header: h(good, tsStr), body: hmacBodyText, now: now.Add(5*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
			{name: "future", header: h(good, tsStr), body: hmacBodyText, now: now.Add(-5*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
			{name: "configured tolerance", cfg: func(c *ProviderConfig) { c.Tolerance = time.Hour },
				header: h(good, tsStr), body: hmacBodyText, now: now.Add(30 * time.Minute)},
			{name: "tampered timestamp", header: h(good, strconv.FormatInt(ts+1, 10)), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
			{name: "body signed without timestamp", header: h(signGenericHMAC(sha256.New, false, "", hmacSecret, hmacBodyText), tsStr), body: hmacBodyText, now: now,
				wantErr: ErrUnauthorized},
			{name: "tampered body", header: h(good, tsStr), body: hmacBodyText + "\n", now: now, wantErr: ErrUnauthorized},
			{name: "missing timestamp", header: headers("X-Signature", good), body: hmacBodyText, now: now,
				wantErr: ErrBadRequest, wantMsg: "missing X-Timestamp header"},
			{name: "missing signature", header: headers("X-Timestamp", tsStr), body: hmacBodyText, now: now,
				wantErr: ErrBadRequest, wantMsg: "missing X-Signature header"},
			{name: "milliseconds", header: h(good, tsStr+"000"), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
			{name: "negative", header: h(good, "-"+tsStr), body: hmacBodyText, now: now, wantErr: ErrUnauthorized, wantMsg: "malformed X-Timestamp"},
			{name: "not a number", header: h(good, "yesterday"), body: hmacBodyText, now: now, wantErr: ErrUnauthorized, wantMsg: "malformed"},
			{name: "rotated", cfg: func(c *ProviderConfig) { c.Secrets = []string{hmacOtherSecret, hmacSecret} },
				header: h(good, tsStr), body: hmacBodyText, now: now},
			{name: "header too long", header: h(good+strings.Repeat("0", maxSignatureHeaderLen), tsStr), body: hmacBodyText, now: now,
				wantErr: ErrUnauthorized, wantMsg: "longer than"},
		})
	})

	t.Run("id", func(t *testing.T) {
		good := signGenericHMAC(sha512.New, true, "v1,", hmacSecret, id, ".", tsStr, ".", hmacBodyText)
		base := ProviderConfig{Name: "inhouse", Scheme: SchemeHMAC, Secrets: []string{hmacSecret}, IDHeader: "X-Event-Id",
			HMAC: HMACConfig{Algorithm: "sha512", Encoding: "base64", Prefix: "v1,", SignatureHeader: "X-Signature",
				TimestampHeader: "X-Timestamp", SignedContent: "{id}.{timestamp}.{body}"}}
		h := func(sig, id string) http.Header {
			return headers("X-Signature", sig, "X-Timestamp", tsStr, "X-Event-Id", id)
		}
		runCasesB(t, base, []caseB{
			{name: "valid", header: h(good, id), body: hmacBodyText, now: now, wantID: id},
			{name: "tampered id", header: h(good, "evt_0002"), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
			{name: "missing id", header: headers("X-Signature", good, "X-Timestamp", tsStr), body: hmacBodyText, now: now,
				wantErr: ErrBadRequest, wantMsg: "missing X-Event-Id header"},
			{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{hmacOtherSecret} },
				header: h(good, id), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
			{name: "stale", header: h(good, id), body: hmacBodyText, now: now.Add(time.Hour), wantErr: ErrUnauthorized},
		})
	})

	t.Run("literal text", func(t *testing.T) {
		// A Slack-style template: "v0:{timestamp}:{body}", prefix "v0=".
		good := signGenericHMAC(sha256.New, false, "v0=", hmacSecret, "v0:", tsStr, ":", hmacBodyText)
		base := ProviderConfig{Name: "inhouse", Scheme: SchemeHMAC, Secrets: []string{hmacSecret},
			HMAC: HMACConfig{SignatureHeader: "X-Sig", Prefix: "v0=", TimestampHeader: "X-Ts", SignedContent: "v0:{timestamp}:{body}"}}
		runCasesB(t, base, []caseB{
			{name: "valid", header: headers("X-Sig", good, "X-Ts", tsStr), body: hmacBodyText, now: now},
			{name: "other literal", cfg: func(c *ProviderConfig) { c.HMAC.SignedContent = "v1:{timestamp}:{body}" },
				header: headers("X-Sig", good, "X-Ts", tsStr), body: hmacBodyText, now: now, wantErr: ErrUnauthorized},
			{name: "lone closing brace is literal", cfg: func(c *ProviderConfig) { c.HMAC.SignedContent = "}{timestamp}{body}" },
				header: headers("X-Sig", signGenericHMAC(sha256.New, false, "v0=", hmacSecret, "}", tsStr, hmacBodyText), "X-Ts", tsStr), body: hmacBodyText, now: now},
			{name: "body twice", cfg: func(c *ProviderConfig) { c.HMAC.SignedContent = "{timestamp}{body}{body}" },
				header: headers("X-Sig", signGenericHMAC(sha256.New, false, "v0=", hmacSecret, tsStr, hmacBodyText, hmacBodyText), "X-Ts", tsStr), body: hmacBodyText, now: now},
		})
	})
}

func TestHMACConstructorErrors(t *testing.T) {
	const secret = "very-secret-value"
	ok := HMACConfig{SignatureHeader: "X-Signature"}
	with := func(change func(*HMACConfig)) HMACConfig {
		c := ok
		change(&c)
		return c
	}
	cases := []struct {
		name     string
		hmac     HMACConfig
		idHeader string
		secrets  []string
		want     string
	}{
		{"no secret", ok, "", nil, "no secret configured"},
		{"empty secret", ok, "", []string{secret, ""}, "secret 2 of 2 is empty"},
		{"unknown algorithm", with(func(c *HMACConfig) { c.Algorithm = "md5" }), "", nil, "HMAC algorithm must be sha256"},
		{"sha-256 spelling", with(func(c *HMACConfig) { c.Algorithm = "sha-256" }), "", nil, "HMAC algorithm"},
		{"no signature header", with(func(c *HMACConfig) { c.SignatureHeader = "" }), "", nil, "HMAC signature header (the name of the header carrying the signature) is required"},
		{"bad signature header", with(func(c *HMACConfig) { c.SignatureHeader = "X Signature" }), "", nil, "not a valid header name"},
		{"bad timestamp header", with(func(c *HMACConfig) { c.TimestampHeader = "X:Ts"; c.SignedContent = "{timestamp}{body}" }), "", nil,
			"HMAC timestamp header is not a valid header name"},
		{"unknown encoding", with(func(c *HMACConfig) { c.Encoding = "base32" }), "", nil, "encoding must be hex"},
		{"unknown placeholder", with(func(c *HMACConfig) { c.SignedContent = "{nonce}.{body}" }), "", nil, "unknown placeholder at byte 0"},
		{"placeholder case", with(func(c *HMACConfig) { c.SignedContent = "{Body}" }), "", nil, "unknown placeholder"},
		{"unclosed brace", with(func(c *HMACConfig) { c.SignedContent = "{body}.{timestamp" }), "", nil, "unclosed '{' at byte 7"},
		{"timestamp without header", with(func(c *HMACConfig) { c.SignedContent = "{timestamp}.{body}" }), "", nil,
			"uses {timestamp} but no timestamp header"},
		{"id without header", with(func(c *HMACConfig) { c.SignedContent = "{id}.{body}" }), "", nil, "uses {id} but no ID header"},
		{"body not signed", with(func(c *HMACConfig) { c.TimestampHeader = "X-Ts"; c.SignedContent = "{timestamp}" }), "", nil,
			"must contain {body}"},
		{"timestamp header unsigned", with(func(c *HMACConfig) { c.TimestampHeader = "X-Ts" }), "", nil,
			"does not use {timestamp}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			secrets := tc.secrets
			if secrets == nil && tc.want != "no secret configured" {
				secrets = []string{secret}
			}
			p, err := NewProvider(ProviderConfig{Name: "x", Scheme: SchemeHMAC, Secrets: secrets, IDHeader: tc.idHeader, HMAC: tc.hmac})
			if err == nil || p != nil {
				t.Fatalf("NewProvider accepted %+v", tc.hmac)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, `provider "x"`) {
				t.Errorf("error %q does not say %q and name the provider", msg, tc.want)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("error %q contains the secret", msg)
			}
			for _, v := range []string{"md5", "nonce", "base32", "X Signature"} {
				if strings.Contains(msg, v) {
					t.Errorf("error %q echoes the configured value %q", msg, v)
				}
			}
		})
	}

	// The same settings with what they lack are accepted.
	for _, c := range []ProviderConfig{
		{Name: "x", Scheme: SchemeHMAC, Secrets: []string{secret}, HMAC: ok},
		{Name: "x", Scheme: SchemeHMAC, Secrets: []string{secret}, IDHeader: "X-Id",
			HMAC: with(func(c *HMACConfig) { c.TimestampHeader = "X-Ts"; c.SignedContent = "{id}.{timestamp}.{body}" })},
		{Name: "x", Scheme: SchemeHMAC, Secrets: []string{secret}, HMAC: with(func(c *HMACConfig) { c.Algorithm = "SHA512"; c.Encoding = "Base64" })},
	} {
		if _, err := NewProvider(c); err != nil {
			t.Errorf("NewProvider(%+v): %v", c.HMAC, err)
		}
	}
}

func TestParseHMACTemplate(t *testing.T) {
	segs, err := parseHMACTemplate("v0:{timestamp}:{body}}{id}")
	want := []hmacSegment{{hmacPartLiteral, "v0:"}, {part: hmacPartTimestamp}, {hmacPartLiteral, ":"}, {part: hmacPartBody}, {hmacPartLiteral, "}"}, {part: hmacPartID}}
	if err != nil || !reflect.DeepEqual(segs, want) {
		t.Fatalf("got %+v, %v; want %+v", segs, err, want)
	}
	for _, bad := range []string{"{", "{}", "{body", "{ body}", "{body}{x}", "{{body}}", "{timestamp{body}"} {
		if _, err := parseHMACTemplate(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
