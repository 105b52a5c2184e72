package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/proxy"
)

// adminCLI serves the admin API with api (over a real store) on a test
// server for the test's duration, and returns a function that runs
// `whguard <args>` against it with the sidecar's variables, returning the
// exit status, stdout and stderr.
func adminCLI(t *testing.T, api proxy.APIConfig) func(args ...string) (code int, stdout, stderr string) {
	t.Helper()
	srv := httptest.NewServer(proxy.NewAdmin(proxy.AdminConfig{
		Ready: func(context.Context) error { return nil }, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: proxy.NewAPI(api),
	}))
	t.Cleanup(srv.Close)
	env := []string{"WHGUARD_ADMIN_URL=" + srv.URL, "WHGUARD_ADMIN_TOKEN=tok"}
	return func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(args, env, &out, &errb)
		return code, out.String(), errb.String()
	}
}
