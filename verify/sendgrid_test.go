package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
)

// The sendgrid-go test vector (helpers/eventwebhook/eventwebhook_test.go):
// the payload ends with a literal CRLF.
const (
	sgPublicKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	sgSignature = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
	sgTimestamp = "1600112502"
	sgPayload   = `[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]` + "\r\n"
)

func sgHeaders(sig, ts string) []string {
	return []string{"X-Twilio-Email-Event-Webhook-Signature", sig, "X-Twilio-Email-Event-Webhook-Timestamp", ts}
}

// newSendGridKey generates a P-256 key and its public key as SendGrid shows
// it (base64 PKIX DER).
func newSendGridKey(t testing.TB) (*ecdsa.PrivateKey, string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return priv, base64.StdEncoding.EncodeToString(der)
}

// signSendGrid signs "{ts}{body}" as SendGrid does.
func signSendGrid(t testing.TB, priv *ecdsa.PrivateKey, ts, body string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(ts + body))
	sig, err := ecdsa.SignASN1(rand.Reader, priv, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

func TestSendGridPublishedVector(t *testing.T) {
	if !strings.HasSuffix(sgPayload, "]\r\n") {
		t.Fatal("the vector's payload must end with CRLF")
	}
	p := mustProvider(t, ProviderConfig{Name: "sg", Scheme: SchemeSendGrid, PublicKey: sgPublicKey})
	now := time.Unix(1600112502, 0)
	ev, err := p.Check(Input{Header: headers(sgHeaders(sgSignature, sgTimestamp)...), Body: []byte(sgPayload)}, now)
	if err != nil {
		t.Fatalf("published vector refused: %v", err)
	}
	// The batch is one event keyed by its content.
	digest, err := Digest(nil, []byte(sgPayload))
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != digest || ev.ContentHash != digest || ev.Type != "" || ev.Reply != nil || ev.Handshake != nil {
		t.Errorf("event = %+v, want ID = ContentHash = %s", ev, digest)
	}
	// Without its CRLF the payload is different bytes.
	if _, err := p.Check(Input{Header: headers(sgHeaders(sgSignature, sgTimestamp)...), Body: []byte(strings.TrimSuffix(sgPayload, "\r\n"))}, now); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("payload without CRLF: err = %v, want ErrUnauthorized", err)
	}
	// sendgrid-go decodes padded base64; so do we.
	if _, err := p.Check(Input{Header: headers(sgHeaders(strings.TrimRight(sgSignature, "="), sgTimestamp)...), Body: []byte(sgPayload)}, now); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("unpadded signature: err = %v, want ErrUnauthorized", err)
	}
}

func TestSendGridCheck(t *testing.T) {
	priv, pub := newSendGridKey(t)
	_, otherPub := newSendGridKey(t)
	const (
		ts   = int64(1700000000)
		body = `[{"email":"a@example.com","event":"delivered","sg_event_id":"ZGVsaXZlcmVk","timestamp":1699999990},{"email":"b@example.com","event":"open","sg_event_id":"b3Blbg","timestamp":1699999995}]`
	)
	tsStr := strconv.FormatInt(ts, 10)
	now := time.Unix(ts, 0)
	good := signSendGrid(t, priv, tsStr, body)
	der, _ := base64.StdEncoding.DecodeString(good)

	base := ProviderConfig{Name: "sg", Scheme: SchemeSendGrid, PublicKey: pub}
	runCasesB(t, base, []caseB{
		{name: "valid", header: headers(sgHeaders(good, tsStr)...), body: body, now: now, wantID: "digest"},
		{name: "secrets ignored", cfg: func(c *ProviderConfig) { c.Secrets = []string{"unused secret"} },
			header: headers(sgHeaders(good, tsStr)...), body: body, now: now, wantID: "digest"},
		{name: "key with surrounding whitespace", cfg: func(c *ProviderConfig) { c.PublicKey = " " + pub + "\n" },
			header: headers(sgHeaders(good, tsStr)...), body: body, now: now},
		{name: "within tolerance", header: headers(sgHeaders(good, tsStr)...), body: body, now: now.Add(4 * time.Minute)},
		{name: "wrong key", cfg: func(c *ProviderConfig) { c.PublicKey = otherPub },
			header: headers(sgHeaders(good, tsStr)...), body: body, now: now, wantErr: ErrUnauthorized, wantMsg: "does not verify"},
		{name: "tampered body", header: headers(sgHeaders(good, tsStr)...), body: strings.Replace(body, "open", "click", 1), now: now, wantErr: ErrUnauthorized},
		{name: "tampered timestamp", header: headers(sgHeaders(good, strconv.FormatInt(ts+1, 10))...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "timestamp with a leading zero is other bytes", header: headers(sgHeaders(good, "0"+tsStr)...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "stale", header: headers(sgHeaders(good, tsStr)...), body: body, now: now.Add(5*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: headers(sgHeaders(good, tsStr)...), body: body, now: now.Add(-5*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "configured tolerance", cfg: func(c *ProviderConfig) { c.Tolerance = time.Minute },
			header: headers(sgHeaders(good, tsStr)...), body: body, now: now.Add(2 * time.Minute), wantErr: ErrUnauthorized},
		{name: "missing signature", header: headers("X-Twilio-Email-Event-Webhook-Timestamp", tsStr), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Twilio-Email-Event-Webhook-Signature header"},
		{name: "missing timestamp", header: headers("X-Twilio-Email-Event-Webhook-Signature", good), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Twilio-Email-Event-Webhook-Timestamp header"},
		{name: "timestamp not a number", header: headers(sgHeaders(good, "2023-11-14T22:13:20Z")...), body: body, now: now,
			wantErr: ErrUnauthorized, wantMsg: "malformed X-Twilio-Email-Event-Webhook-Timestamp"},
		{name: "timestamp in ms", header: headers(sgHeaders(good, tsStr+"000")...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "signature not base64", header: headers(sgHeaders("%%%"+good[3:], tsStr)...), body: body, now: now, wantErr: ErrUnauthorized, wantMsg: "base64"},
		{name: "signature raw r||s, not DER", header: headers(sgHeaders(base64.StdEncoding.EncodeToString(make([]byte, 64)), tsStr)...), body: body, now: now,
			wantErr: ErrUnauthorized},
		{name: "signature DER truncated", header: headers(sgHeaders(base64.StdEncoding.EncodeToString(der[:len(der)-1]), tsStr)...), body: body, now: now,
			wantErr: ErrUnauthorized},
		{name: "signature DER with trailing byte", header: headers(sgHeaders(base64.StdEncoding.EncodeToString(append(der[:len(der):len(der)], 0)), tsStr)...),
			body: body, now: now, wantErr: ErrUnauthorized},
		{name: "signature too long for P-256", header: headers(sgHeaders(base64.StdEncoding.EncodeToString(make([]byte, 73)), tsStr)...), body: body, now: now,
			wantErr: ErrUnauthorized},
		{name: "signature header too long", header: headers(sgHeaders(good+strings.Repeat("A", maxSignatureHeaderLen), tsStr)...), body: body, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
	})
}

// TestSendGridSDK checks our verdicts against sendgrid-go's verifier on the
// published vector and on payloads signed here.
func TestSendGridSDK(t *testing.T) {
	priv, pub := newSendGridKey(t)
	otherPriv, _ := newSendGridKey(t)
	const ts = "1700000000"
	body := `[{"email":"c@example.com","event":"bounce","sg_event_id":"Ym91bmNl","timestamp":1699999999}]` + "\r\n"
	good := signSendGrid(t, priv, ts, body)

	// A high-S twin of a valid signature: ECDSA accepts (r, n-s) as well,
	// and both verifiers must agree on it.
	var rs struct{ R, S *big.Int }
	der, _ := base64.StdEncoding.DecodeString(good)
	if _, err := asn1.Unmarshal(der, &rs); err != nil {
		t.Fatal(err)
	}
	rs.S.Sub(elliptic.P256().Params().N, rs.S)
	twinDER, err := asn1.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, key, sig, ts, body string
		want                     bool
	}{
		{"published vector", sgPublicKey, sgSignature, sgTimestamp, sgPayload, true},
		{"published vector, other timestamp", sgPublicKey, sgSignature, "1600112503", sgPayload, false},
		{"published vector, tampered", sgPublicKey, sgSignature, sgTimestamp, strings.Replace(sgPayload, "dropped", "deferred", 1), false},
		{"own key", pub, good, ts, body, true},
		{"own key, high-S twin", pub, base64.StdEncoding.EncodeToString(twinDER), ts, body, true},
		{"signed by another key", pub, signSendGrid(t, otherPriv, ts, body), ts, body, false},
		{"wrong public key", sgPublicKey, good, ts, body, false},
		{"tampered body", pub, good, ts, body + " ", false},
		{"other timestamp", pub, good, "1700000001", body, false},
		{"signature of the body only", pub, signSendGrid(t, priv, "", body), ts, body, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			sdk, err := eventwebhook.VerifySignature(key, []byte(tc.body), tc.sig, tc.ts)
			if err != nil {
				t.Fatalf("sendgrid-go: %v", err)
			}
			if sdk != tc.want {
				t.Fatalf("sendgrid-go says %v, the test expects %v", sdk, tc.want)
			}
			unix, _ := strconv.ParseInt(tc.ts, 10, 64)
			p := mustProvider(t, ProviderConfig{Name: "sg", Scheme: SchemeSendGrid, PublicKey: tc.key})
			_, err = p.Check(Input{Header: headers(sgHeaders(tc.sig, tc.ts)...), Body: []byte(tc.body)}, time.Unix(unix, 0))
			if (err == nil) != sdk {
				t.Errorf("sendgrid-go says %v, Check says %v", sdk, err)
			}
			if err != nil && !errors.Is(err, ErrUnauthorized) {
				t.Errorf("err = %v, want ErrUnauthorized", err)
			}
		})
	}
}

func TestSendGridConstructorErrors(t *testing.T) {
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edDER, err := x509.MarshalPKIXPublicKey(edPub)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384DER, err := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sgDER, _ := base64.StdEncoding.DecodeString(sgPublicKey)
	for _, tc := range []struct{ name, key, want string }{
		{"missing", "", "public key (base64 DER of the SendGrid ECDSA P-256 verification key) is required"},
		{"blank", "  ", "is required"},
		{"not base64", "not*base64!" + sgPublicKey, "public key is not base64 DER of an ECDSA P-256 key: not base64"},
		{"URL-safe base64", strings.NewReplacer("+", "-", "/", "_").Replace(sgPublicKey), "not base64"},
		{"not DER", base64.StdEncoding.EncodeToString([]byte("hello, this is no key")), "not a PKIX public key"},
		{"truncated DER", base64.StdEncoding.EncodeToString(sgDER[:40]), "not a PKIX public key"},
		{"ed25519 key", base64.StdEncoding.EncodeToString(edDER), "another key type or curve"},
		{"P-384 key", base64.StdEncoding.EncodeToString(p384DER), "another key type or curve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewProvider(ProviderConfig{Name: "sg", Scheme: SchemeSendGrid, PublicKey: tc.key, Secrets: []string{"unused"}})
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `provider "sg"`) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.TrimSpace(tc.key) != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.key)) {
				t.Errorf("error %q echoes the key", err)
			}
		})
	}
}
