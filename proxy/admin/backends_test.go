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

// fakeControl records pauses and resumes.
type fakeControl struct {
	mu      sync.Mutex
	paused  []journal.Pause
	resumed []string
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
	return p, nil
}

func (c *fakeControl) Resume(_ context.Context, kind, name, _ string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resumed = append(c.resumed, kind+" "+name)
	return len(c.paused) > 0, nil
}

// TestPauseMustNameSomethingConfigured: a pause of an origin or provider
// that matches nothing configured answers 404 naming what is configured,
// and pauses nothing, unless forced. (Found: "pause -backend
// 127.0.0.1:15001", without the scheme, answered "paused" and held
// nothing.)
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
	for _, body := range []string{
		`{"backend":"127.0.0.1:15001","reason":"x"}`,
		`{"backend":"http://127.0.0.1:15002","reason":"x"}`,
		`{"provider":"shopify","reason":"x"}`,
	} {
		code, m := a.do(t, "POST", "/api/backends/pause", "tok", body)
		msg, _ := m["error"].(string)
		if code != http.StatusNotFound || !strings.Contains(msg, "configured: ") {
			t.Errorf("pause %s: %d %v; want 404 naming what is configured", body, code, m)
		}
		if !strings.Contains(msg, "http://127.0.0.1:15001") && !strings.Contains(msg, "stripe, github") {
			t.Errorf("pause %s: %q names nothing configured", body, msg)
		}
	}
	if len(c.paused) != 0 {
		t.Fatalf("paused %+v", c.paused)
	}
	for _, body := range []string{
		`{"backend":"http://127.0.0.1:15001/","reason":"x"}`, // a trailing slash is the same origin
		`{"provider":"stripe","reason":"x"}`,
		`{"backend":"http://new-app:80","reason":"x","force":true}`,
	} {
		if code, m := a.do(t, "POST", "/api/backends/pause", "tok", body); code != http.StatusOK {
			t.Errorf("pause %s: %d %v", body, code, m)
		}
	}
	if len(c.paused) != 3 || c.paused[0].Name != "http://127.0.0.1:15001" {
		t.Fatalf("paused %+v", c.paused)
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
	code, m = a.do(t, "POST", "/api/backends/resume", "tok", `{"provider":"stripe","reason":"fixed"}`)
	if code != http.StatusOK || m["status"] != "resumed" || len(c.resumed) != 1 || c.resumed[0] != "provider stripe" {
		t.Fatalf("resume: %d %v, %v", code, m, c.resumed)
	}
}
