package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
)

// TestEventsListShowsHeld: `whguard events list` says which deliveries
// wait without spending attempts, and why.
func TestEventsListShowsHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := testdb.OpenStore(t, "sqlite", true)
	if _, err := j.Append(ctx, []journal.Event{{Provider: "gone", EventID: "evt_1", ContentHash: "h", Body: []byte("{}"), Path: "/webhooks/gone", Headers: http.Header{}}}); err != nil {
		t.Fatal(err)
	}
	ds, err := j.Lease(ctx, 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("lease: %v %v", ds, err)
	}
	if _, err := j.Hold(ctx, []journal.Hold{{ID: ds[0].ID, LeaseToken: ds[0].LeaseToken, For: time.Hour, Reason: "no_backend"}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy.NewAdmin(proxy.AdminConfig{
		Ready: j.Ready, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: proxy.NewAPI(proxy.APIConfig{Store: j}),
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"events", "list"}, []string{"WHGUARD_ADMIN_URL=" + srv.URL, "WHGUARD_ADMIN_TOKEN=tok"}, &out, &errb); code != 0 {
		t.Fatalf("events list: %d %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "pending (held: no_backend)") {
		t.Fatalf("events list does not show the hold:\n%s", out.String())
	}
}
