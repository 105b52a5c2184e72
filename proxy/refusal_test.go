package proxy_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// refusalIngress is an ingress with a std and a stripe route whose log
// lines are observed; refused requests never reach its journal.
func refusalIngress(t *testing.T) (*proxy.Ingress, *prometheus.Registry, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	route := func(name, scheme, secret string) proxy.Route {
		p, err := verify.NewProvider(verify.ProviderConfig{Name: name, Scheme: scheme, Secrets: []string{secret}})
		if err != nil {
			t.Fatal(err)
		}
		return proxy.Route{Path: "/webhooks/" + name, Provider: p}
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes:  []proxy.Route{route("std", "standard", stdSecret), route("stripe", "stripe", stripeSecret)},
		Intake:  newIntake(t, failingJournal{}, nil),
		Metrics: proxy.NewMetrics(reg),
		Logger:  zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	return in, reg, logs
}

// Each refusal is logged with its reason code (never the signature or a
// secret) and counted in whguard_ingress_refusals_total{provider,reason,
// diagnosis}.
func TestRefusalReasonsLoggedAndCounted(t *testing.T) {
	in, reg, logs := refusalIngress(t)
	now := time.Now()
	body := `{"type":"x"}`
	good := signStandard("msg_r", now, body)
	without := good.Clone()
	without.Del("webhook-signature")
	garbled := good.Clone()
	garbled.Set("webhook-signature", "v1,not-base64")
	cases := []struct {
		name, path string
		header     http.Header
		body       string
		status     int
		reason     string
	}{
		{"tampered body", "/webhooks/std", good, `{"type":"y"}`, 401, verify.ReasonSignatureMismatch},
		{"stale", "/webhooks/std", signStandard("msg_r", now.Add(-time.Hour), body), body, 401, verify.ReasonTimestampOutsideTolerance},
		{"future", "/webhooks/std", signStandard("msg_r", now.Add(time.Hour), body), body, 401, verify.ReasonTimestampOutsideTolerance},
		{"garbled signature", "/webhooks/std", garbled, body, 401, verify.ReasonMalformedHeader},
		{"no signature", "/webhooks/std", without, body, 400, verify.ReasonMissingHeader},
		{"stripe body without id", "/webhooks/stripe", signStripe(now, body), body, 400, verify.ReasonMalformedBody},
	}
	for _, tc := range cases {
		logs.TakeAll()
		req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
		req.Header = tc.header.Clone()
		rec := httptest.NewRecorder()
		in.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Fatalf("%s: status %d %s, want %d", tc.name, rec.Code, rec.Body, tc.status)
		}
		lines := logs.FilterMessage("webhook refused").All()
		if len(lines) != 1 {
			t.Fatalf("%s: %d refusal log lines", tc.name, len(lines))
		}
		fields := lines[0].ContextMap()
		if fields["reason"] != tc.reason || fields["status"] != int64(tc.status) {
			t.Errorf("%s: log fields %v, want reason %s", tc.name, fields, tc.reason)
		}
		for _, v := range fields {
			s, _ := v.(string)
			for _, secretish := range []string{"MfKQ9r8G", "stripe test secret", tc.header.Get("webhook-signature"), tc.header.Get("Stripe-Signature")} {
				if secretish != "" && strings.Contains(s, secretish) {
					t.Errorf("%s: log line holds a secret or signature: %v", tc.name, fields)
				}
			}
		}
	}
	err := testutil.GatherAndCompare(reg, bytes.NewBufferString(`
# HELP whguard_ingress_refusals_total Webhook requests refused by verification (401, 400, 403 and 503), by provider, reason (missing_header, malformed_header, timestamp_outside_tolerance, signature_mismatch, malformed_body, invalid_event_id, unsupported_event, challenge_refused, untrusted_key_url, key_unavailable, sender_not_allowed) and diagnosis (wrong_path, wrong_scheme, encoding_hex, encoding_base64, timestamp_ms, clock_skew, body_reserialized, url_mismatch, none).
# TYPE whguard_ingress_refusals_total counter
whguard_ingress_refusals_total{diagnosis="clock_skew",provider="std",reason="timestamp_outside_tolerance"} 2
whguard_ingress_refusals_total{diagnosis="none",provider="std",reason="malformed_header"} 1
whguard_ingress_refusals_total{diagnosis="none",provider="std",reason="missing_header"} 1
whguard_ingress_refusals_total{diagnosis="none",provider="std",reason="signature_mismatch"} 1
whguard_ingress_refusals_total{diagnosis="none",provider="stripe",reason="malformed_body"} 1
`), "whguard_ingress_refusals_total")
	if err != nil {
		t.Error(err)
	}
}

// The 404 log line names the path, bounded to 200 bytes and never cut
// inside a UTF-8 sequence.
func TestNotFoundLogsPath(t *testing.T) {
	in, _, logs := refusalIngress(t)
	long := "/" + strings.Repeat("a", 198) + "é" + strings.Repeat("b", 300) // é straddles byte 200
	for _, tc := range []struct{ path, want string }{
		{"/webhooks/strpe", "/webhooks/strpe"},
		{long, long[:199]},
	} {
		logs.TakeAll()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		req.URL.Path = tc.path
		in.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			t.Fatalf("%.30s: status %d", tc.path, rec.Code)
		}
		lines := logs.FilterMessage("webhook refused").All()
		if len(lines) != 1 {
			t.Fatalf("%d log lines", len(lines))
		}
		if got := lines[0].ContextMap()["path"]; got != tc.want {
			t.Errorf("logged path %q, want %q", got, tc.want)
		}
	}
}
