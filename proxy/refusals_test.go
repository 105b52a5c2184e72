package proxy_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/proxy/admin"
	"github.com/whguard/whguard/verify"
)

// Secrets, and a marker in every body: none may reach a refusal record,
// the admin API or a log line.
const (
	explStripeA  = "whsec_explainStripeA"
	explStripeB  = "whsec_explainStripeB"
	explGitHub   = "explain-github-secret"
	explHMAC     = "explain-hmac-secret"
	explStandard = "whsec_ZXhwbGFpbi1zdGFuZGFyZC1zZWNyZXQ="
	explTwilio   = "explain-twilio-token"
	explSquare   = "explain-square-key"
	explMarker   = "EXPLAIN-BODY-MARKER-91c4"
)

var explSecrets = []string{explStripeA, explStripeB, explGitHub, explHMAC, explStandard, explTwilio, explSquare}

var explBody = `{"id":"evt_explain","type":"invoice.paid","note":"` + explMarker + `"}`

func explMAC(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func explStripeHeader(secret string, at time.Time, body string) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	return http.Header{"Stripe-Signature": {"t=" + ts + ",v1=" + hex.EncodeToString(explMAC([]byte(secret), ts, ".", body))}}
}

func explStandardHeader(ts, body string) http.Header {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(explStandard, "whsec_"))
	return http.Header{"Webhook-Id": {"msg_explain"}, "Webhook-Timestamp": {ts},
		"Webhook-Signature": {"v1," + base64.StdEncoding.EncodeToString(explMAC(key, "msg_explain", ".", ts, ".", body))}}
}

// explainStack is an ingress with a provider per cause, its refusals kept
// and served by a real admin API, its log lines observed; refused
// requests never reach its journal.
type explainStack struct {
	ingress  *proxy.Ingress
	refusals *proxy.Refusals
	reg      *prometheus.Registry
	logs     *observer.ObservedLogs
	admin    *httptest.Server
	mu       sync.Mutex
	now      time.Time
}

func (s *explainStack) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *explainStack) advance(d time.Duration) {
	s.mu.Lock()
	s.now = s.now.Add(d)
	s.mu.Unlock()
}

func newExplainStack(t *testing.T) *explainStack {
	t.Helper()
	s := &explainStack{now: time.Now(), refusals: proxy.NewRefusals(0), reg: prometheus.NewRegistry()}
	core, logs := observer.New(zap.DebugLevel)
	s.logs = logs
	route := func(cfg verify.ProviderConfig) proxy.Route {
		p, err := verify.NewProvider(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return proxy.Route{Path: "/webhooks/" + cfg.Name, Provider: p}
	}
	std := route(verify.ProviderConfig{Name: "std", Scheme: verify.SchemeStandard, Secrets: []string{explStandard}})
	std.MaxBodyBytes = 2048
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{
			route(verify.ProviderConfig{Name: "stripe-a", Scheme: verify.SchemeStripe, Secrets: []string{explStripeA}}),
			route(verify.ProviderConfig{Name: "stripe-b", Scheme: verify.SchemeStripe, Secrets: []string{explStripeB}}),
			route(verify.ProviderConfig{Name: "gh", Scheme: verify.SchemeGitHub, Secrets: []string{explGitHub}}),
			route(verify.ProviderConfig{Name: "inhouse", Scheme: verify.SchemeHMAC, Secrets: []string{explHMAC},
				HMAC: verify.HMACConfig{SignatureHeader: "X-Signature", Encoding: "base64"}}),
			std,
			route(verify.ProviderConfig{Name: "tw", Scheme: verify.SchemeTwilio, Secrets: []string{explTwilio}, PublicURL: "https://hooks.example.com/webhooks/tw"}),
			route(verify.ProviderConfig{Name: "sq", Scheme: verify.SchemeSquare, Secrets: []string{explSquare}, PublicURL: "https://hooks.example.com/webhooks/sq"}),
		},
		Intake:   newIntake(t, failingJournal{}, nil),
		Metrics:  proxy.NewMetrics(s.reg),
		Logger:   zap.New(core),
		Now:      s.clock,
		Refusals: s.refusals,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.ingress = in
	s.admin = httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: func(context.Context) error { return nil }, Gatherer: s.reg, Token: "explain-token",
		API: admin.NewAPI(admin.APIConfig{Refusals: s.refusals}),
	}))
	t.Cleanup(s.admin.Close)
	return s
}

// list reads GET /api/refusals with query, returning the records and the
// raw answer.
func (s *explainStack) list(t *testing.T, query string) ([]proxy.Refusal, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.admin.URL+"/api/refusals?"+query, nil)
	req.Header.Set("Authorization", "Bearer explain-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/refusals?%s: %d %s", query, resp.StatusCode, raw)
	}
	var out struct {
		Refusals []proxy.Refusal `json:"refusals"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.Refusals, string(raw)
}

// Every cause, in a real refused request sent over HTTP to the ingress:
// the sender gets its usual refusal, and GET /api/refusals shows the
// request (newest first) with its reason, diagnosis and header names;
// no secret, signature or body content is kept, served or logged.
func TestRefusalsExplained(t *testing.T) {
	s := newExplainStack(t)
	srv := httptest.NewServer(s.ingress)
	defer srv.Close()
	now := s.clock()
	ts := strconv.FormatInt(now.Unix(), 10)
	form := url.Values{"CallSid": {"CA1"}, "Note": {explMarker}}
	twilioSig := func(u string) string {
		keys := make([]string, 0, len(form))
		for k := range form {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		signed := u
		for _, k := range keys {
			signed += k + form.Get(k)
		}
		m := hmac.New(sha1.New, []byte(explTwilio))
		m.Write([]byte(signed))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	indented := "{\n  \"id\": \"evt_explain\",\n  \"note\": \"" + explMarker + "\"\n}\n"
	compact := `{"id":"evt_explain","note":"` + explMarker + `"}`

	cases := []struct {
		name, path, provider string
		header               http.Header
		body                 string
		status               int
		reason, diagnosis    string
		detail               string
	}{
		{"another provider's secret", "/webhooks/stripe-a", "stripe-a", explStripeHeader(explStripeB, now, explBody), explBody,
			401, verify.ReasonSignatureMismatch, verify.DiagnosisWrongPath, `"stripe-b"`},
		{"another scheme", "/webhooks/gh", "gh", http.Header{"Svix-Id": {"msg_1"}, "Svix-Timestamp": {ts}, "Svix-Signature": {"v1,abc"}}, explBody,
			400, verify.ReasonMissingHeader, verify.DiagnosisWrongScheme, "svix"},
		{"hex for base64", "/webhooks/inhouse", "inhouse", http.Header{"X-Signature": {hex.EncodeToString(explMAC([]byte(explHMAC), explBody))}}, explBody,
			401, verify.ReasonMalformedHeader, verify.DiagnosisEncodingHex, "X-Signature"},
		{"base64 for hex", "/webhooks/gh", "gh", http.Header{"X-Hub-Signature-256": {"sha256=" + base64.StdEncoding.EncodeToString(explMAC([]byte(explGitHub), explBody))}}, explBody,
			401, verify.ReasonMalformedHeader, verify.DiagnosisEncodingBase64, "X-Hub-Signature-256"},
		{"milliseconds", "/webhooks/std", "std", explStandardHeader(strconv.FormatInt(now.UnixMilli(), 10), explBody), explBody,
			401, verify.ReasonMalformedHeader, verify.DiagnosisTimestampMillis, "milliseconds"},
		{"clock skew", "/webhooks/std", "std", explStandardHeader(strconv.FormatInt(now.Unix()-600, 10), explBody), explBody,
			401, verify.ReasonTimestampOutsideTolerance, verify.DiagnosisClockSkew, "seconds behind this replica's clock"},
		{"re-formatted body", "/webhooks/stripe-a", "stripe-a", explStripeHeader(explStripeA, now, compact), indented,
			401, verify.ReasonSignatureMismatch, verify.DiagnosisBodyReserialized, "re-serialized compactly"},
		{"twilio signs the URL it posted to", "/webhooks/tw", "tw", http.Header{"X-Twilio-Signature": {twilioSig(srv.URL + "/webhooks/tw")},
			"Content-Type": {"application/x-www-form-urlencoded"}}, form.Encode(),
			401, verify.ReasonSignatureMismatch, verify.DiagnosisURLMismatch, "scheme http, not https"},
		{"square behind a proxy", "/webhooks/sq", "sq", http.Header{"X-Forwarded-Host": {"hooks.example.com:8443"},
			"X-Square-Hmacsha256-Signature": {base64.StdEncoding.EncodeToString(explMAC([]byte(explSquare), "https://hooks.example.com:8443/webhooks/sq", explBody))}}, explBody,
			401, verify.ReasonSignatureMismatch, verify.DiagnosisURLMismatch, "port 8443, not 443"},
		{"a wrong secret", "/webhooks/stripe-a", "stripe-a", explStripeHeader("whsec_nobody", now, explBody), explBody,
			401, verify.ReasonSignatureMismatch, verify.DiagnosisNone, "no configured secret verifies"},
		{"a typo in the path", "/webhooks/stripe-c", "", explStripeHeader(explStripeA, now, explBody), explBody,
			404, proxy.RefusalNotFound, verify.DiagnosisWrongPath, "/webhooks/stripe-a"},
		{"too large", "/webhooks/std", "std", explStandardHeader(ts, explBody), strings.Repeat(explMarker, 200),
			413, proxy.RefusalTooLarge, verify.DiagnosisNone, "2048 bytes"},
	}
	kept := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A second apart: the diagnoses stay within their ration.
			s.advance(time.Second)
			req, err := http.NewRequest(http.MethodPost, srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, answer, tc.status)
			}
			// The record is kept once the answer is out: wait for it.
			var got []proxy.Refusal
			if !testwait.Until(5*time.Second, testwait.Poll, func() bool { got, _ = s.list(t, ""); return len(got) > kept }) {
				t.Fatalf("no record of the refusal: %+v", got)
			}
			kept++
			if r := got[0]; r.Path != tc.path || r.Provider != tc.provider || r.Status != tc.status || r.Reason != tc.reason {
				t.Fatalf("newest record %+v", r)
			}
			filtered, _ := s.list(t, url.Values{"provider": {tc.provider}, "reason": {tc.reason}}.Encode())
			if len(filtered) == 0 || filtered[0].At != got[0].At {
				t.Fatalf("filtered by provider and reason: %+v", filtered)
			}
			r := got[0]
			if r.Diagnosis != tc.diagnosis || !strings.Contains(r.Detail, tc.detail) || r.Method != http.MethodPost {
				t.Fatalf("record %+v, want diagnosis %s with %q", r, tc.diagnosis, tc.detail)
			}
			for name := range tc.header {
				if !contains(r.Headers, name) {
					t.Errorf("header names %v lack %s", r.Headers, name)
				}
			}
			if tc.status != 413 && r.BodyBytes != int64(len(tc.body)) {
				t.Errorf("body_bytes %d, want %d", r.BodyBytes, len(tc.body))
			}
		})
	}
	// A GET that routes nowhere is a browser or a scanner: not kept.
	resp, err := http.Get(srv.URL + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	all, raw := s.list(t, "")
	if len(all) != len(cases) {
		t.Errorf("%d records for %d refused requests", len(all), len(cases))
	}
	if all[0].Reason != proxy.RefusalTooLarge || !all[0].At.After(all[1].At) {
		t.Errorf("newest record %+v is not the last refusal", all[0])
	}
	var logged strings.Builder
	for _, e := range s.logs.All() {
		fmt.Fprintf(&logged, "%s %v\n", e.Message, e.ContextMap())
	}
	for _, secret := range append(explSecrets, explMarker, "invoice.paid", "msg_explain") {
		if strings.Contains(raw, secret) {
			t.Errorf("GET /api/refusals holds %q", secret)
		}
		if strings.Contains(logged.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	if !strings.Contains(logged.String(), "refusal diagnosed") {
		t.Errorf("no diagnosis logged:\n%s", logged.String())
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Diagnoses are rationed per replica, on the ingress clock: a flood of
// bad signatures gets 10 a second; beyond that each refusal is still
// kept and counted, as "not diagnosed". Diagnosed or not, the sender's
// answer is the same.
func TestDiagnosesRationed(t *testing.T) {
	s := newExplainStack(t)
	send := func() (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe-a", strings.NewReader(explBody))
		req.Header = explStripeHeader(explStripeB, s.clock(), explBody)
		rec := httptest.NewRecorder()
		s.ingress.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	status, first := send()
	for range 24 {
		if code, body := send(); code != status || body != first {
			t.Fatalf("answer %d %s, then %d %s", status, first, code, body)
		}
	}
	count := func() map[string]int {
		n := map[string]int{}
		for _, r := range s.refusals.List("stripe-a", "") {
			n[r.Diagnosis]++
			if r.Diagnosis == verify.DiagnosisNone && !strings.HasPrefix(r.Detail, "not diagnosed") {
				t.Fatalf("record %+v", r)
			}
		}
		return n
	}
	if got := count(); got[verify.DiagnosisWrongPath] != 10 || got[verify.DiagnosisNone] != 15 {
		t.Fatalf("25 refusals in an instant: %v", got)
	}
	s.advance(300 * time.Millisecond) // 3 more
	for range 5 {
		send()
	}
	if got := count(); got[verify.DiagnosisWrongPath] != 13 || got[verify.DiagnosisNone] != 17 {
		t.Fatalf("5 more 300 ms later: %v", got)
	}
	err := testutil.GatherAndCompare(s.reg, bytes.NewBufferString(`
# HELP whguard_ingress_refusals_total Webhook requests refused by verification (401, 400, 403 and 503), by provider, reason (missing_header, malformed_header, timestamp_outside_tolerance, signature_mismatch, malformed_body, invalid_event_id, unsupported_event, challenge_refused, untrusted_key_url, key_unavailable, sender_not_allowed) and diagnosis (wrong_path, wrong_scheme, encoding_hex, encoding_base64, timestamp_ms, clock_skew, body_reserialized, url_mismatch, none).
# TYPE whguard_ingress_refusals_total counter
whguard_ingress_refusals_total{diagnosis="none",provider="stripe-a",reason="signature_mismatch"} 17
whguard_ingress_refusals_total{diagnosis="wrong_path",provider="stripe-a",reason="signature_mismatch"} 13
`), "whguard_ingress_refusals_total")
	if err != nil {
		t.Error(err)
	}
}

// The ring keeps the last n refusals, newest first, and filters them.
func TestRefusalsRing(t *testing.T) {
	s := &explainStack{now: time.Now()}
	ring := proxy.NewRefusals(3)
	in, err := proxy.NewIngress(proxy.IngressConfig{Intake: newIntake(t, failingJournal{}, nil), Refusals: ring, Now: s.clock})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		s.advance(time.Second)
		req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/nowhere/%d", i), strings.NewReader("{}"))
		in.ServeHTTP(httptest.NewRecorder(), req)
	}
	got := ring.List("", "")
	if len(got) != 3 || got[0].Path != "/nowhere/4" || got[2].Path != "/nowhere/2" || !got[0].At.After(got[1].At) {
		t.Fatalf("ring of 3 after 5: %+v", got)
	}
	if got := ring.List("", proxy.RefusalNotFound); len(got) != 3 {
		t.Fatalf("by reason: %d", len(got))
	}
	if got := ring.List("stripe", ""); len(got) != 0 {
		t.Fatalf("by provider: %d", len(got))
	}
	if got := proxy.NewRefusals(0).List("", ""); got == nil || len(got) != 0 {
		t.Fatalf("empty ring lists %v", got)
	}
}

// Refusals that verification did not decide are kept too, with a sentence
// and no diagnosis: a query that is not UTF-8 on a signed request.
func TestRefusalsKeptBeyondVerification(t *testing.T) {
	s := newExplainStack(t)
	req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe-a", strings.NewReader(explBody))
	req.URL.RawQuery = "note=\xff"
	req.Header = explStripeHeader(explStripeA, s.clock(), explBody)
	rec := httptest.NewRecorder()
	s.ingress.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d %s", rec.Code, rec.Body)
	}
	got := s.refusals.List("stripe-a", proxy.RefusalInvalidQuery)
	if len(got) != 1 || got[0].Diagnosis != verify.DiagnosisNone || !strings.Contains(got[0].Detail, "not valid UTF-8") ||
		got[0].BodyBytes != int64(len(explBody)) {
		t.Fatalf("records %+v", got)
	}
	// Not a verification refusal: not in the refusals counter.
	if n := testutil.CollectAndCount(s.reg, "whguard_ingress_refusals_total"); n != 0 {
		t.Fatalf("%d refusal series", n)
	}
}

// A record holds what it shows, not the request it was cut from: a short
// path sent with a long query, a long method and a long header name keep
// a few hundred bytes each, not the request line and the name they came
// in (which net/http allocates once and the record's strings would
// otherwise point into).
func TestRefusalsKeepNoMoreThanTheyShow(t *testing.T) {
	ring := proxy.NewRefusals(proxy.DefaultRefusalsKept)
	in, err := proxy.NewIngress(proxy.IngressConfig{Intake: newIntake(t, failingJournal{}, nil), Refusals: ring})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	defer srv.Close()
	const n, pad = 400, 24 << 10
	query, name := "q="+strings.Repeat("a", pad), "X-"+strings.Repeat("N", pad)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for i := range n {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/nowhere/%d?%s", srv.URL, i, query), strings.NewReader("{}"))
		req.Header.Set(name, "v")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	srv.CloseClientConnections()
	grown := int64(heap()) - int64(before)
	got := ring.List("", "")
	if len(got) != n || len(got[0].Headers) == 0 {
		t.Fatalf("%d records", len(got))
	}
	// Each request brought 2×24 KiB; a record shows under 1 KiB of it.
	if limit := int64(n * 4 << 10); grown > limit {
		t.Errorf("the heap grew by %d KiB for %d records (at most %d KiB expected): the records hold their requests' bytes", grown>>10, n, limit>>10)
	}
	runtime.KeepAlive(ring)
}
