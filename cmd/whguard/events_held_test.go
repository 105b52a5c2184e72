package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
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
	code, out, errOut := adminCLI(t, admin.APIConfig{Store: j})("events", "list")
	if code != 0 {
		t.Fatalf("events list: %d %s", code, errOut)
	}
	if !strings.Contains(out, "pending (held: no_backend)") {
		t.Fatalf("events list does not show the hold:\n%s", out)
	}
}

// TestEventsHelp: `whguard events --help` prints the usage and succeeds,
// with or without an admin token configured.
func TestEventsHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "help"} {
		var out, errb bytes.Buffer
		if code := run([]string{"events", arg}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "whguard events list") {
			t.Fatalf("events %s: %d\n%s%s", arg, code, out.String(), errb.String())
		}
	}
}

// TestEventsErrorHidesTheAdminURLPassword: an unreachable admin API is
// reported without the password of WHGUARD_ADMIN_URL.
func TestEventsErrorHidesTheAdminURLPassword(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"events", "list"}, []string{"WHGUARD_ADMIN_URL=http://ops:s3cr3t-pw@127.0.0.1:1", "WHGUARD_ADMIN_TOKEN=tok"}, &out, &errb)
	if code == 0 || strings.Contains(errb.String(), "s3cr3t-pw") || !strings.Contains(errb.String(), "127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestEventsShowByProvidersID: `whguard events show evt_…` finds the event
// by the id its provider shows (it answered "event id must be a number"),
// and `whguard events conflicts` lists the copies received with other
// content.
func TestEventsShowByProvidersID(t *testing.T) {
	ctx := context.Background()
	j := testdb.OpenStore(t, "sqlite", true)
	mk := func(hash string) journal.Event {
		return journal.Event{Provider: "stripe", EventID: "evt_1Abc", ContentHash: hash, Body: []byte(`{"v":"` + hash + `"}`), Path: "/", Headers: http.Header{}}
	}
	if _, err := j.Append(ctx, []journal.Event{mk("first")}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, []journal.Event{mk("second")}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: j.Ready, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: admin.NewAPI(admin.APIConfig{Store: j, Providers: []string{"stripe"}}),
	}))
	defer srv.Close()
	env := []string{"WHGUARD_ADMIN_URL=" + srv.URL, "WHGUARD_ADMIN_TOKEN=tok"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "show", "evt_1Abc"}, "stripe evt_1Abc"},
		{[]string{"events", "show", "evt_1Abc", "-provider", "stripe"}, "stripe evt_1Abc"},
		{[]string{"events", "show", "evt_1Abc", "-json"}, `"event_id": "evt_1Abc"`},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, env, &out, &errb); code != 0 || !strings.Contains(out.String(), c.want) {
			t.Fatalf("%v: %d\n%s%s", c.args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"events", "conflicts", "evt_1Abc"}, env, &out, &errb); code != 0 || !strings.Contains(out.String(), `{\"v\":\"second\"}`) {
		t.Fatalf("conflicts: %d\n%s%s", code, out.String(), errb.String())
	}
}

// TestEventsSearchAndDryRun: `whguard events list` takes the search filters
// and `whguard events replay -all -dry-run` counts without replaying.
func TestEventsSearchAndDryRun(t *testing.T) {
	ctx := context.Background()
	j := testdb.OpenStore(t, "sqlite", true)
	var evs []journal.Event
	for i, c := range []struct{ typ, customer string }{{"invoice.paid", "cus_123"}, {"invoice.paid", "cus_9"}, {"customer.updated", "cus_123"}} {
		evs = append(evs, journal.Event{Provider: "stripe", EventID: fmt.Sprintf("evt_%d", i), EventType: c.typ, ContentHash: "h",
			Body: []byte(`{"data":{"object":{"customer":"` + c.customer + `"}}}`), Path: "/", Headers: http.Header{}})
	}
	if _, err := j.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	ds, err := j.Lease(ctx, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var fs []journal.Finish
	for _, d := range ds {
		fs = append(fs, journal.Finish{ID: d.ID, LeaseToken: d.LeaseToken, Status: journal.StatusDead, Attempt: journal.Attempt{Number: 1, StartedAt: time.Now()}})
	}
	if _, err := j.Complete(ctx, fs); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: j.Ready, Gatherer: prometheus.NewRegistry(), Token: "tok", API: admin.NewAPI(admin.APIConfig{Store: j}),
	}))
	defer srv.Close()
	env := []string{"WHGUARD_ADMIN_URL=" + srv.URL, "WHGUARD_ADMIN_TOKEN=tok"}
	var out, errb bytes.Buffer
	if code := run([]string{"events", "list", "-type", "invoice.*", "-match", "/data/object/customer=cus_123"}, env, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "evt_0") || strings.Contains(out.String(), "evt_1") || strings.Contains(out.String(), "evt_2") {
		t.Fatalf("list: %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"events", "replay", "-all", "-dry-run", "-match", "/data/object/customer=cus_123"}, env, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "would replay 2 events") {
		t.Fatalf("dry run: %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"events", "replay", "-all", "-type", "customer.*", "-reason", "fixed"}, env, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "replayed 1 events") {
		t.Fatalf("replay: %d\n%s%s", code, out.String(), errb.String())
	}
}

// TestEventsOutputIsEscaped: what senders and backends choose (a body
// that is not JSON, a header value, an event type with a C1 control)
// reaches the operator's terminal escaped from `events show` and `events
// list`, so none of it can act on the terminal (found: only `whguard
// refusals` escaped).
func TestEventsOutputIsEscaped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := testdb.OpenStore(t, "sqlite", true)
	hostile := "\x1b]0;owned\x07\x1b[2J\u009b"
	res, err := j.Append(ctx, []journal.Event{{Provider: "p", EventID: "evt_esc", EventType: "t" + hostile, ContentHash: "h",
		Body: []byte("not json " + hostile), Path: "/webhooks/p", Headers: http.Header{"X-Note": {"v" + hostile}}}})
	if err != nil {
		t.Fatal(err)
	}
	cli := adminCLI(t, admin.APIConfig{Store: j})
	for _, args := range [][]string{{"events", "show", fmt.Sprint(res[0].ID)}, {"events", "list"}} {
		code, out, errOut := cli(args...)
		if code != 0 {
			t.Fatalf("%v: %d %s", args, code, errOut)
		}
		if strings.ContainsAny(out, "\x1b\x07\u009b") || !strings.Contains(out, `\x1b]0;owned`) {
			t.Errorf("%v printed the sender's control characters unescaped:\n%q", args, out)
		}
	}
}
