package verify

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	linearSecret      = "lin_wh_0123456789abcdefABCDEF0123456789"
	linearOtherSecret = "lin_wh_previous_secret_9876543210zyxwvu"
	linearDelivery    = "234d1a4e-b617-4388-90fe-adc3633d6b72"
	linearTSms        = int64(1700000000123)
)

// linearBody returns a Linear Issue webhook body delivered at ms.
func linearBody(ms int64, title string) string {
	return fmt.Sprintf(`{"action":"create","type":"Issue","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":%q},"url":"https://linear.app/x/issue/ENG-1","createdAt":"2023-11-14T22:13:20.000Z","organizationId":"o1","webhookTimestamp":%d,"webhookId":"w1"}`, title, ms)
}

// signLinear returns a Linear-Signature value (hex HMAC-SHA256 of the body,
// as @linear/sdk LinearWebhooks.verify checks it).
func signLinear(secret, body string) string {
	return hex.EncodeToString(hmacSHA256([]byte(secret), body))
}

func TestLinearCheck(t *testing.T) {
	now := time.UnixMilli(linearTSms)
	body := linearBody(linearTSms, "Fix it")
	good := signLinear(linearSecret, body)
	lh := func(sig string, kv ...string) http.Header {
		return headers(append([]string{"Linear-Signature", sig, "Linear-Event", "Issue"}, kv...)...)
	}
	signed := func(b string) http.Header { return lh(signLinear(linearSecret, b), "Linear-Delivery", linearDelivery) }
	base := ProviderConfig{Name: "linear", Scheme: SchemeLinear, Secrets: []string{linearSecret}}
	withTS := func(v string) string {
		return strings.Replace(body, fmt.Sprintf(`"webhookTimestamp":%d`, linearTSms), `"webhookTimestamp":`+v, 1)
	}
	canonical, err := Canonicalize([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	noTS := `{"action":"create","type":"Issue"}`
	cases := []checkCase{
		{name: "valid", header: lh(good, "Linear-Delivery", linearDelivery), body: body, now: now, wantID: linearDelivery},
		{name: "no delivery header: full body digest", header: lh(good), body: body, now: now, wantID: sha256Hex(string(canonical))},
		{name: "uppercase hex", header: lh(strings.ToUpper(good)), body: body, now: now},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{linearOtherSecret} },
			header: lh(good), body: body, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered body", header: lh(good), body: strings.Replace(body, "Fix it", "Fix that", 1), now: now, wantErr: ErrUnauthorized},
		{name: "rotated: second secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{linearOtherSecret, linearSecret} },
			header: lh(good, "Linear-Delivery", linearDelivery), body: body, now: now, wantID: linearDelivery},
		{name: "missing header", header: headers("Linear-Delivery", linearDelivery), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing Linear-Signature header"},
		{name: "sha256= prefix", header: lh("sha256=" + good), body: body, now: now, wantErr: ErrUnauthorized, wantMsg: "64 hex"},
		{name: "bad hex", header: lh(strings.Repeat("q", 64)), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "short", header: lh(good[:62]), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "two signatures", header: lh(good + "," + good), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: lh(strings.Repeat(good, 70)), body: body, now: now, wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "stale", header: lh(good), body: body, now: now.Add(time.Minute + time.Millisecond), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: lh(good), body: body, now: now.Add(-time.Minute - time.Millisecond), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "within tolerance", header: lh(good), body: body, now: now.Add(time.Minute), wantID: sha256Hex(string(canonical))},
		{name: "configured tolerance", cfg: func(c *ProviderConfig) { c.Tolerance = 10 * time.Minute },
			header: lh(good), body: body, now: now.Add(9 * time.Minute)},
		{name: "seconds, not milliseconds", header: signed(withTS("1700000000")), body: withTS("1700000000"), now: now,
			wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "exponent form", header: signed(withTS("1.700000000123e12")), body: withTS("1.700000000123e12"), now: now, wantID: linearDelivery},
		{name: "body not JSON", header: signed("webhookTimestamp=1"), body: "webhookTimestamp=1", now: now,
			wantErr: ErrBadRequest, wantMsg: "unparseable"},
		{name: "no webhookTimestamp", header: signed(noTS), body: noTS, now: now, wantErr: ErrBadRequest, wantMsg: `no "webhookTimestamp"`},
		{name: "nested webhookTimestamp only", header: signed(`{"data":{"webhookTimestamp":1700000000123}}`),
			body: `{"data":{"webhookTimestamp":1700000000123}}`, now: now, wantErr: ErrBadRequest},
		{name: "array body", header: signed(`[{"webhookTimestamp":1700000000123}]`), body: `[{"webhookTimestamp":1700000000123}]`, now: now,
			wantErr: ErrBadRequest},
	}
	for _, v := range []string{`"1700000000123"`, "1700000000123.5", "-1700000000123", "null", "1e30", "17000000001230000"} {
		cases = append(cases, checkCase{name: "webhookTimestamp " + v, header: signed(withTS(v)), body: withTS(v), now: now,
			wantErr: ErrBadRequest, wantMsg: "whole number of milliseconds"})
	}
	runCheckCases(t, base, cases)

	// The type: Linear-Event, else the body's "type".
	p := mustProvider(t, base)
	for _, tc := range []struct {
		header http.Header
		want   string
	}{
		{lh(good), "Issue"},
		{headers("Linear-Signature", good, "Linear-Event", "IssueLabel"), "IssueLabel"},
		{headers("Linear-Signature", good), "Issue"},
	} {
		ev, err := p.Check(Input{Header: tc.header, Body: []byte(body)}, now)
		if err != nil || ev.Type != tc.want {
			t.Errorf("%v: event = %+v, %v; want type %q", tc.header, ev, err, tc.want)
		}
	}
}

// TestLinearResend: Linear refreshes webhookTimestamp (and so the signature)
// on every delivery; a resend of the same data has the same content hash,
// different data does not.
func TestLinearResend(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "linear", Scheme: SchemeLinear, Secrets: []string{linearSecret}})
	if !reflect.DeepEqual(p.volatile, []string{"webhookTimestamp"}) {
		t.Fatalf("volatile = %q, want webhookTimestamp", p.volatile)
	}
	check := func(ms int64, title string) Event {
		t.Helper()
		body := linearBody(ms, title)
		ev, err := p.Check(Input{
			Header: headers("Linear-Signature", signLinear(linearSecret, body), "Linear-Delivery", linearDelivery),
			Body:   []byte(body),
		}, time.UnixMilli(ms))
		if err != nil {
			t.Fatalf("Check(%s): %v", body, err)
		}
		return ev
	}
	first := check(linearTSms, "Fix it")
	resend := check(linearTSms+3_600_000, "Fix it")
	changed := check(linearTSms+3_600_000, "Fix it now")
	if first.ID != linearDelivery || resend.ID != first.ID || changed.ID != first.ID {
		t.Fatalf("ids: %q %q %q", first.ID, resend.ID, changed.ID)
	}
	if resend.ContentHash != first.ContentHash {
		t.Errorf("resend with a new webhookTimestamp changed the content hash")
	}
	if changed.ContentHash == first.ContentHash {
		t.Errorf("changed title kept the content hash")
	}
	want, err := ContentDigest(nil, []byte(linearBody(0, "Fix it")), []string{"webhookTimestamp"})
	if err != nil || first.ContentHash != want {
		t.Errorf("ContentHash = %q, want %q (%v)", first.ContentHash, want, err)
	}
}
