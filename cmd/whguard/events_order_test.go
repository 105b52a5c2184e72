package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// TestEventsSkipReleasesTheKey: `whguard events list` shows an event
// waiting for its order key as held for order; `whguard events skip`
// refuses an event that holds nothing and releases a dead blocker, after
// which the waiting event is leased.
func TestEventsSkipReleasesTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := testdb.OpenStore(t, "sqlite", true)
	ordered := func(id string) journal.Event {
		return journal.Event{Provider: "stripe", EventID: id, ContentHash: id, Body: []byte("{}"), Path: "/webhooks/stripe",
			Headers: http.Header{}, OrderKey: "sub_1", OrderBlock: true}
	}
	if _, err := j.Append(ctx, []journal.Event{ordered("evt_1"), ordered("evt_2")}); err != nil {
		t.Fatal(err)
	}
	ds, err := j.Lease(ctx, 10, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].EventID != "evt_1" {
		t.Fatalf("lease: %+v %v, want evt_1 alone", ds, err)
	}
	if _, err := j.Complete(ctx, []journal.Finish{{ID: ds[0].ID, LeaseToken: ds[0].LeaseToken, Status: journal.StatusDead, LastError: "answered 422"}}); err != nil {
		t.Fatal(err)
	}
	admin := adminCLI(t, admin.APIConfig{Store: j})
	cli := func(args ...string) (int, string) {
		code, out, errOut := admin(append([]string{"events"}, args...)...)
		return code, out + errOut
	}
	if code, out := cli("list"); code != 0 || !strings.Contains(out, "pending (held: order)") {
		t.Fatalf("events list: %d\n%s", code, out)
	}
	if code, out := cli("skip", "evt_2"); code == 0 || !strings.Contains(out, "-reason is required") {
		t.Fatalf("skip without a reason: %d %s", code, out)
	}
	if code, out := cli("skip", "evt_2", "-reason", "wrong one"); code == 0 || !strings.Contains(out, "holds its order key") {
		t.Fatalf("skip of a waiting event: %d %s", code, out)
	}
	if ds, _ := j.Lease(ctx, 10, time.Minute); len(ds) != 0 {
		t.Fatalf("leased %+v behind a dead blocker", ds)
	}
	if code, out := cli("skip", "evt_1", "-reason", "subscription deleted upstream"); code != 0 || !strings.Contains(out, "skipped") {
		t.Fatalf("skip: %d %s", code, out)
	}
	if ds, _ := j.Lease(ctx, 10, time.Minute); len(ds) != 1 || ds[0].EventID != "evt_2" {
		t.Fatalf("after the skip leased %+v, want evt_2", ds)
	}
}
