package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/whguard/whguard/proxy/admin"
)

// adminCLI serves the admin API with api (over a real store) on a test
// server for the test's duration, and returns a function that runs
// `whguard <args>` against it with the sidecar's variables, returning the
// exit status, stdout and stderr.
func adminCLI(t *testing.T, api admin.APIConfig) func(args ...string) (code int, stdout, stderr string) {
	t.Helper()
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: func(context.Context) error { return nil }, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: admin.NewAPI(api),
	}))
	t.Cleanup(srv.Close)
	env := []string{"WHGUARD_ADMIN_URL=" + srv.URL, "WHGUARD_ADMIN_TOKEN=tok"}
	return func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(args, env, &out, &errb)
		return code, out.String(), errb.String()
	}
}

// adminCall calls a running whguard's admin API with its token, decoding
// the answer into out (when not nil), and returns the status.
func adminCall(t *testing.T, admin, token, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func adminGet(t *testing.T, admin, token, path string, out any) {
	t.Helper()
	if code := adminCall(t, admin, token, http.MethodGet, path, "", out); code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, code)
	}
}

func adminPost(t *testing.T, admin, token, path, body string) {
	t.Helper()
	if code := adminCall(t, admin, token, http.MethodPost, path, body, nil); code/100 != 2 {
		t.Fatalf("POST %s: %d", path, code)
	}
}
