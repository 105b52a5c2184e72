package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// TestEventsOverviewCommand: `whguard events overview` prints the counts,
// the window's totals, the last minutes and the backends' state, from a
// real journal through the admin API.
func TestEventsOverviewCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := testdb.OpenStore(t, "sqlite", true)
	if _, err := j.Append(ctx, []journal.Event{{Provider: "stripe", EventID: "evt_1", ContentHash: "h", Body: []byte(`{}`), Path: "/", Headers: http.Header{}}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Minute)
	m := journal.Minute{Minute: now, Provider: "stripe", Delivered: 7, Failed: 3, Dead: 1}
	for range 7 {
		m.ObserveLatency(40 * time.Millisecond)
	}
	if err := j.RecordMinutes(ctx, "r", []journal.Minute{m}); err != nil {
		t.Fatal(err)
	}
	fwd, err := forwarder.New(forwarder.Config{Store: j, Targets: map[string]forwarder.Target{"stripe": {BackendURL: "http://app:3000"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fwd.Pause(ctx, journal.Pause{Kind: journal.PauseBackend, Name: "http://app:3000", Reason: "deploy"}); err != nil {
		t.Fatal(err)
	}
	cli := adminCLI(t, admin.APIConfig{Store: j, Backends: backendControl{fwd}, Overview: j})
	code, text, errOut := cli("events", "overview", "-window", "15m", "-minutes", "3")
	if code != 0 {
		t.Fatalf("overview: %d %s%s", code, text, errOut)
	}
	for _, want := range []string{"pending 1,", "last 15m: 7 delivered, 3 failed attempts, 1 dead", now.Format("15:04"),
		"backend http://app:3000: breaker off, paused since", "(deploy), 1 waiting"} {
		if !strings.Contains(text, want) {
			t.Errorf("overview lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`; oldest undelivered [0-9.]+ (ms|s)\n`).MatchString(text) || !regexp.MustCompile(`p50 [0-9.]+ ms, p99 [0-9.]+ ms\n`).MatchString(text) {
		t.Errorf("the ages and latencies are not in human units:\n%s", text)
	}
	if lines := strings.Count(text, "\n"); lines != 2+1+3+1 {
		t.Errorf("%d lines, want counts, totals, header, 3 minutes and one backend:\n%s", lines, text)
	}
	if code, _, errOut := cli("events", "overview", "-window", "2d"); code != 1 || !strings.Contains(errOut, "window must be") {
		t.Errorf("a bad window: %d %s", code, errOut)
	}
}
