package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// fakeControl records pauses and resumes, and knows which are in force.
type fakeControl struct {
	mu      sync.Mutex
	paused  []journal.Pause
	resumed []string
	active  map[string]bool // kind+" "+name of the pauses in force
}

func (c *fakeControl) Backends(context.Context) (forwarder.Backends, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := forwarder.BackendStatus{Backend: "http://app:80", Breaker: "closed", Providers: []string{}}
	if len(c.paused) > 0 {
		b.Paused = &c.paused[len(c.paused)-1]
	}
	return forwarder.Backends{Backends: []forwarder.BackendStatus{b}, PausedProviders: []journal.Pause{}}, nil
}

func (c *fakeControl) Pause(_ context.Context, p journal.Pause) (journal.Pause, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = append(c.paused, p)
	if c.active == nil {
		c.active = map[string]bool{}
	}
	c.active[p.Kind+" "+p.Name] = true
	return p, nil
}

func (c *fakeControl) Resume(_ context.Context, kind, name, _ string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resumed = append(c.resumed, kind+" "+name)
	found := c.active[kind+" "+name]
	delete(c.active, kind+" "+name)
	return found, nil
}

// TestPauseMustNameSomethingConfigured: a pause of an origin or provider
// that matches nothing configured answers 404 naming what is configured,
// and pauses nothing, unless forced; an origin written without its
// scheme pauses the one configured origin with that host:port, under
// that origin's name. (Found: "pause -backend 127.0.0.1:15001", without
// the scheme, answered "paused" and held nothing.)
func TestPauseMustNameSomethingConfigured(t *testing.T) {
	t.Parallel()
	c := &fakeControl{}
	adm := admin.NewAdmin(admin.AdminConfig{
		Ready: func(context.Context) error { return nil }, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: admin.NewAPI(admin.APIConfig{Backends: c, Origins: []string{"http://127.0.0.1:15001"}, Providers: []string{"stripe", "github"}}),
	})
	srv := httptest.NewServer(adm)
	t.Cleanup(srv.Close)
	a := &apiFixture{srv: srv}
	for _, tc := range []struct{ body, names, hint string }{
		{`{"backend":"127.0.0.1:15002","reason":"x"}`, "configured: http://127.0.0.1:15001;", "scheme://host:port"},
		{`{"backend":"http://127.0.0.1:15002","reason":"x"}`, "configured: http://127.0.0.1:15001;", `"force":true`},
		{`{"backend":"https://127.0.0.1:15001","reason":"x"}`, "configured: http://127.0.0.1:15001;", `"force":true`},
		{`{"provider":"shopify","reason":"x"}`, "configured: stripe, github;", `"force":true`},
		{`{"provider":"http://127.0.0.1:15001","reason":"x"}`, "configured: stripe, github;", `"force":true`},
	} {
		code, m := a.do(t, "POST", "/api/backends/pause", "tok", tc.body)
		msg, _ := m["error"].(string)
		if code != http.StatusNotFound || !strings.Contains(msg, tc.names) || !strings.Contains(msg, tc.hint) {
			t.Errorf("pause %s: %d %v; want 404 naming what is configured (%q) and %q", tc.body, code, m, tc.names, tc.hint)
		}
		if _, ok := m["configured"].([]any); !ok {
			t.Errorf("pause %s: no configured list in %v", tc.body, m)
		}
	}
	if len(c.paused) != 0 {
		t.Fatalf("paused %+v", c.paused)
	}
	// Forced without a scheme, a pause could never match a backend.
	if code, m := a.do(t, "POST", "/api/backends/pause", "tok", `{"backend":"new-app:80","reason":"x","force":true}`); code != http.StatusBadRequest {
		t.Errorf("forced scheme-less pause: %d %v, want 400", code, m)
	}
	for _, tc := range []struct{ body, name string }{
		{`{"backend":"http://127.0.0.1:15001/","reason":"x"}`, "http://127.0.0.1:15001"}, // a trailing slash is the same origin
		{`{"backend":"127.0.0.1:15001","reason":"x"}`, "http://127.0.0.1:15001"},         // the one origin with that host:port
		{`{"provider":"Stripe","reason":"x"}`, "stripe"},
		{`{"backend":"http://new-app","reason":"x","force":true}`, "http://new-app:80"},
	} {
		code, m := a.do(t, "POST", "/api/backends/pause", "tok", tc.body)
		p, _ := m["pause"].(map[string]any)
		if code != http.StatusOK || p["name"] != tc.name {
			t.Errorf("pause %s: %d %v, want 200 pausing %s", tc.body, code, m, tc.name)
		}
	}
	if len(c.paused) != 4 || c.paused[1].Name != "http://127.0.0.1:15001" || c.paused[3].Name != "http://new-app:80" {
		t.Fatalf("paused %+v", c.paused)
	}

	// A resume resolves its target the same way; one that is neither
	// configured nor paused is 404, a forced pause can be ended.
	for _, tc := range []struct {
		body   string
		code   int
		status string
	}{
		{`{"backend":"127.0.0.1:15001","reason":"x"}`, http.StatusOK, "resumed"},
		{`{"backend":"http://127.0.0.1:15001","reason":"x"}`, http.StatusOK, "not paused"},
		{`{"backend":"http://new-app:80/","reason":"x"}`, http.StatusOK, "resumed"},
		{`{"backend":"http://new-app:80","reason":"x"}`, http.StatusNotFound, ""},
		{`{"backend":"127.0.0.1:15002","reason":"x"}`, http.StatusNotFound, ""},
		{`{"provider":"shopify","reason":"x"}`, http.StatusNotFound, ""},
	} {
		code, m := a.do(t, "POST", "/api/backends/resume", "tok", tc.body)
		if code != tc.code || (tc.status != "" && m["status"] != tc.status) {
			t.Errorf("resume %s: %d %v, want %d %s", tc.body, code, m, tc.code, tc.status)
		}
		if msg, _ := m["error"].(string); code == http.StatusNotFound && !strings.Contains(msg, "configured or paused; configured: ") {
			t.Errorf("resume %s: %q does not say what is configured", tc.body, msg)
		}
	}
}

func TestBackendsAPI(t *testing.T) {
	c := &fakeControl{}
	adm := admin.NewAdmin(admin.AdminConfig{
		Ready: func(context.Context) error { return nil }, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: admin.NewAPI(admin.APIConfig{Backends: c, Origins: []string{"http://app:80"}, Providers: []string{"stripe"}}),
	})
	srv := httptest.NewServer(adm)
	t.Cleanup(srv.Close)
	a := &apiFixture{srv: srv}

	if code, _ := a.do(t, "GET", "/api/backends", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /api/backends without the token: %d", code)
	}
	for _, body := range []string{
		`{"reason":"x"}`,
		`{"backend":"http://app:80","provider":"stripe","reason":"x"}`,
		`{"backend":"http://app:80"}`,
		`{"backend":"http://app:80","reason":"x","extra":1}`,
		`{"provider":"a\u0000b","reason":"x"}`,
		`not json`,
	} {
		if code, m := a.do(t, "POST", "/api/backends/pause", "tok", body); code != http.StatusBadRequest {
			t.Errorf("pause %s: %d %v, want 400", body, code, m)
		}
	}
	code, m := a.do(t, "POST", "/api/backends/pause", "tok", `{"backend":"http://app:80","reason":"deploy"}`)
	if code != http.StatusOK || m["status"] != "paused" {
		t.Fatalf("pause: %d %v", code, m)
	}
	if len(c.paused) != 1 || c.paused[0] != (journal.Pause{Kind: journal.PauseBackend, Name: "http://app:80", Reason: "deploy"}) {
		t.Fatalf("paused %+v", c.paused)
	}
	code, m = a.do(t, "GET", "/api/backends", "tok", "")
	if code != http.StatusOK || len(m["backends"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, m)
	}
	code, m = a.do(t, "POST", "/api/backends/resume", "tok", `{"backend":"http://app:80","reason":"fixed"}`)
	if code != http.StatusOK || m["status"] != "resumed" || len(c.resumed) != 1 || c.resumed[0] != "backend http://app:80" {
		t.Fatalf("resume: %d %v, %v", code, m, c.resumed)
	}
}
