package verify

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Rekey replaces the secrets a provider checks and signs with: a request
// signed with a dropped secret is refused, one signed with the new secret
// passes, and deliveries carry one signature per accepted secret, current
// first.
func TestRekeyReplacesSecrets(t *testing.T) {
	const oldSecret, newSecret = "whsec_rekeyOldSecret0123", "whsec_rekeyNewSecret0123"
	body := `{"id":"evt_rekey","object":"event","type":"invoice.paid"}`
	now := time.Unix(1_700_000_000, 0)
	signed := func(secret string) http.Header {
		return headers("Stripe-Signature", "t="+strconv.FormatInt(now.Unix(), 10)+",v1="+signStripe(secret, now.Unix(), body))
	}
	p := mustProvider(t, ProviderConfig{Name: "pay", Scheme: SchemeStripe, Secrets: []string{oldSecret}})
	if _, err := p.Check(Input{Header: signed(newSecret), Body: []byte(body)}, now); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("the new secret verifies before the rekey: %v", err)
	}

	// The overlap: the new secret current, the old one still accepted.
	if err := p.Rekey(Keys{Secrets: []string{newSecret, oldSecret}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{oldSecret, newSecret} {
		if _, err := p.Check(Input{Header: signed(s), Body: []byte(body)}, now); err != nil {
			t.Errorf("during the overlap, signed with the %s secret: %v", which(s, oldSecret), err)
		}
	}
	h := http.Header{}
	p.Resign(h, []byte(body), now)
	want := "t=" + strconv.FormatInt(now.Unix(), 10) + ",v1=" + signStripe(newSecret, now.Unix(), body) + ",v1=" + signStripe(oldSecret, now.Unix(), body)
	if got := h.Get("Stripe-Signature"); got != want {
		t.Errorf("re-signed during the overlap:\n got %s\nwant %s", got, want)
	}

	// After the overlap: the new secret alone.
	if err := p.Rekey(Keys{Secrets: []string{newSecret}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Check(Input{Header: signed(oldSecret), Body: []byte(body)}, now); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("the dropped secret still verifies: %v", err)
	}
	p.Resign(h, []byte(body), now)
	if _, n := firstSignature(SchemeStripe, h); n != 1 {
		t.Errorf("%d signatures after the overlap, want 1: %v", n, h)
	}
}

// A refused rekey names the setting, never the value, and leaves the
// provider as it was.
func TestRekeyRefusedKeepsTheKeys(t *testing.T) {
	const current = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Unix(1_700_000_000, 0)
	body := `{"type":"user.created"}`
	signed := headers("webhook-id", "msg_1", "webhook-timestamp", strconv.FormatInt(now.Unix(), 10),
		"webhook-signature", signStandard(t, current, "msg_1", now.Unix(), body))
	p := mustProvider(t, ProviderConfig{Name: "std", Scheme: SchemeStandard, Secrets: []string{current}})
	cases := []struct {
		name  string
		keys  Keys
		field Field
	}{
		{"not base64", Keys{Secrets: []string{"whsec_!!!secret-value!!!"}}, FieldSecrets},
		{"none", Keys{}, FieldSecrets},
		{"an empty line", Keys{Secrets: []string{current, ""}}, FieldSecrets},
		{"a backend secret added", Keys{Secrets: []string{current}, BackendSecrets: []string{current}}, FieldBackendSecret},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Rekey(tc.keys)
			fes := FieldErrors(err)
			if len(fes) == 0 || fes[0].Field != tc.field {
				t.Fatalf("error %v, want one about %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "secret-value") || strings.Contains(err.Error(), current) {
				t.Errorf("the error quotes a secret: %v", err)
			}
			if _, err := p.Check(Input{Header: signed, Body: []byte(body)}, now); err != nil {
				t.Errorf("the provider lost its secret: %v", err)
			}
		})
	}
}

// Discord and SendGrid sign with a private key: during a rotation of the
// public key the previous one still verifies, tried after the current one.
func TestRekeyPublicKeys(t *testing.T) {
	ts := strconv.FormatInt(discordTS, 10)
	now := time.Unix(discordTS, 0)
	signedBy := func(k []byte) http.Header {
		return headers("X-Signature-Ed25519", signDiscord(k, ts, discordCmdBody), "X-Signature-Timestamp", ts)
	}
	oldKey, newKey := discordTestKey, discordOtherKey
	p := mustProvider(t, ProviderConfig{Name: "dsc", Scheme: SchemeDiscord, PublicKey: discordPublicHex(oldKey)})
	if err := p.Rekey(Keys{PublicKeys: []string{discordPublicHex(newKey), discordPublicHex(oldKey)}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{oldKey, newKey} {
		if ev, err := p.Check(Input{Header: signedBy(k), Body: []byte(discordCmdBody)}, now); err != nil || ev.Reply == nil {
			t.Errorf("during the overlap: %v %+v", err, ev)
		}
	}
	if err := p.Rekey(Keys{PublicKeys: []string{discordPublicHex(newKey)}}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Check(Input{Header: signedBy(oldKey), Body: []byte(discordCmdBody)}, now)
	if !errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonSignatureMismatch {
		t.Errorf("the dropped key: %v", err)
	}
	// A bad previous key is refused as the public key, counted from 1.
	err = p.Rekey(Keys{PublicKeys: []string{discordPublicHex(newKey), "zz"}})
	if fes := FieldErrors(err); len(fes) != 1 || fes[0].Field != FieldPublicKey || fes[0].Index != 1 || !strings.Contains(err.Error(), "key 2 of 2") {
		t.Errorf("a bad previous key: %v", err)
	}
	if _, err := p.Check(Input{Header: signedBy(newKey), Body: []byte(discordCmdBody)}, now); err != nil {
		t.Errorf("the refused rekey changed the key: %v", err)
	}
}

// A rotated backend secret: multi-signature schemes sign deliveries with
// the new and the previous one; one-signature schemes with the new one.
func TestRekeyBackendSecrets(t *testing.T) {
	const b1, b2 = "whsec_backendOne0123", "whsec_backendTwo0123"
	body := []byte(`{"id":"evt_b","object":"event","type":"x"}`)
	now := time.Unix(1_700_000_000, 0)
	p := mustProvider(t, ProviderConfig{Name: "pay", Scheme: SchemeStripe, Secrets: []string{"whsec_sender"}, BackendSecret: b1})
	if err := p.Rekey(Keys{Secrets: []string{"whsec_sender"}, BackendSecrets: []string{b2, b1}}); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	p.Resign(h, body, now)
	ts := strconv.FormatInt(now.Unix(), 10)
	if want := "t=" + ts + ",v1=" + signStripe(b2, now.Unix(), string(body)) + ",v1=" + signStripe(b1, now.Unix(), string(body)); h.Get("Stripe-Signature") != want {
		t.Errorf("got %s, want %s", h.Get("Stripe-Signature"), want)
	}
	if err := p.Rekey(Keys{Secrets: []string{"whsec_sender"}}); FieldErrors(err)[0].Field != FieldBackendSecret {
		t.Errorf("the backend secret removed: %v", err)
	}

	slk := mustProvider(t, ProviderConfig{Name: "slk", Scheme: SchemeSlack, Secrets: []string{"sender"}, BackendSecret: "backend-1"})
	if err := slk.Rekey(Keys{Secrets: []string{"sender"}, BackendSecrets: []string{"backend-2", "backend-1"}}); err != nil {
		t.Fatal(err)
	}
	slk.Resign(h, body, now)
	if got, want := h.Get("X-Slack-Signature"), "v0="+sha256HexMAC("backend-2", "v0:"+ts+":"+string(body)); got != want {
		t.Errorf("slack re-signed with %s, want the new backend secret's %s", got, want)
	}
}

// sha256HexMAC is hex(HMAC-SHA256(key, msg)).
func sha256HexMAC(key, msg string) string {
	return strings.TrimPrefix(signGitHub(key, msg), "sha256=")
}

// Requests checked and deliveries signed while the secrets are replaced
// each see one whole set (run with -race).
func TestRekeyConcurrentWithChecks(t *testing.T) {
	secrets := []string{"whsec_concurrentA", "whsec_concurrentB"}
	body := `{"id":"evt_c","object":"event","type":"x"}`
	now := time.Unix(1_700_000_000, 0)
	p := mustProvider(t, ProviderConfig{Name: "pay", Scheme: SchemeStripe, Secrets: secrets})
	h := headers("Stripe-Signature", "t="+strconv.FormatInt(now.Unix(), 10)+",v1="+signStripe(secrets[0], now.Unix(), body))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// secrets[0] stays accepted throughout.
			if err := p.Rekey(Keys{Secrets: []string{secrets[i%2], secrets[0]}}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for range 500 {
		if _, err := p.Check(Input{Header: h.Clone(), Body: []byte(body)}, now); err != nil {
			t.Fatal(err)
		}
		out := http.Header{}
		p.Resign(out, []byte(body), now)
		if sig, n := firstSignature(SchemeStripe, out); sig == "" || n < 1 {
			t.Fatalf("re-signed: %v", out)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
