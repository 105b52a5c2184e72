package forwarder_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/verify"
)

// TestSentHeadersRebuildTheRequest: the headers an attempt sent are
// rebuilt exactly from the journaled headers and what the attempt records
// of signing (journal.Attempt.Sent, nothing when signing changed nothing):
// re-signed, unsigned, or forwarded as received, hop-by-hop headers,
// those Connection names and spoofed whguard headers left out.
func TestSentHeadersRebuildTheRequest(t *testing.T) {
	t.Parallel()
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "pay", Scheme: "stripe", Secrets: []string{"whsec_sentHeaders0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	stored := http.Header{
		"Stripe-Signature": {"t=1,v1=from-the-sender"}, "Content-Type": {"application/json"},
		"Connection": {"keep-alive, X-Private"}, "X-Private": {"hop"}, "Accept-Encoding": {"gzip"},
		"X-Whguard-Attempt": {"99"}, "X-Forwarded-For": {"127.0.0.1"}, "Authorization": {"Bearer x"},
	}
	for _, c := range []struct {
		name    string
		target  forwarder.Target
		scheme  string
		changed bool
	}{
		{"re-signed", forwarder.Target{Scheme: "stripe", Resign: p.Resign, Unsign: p.Unsign}, "stripe", true},
		{"unsigned (verified under none)", forwarder.Target{Scheme: "stripe", Resign: p.Resign, Unsign: p.Unsign}, "none", true},
		{"forwarded as received", forwarder.Target{Scheme: "stripe"}, "stripe", false},
	} {
		c.target.BackendURL = "http://127.0.0.1:1"
		d := journal.Delivery{ID: 42, Provider: "pay", EventID: "evt_1", Attempt: 3, Body: []byte(`{}`), Path: "/p",
			Headers: stored, Scheme: c.scheme}
		req, sent, err := forwarder.BuildWithSent(context.Background(), c.target, d, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if sent.IsZero() == c.changed {
			t.Errorf("%s: recorded %+v, want a change: %v", c.name, sent, c.changed)
		}
		got := forwarder.SentHeaders(stored, "pay", "evt_1", 42, 3, sent)
		if !reflect.DeepEqual(got, req.Header) {
			t.Errorf("%s: rebuilt\n%v\nsent\n%v", c.name, got, req.Header)
		}
		if got.Get("X-Private") != "" || got.Get("Accept-Encoding") != "" || got.Get(forwarder.HeaderAttempt) != "3" {
			t.Errorf("%s: sent %v", c.name, got)
		}
	}
}

// TestSendRecordsWhatSigningChanged: a delivery's attempt record carries
// what the request's headers changed, and nothing when they did not.
func TestSendRecordsWhatSigningChanged(t *testing.T) {
	t.Parallel()
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	target := forwarder.Target{BackendURL: srv.URL, Resign: func(h http.Header, _ []byte, _ time.Time) {
		h.Set("X-Sig", "fresh")
		h.Del("X-Old")
	}}
	d := journal.Delivery{ID: 1, Provider: "p", EventID: "e", Attempt: 1, Path: "/",
		Headers: http.Header{"X-Sig": {"old"}, "X-Old": {"1"}, "X-Keep": {"k"}}}
	a := forwarder.AttemptOnce(context.Background(), target, d)
	if a.StatusCode != http.StatusOK || a.Sent.Set.Get("X-Sig") != "fresh" || len(a.Sent.Set) != 1 || !reflect.DeepEqual(a.Sent.Del, []string{"X-Old"}) {
		t.Fatalf("recorded %+v", a)
	}
	if got.Get("X-Sig") != "fresh" || got.Get("X-Old") != "" || got.Get("X-Keep") != "k" {
		t.Fatalf("the backend got %v", got)
	}
	target.Resign = nil
	if a := forwarder.AttemptOnce(context.Background(), target, d); !a.Sent.IsZero() {
		t.Fatalf("forwarded as received, recorded %+v", a.Sent)
	}
}
