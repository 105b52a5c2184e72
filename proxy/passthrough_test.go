package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// normalizingApp is an app whose router forgives the way common frameworks
// do: it decodes percent-escapes (%2F included, and twice, as some
// gateways and frameworks do), folds backslashes, drops ;matrix
// parameters, collapses repeated slashes, resolves . and .. segments,
// ignores a trailing slash, letter case and a format suffix (.json, as
// Rails routes do). Its webhook handlers count every request they get.
type normalizingApp struct {
	mu       sync.Mutex
	webhooks map[string]int // handler path → requests that reached it
	seen     []http.Header  // headers of every request to its other routes
}

func (a *normalizingApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	for range 2 {
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
	}
	p = strings.ReplaceAll(p, `\`, "/")
	segs := strings.Split(p, "/")
	for i, s := range segs {
		s, _, _ = strings.Cut(s, ";")
		segs[i] = s
	}
	p = strings.ToLower(path.Clean("/" + strings.Join(segs, "/")))
	p = strings.TrimSuffix(p, path.Ext(p))
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.webhooks[p]; ok {
		a.webhooks[p]++
		w.WriteHeader(http.StatusOK)
		return
	}
	a.seen = append(a.seen, r.Header.Clone())
	w.WriteHeader(http.StatusTeapot)
}

func newPassThroughFixture(t *testing.T, app http.Handler, idle time.Duration) string {
	t.Helper()
	appSrv := httptest.NewServer(app)
	t.Cleanup(appSrv.Close)
	target, _ := url.Parse(appSrv.URL)
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "st", Scheme: "standard", Secrets: []string{stdSecret}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{{Path: "/webhooks/st", ForwardPath: "/internal/Stripe-Hook", Provider: p,
			AppPaths: []string{"/payments/internal/stripe-hook"}}},
		Intake:      newIntake(t, testdb.OpenStore(t, "sqlite", true), nil),
		PassThrough: proxy.NewPassThrough(proxy.PassThroughConfig{Target: target, IdleTimeout: idle}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The ingress listener's own bounds, made short: pass-through must not
	// inherit them.
	srv := httptest.NewUnstartedServer(in)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = time.Second, time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPassThroughNeverReachesAWebhookHandler: behind pass-through sits an
// app that normalizes paths as frameworks do. No spelling of a provider's
// path or of its FORWARD_PATH reaches the app's webhook handler: whguard
// answers 404 (it never passes such a request on unverified), while other
// paths still pass. (Found: /webhooks/st/, //webhooks/st and
// /webhooks/st%2F reached it, and the FORWARD_PATH was reachable as it
// was.)
func TestPassThroughNeverReachesAWebhookHandler(t *testing.T) {
	t.Parallel()
	app := &normalizingApp{webhooks: map[string]int{"/webhooks/st": 0, "/internal/stripe-hook": 0, "/payments/internal/stripe-hook": 0}}
	base := newPassThroughFixture(t, app, 0)
	variants := []string{
		"/webhooks/st/", "//webhooks/st", "/webhooks//st", "/webhooks/st%2F", "/webhooks/st%2f", "/webhooks%2Fst",
		"/WEBHOOKS/ST", "/Webhooks/St/", "/webhooks/./st", "/x/../webhooks/st", "/webhooks/st/.", "/./webhooks/st",
		"/webhooks/st;jsessionid=1", "/webhooks;a=b/st", "/%77ebhooks/st", "/webhooks/st%252F", "/webhooks%5Cst",
		"/webhooks/st.json", "/webhooks/st.", "/%2Fwebhooks/st",
		// A bad escape once decoded: the valid ones beside it count
		// (found: decoding stopped, and the ;… cut left /webhooks/%73t).
		"/webhooks/%2573t;%25zz",
		"/internal/Stripe-Hook", "/internal/stripe-hook", "/internal/stripe-hook/", "//internal//stripe-hook",
		"/internal/stripe-hook%2F", "/INTERNAL/STRIPE-HOOK", "/a/../internal/stripe-hook", "/internal/stripe-hook.xml",
		// The handler a provider's own BACKEND_URL (…/payments) reaches.
		"/payments/internal/stripe-hook", "/Payments//internal/stripe-hook/",
	}
	addr := strings.TrimPrefix(base, "http://")
	for _, v := range variants {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodPut} {
			// Sent as written: a Go client would clean some of these.
			status, body, err := sendRawRequest(addr, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: app.test\r\nContent-Length: 17\r\nConnection: close\r\n\r\n{\"type\":\"forged\"}", method, v))
			if err != nil {
				t.Fatalf("%s %s: %v", method, v, err)
			}
			// whguard's own answer: 404, or, for a spelling that is the
			// webhook path once decoded, the ingress's verification.
			if status == http.StatusTeapot || status < 400 || !strings.Contains(body, `"error"`) {
				t.Errorf("%s %s: %d %s; want whguard's refusal", method, v, status, body)
			}
		}
	}
	app.mu.Lock()
	for h, n := range app.webhooks {
		if n != 0 {
			t.Errorf("the app's webhook handler %s was reached %d times without verification", h, n)
		}
	}
	app.mu.Unlock()
	// Other paths still pass, even those that look alike.
	for _, p := range []string{"/webhooks/stripe", "/webhooks", "/orders/webhooks/st", "/webhooks/st/extra"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTeapot {
			t.Errorf("GET %s: %d; want the app's own 418", p, resp.StatusCode)
		}
	}
}

// TestPassThroughDropsWhguardHeaders: a client cannot pose as a delivery:
// X-Whguard-* and Idempotency-Key headers it sends never reach the app.
func TestPassThroughDropsWhguardHeaders(t *testing.T) {
	t.Parallel()
	app := &normalizingApp{webhooks: map[string]int{}}
	base := newPassThroughFixture(t, app, 0)
	req, _ := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader("x"))
	for _, h := range []string{"X-Whguard-Provider", "X-Whguard-Event-Id", "X-Whguard-Attempt", "X-Whguard-Source-Event-Id", "x-whguard-anything", "Idempotency-Key"} {
		req.Header.Set(h, "forged")
	}
	// Spellings with underscores, which CGI-style servers (Rack, WSGI,
	// PHP) read as the hyphenated names (found: passed on).
	for _, h := range []string{"X_Whguard_Provider", "Idempotency_Key", "X_Forwarded_Host", "X-Forwarded_Proto"} {
		req.Header[h] = []string{"forged"}
	}
	req.Header.Set("X-Other", "kept")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	app.mu.Lock()
	defer app.mu.Unlock()
	if len(app.seen) != 1 {
		t.Fatalf("the app saw %d requests", len(app.seen))
	}
	for name, vs := range app.seen[0] {
		n := strings.ReplaceAll(name, "_", "-")
		if strings.HasPrefix(strings.ToLower(n), "x-whguard-") || strings.EqualFold(n, "Idempotency-Key") || slices.Contains(vs, "forged") {
			t.Errorf("client-sent %s reached the app", name)
		}
	}
	if app.seen[0].Get("X-Other") != "kept" {
		t.Errorf("other headers lost: %v", app.seen[0])
	}
}

// TestPassThroughRefusesUpgradesButWebSocket: an h2c upgrade would give
// the client a connection to the app on which any request, to a webhook
// handler too, goes unchecked: it is refused before the app sees it.
func TestPassThroughRefusesUpgradesButWebSocket(t *testing.T) {
	t.Parallel()
	app := &normalizingApp{webhooks: map[string]int{}}
	base := newPassThroughFixture(t, app, 0)
	for _, up := range []string{"h2c", "H2C", "tls/1.2"} {
		status, body, err := sendRawRequest(strings.TrimPrefix(base, "http://"),
			"GET /anything HTTP/1.1\r\nHost: app.test\r\nConnection: Upgrade, close\r\nUpgrade: "+up+"\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Errorf("Upgrade: %s: %d %s; want 400", up, status, body)
		}
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if len(app.seen) != 0 {
		t.Errorf("the app saw %d upgrade requests", len(app.seen))
	}
}

// TestPassThroughStreamsPastTheIngressDeadlines: the ingress listener cuts
// a request after its total deadline (30 s; 1 s here), but pass-through
// traffic has a reverse proxy's idle timeouts instead: a download and an
// upload that each last three times the deadline, with data flowing, pass;
// a client that stops sending for longer than the idle timeout is cut.
// (Found: a streamed download and a slow upload were cut at 30 s.)
func TestPassThroughStreamsPastTheIngressDeadlines(t *testing.T) {
	t.Parallel()
	const chunks, every = 15, 200 * time.Millisecond // 3 s in all
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/download":
			for i := range chunks {
				fmt.Fprintf(w, "chunk %d\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(every)
			}
		case "/upload":
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "got %d bytes", n)
		}
	})
	base := newPassThroughFixture(t, app, 700*time.Millisecond)

	resp, err := http.Get(base + "/download")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines++
	}
	resp.Body.Close()
	if lines != chunks {
		t.Errorf("download: %d of %d chunks arrived (%v)", lines, chunks, sc.Err())
	}

	slow := func(pause time.Duration) (string, error) {
		pr, pw := io.Pipe()
		go func() {
			for range chunks {
				if _, err := pw.Write([]byte(strings.Repeat("u", 100))); err != nil {
					return
				}
				time.Sleep(pause)
			}
			pw.Close()
		}()
		resp, err := http.Post(base+"/upload", "application/octet-stream", pr)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b), err
	}
	if got, err := slow(every); err != nil || got != fmt.Sprintf("200 got %d bytes", chunks*100) {
		t.Errorf("slow upload: %q, %v", got, err)
	}

	// Idle for longer than the idle timeout: cut.
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("an idle upload was answered %d", resp.StatusCode)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("an idle upload was cut after %v; want about the idle timeout", took)
	}
}

// sendRawRequest writes raw to addr and returns the answer's status and
// body.
func sendRawRequest(addr, raw string) (int, string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
