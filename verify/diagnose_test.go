package verify

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Secrets and a body marker that must never reach a diagnosis.
const (
	diagStripeA  = "whsec_diagStripeSecretA"
	diagStripeB  = "whsec_diagStripeSecretB"
	diagGitHub   = "diag-github-secret"
	diagHMAC     = "diag-hmac-secret"
	diagTwilio   = "diag-twilio-token"
	diagSquare   = "diag-square-key"
	diagStandard = "whsec_ZGlhZy1zdGFuZGFyZC1zZWNyZXQ="
	diagMarker   = "DIAG-BODY-MARKER-5e1f"
)

var diagBody = `{"id":"evt_diag","type":"invoice.paid","note":"` + diagMarker + `"}`

// refusedAs refuses a request the way the ingress does: Precheck before
// the body is read (a refusal there has no body), then Check.
func refusedAs(t *testing.T, p *Provider, in Input, host string, now time.Time) Refused {
	t.Helper()
	if err := p.Precheck(in.Header, in.RawQuery, in.Method, now); err != nil {
		return Refused{Input: Input{Header: in.Header, RawQuery: in.RawQuery, Method: in.Method}, Host: host, Err: err}
	}
	if _, err := p.Check(in, now); err != nil {
		return Refused{Input: in, BodyRead: true, Host: host, Err: err}
	}
	t.Fatalf("the request was not refused")
	return Refused{}
}

// Each cause Diagnose knows, found in a real refused request signed as a
// misconfigured sender would sign it; the detail names what went wrong
// and holds no secret, signature or body content.
func TestDiagnoseCauses(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	stripeA := mustProvider(t, ProviderConfig{Name: "stripe-a", Scheme: SchemeStripe, Secrets: []string{diagStripeA}})
	stripeB := mustProvider(t, ProviderConfig{Name: "stripe-b", Scheme: SchemeStripe, Secrets: []string{diagStripeB}})
	github := mustProvider(t, ProviderConfig{Name: "gh", Scheme: SchemeGitHub, Secrets: []string{diagGitHub}})
	hmacB64 := mustProvider(t, ProviderConfig{Name: "inhouse", Scheme: SchemeHMAC, Secrets: []string{diagHMAC},
		HMAC: HMACConfig{SignatureHeader: "X-Signature", Encoding: "base64"}})
	standard := mustProvider(t, ProviderConfig{Name: "std", Scheme: SchemeStandard, Secrets: []string{diagStandard}})
	twilio := mustProvider(t, ProviderConfig{Name: "tw", Scheme: SchemeTwilio, Secrets: []string{diagTwilio}, PublicURL: "https://hooks.example.com/webhooks/tw"})
	square := mustProvider(t, ProviderConfig{Name: "sq", Scheme: SchemeSquare, Secrets: []string{diagSquare}, PublicURL: "https://hooks.example.com/webhooks/sq"})
	peers := []Peer{{"/webhooks/stripe-a", stripeA}, {"/webhooks/stripe-b", stripeB}, {"/webhooks/gh", github},
		{"/webhooks/inhouse", hmacB64}, {"/webhooks/std", standard}, {"/webhooks/tw", twilio}, {"/webhooks/sq", square}}

	stripeHeader := func(secret string, at time.Time, body string) http.Header {
		return headers("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s", at.Unix(), signStripe(secret, at.Unix(), body)))
	}
	hexHMAC := hex.EncodeToString(hmacSHA256([]byte(diagHMAC), diagBody))
	ghB64 := "sha256=" + base64.StdEncoding.EncodeToString(hmacSHA256([]byte(diagGitHub), diagBody))
	standardAt := func(at string, body string) http.Header {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(diagStandard, "whsec_"))
		sig := "v1," + base64.StdEncoding.EncodeToString(hmacSHA256(key, "msg_1", ".", at, ".", body))
		return headers("webhook-id", "msg_1", "webhook-timestamp", at, "webhook-signature", sig)
	}
	form := url.Values{"CallSid": {"CA1"}, "Note": {diagMarker}}
	indented := "{\n  \"id\": \"evt_diag\",\n  \"type\": \"invoice.paid\",\n  \"note\": \"" + diagMarker + "\"\n}\n"

	cases := []struct {
		name       string
		p          *Provider
		header     http.Header
		body, host string
		want       string
		detail     []string
	}{
		{name: "another provider's secret", p: stripeA, header: stripeHeader(diagStripeB, now, diagBody), body: diagBody,
			want: DiagnosisWrongPath, detail: []string{`"stripe-b"`, "/webhooks/stripe-b"}},
		{name: "another provider's headers, body unread", p: github, header: stripeHeader(diagStripeB, now, diagBody), body: diagBody,
			want: DiagnosisWrongPath, detail: []string{`"stripe-a"`, "/webhooks/stripe-a", "not checked"}},
		{name: "a scheme configured nowhere here", p: github, header: headers("Svix-Id", "msg_1", "Svix-Timestamp", ts, "Svix-Signature", "v1,abc"), body: diagBody,
			want: DiagnosisWrongScheme, detail: []string{"Svix-Signature", "svix scheme", "X-Hub-Signature-256"}},
		{name: "hex for base64, body unread", p: hmacB64, header: headers("X-Signature", hexHMAC), body: diagBody,
			want: DiagnosisEncodingHex, detail: []string{"X-Signature", "is hex where the hmac scheme expects base64", "not checked"}},
		{name: "base64 for hex", p: github, header: headers("X-Hub-Signature-256", ghB64), body: diagBody,
			want: DiagnosisEncodingBase64, detail: []string{"X-Hub-Signature-256", "base64 where the github scheme expects hex"}},
		{name: "milliseconds", p: standard, header: standardAt(strconv.FormatInt(now.UnixMilli(), 10), diagBody), body: diagBody,
			want: DiagnosisTimestampMillis, detail: []string{"Webhook-Timestamp", "milliseconds"}},
		{name: "clock behind", p: standard, header: standardAt(strconv.FormatInt(now.Unix()-3600, 10), diagBody), body: diagBody,
			want: DiagnosisClockSkew, detail: []string{"3600 seconds behind", "5m0s tolerance"}},
		{name: "clock ahead", p: stripeA, header: stripeHeader(diagStripeA, now.Add(2*time.Hour), diagBody), body: diagBody,
			want: DiagnosisClockSkew, detail: []string{"7200 seconds ahead of"}},
		{name: "re-formatted body", p: stripeA, header: stripeHeader(diagStripeA, now, diagBody), body: indented,
			want: DiagnosisBodyReserialized, detail: []string{"re-serialized compactly"}},
		{name: "twilio over http", p: twilio, header: headers("X-Twilio-Signature", signTwilio(diagTwilio, "http://hooks.example.com/webhooks/tw", form)),
			body: form.Encode(), host: "hooks.example.com", want: DiagnosisURLMismatch, detail: []string{"scheme http, not https"}},
		{name: "square behind a proxy", p: square, header: headers("X-Square-Hmacsha256-Signature", signSquare(diagSquare, "http://square-app.internal:8080/webhooks/sq", diagBody)),
			body: diagBody, host: "square-app.internal:8080", want: DiagnosisURLMismatch,
			detail: []string{"scheme http, not https", "host square-app.internal, not hooks.example.com", "port 8080, not 443"}},
		{name: "a wrong secret", p: stripeA, header: stripeHeader("whsec_unknown", now, diagBody), body: diagBody,
			want: DiagnosisNone, detail: []string{"no configured secret verifies"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := refusedAs(t, tc.p, Input{Header: tc.header, Body: []byte(tc.body)}, tc.host, now)
			got := Diagnose(tc.p, peers, r, now)
			if got.Code != tc.want {
				t.Fatalf("diagnosis %s (%s), want %s; refusal %v", got.Code, got.Detail, tc.want, r.Err)
			}
			for _, want := range tc.detail {
				if !strings.Contains(got.Detail, want) {
					t.Errorf("detail %q lacks %q", got.Detail, want)
				}
			}
			if got.Attempts > MaxDiagnosisAttempts {
				t.Errorf("%d attempts", got.Attempts)
			}
			leaks := []string{diagMarker, diagStripeA, diagStripeB, diagGitHub, diagHMAC, diagTwilio, diagSquare, diagStandard, "invoice.paid"}
			for _, vs := range tc.header {
				leaks = append(leaks, vs...)
			}
			for _, s := range leaks {
				if len(s) > 6 && strings.Contains(got.Detail, s) {
					t.Errorf("detail %q holds %q", got.Detail, s)
				}
			}
		})
	}
}

// A path that routes nowhere is explained from its headers alone: a
// provider configured here whose signature headers it carries.
func TestDiagnoseNoRoute(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	stripe := mustProvider(t, ProviderConfig{Name: "stripe", Scheme: SchemeStripe, Secrets: []string{diagStripeA}})
	peers := []Peer{{"/webhooks/stripe", stripe}}
	h := headers("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s", now.Unix(), signStripe(diagStripeA, now.Unix(), diagBody)))
	got := Diagnose(nil, peers, Refused{Input: Input{Header: h}}, now)
	if got.Code != DiagnosisWrongPath || !strings.Contains(got.Detail, "/webhooks/stripe") {
		t.Fatalf("got %+v", got)
	}
	got = Diagnose(nil, peers, Refused{Input: Input{Header: headers("X-Hub-Signature-256", "sha256=00")}}, now)
	if got.Code != DiagnosisNone || !strings.Contains(got.Detail, "github or meta scheme") {
		t.Fatalf("got %+v", got)
	}
	got = Diagnose(nil, peers, Refused{Input: Input{Header: headers("Content-Type", "application/json")}}, now)
	if got.Code != DiagnosisNone || !strings.Contains(got.Detail, "no provider on this path") {
		t.Fatalf("got %+v", got)
	}
}

// However many providers are configured, one diagnosis runs at most
// MaxDiagnosisAttempts verifications; a cause beyond them is not found,
// and the detail says that not every cause was tried.
func TestDiagnoseBounded(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	var peers []Peer
	for i := range 3 * MaxDiagnosisAttempts {
		name := fmt.Sprintf("s%02d", i)
		peers = append(peers, Peer{"/webhooks/" + name, mustProvider(t, ProviderConfig{Name: name, Scheme: SchemeStripe, Secrets: []string{"whsec_" + name}})})
	}
	p := mustProvider(t, ProviderConfig{Name: "target", Scheme: SchemeStripe, Secrets: []string{diagStripeA}})
	signedBy := func(i int) Refused {
		h := headers("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s", now.Unix(), signStripe("whsec_"+peers[i].Provider.name, now.Unix(), diagBody)))
		return refusedAs(t, p, Input{Header: h, Body: []byte(diagBody)}, "", now)
	}
	if got := Diagnose(p, peers, signedBy(2), now); got.Code != DiagnosisWrongPath || got.Attempts != 3 {
		t.Fatalf("signed by the third peer: %+v", got)
	}
	got := Diagnose(p, peers, signedBy(len(peers)-1), now)
	if got.Code != DiagnosisNone || got.Attempts != MaxDiagnosisAttempts || !strings.Contains(got.Detail, "not every cause was tried") {
		t.Fatalf("signed by the last peer: %+v", got)
	}
	// A body over the bound is diagnosed from its headers alone: its
	// signature header is prechecked (re-encoded), its body never hashed.
	big := `{"id":"evt_big","pad":"` + strings.Repeat("x", MaxDiagnosedBody) + `"}`
	h := headers("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s", now.Unix(), signStripe("whsec_s00", now.Unix(), big)))
	got = Diagnose(p, peers, refusedAs(t, p, Input{Header: h, Body: []byte(big)}, "", now), now)
	if got.Code != DiagnosisNone || got.Attempts != 1 || !strings.Contains(got.Detail, "headers alone") {
		t.Fatalf("large body: %+v", got)
	}
}

// Every scheme's signature headers are decided: listed, configured
// (hmac), or knowingly none (signed in the body, or a credential in a
// header any request may carry).
func TestSchemeSignatureHeadersCoverRegistry(t *testing.T) {
	none := []string{SchemeMailgun, SchemePostmark, SchemeOkta, SchemeMSGraph, SchemeAdyen, SchemePubSub, SchemeHMAC, SchemeNone}
	for _, s := range KnownSchemes() {
		_, listed := schemeSignatureHeaders[s]
		if listed == slices.Contains(none, s) {
			t.Errorf("scheme %s: listed %v, in the none list %v", s, listed, !listed)
		}
	}
	for s := range schemeSignatureHeaders {
		if !slices.Contains(KnownSchemes(), s) {
			t.Errorf("unknown scheme %s listed", s)
		}
	}
}

func TestDiagnosisTokens(t *testing.T) {
	sum := hmacSHA256([]byte("k"), "body")
	hx, b64 := hex.EncodeToString(sum), base64.StdEncoding.EncodeToString(sum)
	for _, tc := range []struct {
		value string
		want  []sigToken
	}{
		{"sha256=" + hx, []sigToken{{start: 7, end: 7 + len(hx), other: b64}}},
		{"v1," + b64, []sigToken{{start: 3, end: 3 + len(b64), other: hx, base64: true}}},
		{"t=1,v1=" + hx + ",v1=" + b64, []sigToken{{start: 7, end: 7 + len(hx), other: b64}, {start: 11 + len(hx), end: 11 + len(hx) + len(b64), other: hx, base64: true}}},
		{"sha256=abc", nil},
	} {
		if got := signatureTokens(tc.value); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.value, got, tc.want)
		}
	}
}

// A scheme that reads its time from the body (mailgun) refuses a stale
// request whose headers pass their checks as they came: no header of it
// holds the time, so none is blamed. Without a secret anyone can send such
// a request, with a header of their own holding a millisecond time, and
// had its (long) name put in the detail.
func TestDiagnoseMillisecondsOnlyWhereTheHeadersFail(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	p := mustProvider(t, ProviderConfig{Name: "mg", Scheme: SchemeMailgun, Secrets: []string{diagGitHub}})
	stale := now.Add(-24 * time.Hour).Unix()
	body := fmt.Sprintf(`{"signature":{"timestamp":"%d","token":"tok","signature":"%s"},"event-data":{"id":"e1","event":"delivered"}}`,
		stale, strings.Repeat("ab", 32))
	long := "X-" + strings.Repeat("Padding", 500)
	h := headers("Content-Type", "application/json", long, strconv.FormatInt(now.UnixMilli(), 10))
	r := refusedAs(t, p, Input{Header: h, Body: []byte(body)}, "", now)
	if Reason(r.Err) != ReasonTimestampOutsideTolerance {
		t.Fatalf("refused for %s, want %s", Reason(r.Err), ReasonTimestampOutsideTolerance)
	}
	got := Diagnose(p, nil, r, now)
	if got.Code != DiagnosisClockSkew {
		t.Errorf("diagnosis %s, want %s (the body's time is stale)", got.Code, DiagnosisClockSkew)
	}
	if strings.Contains(strings.ToLower(got.Detail), "xpadding") || strings.Contains(got.Detail, "Padding") {
		t.Errorf("detail names the sender's own header: %.200q", got.Detail)
	}
}

// A request's headers are copied once per diagnosis, not once per
// attempt: 64 KiB of headers are some 3 000 of them, and trying the
// milliseconds or the other encoding in 16 copies made a diagnosis cost
// some 15 ms, where the verifications it is bounded by cost microseconds.
func TestDiagnoseCopiesTheHeadersOnce(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	p := mustProvider(t, ProviderConfig{Name: "s", Scheme: SchemeStripe, Secrets: []string{diagStripeA}})
	h := http.Header{"Stripe-Signature": {"t=1,v1=zz"}}
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	for i := range 3000 {
		h[fmt.Sprintf("A%04d", i)] = []string{ms}
	}
	r := refusedAs(t, p, Input{Header: h, Body: []byte(diagBody)}, "", now)
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			f()
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 10
	}
	var dg Diagnosis
	diagnosis := allocated(func() { dg = Diagnose(p, nil, r, now) })
	oneCopy := allocated(func() {
		c := make(http.Header, len(h))
		for k, v := range h {
			c[k] = v
		}
	})
	if dg.Attempts != MaxDiagnosisAttempts {
		t.Fatalf("%+v: expected every attempt spent", dg)
	}
	if diagnosis > 3*oneCopy {
		t.Errorf("a diagnosis of %d attempts allocated %d KiB, %.1f copies of the headers", dg.Attempts, diagnosis>>10, float64(diagnosis)/float64(oneCopy))
	}
}
