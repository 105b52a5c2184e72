package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/fields"
	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/proxy/admin"
	"github.com/whguard/whguard/verify"
)

var dbURL string

func TestMain(m *testing.M) { os.Exit(testdb.Main(m, "proxy", &dbURL)) }

const (
	stdSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stripeSecret = "whsec_stripe test secret"
)

// fixture is an ingress over real HTTP in front of a migrated journal of its
// own.
type fixture struct {
	srv     *httptest.Server
	j       journal.Store
	reg     *prometheus.Registry
	ingress *proxy.Ingress
}

var forEachStore = testdb.ForEachStoreParallel

func newFixture(t *testing.T, store string) *fixture {
	t.Helper()
	return newFixtureOn(t, testdb.OpenStore(t, store, true))
}

func newFixtureOn(t *testing.T, j forwarder.Appender) *fixture {
	t.Helper()
	return newFixtureWith(t, j, nil)
}

// newFixtureWith is newFixtureOn with a dispatcher (a forwarder) that new
// events are offered to.
func newFixtureWith(t *testing.T, j forwarder.Appender, d forwarder.Deliverer) *fixture {
	t.Helper()
	mk := func(name, scheme, secret string) *verify.Provider {
		var secrets []string
		if secret != "" {
			secrets = []string{secret}
		}
		p, err := verify.NewProvider(verify.ProviderConfig{Name: name, Scheme: scheme, Secrets: secrets})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	reg := prometheus.NewRegistry()
	var receipts proxy.ReceiptRecorder
	if st, ok := j.(journal.Store); ok {
		receipts = st
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{
			{Path: "/webhooks/std", Provider: mk("std", "standard", stdSecret)},
			{Path: "/webhooks/stripe", Provider: mk("stripe", "stripe", stripeSecret)},
			{Path: "/webhooks/open", Provider: mk("open", "none", ""), MaxBodyBytes: 64},
		},
		Intake:   newIntake(t, j, d),
		Metrics:  proxy.NewMetrics(reg),
		Receipts: receipts,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: httptest.NewServer(in), reg: reg, ingress: in}
	if st, ok := j.(journal.Store); ok {
		f.j = st
	}
	t.Cleanup(f.srv.Close)
	return f
}

// newIntake journals into j and, when d is set, offers new events to d
// for delivery from memory (a forwarder's Wake hears of the others).
func newIntake(t testing.TB, j forwarder.Appender, d forwarder.Deliverer) *forwarder.Intake {
	t.Helper()
	cfg := forwarder.IntakeConfig{Journal: j, Deliverer: d}
	if f, ok := d.(*forwarder.Forwarder); ok {
		cfg.OnCommit = f.Wake
	}
	in, err := forwarder.NewIntake(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// signStandard signs like a Standard Webhooks sender (independently of
// verify's code).
func signStandard(id string, ts time.Time, body string) http.Header {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(stdSecret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.%s", id, ts.Unix(), body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}

func signStripe(ts time.Time, body string) http.Header {
	mac := hmac.New(sha256.New, []byte(stripeSecret))
	fmt.Fprintf(mac, "%d.%s", ts.Unix(), body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s", ts.Unix(), hex.EncodeToString(mac.Sum(nil))))
	return h
}

type reply struct {
	status int
	body   string
	header http.Header
}

func (f *fixture) post(t *testing.T, path string, h http.Header, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b), resp.Header}
}

// events lists every journaled event (through the store's own API, so the
// same check holds on both stores).
func (f *fixture) events(t *testing.T) []journal.Summary {
	t.Helper()
	evs, _, err := f.j.List(context.Background(), journal.Filter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// conflicts counts the conflicting resends recorded on every event.
func (f *fixture) conflicts(t *testing.T) int {
	t.Helper()
	n := 0
	for _, e := range f.events(t) {
		d, err := f.j.Get(context.Background(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		n += d.Conflicts
	}
	return n
}

func (f *fixture) detail(t *testing.T, id int64) *journal.Detail {
	t.Helper()
	d, err := f.j.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) count(provider, result string) float64 {
	m, _ := f.reg.Gather()
	for _, mf := range m {
		if mf.GetName() != "whguard_ingress_requests_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["result"] == result {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestNewEventAcceptedThenDuplicates(t *testing.T) {
	t.Parallel()
	forEachStore(t, testNewEventAcceptedThenDuplicates)
}

func testNewEventAcceptedThenDuplicates(t *testing.T, store string) {
	f := newFixture(t, store)
	body := `{"type":"order.paid","data":{"order":"o1","amount":100}}`
	h := signStandard("msg_1", time.Now(), body)

	first := f.post(t, "/webhooks/std", h, body)
	if first.status != http.StatusAccepted {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	if want := `{"status":"accepted","provider":"std","event_id":"msg_1"}`; first.body != want {
		t.Fatalf("202 body %s, want %s", first.body, want)
	}
	for i := range 10 {
		r := f.post(t, "/webhooks/std", h, body)
		if r.status != http.StatusOK || r.body != first.body {
			t.Fatalf("duplicate %d: %d %q, want 200 and the first body", i, r.status, r.body)
		}
	}
	if n := len(f.events(t)); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
	if got := f.count("std", "accepted"); got != 1 {
		t.Errorf("accepted counter = %v", got)
	}
	if got := f.count("std", "duplicate"); got != 10 {
		t.Errorf("duplicate counter = %v", got)
	}
	// The journal holds the exact bytes and the event type.
	stored := f.detail(t, f.events(t)[0].ID)
	if stored.Body != body || stored.EventType != "order.paid" || stored.Headers.Get("Webhook-Id") != "msg_1" {
		t.Fatalf("stored %q type %q headers %v", stored.Body, stored.EventType, stored.Headers)
	}
}

func TestConcurrentIdenticalRequests(t *testing.T) {
	t.Parallel()
	forEachStore(t, testConcurrentIdenticalRequests)
}

func testConcurrentIdenticalRequests(t *testing.T, store string) {
	f := newFixture(t, store)
	body := `{"type":"x","n":1}`
	h := signStandard("msg_conc", time.Now(), body)
	const n = 50
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[int]int{}
		bodies = map[string]bool{}
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := f.post(t, "/webhooks/std", h, body)
			mu.Lock()
			counts[r.status]++
			bodies[r.body] = true
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if counts[http.StatusAccepted] != 1 || counts[http.StatusOK] != n-1 {
		t.Fatalf("statuses %v, want one 202 and %d 200", counts, n-1)
	}
	if len(bodies) != 1 {
		t.Fatalf("bodies differ: %v", bodies)
	}
	if rows := len(f.events(t)); rows != 1 {
		t.Fatalf("rows = %d", rows)
	}
}

// A resend that re-serializes the JSON (key order, whitespace, number
// spelling) is the same event: 200, not a conflict.
func TestReserializedDuplicate(t *testing.T) {
	t.Parallel()
	forEachStore(t, testReserializedDuplicate)
}

func testReserializedDuplicate(t *testing.T, store string) {
	f := newFixture(t, store)
	body1 := `{"type":"x","data":{"a":1,"b":[1,2]}}`
	body2 := "{ \"data\": {\"b\":[1, 2.0], \"a\":1e0},\n \"type\":\"x\" }"
	if r := f.post(t, "/webhooks/std", signStandard("msg_r", time.Now(), body1), body1); r.status != 202 {
		t.Fatalf("first: %+v", r)
	}
	if r := f.post(t, "/webhooks/std", signStandard("msg_r", time.Now(), body2), body2); r.status != 200 {
		t.Fatalf("re-serialized: %+v, want 200", r)
	}
	// Unsigned provider: the key itself is the canonical digest.
	if r := f.post(t, "/webhooks/open", http.Header{"Content-Type": {"application/json"}}, body1); r.status != 202 {
		t.Fatalf("open first: %+v", r)
	}
	r := f.post(t, "/webhooks/open", http.Header{"Content-Type": {"application/json"}}, body2)
	if r.status != 200 || !strings.Contains(r.body, `"event_id":"sha256:`) {
		t.Fatalf("open re-serialized: %+v", r)
	}
	if n := f.conflicts(t); n != 0 {
		t.Fatalf("conflicts = %d", n)
	}
}

func TestSameIDDifferentContentConflicts(t *testing.T) {
	t.Parallel()
	forEachStore(t, testSameIDDifferentContentConflicts)
}

func testSameIDDifferentContentConflicts(t *testing.T, store string) {
	f := newFixture(t, store)
	b1, b2 := `{"type":"x","amount":1}`, `{"type":"x","amount":2}`
	if r := f.post(t, "/webhooks/std", signStandard("msg_c", time.Now(), b1), b1); r.status != 202 {
		t.Fatalf("first: %+v", r)
	}
	r := f.post(t, "/webhooks/std", signStandard("msg_c", time.Now(), b2), b2)
	if r.status != http.StatusConflict || !strings.Contains(r.body, `"error"`) {
		t.Fatalf("conflict: %+v", r)
	}
	if n := len(f.events(t)); n != 1 {
		t.Fatalf("events = %d", n)
	}
	if n := f.conflicts(t); n != 1 {
		t.Fatalf("conflicts = %d", n)
	}
	if got := f.count("std", "conflict"); got != 1 {
		t.Errorf("conflict counter = %v", got)
	}
	if kept := f.detail(t, f.events(t)[0].ID).Body; kept != b1 {
		t.Fatalf("kept %q, want the first payload", kept)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	forEachStore(t, testRefusals)
}

func testRefusals(t *testing.T, store string) {
	f := newFixture(t, store)
	now := time.Now()
	body := `{"type":"x"}`
	good := signStandard("msg_bad", now, body)
	with := func(h http.Header, k, v string) http.Header {
		c := h.Clone()
		if v == "" {
			c.Del(k)
		} else {
			c.Set(k, v)
		}
		return c
	}
	cases := []struct {
		name   string
		path   string
		header http.Header
		body   string
		status int
		result string
	}{
		{"tampered body", "/webhooks/std", good, `{"type":"y"}`, 401, "unauthorized"},
		{"wrong signature", "/webhooks/std", with(good, "webhook-signature", "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), body, 401, "unauthorized"},
		{"stale timestamp", "/webhooks/std", signStandard("msg_bad", now.Add(-10*time.Minute), body), body, 401, "unauthorized"},
		{"future timestamp", "/webhooks/std", signStandard("msg_bad", now.Add(10*time.Minute), body), body, 401, "unauthorized"},
		{"missing signature", "/webhooks/std", with(good, "webhook-signature", ""), body, 400, "bad_request"},
		{"missing id", "/webhooks/std", with(good, "webhook-id", ""), body, 400, "bad_request"},
		{"stripe body not JSON", "/webhooks/stripe", signStripe(now, "not json"), "not json", 400, "bad_request"},
		{"stripe body without id", "/webhooks/stripe", signStripe(now, `{"type":"x"}`), `{"type":"x"}`, 400, "bad_request"},
		{"duplicate JSON keys", "/webhooks/open", http.Header{"Content-Type": {"application/json"}}, `{"a":1,"a":2}`, 400, "bad_request"},
		{"oversize", "/webhooks/open", nil, strings.Repeat("x", 65), 413, "too_large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(t, tc.path, tc.header, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
			}
			if !strings.HasPrefix(r.body, `{"error":"`) {
				t.Fatalf("body %q is not a JSON error", r.body)
			}
			if strings.Contains(r.body, "MfKQ9r8G") || strings.Contains(r.body, "stripe test secret") {
				t.Fatalf("error body leaks a secret: %s", r.body)
			}
		})
	}
	if n := len(f.events(t)); n != 0 {
		t.Fatalf("refused requests wrote %d rows", n)
	}
	if got := f.count("std", "unauthorized"); got != 4 {
		t.Errorf("unauthorized counter = %v, want 4", got)
	}
	if got := f.count("open", "too_large"); got != 1 {
		t.Errorf("too_large counter = %v", got)
	}
	// Exactly at the limit is fine.
	if r := f.post(t, "/webhooks/open", nil, strings.Repeat("x", 64)); r.status != 202 {
		t.Fatalf("body at the limit: %+v", r)
	}
	// A valid Stripe event is accepted under its body id.
	sb := `{"id":"evt_1","type":"charge.succeeded","pending_webhooks":1}`
	if r := f.post(t, "/webhooks/stripe", signStripe(now, sb), sb); r.status != 202 || !strings.Contains(r.body, `"event_id":"evt_1"`) {
		t.Fatalf("stripe: %+v", r)
	}
}

func TestRouteAndMethod(t *testing.T) {
	t.Parallel()
	f := newFixtureOn(t, failingJournal{})
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		req, _ := http.NewRequest(m, f.srv.URL+"/nope", nil)
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s /nope = %d, want 404", m, resp.StatusCode)
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, f.srv.URL+"/webhooks/std", nil)
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Fatalf("%s = %d allow %q, want 405", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

// countingReader yields an endless body and counts what was read of it.
type countingReader struct {
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	c.n += int64(len(p))
	return len(p), nil
}

// The handler must stop reading at the limit, even when the sender does not
// announce a length.
func TestOversizeStopsReadingAtLimit(t *testing.T) {
	t.Parallel()
	f := newFixtureOn(t, failingJournal{})
	src := &countingReader{}
	req := httptest.NewRequest(http.MethodPost, "/webhooks/open", io.LimitReader(src, 10<<20))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	f.ingress.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", rec.Code)
	}
	// io.ReadAll asks for at least 512 bytes at a time: allow one buffer.
	if src.n > 64+1+512 {
		t.Fatalf("read %d bytes of a body limited to 64", src.n)
	}
	// With a declared length over the limit, nothing is read at all.
	src2 := &countingReader{}
	req = httptest.NewRequest(http.MethodPost, "/webhooks/open", io.LimitReader(src2, 1000))
	req.ContentLength = 1000
	rec = httptest.NewRecorder()
	f.ingress.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || src2.n != 0 {
		t.Fatalf("status %d, read %d", rec.Code, src2.n)
	}
}

type failingJournal struct{}

func (failingJournal) Append(context.Context, []journal.Event) ([]journal.Result, error) {
	return nil, fmt.Errorf("append: %w", context.DeadlineExceeded)
}

// A journal that cannot commit means 503 and never a 2xx: against a real
// pool pointed at a dead port, and against a real database whose
// connections are killed mid-life.
func TestJournalDownAnswers503(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dead, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: "postgres://postgres@127.0.0.1:1/x?connect_timeout=1"})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	f := newFixtureOn(t, dead)
	body := `{"type":"x"}`
	r := f.post(t, "/webhooks/std", signStandard("msg_down", time.Now(), body), body)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"error"`) {
		t.Fatalf("dead journal: %+v, want 503", r)
	}
	if got := f.count("std", "unavailable"); got != 1 {
		t.Errorf("unavailable counter = %v", got)
	}

	// A live database that goes away: drop it under the running pool.
	live := newFixture(t, "postgres")
	if r := live.post(t, "/webhooks/std", signStandard("msg_up", time.Now(), body), body); r.status != 202 {
		t.Fatalf("live: %+v", r)
	}
	var name string
	if err := live.j.(*journal.Postgres).Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	admin, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: testdb.ServerURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Pool().Exec(ctx, `DROP DATABASE `+`"`+name+`"`+` WITH (FORCE)`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r := live.post(t, "/webhooks/std", signStandard(fmt.Sprintf("msg_gone_%d", i), time.Now(), body), body)
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("after the database went away: %+v, want 503", r)
		}
	}

	// The embedded journal closed under a running ingress: 503, never 2xx.
	emb := newFixture(t, "sqlite")
	if r := emb.post(t, "/webhooks/std", signStandard("msg_emb", time.Now(), body), body); r.status != 202 {
		t.Fatalf("embedded: %+v", r)
	}
	emb.j.Close()
	if r := emb.post(t, "/webhooks/std", signStandard("msg_emb_gone", time.Now(), body), body); r.status != http.StatusServiceUnavailable {
		t.Fatalf("after the embedded journal closed: %+v, want 503", r)
	}
}

func TestAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "postgres")
	// One request so the ingress counters exist.
	f.post(t, "/webhooks/std", signStandard("msg_m", time.Now(), `{}`), `{}`)
	adminSrv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: f.j.Ready, Gatherer: f.reg, Token: "s3cret",
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }),
	}))
	defer adminSrv.Close()
	closed := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: func(context.Context) error { return journal.ErrNotMigrated }, Gatherer: f.reg,
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }),
	}))
	defer closed.Close()

	get := func(base, path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if s, _ := get(adminSrv.URL, "/healthz", ""); s != 200 {
		t.Errorf("healthz %d", s)
	}
	if s, b := get(adminSrv.URL, "/readyz", ""); s != 200 {
		t.Errorf("readyz %d %s", s, b)
	}
	if s, b := get(closed.URL, "/readyz", ""); s != 503 || !strings.Contains(b, "migrate") {
		t.Errorf("readyz unmigrated %d %s", s, b)
	}
	s, b := get(adminSrv.URL, "/metrics", "")
	if s != 200 || !strings.Contains(b, `whguard_ingress_requests_total{provider="std",result="accepted"} 1`) ||
		!strings.Contains(b, "whguard_ingress_duration_seconds") {
		t.Errorf("metrics %d:\n%s", s, b)
	}
	if err := testutil.GatherAndCompare(f.reg, bytes.NewBufferString(`
# HELP whguard_ingress_requests_total Webhook requests received, by provider and result (accepted, duplicate, conflict, unauthorized, too_large, bad_request, unavailable, not_found, method_not_allowed, handshake).
# TYPE whguard_ingress_requests_total counter
whguard_ingress_requests_total{provider="std",result="accepted"} 1
`), "whguard_ingress_requests_total"); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		base, token string
		want        int
	}{
		{adminSrv.URL, "", 401}, {adminSrv.URL, "wrong", 401}, {adminSrv.URL, "s3cret", 299},
		{closed.URL, "", 401}, {closed.URL, "anything", 401},
	} {
		if s, _ := get(tc.base, "/api/events", tc.token); s != tc.want {
			t.Errorf("api with token %q = %d, want %d", tc.token, s, tc.want)
		}
	}
}

// A query string that is not UTF-8 is refused before it reaches the
// journal (it would fail the commit it shares with other requests).
func TestInvalidUTF8QueryRefused(t *testing.T) {
	t.Parallel()
	f := newFixtureOn(t, failingJournal{})
	req := httptest.NewRequest(http.MethodPost, "/webhooks/open", strings.NewReader("{}"))
	req.URL.RawQuery = "a=\xff"
	rec := httptest.NewRecorder()
	f.ingress.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "UTF-8") {
		t.Fatalf("status %d body %s", rec.Code, rec.Body.String())
	}
}

// With a forwarder as dispatcher, new events are claimed at ingest and
// delivered from memory: under concurrent duplicates every event still
// reaches the backend exactly once, and every claim a duplicate made is
// given back (Stop would otherwise wait for it and report a timeout).
func TestDispatchedDeliveriesUnderDuplicates(t *testing.T) {
	t.Parallel()
	forEachStore(t, testDispatchedDeliveriesUnderDuplicates)
}

func testDispatchedDeliveriesUnderDuplicates(t *testing.T, store string) {
	j := testdb.OpenStore(t, store, true)
	var (
		mu       sync.Mutex
		received = map[string]int{}
	)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		received[string(b)]++
		mu.Unlock()
	}))
	defer backend.Close()
	reg := prometheus.NewRegistry()
	fwd, err := forwarder.New(forwarder.Config{Store: j, Concurrency: 8, Metrics: forwarder.NewMetrics(reg),
		Targets: map[string]forwarder.Target{"std": {BackendURL: backend.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fwd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, j, fwd)
	const events, copies = 20, 5
	var wg sync.WaitGroup
	for i := range events {
		body := fmt.Sprintf(`{"type":"x","n":%d}`, i)
		h := signStandard(fmt.Sprintf("msg_d%d", i), time.Now(), body)
		for range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := f.post(t, "/webhooks/std", h, body); r.status != http.StatusAccepted && r.status != http.StatusOK {
					t.Errorf("%s: %d %s", body, r.status, r.body)
				}
			}()
		}
	}
	wg.Wait()
	testdb.WaitDone(t, j, events, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := fwd.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v (a claim was never given back)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(received) != events {
		t.Fatalf("backend got %d distinct events, want %d", len(received), events)
	}
	for body, n := range received {
		if n != 1 {
			t.Errorf("%s delivered %d times", body, n)
		}
	}
	var dispatched float64
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "whguard_deliveries_dispatched_total" {
			for _, m := range mf.GetMetric() {
				dispatched += m.GetCounter().GetValue()
			}
		}
	}
	if dispatched < 1 {
		t.Fatal("no event was dispatched from memory")
	}
	t.Logf("%s: %v of %d events dispatched from memory", store, dispatched, events)
}

// TestStalledJournal503MeansNotStored: a 503 promises the sender that
// nothing was stored. The journal stalls behind a table lock held by the
// test; the request times out with 503; once the lock is gone the group
// commit must not store the event after all (it did before the fix: the
// flush outlived the request by seconds and committed the event the
// sender had been told to resend).
func TestStalledJournal503MeansNotStored(t *testing.T) {
	ctx := context.Background()
	pg := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "std", Scheme: "standard", Secrets: []string{stdSecret}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes:        []proxy.Route{{Path: "/webhooks/std", Provider: p}},
		Intake:        newIntake(t, journal.NewGroupCommitter(pg, 2, nil), nil),
		CommitTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: httptest.NewServer(in), j: pg}
	t.Cleanup(f.srv.Close)

	lock, err := pg.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `LOCK TABLE whguard_events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	body := `{"type":"stalled"}`
	start := time.Now()
	r := f.post(t, "/webhooks/std", signStandard("msg_stalled", time.Now(), body), body)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("stalled journal: %+v, want 503", r)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("503 after %s; the commit timeout is 500ms", took)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Wait until no statement of the journal's is running any more.
	var active int
	if !testwait.Until(15*time.Second, testwait.Poll, func() bool {
		if err := pg.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'`).Scan(&active); err != nil {
			t.Fatal(err)
		}
		return active == 0
	}) {
		t.Fatalf("%d statements still running 15 s after the lock was released", active)
	}
	if evs := f.events(t); len(evs) != 0 {
		t.Fatalf("answered 503 but stored %d event(s): %+v", len(evs), evs)
	}
	// The sender's retry is stored as new.
	if r := f.post(t, "/webhooks/std", signStandard("msg_stalled", time.Now(), body), body); r.status != http.StatusAccepted {
		t.Fatalf("retry after the stall: %+v, want 202", r)
	}
}

// TestForwardedHeadersJournaled: the ingress records where a webhook came
// from the way a reverse proxy does, so the backend behind whguard sees the
// sender's host and scheme (HTTPS redirects and host checks pass) and the
// client; values set by a proxy in front of whguard are kept or extended.
func TestForwardedHeadersJournaled(t *testing.T) {
	f := newFixture(t, "sqlite")
	body := `{"type":"fwd"}`
	h := signStandard("msg_fwd", time.Now(), body)
	h.Set("X-Forwarded-For", "203.0.113.9")
	h.Set("X-Forwarded-Proto", "https")
	r := f.post(t, "/webhooks/std", h, body)
	if r.status != http.StatusAccepted {
		t.Fatalf("%+v", r)
	}
	// The answer itself: JSON, its length declared.
	if ct, cl := r.header.Get("Content-Type"), r.header.Get("Content-Length"); ct != "application/json" || cl != strconv.Itoa(len(r.body)) {
		t.Errorf("answer headers: Content-Type %q, Content-Length %q for a %d-byte body", ct, cl, len(r.body))
	}
	d := f.detail(t, f.events(t)[0].ID)
	host := strings.TrimPrefix(f.srv.URL, "http://")
	for name, want := range map[string]string{
		"X-Forwarded-For":   "203.0.113.9, 127.0.0.1",
		"X-Forwarded-Proto": "https",
		"X-Forwarded-Host":  host,
		"Forwarded":         `for=127.0.0.1;host="` + host + `";proto=https`,
	} {
		if got := d.Headers.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// TestBodyBudget: bodies being read hold at most MaxBufferedBytes, and large
// ones at most three quarters of it. Clients that declare large bodies and
// withhold their last byte (no signature can be checked before the body is
// in) get 503 with Retry-After once their share is spent, while small,
// genuine webhooks still get through.
func TestBodyBudget(t *testing.T) {
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "std", Scheme: "standard", Secrets: []string{stdSecret}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes:           []proxy.Route{{Path: "/webhooks/std", Provider: p}},
		Intake:           newIntake(t, testdb.OpenStore(t, "sqlite", true), nil),
		MaxBufferedBytes: 2 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: httptest.NewServer(in)}
	t.Cleanup(f.srv.Close)
	addr := strings.TrimPrefix(f.srv.URL, "http://")

	// withhold sends a large body's headers and all of it but its last byte.
	withhold := func(size int) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		h := signStandard("msg_big", time.Now(), "x")
		fmt.Fprintf(c, "POST /webhooks/std HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", addr, size)
		for k, v := range h {
			fmt.Fprintf(c, "%s: %s\r\n", k, v[0])
		}
		fmt.Fprint(c, "\r\n")
		if _, err := c.Write(make([]byte, size-1)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	bigPost := func() reply {
		body := strings.Repeat("y", 900<<10)
		return f.post(t, "/webhooks/std", signStandard("msg_probe", time.Now(), body), body)
	}
	withhold(900 << 10) // 0.9 MiB of the 1.5 MiB large share
	// Wait until the server has reserved it: another large body no longer fits.
	var r reply
	if !testwait.Until(10*time.Second, testwait.Poll, func() bool { r = bigPost(); return r.status == http.StatusServiceUnavailable }) {
		t.Fatalf("a second large body was still read with the large share spent: %+v", r)
	}
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("503 without Retry-After: 1: %+v", r)
	}
	// Small genuine webhooks still get through.
	for i := range 5 {
		body := fmt.Sprintf(`{"type":"small","n":%d}`, i)
		if r := f.post(t, "/webhooks/std", signStandard(fmt.Sprintf("msg_small_%d", i), time.Now(), body), body); r.status != http.StatusAccepted {
			t.Fatalf("genuine small webhook during the attack: %+v", r)
		}
	}
}

// TestHugeBodyLimitRefused: a limit at the edge of int64 once made the
// read limit overflow, every body was read as empty, and distinct events
// collapsed into one key. The configuration refuses such a limit, naming
// the route's setting (readLimited stays correct whatever the limit: see
// TestReadLimitedAtTheEdge).
func TestHugeBodyLimitRefused(t *testing.T) {
	t.Parallel()
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "open", Scheme: "none"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{{Path: "/webhooks/open", Provider: p, MaxBodyBytes: math.MaxInt64}},
		Intake: newIntake(t, testdb.OpenStore(t, "sqlite", true), nil),
	})
	if fes := fields.All(err); len(fes) != 1 || fes[0].Field != "Routes[0].MaxBodyBytes" {
		t.Fatalf("NewIngress: %v", err)
	}
}

// TestBodyGuardAcknowledgesButDoesNotStoreAReplay: GitHub's delivery id is
// not signed, so a captured request resent with a fresh id verifies. With
// the body guard (the default for such providers) it is acknowledged like
// a duplicate, recorded on the first event, and not journaled as new (so
// never forwarded).
func TestBodyGuardAcknowledgesButDoesNotStoreAReplay(t *testing.T) {
	forEachStore(t, func(t *testing.T, store string) {
		const secret = "It's a Secret to Everybody"
		p, err := verify.NewProvider(verify.ProviderConfig{Name: "gh", Scheme: "github", Secrets: []string{secret}})
		if err != nil {
			t.Fatal(err)
		}
		j := testdb.OpenStore(t, store, true)
		reg := prometheus.NewRegistry()
		in, err := proxy.NewIngress(proxy.IngressConfig{
			Routes: []proxy.Route{{Path: "/webhooks/gh", Provider: p, BodyGuard: true}},
			Intake: newIntake(t, j, nil), Metrics: proxy.NewMetrics(reg),
		})
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{srv: httptest.NewServer(in), j: j, reg: reg}
		t.Cleanup(f.srv.Close)
		body := `{"action":"opened","issue":{"id":1}}`
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(body))
		send := func(delivery string) reply {
			return f.post(t, "/webhooks/gh", http.Header{
				"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac.Sum(nil))},
				"X-Github-Delivery":   {delivery}, "X-Github-Event": {"issues"}, "Content-Type": {"application/json"},
			}, body)
		}
		if r := send("d-1"); r.status != http.StatusAccepted {
			t.Fatalf("first: %+v", r)
		}
		if r := send("d-2-forged"); r.status != http.StatusOK {
			t.Fatalf("replay under a fresh id: %+v", r)
		}
		evs := f.events(t)
		if len(evs) != 1 || evs[0].EventID != "d-1" {
			t.Fatalf("journal: %+v", evs)
		}
		if f.conflicts(t) != 1 {
			t.Fatalf("the replay was not recorded on the first event")
		}
		if got := f.count("gh", "replay"); got != 1 {
			t.Fatalf("replay counter %v", got)
		}
	})
}

// TestHeaderChecksComeBeforeTheBody: a request whose signature headers are
// missing or malformed, or whose timestamp is stale, is answered before a
// byte of its body is read (the test never sends the body).
func TestHeaderChecksComeBeforeTheBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "sqlite")
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	for _, c := range []struct {
		name    string
		headers string
		want    int
	}{
		{"no signature headers", "", 400},
		{"malformed signature", "webhook-id: m1\r\nwebhook-timestamp: %d\r\nwebhook-signature: v1,!!!\r\n", 401},
		{"stale timestamp", "webhook-id: m1\r\nwebhook-timestamp: 1000000000\r\nwebhook-signature: v1," + strings.Repeat("A", 43) + "=\r\n", 401},
	} {
		c0, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		headers := c.headers
		if strings.Contains(headers, "%d") {
			headers = fmt.Sprintf(headers, time.Now().Unix())
		}
		fmt.Fprintf(c0, "POST /webhooks/std HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000000\r\n%s\r\n", addr, headers)
		_ = c0.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c0), nil)
		if err != nil {
			t.Fatalf("%s: no answer without the body: %v", c.name, err)
		}
		resp.Body.Close()
		c0.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

// TestPassThroughServesTheAppsOwnTraffic: in front of all of the app's
// traffic, requests that are no provider's webhook reach the app
// unchanged (any method, path, query, body, the user's Host), while the
// webhook path is still verified and journaled.
func TestPassThroughServesTheAppsOwnTraffic(t *testing.T) {
	t.Parallel()
	var got struct {
		method, uri, host, body, xfp string
	}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.uri, got.host, got.body, got.xfp = r.Method, r.RequestURI, r.Host, string(b), r.Header.Get("X-Forwarded-Proto")
		w.Header().Set("X-App", "yes")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "from the app")
	}))
	defer app.Close()
	target, _ := url.Parse(app.URL)
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "std", Scheme: "standard", Secrets: []string{stdSecret}})
	if err != nil {
		t.Fatal(err)
	}
	j := testdb.OpenStore(t, "sqlite", true)
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{{Path: "/webhooks/std", Provider: p}}, Intake: newIntake(t, j, nil),
		PassThrough: proxy.NewPassThrough(proxy.PassThroughConfig{Target: target}),
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: httptest.NewServer(in), j: j}
	t.Cleanup(f.srv.Close)
	req, _ := http.NewRequest(http.MethodPut, f.srv.URL+"/orders/7?x=1", strings.NewReader("user data"))
	req.Host = "shop.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || string(b) != "from the app" || resp.Header.Get("X-App") != "yes" {
		t.Fatalf("answer %d %q %v", resp.StatusCode, b, resp.Header)
	}
	if got.method != "PUT" || got.uri != "/orders/7?x=1" || got.host != "shop.example.com" || got.body != "user data" || got.xfp != "http" {
		t.Fatalf("the app saw %+v", got)
	}
	body := `{"type":"x"}`
	if r := f.post(t, "/webhooks/std", signStandard("msg_pt", time.Now(), body), body); r.status != http.StatusAccepted {
		t.Fatalf("webhook: %+v", r)
	}
	if r := f.post(t, "/webhooks/std", http.Header{}, body); r.status != http.StatusBadRequest {
		t.Fatalf("unsigned webhook passed through: %+v", r)
	}
	if evs := f.events(t); len(evs) != 1 {
		t.Fatalf("journal: %+v", evs)
	}
}

// waitTimeline waits until event id's timeline satisfies ok: receipts are
// recorded once their answer is sent, so a client can read its answer
// before the journal has its receipt.
func waitTimeline(t *testing.T, j journal.Store, id int64, ok func([]journal.TimelineEntry) bool) []journal.TimelineEntry {
	t.Helper()
	var tl []journal.TimelineEntry
	if !testwait.Until(10*time.Second, testwait.Poll, func() bool {
		d, err := j.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		tl = d.Timeline
		return ok(tl)
	}) {
		t.Fatalf("timeline of event %d: %+v", id, tl)
	}
	return tl
}

// TestReceiptsRecorded: an event's timeline holds what its requests were
// answered, the first with its row, each duplicate once answered, a
// conflicting copy by its copy; and its headers exactly as received,
// without the X-Forwarded-* whguard adds for the backend.
func TestReceiptsRecorded(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		f := newFixture(t, store)
		body := `{"type":"order.paid"}`
		h := signStandard("msg_r", time.Now(), body)
		if r := f.post(t, "/webhooks/std", h, body); r.status != http.StatusAccepted {
			t.Fatalf("first: %+v", r)
		}
		for range 3 {
			if r := f.post(t, "/webhooks/std", h, body); r.status != http.StatusOK {
				t.Fatalf("duplicate: %+v", r)
			}
		}
		other := `{"type":"order.paid","changed":true}`
		if r := f.post(t, "/webhooks/std", signStandard("msg_r", time.Now(), other), other); r.status != http.StatusConflict {
			t.Fatalf("conflict: %+v", r)
		}
		id := f.events(t)[0].ID
		tl := waitTimeline(t, f.j, id, func(tl []journal.TimelineEntry) bool { return len(tl) == 5 })
		want := []struct {
			kind   string
			answer int
		}{{journal.TimelineReceived, 202}, {journal.TimelineDuplicate, 200}, {journal.TimelineDuplicate, 200},
			{journal.TimelineDuplicate, 200}, {journal.TimelineConflict, 409}}
		for i, w := range want {
			if tl[i].Kind != w.kind || tl[i].Answer != w.answer {
				t.Fatalf("entry %d: %+v, want %s answered %d (timeline %+v)", i, tl[i], w.kind, w.answer, tl)
			}
		}
		if tl[0].Duplicates != 3 || tl[3].Number != 3 {
			t.Errorf("duplicates counted %d, last numbered %d; want 3", tl[0].Duplicates, tl[3].Number)
		}
		d := f.detail(t, id)
		if d.ReceivedHeaders.Get("Webhook-Id") != "msg_r" || d.Headers.Get("X-Forwarded-For") == "" {
			t.Fatalf("received %v, journaled %v", d.ReceivedHeaders, d.Headers)
		}
		for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded"} {
			if vs, ok := d.ReceivedHeaders[name]; ok {
				t.Errorf("received headers hold %s %q, which whguard added", name, vs)
			}
		}
	})
}
