package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/catchup"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// fakeCatchup answers as catchup.Catchup does, and records the runs.
type fakeCatchup struct {
	mu     sync.Mutex
	runs   []string
	err    error
	status []catchup.Status
}

func (f *fakeCatchup) Status(context.Context) ([]catchup.Status, error) { return f.status, nil }

func (f *fakeCatchup) Run(_ context.Context, provider string, since time.Duration, dry bool) (journal.CatchupPass, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, provider+" "+since.String()+" "+map[bool]string{true: "dry", false: "run"}[dry])
	if f.err != nil {
		return journal.CatchupPass{}, f.err
	}
	return journal.CatchupPass{Listed: 4, Missing: 2, Journaled: 2}, nil
}

func catchupServer(t *testing.T, c admin.CatchupControl, store journal.Store) *httptest.Server {
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: func(context.Context) error { return nil }, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: admin.NewAPI(admin.APIConfig{Store: store, Catchup: c}),
	}))
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestCatchupAPI: POST /api/catchup/{provider} runs a pass with the body's
// since and dry_run and answers what it did; each refusal has its status
// and a short JSON error.
func TestCatchupAPI(t *testing.T) {
	t.Parallel()
	f := &fakeCatchup{status: []catchup.Status{{Provider: "stripe", Window: "72h0m0s", Unarrived: []string{}}}}
	srv := catchupServer(t, f, nil)
	code, out := call(t, srv, http.MethodPost, "/api/catchup/stripe", `{"since":"2h","dry_run":true}`)
	if code != http.StatusOK || out["listed"] != 4.0 || out["missing"] != 2.0 || out["journaled"] != 2.0 || out["error"] != "" {
		t.Fatalf("run: %d %v", code, out)
	}
	if code, _ := call(t, srv, http.MethodPost, "/api/catchup/stripe", ``); code != http.StatusOK {
		t.Fatalf("run without a body: %d", code)
	}
	if want := []string{"stripe 2h0m0s dry", "stripe 0s run"}; strings.Join(f.runs, ",") != strings.Join(want, ",") {
		t.Fatalf("runs %v, want %v", f.runs, want)
	}
	for _, c := range []struct {
		body string
		err  error
		code int
		msg  string
	}{
		{`{"since":"soon"}`, nil, http.StatusBadRequest, "positive duration"},
		{`{"since":"-2h"}`, nil, http.StatusBadRequest, "positive duration"},
		{`{"until":"2h"}`, nil, http.StatusBadRequest, "body must be JSON"},
		{``, catchup.ErrBusy, http.StatusConflict, "a pass is already running"},
		{``, catchup.ErrUnknownProvider, http.StatusNotFound, "not on for provider"},
		{``, catchup.ErrSinceTooFar, http.StatusBadRequest, "beyond"},
	} {
		f.err = c.err
		code, out := call(t, srv, http.MethodPost, "/api/catchup/stripe", c.body)
		if msg, _ := out["error"].(string); code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%q with %v: %d %v, want %d with %q", c.body, c.err, code, out, c.code, c.msg)
		}
	}
	code, out = call(t, srv, http.MethodGet, "/api/catchup", "")
	ps, _ := out["providers"].([]any)
	if code != http.StatusOK || len(ps) != 1 {
		t.Fatalf("status: %d %v", code, out)
	}
	p := ps[0].(map[string]any)
	for _, k := range []string{"provider", "window", "next_pass", "last_success", "last_pass", "last_error", "unarrived"} {
		if _, ok := p[k]; !ok {
			t.Errorf("GET /api/catchup has no %q: %v", k, p)
		}
	}
	// Off everywhere: an empty list, and runs are 404.
	off := catchupServer(t, nil, nil)
	if code, out := call(t, off, http.MethodGet, "/api/catchup", ""); code != http.StatusOK || len(out["providers"].([]any)) != 0 {
		t.Errorf("status with catch-up off: %d %v", code, out)
	}
	if code, _ := call(t, off, http.MethodPost, "/api/catchup/stripe", ""); code != http.StatusNotFound {
		t.Errorf("run with catch-up off: %d, want 404", code)
	}
}
