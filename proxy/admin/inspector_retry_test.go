package admin_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// The inspector's "Retry now" in a real browser: shown on an event waiting
// in retry, not on a delivered one; clicking it makes the event due now
// (its attempts unchanged) and the detail says it was retried.
func TestInspectorRetryNowInBrowser(t *testing.T) {
	t.Parallel()
	a := newAPIFixture(t, "sqlite", 2, 0)
	failAllLater(t, a, "e001") // e000 in retry for an hour, e001 done
	waiting, done := a.events["e000"], a.events["e001"]
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: a.j.Ready, Gatherer: prometheus.NewRegistry(), Token: "browser-token",
		API: admin.NewAPI(admin.APIConfig{Store: a.j}),
	}))
	defer srv.Close()
	ctx, waitJS := openInspector(t, srv.URL, "browser-token")
	waitJS("two rows", `document.querySelectorAll("tr.row").length === 2`)
	open := func(id int64) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr.row[data-id="%d"] td`, id)))); err != nil {
			t.Fatalf("click row %d: %v", id, err)
		}
		waitJS(fmt.Sprintf("the detail of event %d", id), fmt.Sprintf(`(document.querySelector("#detail h3")||{}).textContent?.startsWith("Event %d ")`, id))
	}
	open(done)
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("retryNow")`)); err != nil || !ok {
		t.Fatalf("a done event offers Retry now (%v)", err)
	}
	open(waiting)
	waitJS("the Retry now button", `!!document.getElementById("retryNow")`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("retryNow"))); err != nil {
		t.Fatalf("click Retry now: %v", err)
	}
	waitJS("the retry in the detail", `document.getElementById("detail").textContent.includes("retried now from retry")`)
	d, err := a.j.Get(context.Background(), waiting)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != journal.StatusRetry || d.Attempts != 1 || d.NextAttemptAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("after clicking Retry now: %s, %d attempts, due %s", d.Status, d.Attempts, d.NextAttemptAt)
	}
}
