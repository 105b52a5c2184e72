package verify

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
)

const (
	// stripeSecret is valid base64 after its prefix, so a scheme that
	// wrongly decoded it would still get a key, just the wrong one.
	stripeSecret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stripeOtherSecret = "whsec_test_other_secret"
	stripeTS          = int64(1700000000)
	stripeBody        = `{"id":"evt_1OaBcD2eZvKYlo2C","object":"event","type":"payment_intent.succeeded","pending_webhooks":2,"data":{"object":{"amount":2000}}}`
)

func TestStripeCheck(t *testing.T) {
	now := time.Unix(stripeTS, 0)
	good := signStripe(stripeSecret, stripeTS, stripeBody)
	other := signStripe(stripeOtherSecret, stripeTS, stripeBody)
	sh := func(v string) []string { return []string{"Stripe-Signature", v} }
	hdr := func(v string) []string { return sh(fmt.Sprintf("t=%d,%s", stripeTS, v)) }
	base := ProviderConfig{Name: "stripe", Scheme: SchemeStripe, Secrets: []string{stripeSecret}}
	const wantID = "evt_1OaBcD2eZvKYlo2C"

	manyV1 := func(n int, last string) string {
		parts := make([]string, 0, n)
		for range n - 1 {
			parts = append(parts, "v1="+other)
		}
		return strings.Join(append(parts, "v1="+last), ",")
	}
	cases := []checkCase{
		// signStripe keys the HMAC with the whole secret string: this
		// passing shows the secret is not base64-decoded.
		{name: "valid", header: headers(hdr("v1=" + good)...), body: stripeBody, now: now, wantID: wantID},
		{name: "t after v1", header: headers(sh(fmt.Sprintf("v1=%s,t=%d", good, stripeTS))...), body: stripeBody, now: now, wantID: wantID},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{stripeOtherSecret} },
			header: headers(hdr("v1=" + good)...), body: stripeBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered body", header: headers(hdr("v1=" + good)...), body: strings.Replace(stripeBody, "2000", "2001", 1), now: now, wantErr: ErrUnauthorized},
		{name: "tampered timestamp", header: headers(sh(fmt.Sprintf("t=%d,v1=%s", stripeTS+1, good))...), body: stripeBody, now: now, wantErr: ErrUnauthorized},
		{name: "second secret matches", cfg: func(c *ProviderConfig) { c.Secrets = []string{stripeOtherSecret, stripeSecret} },
			header: headers(hdr("v1=" + good)...), body: stripeBody, now: now, wantID: wantID},
		{name: "rolled secret: second v1 matches", header: headers(hdr("v1=" + other + ",v1=" + good + ",v0=" + strings.Repeat("0", 64))...),
			body: stripeBody, now: now, wantID: wantID},
		{name: "16th v1 is tried", header: headers(hdr(manyV1(16, good))...), body: stripeBody, now: now, wantID: wantID},
		{name: "17th v1 is not", header: headers(hdr(manyV1(17, good))...), body: stripeBody, now: now, wantErr: ErrUnauthorized},
		{name: "unknown keys and bad v1 ignored", header: headers(hdr("v1=zz,v2=abc,foo=bar,v1=" + good)...), body: stripeBody, now: now, wantID: wantID},
		{name: "v0 only", header: headers(hdr("v0=" + good)...), body: stripeBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no well-formed v1"},
		{name: "bad hex only", header: headers(hdr("v1=" + strings.Repeat("g", 64))...), body: stripeBody, now: now, wantErr: ErrUnauthorized},
		{name: "short hex", header: headers(hdr("v1=" + good[:62])...), body: stripeBody, now: now, wantErr: ErrUnauthorized},
		{name: "no t", header: headers(sh("v1=" + good)...), body: stripeBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no t="},
		{name: "two t", header: headers(sh(fmt.Sprintf("t=%d,t=%d,v1=%s", stripeTS, stripeTS, good))...), body: stripeBody, now: now, wantErr: ErrUnauthorized},
		{name: "non-numeric t", header: headers(sh("t=now,v1=" + good)...), body: stripeBody, now: now, wantErr: ErrUnauthorized, wantMsg: "malformed t="},
		{name: "empty t", header: headers(sh("t=,v1=" + good)...), body: stripeBody, now: now, wantErr: ErrUnauthorized},
		{name: "pair without =", header: headers(hdr("v1=" + good + ",garbage")...), body: stripeBody, now: now, wantErr: ErrUnauthorized},
		{name: "spaces", header: headers(sh(fmt.Sprintf("t=%d, v1=%s", stripeTS, good))...), body: stripeBody, now: now, wantErr: ErrUnauthorized},
		{name: "header too long", header: headers(hdr("v1=" + good + "," + strings.Repeat("x=y,", 1100))...), body: stripeBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "stale", header: headers(hdr("v1=" + good)...), body: stripeBody, now: now.Add(5*time.Minute + time.Second),
			wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: headers(hdr("v1=" + good)...), body: stripeBody, now: now.Add(-5*time.Minute - time.Second),
			wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "within tolerance", header: headers(hdr("v1=" + good)...), body: stripeBody, now: now.Add(4 * time.Minute), wantID: wantID},
		{name: "missing header", header: headers("Stripe-Signaturex", "t=1"), body: stripeBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing Stripe-Signature header"},
		{name: "id header overrides the body id", cfg: func(c *ProviderConfig) { c.IDHeader = "X-Event" },
			header: headers(append(hdr("v1="+good), "X-Event", "ev-9")...), body: stripeBody, now: now, wantID: "ev-9"},
	}
	// Bodies that verify but carry no usable id.
	for name, body := range map[string]string{
		"body not JSON":      `id=evt_1`,
		"body without id":    `{"object":"event"}`,
		"numeric id":         `{"id":12}`,
		"empty id":           `{"id":""}`,
		"id in a nested obj": `{"data":{"id":"evt_1"}}`,
		"array body":         `[{"id":"evt_1"}]`,
		"duplicate id key":   `{"id":"evt_1","id":"evt_2"}`,
		"id with a newline":  `{"id":"evt_1\n"}`,
	} {
		cases = append(cases, checkCase{name: name, header: headers(hdr("v1=" + signStripe(stripeSecret, stripeTS, body))...),
			body: body, now: now, wantErr: ErrBadRequest})
	}
	runCheckCases(t, base, cases)
}

// TestStripeSDK signs with stripe-go (an independent implementation) and
// checks our test signer against stripe-go's verifier.
func TestStripeSDK(t *testing.T) {
	now := time.Unix(stripeTS, 0)
	p := mustProvider(t, ProviderConfig{Name: "stripe", Scheme: SchemeStripe, Secrets: []string{stripeOtherSecret, stripeSecret}})
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: []byte(stripeBody), Secret: stripeSecret, Timestamp: now,
	})
	ev, err := p.Check(Input{Header: headers("Stripe-Signature", signed.Header), Body: []byte(stripeBody)}, now)
	if err != nil {
		t.Fatalf("stripe-go signature refused: %v", err)
	}
	if ev.ID != "evt_1OaBcD2eZvKYlo2C" || ev.Type != "payment_intent.succeeded" {
		t.Errorf("event = %+v", ev)
	}
	if _, err := p.Check(Input{Header: headers("Stripe-Signature", signed.Header), Body: []byte(stripeBody + " ")}, now); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("tampered body: err = %v, want ErrUnauthorized", err)
	}

	ours := fmt.Sprintf("t=%d,v1=%s", stripeTS, signStripe(stripeSecret, stripeTS, stripeBody))
	if ours != signed.Header {
		t.Errorf("test signer gives %q, stripe-go %q", ours, signed.Header)
	}
	if err := webhook.ValidatePayloadIgnoringTolerance([]byte(stripeBody), ours, stripeSecret); err != nil {
		t.Errorf("stripe-go refuses the test signer: %v", err)
	}
	fresh := time.Now()
	oursFresh := fmt.Sprintf("t=%d,v1=%s,v1=%s", fresh.Unix(), signStripe(stripeOtherSecret, fresh.Unix(), stripeBody), signStripe(stripeSecret, fresh.Unix(), stripeBody))
	if err := webhook.ValidatePayloadWithTolerance([]byte(stripeBody), oursFresh, stripeSecret, time.Minute); err != nil {
		t.Errorf("stripe-go refuses a rolled-secret header: %v", err)
	}
	if _, err := p.Check(Input{Header: headers("Stripe-Signature", oursFresh), Body: []byte(stripeBody)}, fresh); err != nil {
		t.Errorf("rolled-secret header refused: %v", err)
	}
}

// TestStripeResend: Stripe redelivers an event with the same id and a new
// pending_webhooks count; that is a duplicate, while a changed amount under
// the same id is a conflict.
func TestStripeResend(t *testing.T) {
	now := time.Unix(stripeTS, 0)
	p := mustProvider(t, ProviderConfig{Name: "stripe", Scheme: SchemeStripe, Secrets: []string{stripeSecret}})
	check := func(body string) Event {
		t.Helper()
		ev, err := p.Check(Input{
			Header: headers("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s", stripeTS, signStripe(stripeSecret, stripeTS, body))),
			Body:   []byte(body),
		}, now)
		if err != nil {
			t.Fatalf("Check(%s): %v", body, err)
		}
		return ev
	}
	first := check(stripeBody)
	resend := check(strings.Replace(stripeBody, `"pending_webhooks":2`, `"pending_webhooks":1`, 1))
	changed := check(strings.Replace(stripeBody, `"amount":2000`, `"amount":2500`, 1))
	reordered := check(`{"pending_webhooks":0,"data":{"object":{"amount":2000}},"type":"payment_intent.succeeded","object":"event","id":"evt_1OaBcD2eZvKYlo2C"}`)

	if first.ID != resend.ID || first.ID != changed.ID {
		t.Fatalf("ids differ: %q %q %q", first.ID, resend.ID, changed.ID)
	}
	if resend.ContentHash != first.ContentHash {
		t.Errorf("resend with a new pending_webhooks changed the content hash")
	}
	if reordered.ContentHash != first.ContentHash {
		t.Errorf("re-serialized resend changed the content hash")
	}
	if changed.ContentHash == first.ContentHash {
		t.Errorf("changed amount kept the content hash")
	}
	want, err := ContentDigest(nil, []byte(stripeBody), []string{"pending_webhooks"})
	if err != nil || first.ContentHash != want {
		t.Errorf("ContentHash = %q, want %q (%v)", first.ContentHash, want, err)
	}
}

func TestParseStripeHeader(t *testing.T) {
	sig := strings.Repeat("ab", 32)
	ts, sigs, err := parseStripeHeader("t=12,v1=" + sig + ",v0=00,v1=" + strings.ToUpper(sig))
	if err != nil || ts != 12 || len(sigs) != 2 || sigs[0] != sigs[1] || sigs[0][0] != 0xab {
		t.Fatalf("got %d %x %v", ts, sigs, err)
	}
	for _, h := range []string{"", ",", "t=1", "v1=" + sig, "t=1,v1=", "t==1,v1=" + sig, "t=1x,v1=" + sig, "t=1,t=1,v1=" + sig} {
		if _, _, err := parseStripeHeader(h); err == nil {
			t.Errorf("%q: no error", h)
		}
	}
}
