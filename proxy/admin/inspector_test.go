package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/catchup"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// chromiumPath finds the browser `make test` installs (Debian's chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("WHGUARD_TEST_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("no Chromium found: `make test` installs Debian's chromium; or set WHGUARD_TEST_CHROMIUM")
	return ""
}

// The web inspector in a real headless browser: refuses a wrong token,
// lists events, shows one with its attempts, and replays it with an
// audited reason.
func TestInspectorInBrowser(t *testing.T) {
	t.Parallel()
	a := newAPIFixture(t, "postgres", 3, 1)
	dead := a.events["e000"]
	held := holdOne(t, a.j, "no_backend")
	if _, err := a.j.Append(context.Background(), []journal.Event{{Provider: "alpha", EventID: "e000", ContentHash: "h2",
		Body: []byte(`{"n":"a conflicting copy"}`), Path: "/webhooks/x", Headers: http.Header{}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: a.j.Ready, Gatherer: prometheus.NewRegistry(), Token: "browser-token",
		API: admin.NewAPI(admin.APIConfig{Store: a.j}),
	}))
	defer srv.Close()

	ctx, waitJS := newBrowser(t)
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+"`"+sel+"`"+`).textContent`))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.SendKeys(chromedp.ID("token"), "wrong"),
		chromedp.Click(chromedp.CSS("#loginForm button")),
	); err != nil {
		t.Fatalf("wrong token: %v", err)
	}
	waitJS("the refusal", `document.getElementById("loginErr").textContent.includes("refused")`)

	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("token"), "browser-token"),
		chromedp.Click(chromedp.CSS("#loginForm button")),
	); err != nil {
		t.Fatalf("login: %v", err)
	}
	waitJS("three rows", `document.querySelectorAll("tr.row").length === 3`)
	// Search by a value in the body: only the event whose body has n = 2.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("fMatch"), "/n=2"),
		chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)),
	); err != nil {
		t.Fatalf("search: %v", err)
	}
	waitJS("one match", `document.querySelectorAll("tr.row").length === 1 && document.querySelector("tr.row").dataset.id === "`+fmt.Sprint(a.events["e002"])+`"`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("fMatch").value = "", true`)); err != nil {
		t.Fatalf("clear search: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`))); err != nil {
		t.Fatalf("clear search: %v", err)
	}
	waitJS("three rows again", `document.querySelectorAll("tr.row").length === 3`)
	if row := text(fmt.Sprintf(`tr.row[data-id="%d"]`, held)); !strings.Contains(row, "held: no_backend") {
		t.Fatalf("held event's row %q does not say it is held", row)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr.row[data-id="%d"] td`, dead)))); err != nil {
		t.Fatalf("click row: %v", err)
	}
	waitJS("the detail", `!!document.querySelector("#detail h3")`)
	title, detail := text("#detail h3"), text("#detail")
	if !strings.Contains(title, fmt.Sprintf("Event %d", dead)) || !strings.Contains(title, "dead") {
		t.Fatalf("detail title %q", title)
	}
	waitJS("the conflicting copy", `document.getElementById("detail").textContent.includes("a conflicting copy")`)
	detail = text("#detail")
	for _, want := range []string{"backend answered 500", `"n": 0`, "Attempts (1)", "oops", "Conflicting copies (1)"} {
		if !strings.Contains(detail, want) {
			t.Fatalf("detail lacks %q:\n%s", want, detail)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("reason"), "replayed from the browser test"),
		chromedp.Click(chromedp.ID("replay")),
	); err != nil {
		t.Fatalf("replay: %v", err)
	}
	waitJS("the retry badge", `(document.querySelector("#detail h3 .badge")||{}).textContent === "retry"`)
	// The replay reached the journal, audited with the typed reason.
	var d *journal.Detail
	if !testwait.Until(10*time.Second, 50*time.Millisecond, func() bool {
		var err error
		if d, err = a.j.Get(context.Background(), dead); err != nil {
			t.Fatal(err)
		}
		return d.Status == "retry" && len(d.Replays) == 1 && d.Replays[0].Reason == "replayed from the browser test"
	}) {
		t.Fatalf("after clicking Replay: status %s replays %+v", d.Status, d.Replays)
	}

	// A sync-mode event shows its stored reply, as text.
	bg := context.Background()
	sms := journal.Event{Provider: "sms", EventID: "sms-1", ContentHash: "h", Body: []byte("Body=hi"), Path: "/webhooks/sms",
		Headers: http.Header{}, LeaseFor: time.Minute, LeaseToken: uuid.New()}
	res, err := a.j.Append(bg, []journal.Event{sms})
	if err != nil {
		t.Fatal(err)
	}
	twiml := `<Response><Message>hi <b>there</b></Message></Response>`
	if ok, err := a.j.SaveReply(bg, res[0].ID, sms.LeaseToken, journal.Reply{Status: 200, ContentType: "text/xml", Body: []byte(twiml)}); !ok || err != nil {
		t.Fatalf("save reply: %v %v", ok, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`))); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	row := fmt.Sprintf(`tr.row[data-id="%d"]`, res[0].ID)
	waitJS("the sync event's row", `!!document.querySelector('`+row+`')`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+" td"))); err != nil {
		t.Fatalf("click the sync event: %v", err)
	}
	waitJS("the stored reply", `!!document.getElementById("syncReply")`)
	detail = text("#detail")
	for _, want := range []string{"Stored reply", "text/xml", twiml, fmt.Sprintf("%d bytes", len(twiml))} {
		if !strings.Contains(detail, want) {
			t.Fatalf("detail lacks %q:\n%s", want, detail)
		}
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#detail b").length`)); err != nil || n != 0 {
		t.Fatalf("the reply's markup was rendered (%d elements, %v)", n, err)
	}
}

// Ignored events in a real browser: the status filter finds them, the row
// and the detail show a visible "ignored" badge, and the detail's Replay
// button replays one, audited from ignored.
func TestInspectorIgnoredInBrowser(t *testing.T) {
	t.Parallel()
	a := newAPIFixture(t, "sqlite", 2, 0)
	r, err := a.j.Append(context.Background(), []journal.Event{{Provider: "alpha", EventID: "skipped", EventType: "customer.created",
		ContentHash: "h", Body: []byte(`{"n":"ignored"}`), Path: "/webhooks/x", Headers: http.Header{}, Ignored: true}})
	if err != nil {
		t.Fatal(err)
	}
	ignored := r[0].ID
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: a.j.Ready, Gatherer: prometheus.NewRegistry(), Token: "browser-token",
		API: admin.NewAPI(admin.APIConfig{Store: a.j}),
	}))
	defer srv.Close()
	ctx, waitJS := openInspector(t, srv.URL, "browser-token")
	waitJS("three rows", `document.querySelectorAll("tr.row").length === 3`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(s => (s.value = "ignored", s.dispatchEvent(new Event("change")), true))(document.getElementById("status"))`)); err != nil {
		t.Fatalf("choose status ignored: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`))); err != nil {
		t.Fatalf("filter: %v", err)
	}
	row := fmt.Sprintf(`document.querySelector('tr.row[data-id="%d"]')`, ignored)
	waitJS("only the ignored row", `document.querySelectorAll("tr.row").length === 1 && !!`+row)
	// Visible: a badge of its own, styled unlike the default (white text
	// on no background would be invisible).
	waitJS("the ignored badge", `(b => b.textContent === "ignored" && getComputedStyle(b).color !== "rgb(255, 255, 255)")(`+row+`.querySelector(".badge"))`)
	waitJS("the bulk button following the status", `document.getElementById("bulk").textContent.includes("ignored")`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr.row[data-id="%d"] td`, ignored)))); err != nil {
		t.Fatalf("click row: %v", err)
	}
	waitJS("the detail's replay button", `!!document.getElementById("replay") && document.querySelector("#detail h3 .badge").textContent === "ignored"`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("reason"), "wanted after all"),
		chromedp.Click(chromedp.ID("replay")),
	); err != nil {
		t.Fatalf("replay: %v", err)
	}
	waitJS("the retry badge", `(document.querySelector("#detail h3 .badge")||{}).textContent === "retry"`)
	d, err := a.j.Get(context.Background(), ignored)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != journal.StatusRetry || len(d.Replays) != 1 || d.Replays[0].FromStatus != journal.StatusIgnored || d.Replays[0].Reason != "wanted after all" {
		t.Fatalf("after clicking Replay: %s %+v", d.Status, d.Replays)
	}
}

// The inspector's backends section in a real browser: it lists a backend
// with its state, and its buttons pause and resume it (stored through the
// API, with the typed reason).
func TestInspectorBackendsInBrowser(t *testing.T) {
	t.Parallel()
	c := &stateControl{}
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: func(context.Context) error { return nil }, Gatherer: prometheus.NewRegistry(), Token: "browser-token",
		API: admin.NewAPI(admin.APIConfig{Store: emptyInspector{}, Backends: c, Origins: []string{"http://app:3000"}}),
	}))
	defer srv.Close()
	ctx, waitJS := openInspector(t, srv.URL, "browser-token")
	row := `document.querySelector('tr.backend[data-backend="http://app:3000"]')`
	waitJS("the backend row", `!!`+row+` && `+row+`.textContent.includes("20/s burst 20") && `+row+`.textContent.includes("open")`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr.backend button.toggle`))); err != nil {
		t.Fatal(err)
	}
	waitJS("the reason demanded", `document.getElementById("backendsMsg").textContent.includes("reason is required")`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("backendReason"), "deploy from the browser"),
		chromedp.Click(chromedp.CSS(`tr.backend button.toggle`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS("the pause shown", row+`.querySelector("td.paused").textContent.includes("deploy from the browser") && `+row+`.querySelector("button.toggle").textContent === "Resume"`)
	if got := c.last(); got != "pause backend http://app:3000: deploy from the browser" {
		t.Fatalf("API received %q", got)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr.backend button.toggle`))); err != nil {
		t.Fatal(err)
	}
	waitJS("the resume shown", row+`.querySelector("button.toggle").textContent === "Pause"`)
	if got := c.last(); got != "resume backend http://app:3000: deploy from the browser" {
		t.Fatalf("API received %q", got)
	}
}

// stateControl is a BackendControl with one backend whose pause it keeps.
type stateControl struct {
	mu     sync.Mutex
	paused *journal.Pause
	calls  []string
}

func (c *stateControl) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) == 0 {
		return ""
	}
	return c.calls[len(c.calls)-1]
}

func (c *stateControl) Backends(context.Context) (forwarder.Backends, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return forwarder.Backends{
		Backends: []forwarder.BackendStatus{{Backend: "http://app:3000", Providers: []string{"stripe"}, RateLimit: "20/s", RateBurst: 20,
			MaxInFlight: 4, InFlight: 1, Breaker: "open", Paused: c.paused, Waiting: 3, OldestAgeSeconds: 12.5}},
		PausedProviders: []journal.Pause{},
	}, nil
}

func (c *stateControl) Pause(_ context.Context, p journal.Pause) (journal.Pause, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p.Since = time.Now()
	c.paused = &p
	c.calls = append(c.calls, "pause "+p.Kind+" "+p.Name+": "+p.Reason)
	return p, nil
}

func (c *stateControl) Resume(_ context.Context, kind, name, reason string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = nil
	c.calls = append(c.calls, "resume "+kind+" "+name+": "+reason)
	return true, nil
}

// emptyInspector is a journal with no events.
type emptyInspector struct{ admin.Inspector }

func (emptyInspector) List(context.Context, journal.Filter) ([]journal.Summary, int64, error) {
	return nil, 0, nil
}

// openInspector opens the inspector at url in a new browser (a desktop
// viewport) and logs in with token.
func openInspector(t *testing.T, url, token string) (context.Context, func(what, expr string)) {
	t.Helper()
	ctx, waitJS := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(url+"/"),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS("#loginForm button")),
	); err != nil {
		t.Fatalf("login: %v", err)
	}
	return ctx, waitJS
}

// newBrowser starts a headless Chromium for one test (closed when it
// ends) and returns its context and a function that waits for a
// JavaScript condition in the page.
func newBrowser(t *testing.T) (context.Context, func(what, expr string)) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
	)
	actx, cancel1 := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel2 := chromedp.NewContext(actx)
	ctx, cancel3 := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancel3(); cancel2(); cancel1() })
	waitJS := func(what, expr string) {
		t.Helper()
		var err error
		if !testwait.Until(15*time.Second, 50*time.Millisecond, func() bool {
			var ok bool
			ok, err = chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
			return err == nil && ok
		}) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	return ctx, waitJS
}

// The inspector's overview in a real browser: the numbers from the
// journal, the per-minute charts drawn as SVG by the page's own code, and
// the backends' state. With WHGUARD_SCREENSHOT=file.png it also saves a
// screenshot of the page (docs/inspector-overview.png is one).
func TestInspectorOverviewInBrowser(t *testing.T) {
	t.Parallel()
	a := newAPIFixture(t, "postgres", 12, 2) // 10 pending, 2 dead
	now := time.Now().UTC().Truncate(time.Minute)
	var ms []journal.Minute
	for i := range 60 {
		m := journal.Minute{Minute: now.Add(-time.Duration(59-i) * time.Minute), Provider: "alpha"}
		m.Delivered = int64(400 + 300*((i/7)%3))
		if i == 0 {
			// The oldest minute leaves the hour's window when a minute
			// starts while the page loads: the totals must not change.
			m.Delivered = 0
		}
		if i > 45 {
			m.Failed = int64(20 * (i - 45)) // a backend starting to fail
		}
		for k := range m.Delivered {
			m.ObserveLatency(time.Duration(20+int(k)%40+i) * time.Millisecond)
		}
		ms = append(ms, m)
	}
	if err := a.j.RecordMinutes(context.Background(), "r1", ms); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: a.j.Ready, Gatherer: prometheus.NewRegistry(), Token: "browser-token",
		API: admin.NewAPI(admin.APIConfig{Store: a.j, Overview: a.j, Backends: &stateControl{}}),
	}))
	defer srv.Close()
	ctx, waitJS := openInspector(t, srv.URL, "browser-token")
	numOf := func(label string) string {
		return `(document.querySelector('[data-num="` + label + `"] b')||{}).textContent`
	}
	waitJS("the counts", numOf("dead")+` === "2" && `+numOf("pending")+` === "10"`)
	waitJS("the breaker", numOf("breakers open")+` === "1"`)
	waitJS("the totals", numOf("delivered (1h)")+` === "`+fmt.Sprint(sum(ms, func(m journal.Minute) int64 { return m.Delivered }))+`"`)
	// One point per minute: 60 in the delivered line, and the failures
	// only where there were some (the line still spans the window).
	waitJS("the delivered line", `document.querySelector('#ovFlow path[data-series="delivered"]').getAttribute("d").split(/[ML]/).filter(s => s.trim()).length === 60`)
	waitJS("the latency lines", `document.querySelector('#ovLatency path[data-series="p99"]').getAttribute("d").length > 100`)
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("ovWindow"), "15m")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("ovWindow").dispatchEvent(new Event("change")), true`)); err != nil {
		t.Fatal(err)
	}
	waitJS("a 15-minute window", `document.querySelector('#ovFlow path[data-series="delivered"]').getAttribute("d").split(/[ML]/).filter(s => s.trim()).length === 15`)
	if path := os.Getenv("WHGUARD_SCREENSHOT"); path != "" {
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("ovWindow"), "1h")); err != nil {
			t.Fatal(err)
		}
		chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("ovWindow").dispatchEvent(new Event("change")), true`))
		waitJS("the hour back", `document.querySelector('#ovFlow path[data-series="delivered"]').getAttribute("d").split(/[ML]/).filter(s => s.trim()).length === 60`)
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func sum(ms []journal.Minute, f func(journal.Minute) int64) int64 {
	var n int64
	for _, m := range ms {
		n += f(m)
	}
	return n
}

// The inspector's catch-up card and badge in a real browser: each
// provider's last pass with its figures and error, the GUIDs that never
// arrived, and a badge on events catch-up brought in (none on the others).
func TestInspectorCatchupInBrowser(t *testing.T) {
	t.Parallel()
	a := newAPIFixture(t, "sqlite", 1, 0)
	ev := journal.Event{Provider: "alpha", EventID: "evt_caught", EventType: "invoice.paid", ContentHash: "c",
		Body: []byte(`{"id":"evt_caught"}`), Path: "/webhooks/x", Headers: http.Header{}, Source: journal.SourceCatchup}
	r, err := a.j.Append(context.Background(), []journal.Event{ev})
	if err != nil {
		t.Fatal(err)
	}
	caught := r[0].ID
	finished := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	cu := &fakeCatchup{status: []catchup.Status{
		{Provider: "stripe", Window: "72h0m0s", Unarrived: []string{},
			LastPass: &journal.CatchupPass{Finished: finished, Listed: 31, Missing: 30, Journaled: 30}},
		{Provider: "github", Window: "72h0m0s", Unarrived: []string{"guid-gone"},
			LastPass: &journal.CatchupPass{Finished: finished, Listed: 5, Error: "list the hook's deliveries: GitHub answered 401 Unauthorized"}},
	}}
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: a.j.Ready, Gatherer: prometheus.NewRegistry(), Token: "browser-token",
		API: admin.NewAPI(admin.APIConfig{Store: a.j, Catchup: cu}),
	}))
	defer srv.Close()
	_, waitJS := openInspector(t, srv.URL, "browser-token")
	waitJS("the catch-up card", `!document.getElementById("catchupCard").classList.contains("hidden") && document.querySelectorAll("tr.catchup").length === 2`)
	waitJS("stripe's figures", `(r => r.cells[2].textContent === "31" && r.cells[4].textContent === "30" && r.cells[6].textContent === "ok")(document.querySelector('tr.catchup[data-provider="stripe"]'))`)
	waitJS("github's error and what never arrived", `(r => r.cells[6].textContent.includes("401") && r.cells[6].textContent.includes("guid-gone"))(document.querySelector('tr.catchup[data-provider="github"]'))`)
	waitJS("the catch-up badge on its event only", fmt.Sprintf(
		`!!document.querySelector('tr.row[data-id="%d"] .badge.catchup') && document.querySelectorAll("tr.row .badge.catchup").length === 1`, caught))
}
