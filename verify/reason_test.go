package verify

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Each refusal carries the reason code that says why, with the sentinel
// (and so the HTTP status) it always had.
func TestReason(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	const body = `{"id":"evt_1","type":"x"}`
	stripe := mustProvider(t, ProviderConfig{Name: "s", Scheme: SchemeStripe, Secrets: []string{stripeSecret}})
	stripeIDHeader := mustProvider(t, ProviderConfig{Name: "s", Scheme: SchemeStripe, Secrets: []string{stripeSecret}, IDHeader: "X-Id"})
	github := mustProvider(t, ProviderConfig{Name: "g", Scheme: SchemeGitHub, Secrets: []string{ghSecret}})
	gitlab := mustProvider(t, ProviderConfig{Name: "l", Scheme: SchemeGitLab, Secrets: []string{"token"}})
	slack := mustProvider(t, ProviderConfig{Name: "k", Scheme: SchemeSlack, Secrets: []string{slackSecret}})
	stripeHeader := func(at time.Time, b string) string {
		return "t=" + strconv.FormatInt(at.Unix(), 10) + ",v1=" + signStripe(stripeSecret, at.Unix(), b)
	}
	cases := []struct {
		name     string
		p        *Provider
		in       Input
		reason   string
		sentinel error
	}{
		{"no signature header", stripe, Input{Header: headers(), Body: []byte(body)}, ReasonMissingHeader, ErrBadRequest},
		{"no timestamp header", slack, Input{Header: headers("X-Slack-Signature", "v0=00"), Body: []byte(body)}, ReasonMissingHeader, ErrBadRequest},
		{"no id header", stripeIDHeader, Input{Header: headers("Stripe-Signature", stripeHeader(now, body)), Body: []byte(body)}, ReasonMissingHeader, ErrBadRequest},
		{"unparseable signature header", stripe, Input{Header: headers("Stripe-Signature", "garbage"), Body: []byte(body)}, ReasonMalformedHeader, ErrUnauthorized},
		{"oversized signature header", github, Input{Header: headers("X-Hub-Signature-256", strings.Repeat("a", 5000)), Body: []byte(body)}, ReasonMalformedHeader, ErrUnauthorized},
		{"malformed timestamp", slack, Input{Header: headers(slackHeaders("v0=00", 0, "X-Slack-Request-Timestamp", "-1")...), Body: []byte(body)}, ReasonMalformedHeader, ErrUnauthorized},
		{"stale timestamp", stripe, Input{Header: headers("Stripe-Signature", stripeHeader(now.Add(-time.Hour), body)), Body: []byte(body)}, ReasonTimestampOutsideTolerance, ErrUnauthorized},
		{"future timestamp", slack, Input{Header: headers(slackHeaders(signSlack(slackSecret, now.Unix()+3600, body), now.Unix()+3600)...), Body: []byte(body)}, ReasonTimestampOutsideTolerance, ErrUnauthorized},
		{"wrong signature", stripe, Input{Header: headers("Stripe-Signature", "t="+ts+",v1="+signStripe("whsec_other", now.Unix(), body)), Body: []byte(body)}, ReasonSignatureMismatch, ErrUnauthorized},
		{"tampered body", github, Input{Header: headers("X-Hub-Signature-256", signGitHub(ghSecret, body)), Body: []byte(body + " ")}, ReasonSignatureMismatch, ErrUnauthorized},
		{"wrong token", gitlab, Input{Header: headers("X-Gitlab-Token", "nope"), Body: []byte(body)}, ReasonSignatureMismatch, ErrUnauthorized},
		{"body without id", stripe, Input{Header: headers("Stripe-Signature", stripeHeader(now, `{"type":"x"}`)), Body: []byte(`{"type":"x"}`)}, ReasonMalformedBody, ErrBadRequest},
		{"body not JSON, keyed by digest", github, Input{Header: headers("X-Hub-Signature-256", signGitHub(ghSecret, `{"a":1,"a":2}`)), Body: []byte(`{"a":1,"a":2}`)}, ReasonMalformedBody, ErrBadRequest},
		{"event id with a control character", stripeIDHeader, Input{Header: headers("Stripe-Signature", stripeHeader(now, body), "X-Id", "a\x01b"), Body: []byte(body)}, ReasonInvalidEventID, ErrBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.Check(tc.in, now)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := Reason(err); got != tc.reason {
				t.Errorf("Reason = %q, want %q (error: %v)", got, tc.reason, err)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tc.sentinel)
			}
			if !strings.HasPrefix(err.Error(), tc.sentinel.Error()+": ") {
				t.Errorf("message %q changed", err)
			}
		})
	}
	if Reason(nil) != "" || Reason(errors.New("x")) != ReasonOther {
		t.Error("Reason of nil or of a foreign error")
	}
	wrapped := fmt.Errorf("context: %w", missingHeader("X-Sig"))
	if Reason(wrapped) != ReasonMissingHeader {
		t.Errorf("Reason lost through wrapping: %q", Reason(wrapped))
	}
}
