package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// The inspector shows order holds: an event waiting for its key is marked
// held: order and names the event it waits for; the dead event holding
// the key says so and offers Skip, which releases the key (audited).
func TestInspectorOrderInBrowser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := testdb.OpenStore(t, "sqlite", true)
	ordered := func(id string) journal.Event {
		return journal.Event{Provider: "stripe", EventID: id, ContentHash: id, Body: []byte(`{"data":{"object":{"id":"sub_A"}}}`),
			Path: "/webhooks/stripe", Headers: http.Header{}, OrderKey: "sub_A", OrderBlock: true}
	}
	rs, err := j.Append(ctx, []journal.Event{ordered("evt_1"), ordered("evt_2")})
	if err != nil {
		t.Fatal(err)
	}
	blocker, waiting := rs[0].ID, rs[1].ID
	ds, err := j.Lease(ctx, 10, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("lease: %+v %v", ds, err)
	}
	if _, err := j.Complete(ctx, []journal.Finish{{ID: ds[0].ID, LeaseToken: ds[0].LeaseToken, Status: journal.StatusDead, LastError: "answered 422"}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: j.Ready, Gatherer: prometheus.NewRegistry(), Token: "browser-token",
		API: admin.NewAPI(admin.APIConfig{Store: j}),
	}))
	defer srv.Close()

	bctx, waitJS := newBrowser(t)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.SendKeys(chromedp.ID("token"), "browser-token"),
		chromedp.Click(chromedp.CSS("#loginForm button")),
	); err != nil {
		t.Fatalf("login: %v", err)
	}
	waitJS("the waiting event held for order", fmt.Sprintf(`(document.querySelector('tr.row[data-id="%d"]')||{textContent:""}).textContent.includes("held: order")`, waiting))
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr.row[data-id="%d"] td`, waiting)))); err != nil {
		t.Fatalf("click row: %v", err)
	}
	waitJS("the event it waits for", fmt.Sprintf(`document.getElementById("detail").textContent.includes("waits for event %d")`, blocker))
	// Follow the link to the blocker.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("blocker"))); err != nil {
		t.Fatalf("click blocker: %v", err)
	}
	waitJS("the blocker's detail", fmt.Sprintf(`document.querySelector("#detail h3").textContent.includes("Event %d") && !!document.getElementById("skip")`, blocker))
	if detail, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("detail").textContent`)); err != nil || !strings.Contains(detail, "holds its key") {
		t.Fatalf("blocker detail %q (%v) does not say it holds its key", detail, err)
	}
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("reason"), "subscription deleted upstream"),
		chromedp.Click(chromedp.ID("skip")),
	); err != nil {
		t.Fatalf("skip: %v", err)
	}
	waitJS("the skip in the audit", `document.getElementById("detail").textContent.includes("skipped (order key released)")`)
	d, err := j.Get(ctx, blocker)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != journal.StatusDead || d.HoldsKey || len(d.Replays) != 1 || d.Replays[0].Action != "skip" || d.Replays[0].Reason != "subscription deleted upstream" {
		t.Fatalf("after Skip: %+v holds %v replays %+v", d.Summary, d.HoldsKey, d.Replays)
	}
}
