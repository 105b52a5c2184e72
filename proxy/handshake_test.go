package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// challengeChecker is a sender with a GET handshake, a proof that can
// fail (403), a key host that can be down (503) and a fixed reply to its
// events, the way verify's second-ring schemes answer: the ingress must
// carry each to the sender as the checker says.
type challengeChecker struct{}

func (challengeChecker) Name() string                                          { return "hs" }
func (challengeChecker) SchemeName() string                                    { return "test" }
func (challengeChecker) Digest(http.Header, []byte) string                     { return "sha256:x" }
func (challengeChecker) Accepts(m string) bool                                 { return m == http.MethodPost || m == http.MethodGet }
func (challengeChecker) Precheck(http.Header, string, string, time.Time) error { return nil }

func (challengeChecker) Check(in verify.Input, _ time.Time) (verify.Event, error) {
	switch {
	case in.RawQuery == "deny":
		return verify.Event{}, fmt.Errorf("%w: verify token does not match", verify.ErrForbidden)
	case in.RawQuery == "down":
		return verify.Event{}, fmt.Errorf("%w: key host unreachable", verify.ErrUnavailable)
	case in.Method == http.MethodGet:
		return verify.Event{Handshake: []byte("1158201444"), AnswerType: "text/plain; charset=utf-8"}, nil
	}
	return verify.Event{ID: "ev_" + string(in.Body), Type: "t", ContentHash: "sha256:" + string(in.Body),
		Reply: []byte("[accepted]"), AnswerType: "text/plain; charset=utf-8"}, nil
}

// Handshakes by GET are answered as the checker says and never journaled;
// a 403 or 503 from the checker reaches the sender (the 503 with
// Retry-After); a fixed reply keeps its Content-Type for the new event
// and its duplicate; PUT stays 405.
func TestHandshakesAndFixedReplies(t *testing.T) {
	t.Parallel()
	j := testdb.OpenStore(t, "sqlite", true)
	reg := prometheus.NewRegistry()
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes:  []proxy.Route{{Path: "/webhooks/hs", Provider: challengeChecker{}}},
		Intake:  newIntake(t, j, nil),
		Metrics: proxy.NewMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	defer srv.Close()
	do := func(method, query, body string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/webhooks/hs?"+query, strings.NewReader(body))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	f := &fixture{reg: reg, j: j}

	if st, body, h := do(http.MethodGet, "hub.challenge=1158201444", ""); st != 200 || body != "1158201444" || h.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("GET handshake = %d %q %q", st, body, h.Get("Content-Type"))
	}
	if st, body, _ := do(http.MethodGet, "deny", ""); st != http.StatusForbidden || !strings.Contains(body, `"error"`) {
		t.Fatalf("refused proof = %d %q, want 403 with a JSON error", st, body)
	}
	if st, _, h := do(http.MethodPost, "down", "x"); st != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("key host down = %d (Retry-After %q), want 503 with Retry-After", st, h.Get("Retry-After"))
	}
	if st, _, _ := do(http.MethodPut, "", "x"); st != http.StatusMethodNotAllowed {
		t.Fatalf("PUT = %d, want 405", st)
	}
	for i, want := range []string{"accepted", "duplicate"} {
		st, body, h := do(http.MethodPost, "", "one")
		if st != 200 || body != "[accepted]" || h.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Fatalf("event %d = %d %q %q, want the fixed reply", i, st, body, h.Get("Content-Type"))
		}
		if got := f.count("hs", want); got != 1 {
			t.Errorf("%s counter = %v, want 1", want, got)
		}
	}
	evs, _, err := j.List(context.Background(), journal.Filter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].EventID != "ev_one" {
		t.Fatalf("journal holds %+v, want only the event (no handshake)", evs)
	}
	for result, want := range map[string]float64{"handshake": 1, "unauthorized": 1, "unavailable": 1} {
		if got := f.count("hs", result); got != want {
			t.Errorf("%s counter = %v, want %v", result, got, want)
		}
	}
}
