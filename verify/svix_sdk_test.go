package verify

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

// The official svix-webhooks library as an independent signer for the svix
// scheme (svix-* headers, and the webhook-* fallback), and as a verifier of
// what a Svix sender signs the same way we check it.
func TestSvixSDKSigns(t *testing.T) {
	wh, err := svix.NewWebhook(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	p := mustProvider(t, ProviderConfig{Name: "clerk", Scheme: SchemeSvix, Secrets: []string{swSecret}})
	now := time.Now()
	body := []byte(`{"type":"user.created","data":{"id":"user_1"}}`)
	sig, err := wh.Sign("msg_svix_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"svix-", "webhook-"} {
		h := http.Header{}
		h.Set(prefix+"id", "msg_svix_1")
		h.Set(prefix+"timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set(prefix+"signature", sig)
		ev, err := p.Check(Input{Header: h, Body: body}, now)
		if err != nil {
			t.Fatalf("%s headers signed by the SDK refused: %v", prefix, err)
		}
		if ev.ID != "msg_svix_1" || ev.Type != "user.created" {
			t.Fatalf("%s: event %+v", prefix, ev)
		}
		// The SDK verifies the very headers we accept...
		if err := wh.Verify(body, h); err != nil {
			t.Fatalf("%s: the SDK refuses what we accept: %v", prefix, err)
		}
		// ...and both refuse a tampered body.
		tampered := append([]byte(nil), body...)
		tampered[10] ^= 1
		if _, err := p.Check(Input{Header: h, Body: tampered}, now); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("%s: tampered body: %v", prefix, err)
		}
		if err := wh.Verify(tampered, h); err == nil {
			t.Fatalf("%s: the SDK accepted a tampered body", prefix)
		}
	}
	// A signature made with another secret is refused by both.
	other, _ := svix.NewWebhook("whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=")
	bad, _ := other.Sign("msg_svix_2", now, body)
	h := http.Header{"Svix-Id": {"msg_svix_2"}, "Svix-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Svix-Signature": {bad}}
	if _, err := p.Check(Input{Header: h, Body: body}, now); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("other secret: %v", err)
	}
}
