package forwarder_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

var dbURL string

// TestMain runs the tests on the package's database (testdb.Main), then
// fails the run if any goroutine they started is still running: a
// forwarder never stopped, a delivery, a loop or a backend handler that
// outlived its test. No goroutine is excused but those running before the
// tests (taken after, the snapshot would excuse every leak): the journals'
// pools and the HTTP clients' connections end with their test's cleanup.
func TestMain(m *testing.M) {
	before := goleak.IgnoreCurrent()
	code := testdb.Main(m, "forwarder", &dbURL)
	if code == 0 {
		if err := findLeaks(before, 5*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks looks for goroutines left running (goleak.Find, which retries
// for about half a second), again until within has passed: work a Stop
// gave up on ends within its own time-outs (a hand-back within 0.5 s),
// and a connection of an HTTP client ends after its test's server closed
// it, so only goroutines still there after within are leaks.
func findLeaks(opts goleak.Option, within time.Duration) error {
	deadline := time.Now().Add(within)
	err := goleak.Find(opts)
	for err != nil && time.Now().Before(deadline) {
		err = goleak.Find(opts)
	}
	return err
}

// forEachStore runs a test once per journal store, the two in parallel:
// each subtest opens a journal and a backend of its own.
var forEachStore = testdb.ForEachStoreParallel

// openJournal returns a migrated journal of the test's own.
func openJournal(t *testing.T, store string) journal.Store { return testdb.OpenStore(t, store, true) }

func appendEvent(t *testing.T, j journal.Store, id string) int64 {
	t.Helper()
	r, err := j.Append(context.Background(), []journal.Event{{
		Provider: "acme", EventID: id, ContentHash: "h-" + id,
		Headers: http.Header{
			"Content-Type":      {"application/json"},
			"Webhook-Signature": {"v1,sig-" + id},
			"Connection":        {"keep-alive, X-Private"},
			"X-Private":         {"hop"},
			"Idempotency-Key":   {"sender-chosen"},
			"X-Whguard-Attempt": {"999"},
			"Expect":            {"100-continue"},
		},
		Body: []byte(`{"id":"` + id + `"}`), Path: "/webhooks/acme", RawQuery: "a=1&b=2",
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r[0].ID
}

// recorder is a backend that records every request and answers from a
// script (then 200 when the script runs out).
type recorder struct {
	mu       sync.Mutex
	reqs     []recorded
	script   []func(w http.ResponseWriter)
	delay    time.Duration
	received chan struct{}
}

type recorded struct {
	at     time.Time
	header http.Header
	body   string
	uri    string
}

func newRecorder(t *testing.T, script ...func(w http.ResponseWriter)) (*recorder, *httptest.Server) {
	rec := &recorder{script: script, received: make(chan struct{}, 10000)}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, recorded{time.Now(), req.Header.Clone(), string(b), req.RequestURI})
	var step func(w http.ResponseWriter)
	if len(r.script) > 0 {
		step, r.script = r.script[0], r.script[1:]
	}
	delay := r.delay
	r.mu.Unlock()
	r.received <- struct{}{}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return
		}
	}
	if step != nil {
		step(w)
		return
	}
	w.WriteHeader(200)
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

func status(code int, headers ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d", code)
	}
}

func startForwarder(t *testing.T, j journal.Store, backend string, mod func(*forwarder.Config)) (*forwarder.Forwarder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := forwarder.Config{
		Store:         j,
		Targets:       map[string]forwarder.Target{"acme": {BackendURL: backend}},
		Timeout:       2 * time.Second,
		Policy:        forwarder.Policy{BaseDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond, MaxAttempts: 5},
		PollInterval:  50 * time.Millisecond,
		ReapInterval:  100 * time.Millisecond,
		StatsInterval: 100 * time.Millisecond,
		Metrics:       forwarder.NewMetrics(reg),
		Logger:        zaptest.NewLogger(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	f, err := forwarder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.Stop(ctx)
	})
	return f, reg
}

// stopOverrun bounds how long the tests let Stop run past its deadline.
// Stop promises its deadline plus about a second (its grace for the
// hand-backs, then the last figures' write, at most half a second); the
// tests tell that apart from a stop that waits out what holds its work (a
// backend holding a request 10 s or more, a statement's 10 s time-out), so
// the bound leaves a loaded machine two seconds more than the promise.
const stopOverrun = time.Second + 500*time.Millisecond + 2*time.Second

// stopForwarder stops f, failing the test if Stop reports work it had to
// interrupt. Stop returns once every delivery under way has ended.
func stopForwarder(t *testing.T, f *forwarder.Forwarder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// waitStatus reads the event from the journal every 20 ms until it
// reaches want, and returns it; it fails the test after within.
func waitStatus(t *testing.T, j journal.Store, id int64, want journal.Status, within time.Duration) *journal.Detail {
	t.Helper()
	var d *journal.Detail
	if !eventually(within, 20*time.Millisecond, func() bool { d = get(t, j, id); return d.Status == want }) {
		t.Fatalf("event %d is %s after %s, want %s (last error %q)", id, d.Status, within, want, d.LastError)
	}
	return d
}

func TestRetriesThenDelivered(t *testing.T) {
	t.Parallel()
	forEachStore(t, testRetriesThenDelivered)
}

func testRetriesThenDelivered(t *testing.T, store string) {
	j := openJournal(t, store)
	rec, srv := newRecorder(t, status(500), status(502), status(429, "Retry-After", "1"), status(200))
	id := appendEvent(t, j, "evt_retry")
	startForwarder(t, j, srv.URL, nil)

	d := waitStatus(t, j, id, journal.StatusDone, 15*time.Second)
	reqs := rec.requests()
	if len(reqs) != 4 || d.Attempts != 4 || len(d.AttemptLog) != 4 {
		t.Fatalf("requests %d attempts %d log %d, want 4", len(reqs), d.Attempts, len(d.AttemptLog))
	}
	key := reqs[0].header.Get("Idempotency-Key")
	if key == "" || key == "sender-chosen" || key != forwarder.IdempotencyKey("acme", "evt_retry") {
		t.Fatalf("idempotency key %q", key)
	}
	for i, r := range reqs {
		if r.header.Get("Idempotency-Key") != key {
			t.Fatalf("attempt %d key %q differs from %q", i+1, r.header.Get("Idempotency-Key"), key)
		}
		if r.header.Get("X-Whguard-Attempt") != fmt.Sprint(i+1) {
			t.Fatalf("attempt %d header %q", i+1, r.header.Get("X-Whguard-Attempt"))
		}
		if r.body != `{"id":"evt_retry"}` || r.uri != "/webhooks/acme?a=1&b=2" {
			t.Fatalf("attempt %d body %q uri %q", i+1, r.body, r.uri)
		}
	}
	if gap := reqs[3].at.Sub(reqs[2].at); gap < time.Second {
		t.Fatalf("retry after 429 came %s later, want ≥ 1s (Retry-After)", gap)
	}
	wantCodes := []int{500, 502, 429, 200}
	for i, a := range d.AttemptLog {
		if a.Number != i+1 || a.StatusCode != wantCodes[i] || a.StartedAt.IsZero() {
			t.Fatalf("attempt log[%d] = %+v", i, a)
		}
	}
	if d.AttemptLog[0].ResponseExcerpt != "answer 500" {
		t.Fatalf("excerpt %q", d.AttemptLog[0].ResponseExcerpt)
	}
	h := reqs[0].header
	if h.Get("Webhook-Signature") != "v1,sig-evt_retry" || h.Get("X-Whguard-Provider") != "acme" ||
		h.Get("X-Whguard-Event-Id") != fmt.Sprint(id) || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers not forwarded as expected: %v", h)
	}
	if h.Get("X-Private") != "" || h.Get("Expect") != "" || h.Get("Connection") != "" {
		t.Fatalf("a hop-by-hop header was forwarded: %v", h)
	}
}

func TestPermanentFailureIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, testPermanentFailureIsDeadAtOnce)
}

func testPermanentFailureIsDeadAtOnce(t *testing.T, store string) {
	j := openJournal(t, store)
	rec, srv := newRecorder(t, status(422))
	id := appendEvent(t, j, "evt_422")
	_, reg := startForwarder(t, j, srv.URL, nil)
	d := waitStatus(t, j, id, journal.StatusDead, 10*time.Second)
	// A fixed window in which nothing more may happen: no retry comes
	// for a dead event (backoffs here are 20 to 100 ms, so a retry would
	// fall in it).
	time.Sleep(300 * time.Millisecond)
	if n := len(rec.requests()); n != 1 || d.Attempts != 1 {
		t.Fatalf("requests %d attempts %d, want 1", n, d.Attempts)
	}
	if d.LastError == "" {
		t.Fatal("dead without last_error")
	}
	if v := metricValue(t, reg, "whguard_deliveries_total", map[string]string{"provider": "acme", "outcome": "dead"}); v != 1 {
		t.Fatalf("dead counter %v", v)
	}
}

// metricValue reads one counter or gauge sample from reg by its labels.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

func TestAlways503IsDeadAfterMaxAttemptsThenReplay(t *testing.T) {
	t.Parallel()
	forEachStore(t, testAlways503IsDeadAfterMaxAttemptsThenReplay)
}

func testAlways503IsDeadAfterMaxAttemptsThenReplay(t *testing.T, store string) {
	j := openJournal(t, store)
	var fail atomic.Bool
	fail.Store(true)
	var mu sync.Mutex
	var got []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, recorded{time.Now(), r.Header.Clone(), string(b), r.RequestURI})
		mu.Unlock()
		if fail.Load() {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(204)
	}))
	defer srv.Close()
	id := appendEvent(t, j, "evt_503")
	f, _ := startForwarder(t, j, srv.URL, nil)
	d := waitStatus(t, j, id, journal.StatusDead, 15*time.Second)
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n != 5 || d.Attempts != 5 {
		t.Fatalf("requests %d attempts %d, want exactly 5 (max attempts)", n, d.Attempts)
	}

	fail.Store(false)
	if err := j.Replay(context.Background(), id, "backend fixed"); err != nil {
		t.Fatal(err)
	}
	d = waitStatus(t, j, id, journal.StatusDone, 10*time.Second)
	// Stop waits for every delivery under way: a second delivery of the
	// replayed event, had one started, has reached the backend by then;
	// and a done event is never leased again.
	stopForwarder(t, f)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 6 {
		t.Fatalf("after replay %d requests, want 6 (delivered once)", len(got))
	}
	last, first := got[5], got[0]
	if last.header.Get("Idempotency-Key") != first.header.Get("Idempotency-Key") || last.body != first.body {
		t.Fatal("replay changed the key or the body")
	}
	if last.header.Get("X-Whguard-Attempt") != "6" {
		t.Fatalf("replayed attempt header %q, want 6 (keeps counting)", last.header.Get("X-Whguard-Attempt"))
	}
	if len(d.Replays) != 1 || d.Replays[0].Reason != "backend fixed" || d.Replays[0].FromStatus != "dead" {
		t.Fatalf("replay audit %+v", d.Replays)
	}
	// Replaying an event that is not dead or done is refused (with the
	// forwarder stopped, it stays pending); a done one is replayed.
	id2 := appendEvent(t, j, "evt_not_dead")
	if err := j.Replay(context.Background(), id2, "x"); !errors.Is(err, journal.ErrNotReplayable) {
		t.Fatalf("replay of a pending event: %v, want %v", err, journal.ErrNotReplayable)
	}
	if err := j.Replay(context.Background(), id, "again"); err != nil {
		t.Fatalf("replay of a done event: %v", err)
	}
	if err := j.Replay(context.Background(), 1<<40, "x"); err != journal.ErrNotFound {
		t.Fatalf("replay of a missing event: %v", err)
	}
}

// Two forwarders on one journal, both healthy: every event is delivered
// exactly once.
func TestTwoForwardersNoDoubleDelivery(t *testing.T) {
	t.Parallel()
	forEachStore(t, testTwoForwardersNoDoubleDelivery)
}

func testTwoForwardersNoDoubleDelivery(t *testing.T, store string) {
	j := openJournal(t, store)
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		slowFor(r.Context(), time.Millisecond)
		w.WriteHeader(200)
	}))
	defer srv.Close()
	const n = 400
	startForwarder(t, j, srv.URL, nil)
	startForwarder(t, j, srv.URL, nil)
	var batch []journal.Event
	for i := range n {
		batch = append(batch, journal.Event{Provider: "acme", EventID: fmt.Sprintf("e%d", i), ContentHash: "h",
			Body: []byte("{}"), Path: "/w", Headers: http.Header{}})
		if len(batch) == 50 {
			if _, err := j.Append(context.Background(), batch); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	testdb.WaitDone(t, j, n, 60*time.Second) // a bound for a hang: on SQLite, a loaded machine takes over 10 s
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("%d distinct keys delivered, want %d", len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("key %s delivered %d times", k, c)
		}
	}
}

// The reaper in a running forwarder returns an abandoned lease within
// seconds and counts it.
func TestReaperReturnsAbandonedLease(t *testing.T) {
	t.Parallel()
	forEachStore(t, testReaperReturnsAbandonedLease)
}

func testReaperReturnsAbandonedLease(t *testing.T, store string) {
	j := openJournal(t, store)
	id := appendEvent(t, j, "evt_abandoned")
	if ds, err := j.Lease(context.Background(), 1, 200*time.Millisecond); err != nil || len(ds) != 1 {
		t.Fatalf("lease: %v %v", ds, err)
	}
	rec, srv := newRecorder(t)
	_, reg := startForwarder(t, j, srv.URL, nil)
	d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second)
	if len(rec.requests()) != 1 || d.Attempts != 2 {
		t.Fatalf("requests %d attempts %d", len(rec.requests()), d.Attempts)
	}
	if v := metricValue(t, reg, "whguard_lease_expired_total", nil); v != 1 {
		t.Fatalf("lease_expired_total = %v", v)
	}
}

// New rows are picked up at once through the in-process wake-up and through
// LISTEN/NOTIFY, with the poll fallback set to an hour.
func TestWakeUps(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"in-process/postgres", "in-process/sqlite", "notify/postgres"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			kind, store, _ := strings.Cut(mode, "/")
			var j, writer journal.Store
			if kind == "notify" {
				// Another replica commits: a second connection pool on the
				// same database, whose NOTIFY the forwarder's LISTEN hears.
				u, drop, err := testdb.Create(context.Background(), "fwn")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(drop)
				for _, p := range []*journal.Store{&j, &writer} {
					pg, err := journal.OpenPostgres(context.Background(), journal.PostgresConfig{URL: u})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(pg.Close)
					*p = pg
				}
				if _, err := j.Migrate(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else {
				j = openJournal(t, store)
				writer = j
			}
			rec, srv := newRecorder(t)
			f, _ := startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
				c.PollInterval = time.Hour
				c.ReapInterval = time.Hour
				if kind == "notify" {
					c.Listen = j.(*journal.Postgres).Listen
				}
			})
			if kind == "notify" {
				waitListening(t, j.(*journal.Postgres))
			}
			appendEvent(t, writer, "evt_wake_"+kind)
			if kind == "in-process" {
				f.Wake()
			}
			// Polling and reaping run once an hour: only the wake-up can
			// bring the row before that, so any delivery within a bound far
			// below the hour (and far above what a loaded machine needs)
			// was brought by it.
			select {
			case <-rec.received:
			case <-time.After(10 * time.Second):
				t.Fatal("not delivered within 10 s with polling off: the wake-up was lost")
			}
		})
	}
}

// Stop with a delivery stuck past the deadline: the lease is handed back
// without spending the attempt; the event is due again.
func TestStopReleasesUnfinishedLease(t *testing.T) {
	t.Parallel()
	forEachStore(t, testStopReleasesUnfinishedLease)
}

func testStopReleasesUnfinishedLease(t *testing.T, store string) {
	j := openJournal(t, store)
	rec, srv := newRecorder(t)
	rec.delay = 10 * time.Second
	id := appendEvent(t, j, "evt_stuck")
	f, err := forwarder.New(forwarder.Config{
		Store: j, Targets: map[string]forwarder.Target{"acme": {BackendURL: srv.URL}},
		Timeout: 30 * time.Second, PollInterval: 50 * time.Millisecond, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.received:
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := f.Stop(ctx); err == nil {
		t.Fatal("Stop reported no interruption")
	}
	// The stop does not wait out the backend's 10 s: it ends within its
	// deadline plus stopOverrun.
	if took := time.Since(start); took > 300*time.Millisecond+stopOverrun {
		t.Fatalf("Stop took %s with a 300ms deadline and a backend holding the delivery 10 s", took)
	}
	d, err := j.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != journal.StatusPending || d.Attempts != 0 || len(d.AttemptLog) != 0 {
		t.Fatalf("after stop: status %s attempts %d log %d, want pending/0/0", d.Status, d.Attempts, len(d.AttemptLog))
	}
	if err := f.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestConnectionRefusedRetries(t *testing.T) {
	t.Parallel()
	forEachStore(t, testConnectionRefusedRetries)
}

func testConnectionRefusedRetries(t *testing.T, store string) {
	j := openJournal(t, store)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	id := appendEvent(t, j, "evt_refused")
	startForwarder(t, j, url, func(c *forwarder.Config) { c.Policy.MaxAttempts = 2 })
	d := waitStatus(t, j, id, journal.StatusDead, 10*time.Second)
	if len(d.AttemptLog) != 2 || d.AttemptLog[0].Error != "connection_refused" || d.AttemptLog[0].StatusCode != 0 {
		t.Fatalf("attempt log %+v", d.AttemptLog)
	}
}

// The retention loop runs on its own and forgets delivered events once
// their retention has passed; dead events stay.
func TestRetentionLoop(t *testing.T) {
	t.Parallel()
	forEachStore(t, testRetentionLoop)
}

func testRetentionLoop(t *testing.T, store string) {
	j := openJournal(t, store)
	_, srv := newRecorder(t, status(200), status(422))
	// The forwarder's clock runs ahead on demand: retention is measured
	// with it, against the times the journal recorded.
	var ahead atomic.Int64
	done := appendEvent(t, j, "evt_kept_for_a_while")
	_, reg := startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
		c.CleanupInterval = 50 * time.Millisecond
		c.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	})
	waitStatus(t, j, done, journal.StatusDone, 10*time.Second)
	dead := appendEvent(t, j, "evt_quarantined")
	waitStatus(t, j, dead, journal.StatusDead, 10*time.Second)
	ahead.Store(int64(forwarder.DefaultKeyRetention + time.Hour))
	waitUntil(t, 10*time.Second, "delivered event forgotten and counted after its retention", func() bool {
		_, err := j.Get(context.Background(), done)
		return errors.Is(err, journal.ErrNotFound) &&
			metricValue(t, reg, "whguard_retention_deleted_total", map[string]string{"kind": "event"}) == 1
	})
	// Dead events are never deleted: the round that forgot the delivered
	// event left the dead one.
	if d, err := j.Get(context.Background(), dead); err != nil || d.Status != journal.StatusDead {
		t.Fatalf("dead event after retention: %v %v", d, err)
	}
}

// A claimed event is journaled leased and delivered from memory: the same
// request a leased one gets, its outcome recorded under the claim's token,
// and counted as dispatched. Claims decline before Start, when as many
// claims as slots wait, and after Stop.
func TestClaimDispatch(t *testing.T) {
	t.Parallel()
	forEachStore(t, testClaimDispatch)
}

func testClaimDispatch(t *testing.T, store string) {
	j := openJournal(t, store)
	rec, srv := newRecorder(t, status(503))
	f, err := forwarder.New(forwarder.Config{Store: j, Targets: map[string]forwarder.Target{"acme": {BackendURL: srv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Claim(); ok {
		t.Fatal("claim accepted before Start")
	}
	f, reg := startForwarder(t, j, srv.URL, func(c *forwarder.Config) { c.Concurrency = 2; c.PollInterval = time.Hour })
	held := 0          // claims not yet dispatched or given back
	t.Cleanup(func() { // before Stop, which would wait for them
		for range held {
			f.Unclaim()
		}
	})
	claim := func() (journal.Event, time.Duration) {
		t.Helper()
		leaseFor, ok := f.Claim()
		if !ok {
			t.Fatal("claim declined with free slots")
		}
		held++
		return journal.Event{LeaseFor: leaseFor, LeaseToken: uuid.New()}, leaseFor
	}
	e, leaseFor := claim()
	if leaseFor != 2*time.Second+forwarder.DefaultLeaseMargin {
		t.Fatalf("lease for %s", leaseFor)
	}
	e.Provider, e.EventID, e.ContentHash = "acme", "evt_claimed", "h"
	e.Headers = http.Header{"Content-Type": {"application/json"}, "Connection": {"close"}}
	e.Body, e.Path = []byte(`{"id":"evt_claimed"}`), "/webhooks/acme"
	r, err := j.Append(context.Background(), []journal.Event{e})
	if err != nil || r[0].Outcome != journal.Inserted {
		t.Fatal(r, err)
	}
	// A second claim waits too, a third finds no place; the second is
	// given back.
	_, _ = claim()
	if _, ok := f.Claim(); ok {
		held++
		t.Fatal("claim accepted with two claims waiting for two slots")
	}
	f.Unclaim()
	held--
	now := time.Now()
	held--
	f.Dispatch(journal.Delivery{ID: r[0].ID, Provider: "acme", EventID: e.EventID, Attempt: 1, BudgetAttempt: 1,
		Headers: e.Headers, Body: e.Body, Path: e.Path, ReceivedAt: now, LeaseToken: e.LeaseToken, LeaseExpiresAt: now.Add(leaseFor)})
	// The backend answers 503 first: the claim's attempt is recorded as a
	// retry under its token, then the event is leased and delivered.
	d := waitStatus(t, j, r[0].ID, journal.StatusDone, 10*time.Second)
	if d.Attempts != 2 || len(d.AttemptLog) != 2 || d.AttemptLog[0].StatusCode != 503 || d.AttemptLog[1].StatusCode != 200 {
		t.Fatalf("after delivery: %+v", d)
	}
	reqs := rec.requests()
	if len(reqs) != 2 || reqs[0].body != `{"id":"evt_claimed"}` || reqs[0].header.Get("X-Whguard-Attempt") != "1" ||
		reqs[1].header.Get("X-Whguard-Attempt") != "2" || reqs[0].header.Get("Connection") != "" ||
		reqs[0].header.Get("Idempotency-Key") != forwarder.IdempotencyKey("acme", "evt_claimed") ||
		reqs[0].header.Get("Idempotency-Key") != reqs[1].header.Get("Idempotency-Key") {
		t.Fatalf("requests %+v", reqs)
	}
	if got := metricValue(t, reg, "whguard_deliveries_dispatched_total", map[string]string{"provider": "acme"}); got != 1 {
		t.Fatalf("dispatched = %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Claim(); ok {
		t.Fatal("claim accepted after Stop")
	}
}

// countedLeases is the real journal counting the Lease calls that returned.
type countedLeases struct {
	journal.Store
	n atomic.Int32
}

func (c *countedLeases) Lease(ctx context.Context, n int, leaseFor time.Duration) ([]journal.Delivery, error) {
	defer c.n.Add(1)
	return c.Store.Lease(ctx, n, leaseFor)
}

// startQuiet starts a forwarder that never polls and waits for its first
// lease (of an empty journal) to return: from then on only wake-ups move
// its fetcher, so it cannot see the slots full and call that a backlog
// (which would halve the claims) behind a test's back.
func startQuiet(t *testing.T, j journal.Store, backend string, mod func(*forwarder.Config)) (*forwarder.Forwarder, *prometheus.Registry) {
	t.Helper()
	c := &countedLeases{Store: j}
	f, reg := startForwarder(t, c, backend, func(cfg *forwarder.Config) {
		mod(cfg)
		cfg.PollInterval = time.Hour
	})
	waitUntil(t, 10*time.Second, "the fetcher's first lease to return", func() bool { return c.n.Load() > 0 })
	return f, reg
}

// appendClaimed journals a claimed event (inserted leased under a new
// token for leaseFor) and returns what the ingress would Dispatch.
func appendClaimed(t *testing.T, j journal.Store, id string, leaseFor time.Duration) journal.Delivery {
	t.Helper()
	now := time.Now()
	e := journal.Event{
		Provider: "acme", EventID: id, ContentHash: "h-" + id,
		Headers: http.Header{"Content-Type": {"application/json"}},
		Body:    []byte(`{"id":"` + id + `"}`), Path: "/webhooks/acme",
		LeaseFor: leaseFor, LeaseToken: uuid.New(),
	}
	r, err := j.Append(context.Background(), []journal.Event{e})
	if err != nil || r[0].Outcome != journal.Inserted {
		t.Fatal(r, err)
	}
	return journal.Delivery{ID: r[0].ID, Provider: "acme", EventID: id, Attempt: 1, BudgetAttempt: 1,
		Headers: e.Headers, Body: e.Body, Path: e.Path, ReceivedAt: now,
		LeaseToken: e.LeaseToken, LeaseExpiresAt: now.Add(leaseFor)}
}

// heldBackend answers 200 to each request once hold is closed (or the
// request is cancelled), counting requests and the most at once.
type heldBackend struct {
	hold                      chan struct{}
	arrived, inside, mostSeen atomic.Int32
}

func newHeldBackend(t *testing.T) (*heldBackend, *httptest.Server) {
	b := &heldBackend{hold: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.arrived.Add(1)
		n := b.inside.Add(1)
		defer b.inside.Add(-1)
		for {
			m := b.mostSeen.Load()
			if n <= m || b.mostSeen.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-b.hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(b.release) // runs first: lets the handlers go before Close
	return b, srv
}

func (b *heldBackend) release() {
	select {
	case <-b.hold:
	default:
		close(b.hold)
	}
}

// waitArrived waits until n requests have reached the backend.
func (b *heldBackend) waitArrived(t *testing.T, n int32) {
	t.Helper()
	waitUntil(t, 10*time.Second, fmt.Sprintf("%d requests to reach the backend", n), func() bool { return b.arrived.Load() >= n })
}

// A claim holds no delivery slot while its event is committed: with every
// slot busy, claims are still accepted (as many as the slots) and their
// events wait in memory for a slot; the backend never sees more requests
// at once than the slots, and every claimed event is delivered once, as
// attempt 1.
func TestClaimsWaitForASlot(t *testing.T) {
	t.Parallel()
	forEachStore(t, testClaimsWaitForASlot)
}

func testClaimsWaitForASlot(t *testing.T, store string) {
	j := openJournal(t, store)
	backend, srv := newHeldBackend(t)
	// A minute of timeout: held requests must not time out on a slow machine.
	f, reg := startQuiet(t, j, srv.URL, func(c *forwarder.Config) { c.Concurrency, c.Timeout = 2, time.Minute })
	claim := func(id string) journal.Delivery {
		t.Helper()
		leaseFor, ok := f.Claim()
		if !ok {
			t.Fatalf("claim for %s declined", id)
		}
		return appendClaimed(t, j, id, leaseFor)
	}
	var ids []int64
	for _, id := range []string{"evt_a", "evt_b"} {
		d := claim(id)
		ids = append(ids, d.ID)
		f.Dispatch(d)
	}
	backend.waitArrived(t, 2) // both slots busy at the backend
	for _, id := range []string{"evt_c", "evt_d"} {
		d := claim(id)
		ids = append(ids, d.ID)
		f.Dispatch(d)
	}
	if _, ok := f.Claim(); ok {
		f.Unclaim()
		t.Fatal("a third claim accepted with two claims waiting for two slots")
	}
	labels := map[string]string{}
	if got := metricValue(t, reg, "whguard_claims_waiting", labels); got != 2 {
		t.Fatalf("whguard_claims_waiting = %v, want 2", got)
	}
	// The two dispatched claims reach the queue for a slot on delivery
	// goroutines; once both are in it, neither went to the backend, and
	// only a freed slot lets them out.
	waitUntil(t, 10*time.Second, "both claims queued for a slot", func() bool {
		claims, _ := forwarder.Queued(f)
		return claims == 2
	})
	if got := metricValue(t, reg, "whguard_deliveries_in_flight", labels); got != 2 {
		t.Fatalf("whguard_deliveries_in_flight = %v, want 2", got)
	}
	if n := backend.arrived.Load(); n != 2 {
		t.Fatalf("%d requests reached the backend with two slots busy, want 2", n)
	}
	backend.release()
	for _, id := range ids {
		d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second)
		if d.Attempts != 1 || len(d.AttemptLog) != 1 || d.AttemptLog[0].StatusCode != 200 {
			t.Fatalf("event %d: %+v", id, d)
		}
	}
	if n, most := backend.arrived.Load(), backend.mostSeen.Load(); n != 4 || most != 2 {
		t.Fatalf("%d requests, at most %d at once; want 4, at most 2", n, most)
	}
	if got := metricValue(t, reg, "whguard_claims_waiting", labels); got != 0 {
		t.Fatalf("whguard_claims_waiting = %v after the deliveries, want 0", got)
	}
}

// Without rows waiting in the journal, claims are bounded by the slots'
// ceiling, not by the in-flight limit in force (which starts at 16 and may
// stay low on a fast backend): a claim spends most of its wait in its
// commit, and every event declined here would cost a lease statement.
func TestClaimsNotBoundedByTheAdaptiveLimit(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	_, srv := newHeldBackend(t)
	f, reg := startQuiet(t, j, srv.URL, func(c *forwarder.Config) { c.Concurrency = 64 })
	if got := metricValue(t, reg, "whguard_deliveries_limit", map[string]string{}); got != 16 {
		t.Fatalf("whguard_deliveries_limit = %v at start, want 16", got)
	}
	held := 0
	t.Cleanup(func() { // before Stop: a claim must end
		for ; held > 0; held-- {
			f.Unclaim()
		}
	})
	for range 64 {
		if _, ok := f.Claim(); !ok {
			t.Fatalf("claim %d declined with the limit at 16 and 64 slots, no backlog", held+1)
		}
		held++
	}
	if _, ok := f.Claim(); ok {
		held++
		t.Fatal("a 65th claim accepted with 64 slots")
	}
	if got := metricValue(t, reg, "whguard_claims_waiting", map[string]string{}); got != 64 {
		t.Fatalf("whguard_claims_waiting = %v, want 64", got)
	}
}

// Committed claims waiting for a slot are bounded, unlike claims in their
// commit: by the limit in force, or a quarter of its ceiling when that is
// more (a closed loop's commits dispatch a batch at a time). Each holds its
// body, and past that bound a new event waits as well in the journal. Here
// the limit is 16 and the ceiling 128: the bound is 32.
func TestClaimsWaitingForASlotAreBounded(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	backend, srv := newHeldBackend(t)
	f, reg := startQuiet(t, j, srv.URL, func(c *forwarder.Config) { c.Concurrency, c.Timeout = 128, time.Minute })
	if got := metricValue(t, reg, "whguard_deliveries_limit", map[string]string{}); got != 16 {
		t.Fatalf("whguard_deliveries_limit = %v at start, want 16", got)
	}
	claim := func(i int) bool {
		leaseFor, ok := f.Claim()
		if ok {
			f.Dispatch(appendClaimed(t, j, fmt.Sprintf("evt_%d", i), leaseFor))
		}
		return ok
	}
	for i := range 16 {
		if !claim(i) {
			t.Fatalf("claim %d declined with free slots", i)
		}
	}
	backend.waitArrived(t, 16) // the limit's 16 slots busy
	for i := 16; i < 48; i++ {
		if !claim(i) {
			t.Fatalf("claim %d declined with at most %d waiting for a slot, bound 32", i, i-16)
		}
	}
	// The dispatched claims reach their wait for a slot on delivery
	// goroutines: a claim is declined once all 32 are there.
	waitUntil(t, 10*time.Second, "a claim declined with 32 committed claims waiting for a slot (limit 16, ceiling 128)", func() bool {
		if _, ok := f.Claim(); ok {
			f.Unclaim()
			return false
		}
		return true
	})
	if claims, _ := forwarder.Queued(f); claims != 32 {
		t.Fatalf("%d committed claims waiting for a slot when a claim is declined, want 32", claims)
	}
	backend.release()
	testdb.WaitDone(t, j, 48, 20*time.Second)
}

// Busy slots hold no claim back: a fetcher that polls while every slot is
// busy waits for a freed one. (Busy slots used to count as a backlog, which
// held claims to half the limit and sent every declined event through a
// lease statement under load, and kept the flag up.)
func TestBusySlotsAreNoBacklog(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	backend, srv := newHeldBackend(t)
	c := &countedLeases{Store: j}
	// The forwarder's clock stands still: the probe for unannounced rows,
	// due pollsBeforeProbe polls after the last lease by that clock, never
	// comes, so every lease statement below would be one the busy slots
	// caused. Polls, on their ticker, run every 10 ms.
	frozen := time.Now()
	f, _ := startForwarder(t, c, srv.URL, func(c *forwarder.Config) {
		c.Concurrency, c.Timeout, c.PollInterval = 4, time.Minute, 10*time.Millisecond
		c.Now = func() time.Time { return frozen }
	})
	// The start announces a look at the journal: wait for that lease, so
	// that it is not taken for one of the polls'.
	waitUntil(t, 10*time.Second, "the start's lease", func() bool { return c.n.Load() > 0 })
	for _, id := range []string{"evt_a", "evt_b", "evt_c", "evt_d"} {
		leaseFor, ok := f.Claim()
		if !ok {
			t.Fatalf("claim for %s declined", id)
		}
		f.Dispatch(appendClaimed(t, j, id, leaseFor))
	}
	backend.waitArrived(t, 4) // every slot busy at the backend
	// A poll made while slots were free leases (an empty journal): count
	// from the first poll that found every slot busy, made (the fetcher
	// being one goroutine) after every earlier lease statement returned.
	waitUntil(t, 10*time.Second, "a poll to find every slot busy", func() bool { return forwarder.FetcherWaitsForSlot(f) })
	leases := c.n.Load()
	// A fixed window in which nothing may change, of thirty poll
	// intervals: polls find no free slot, and claims (more than half the
	// limit: the four delivering count) stay accepted through them.
	window, tick := time.NewTimer(300*time.Millisecond), time.NewTicker(5*time.Millisecond)
	defer window.Stop()
	defer tick.Stop()
	for start, open := time.Now(), true; open; {
		select {
		case <-window.C:
			open = false
		case <-tick.C:
		}
		_, ok1 := f.Claim()
		_, ok2 := f.Claim()
		if ok1 {
			f.Unclaim()
		}
		if ok2 {
			f.Unclaim()
		}
		if !ok1 || !ok2 {
			t.Fatalf("claim declined %s into polls with busy slots and no row announced", time.Since(start))
		}
	}
	// Nor do those polls cost a lease statement: nothing was announced,
	// and no probe came due.
	if got := c.n.Load(); got != leases {
		t.Fatalf("%d lease statements during polls with every slot busy and nothing announced", got-leases)
	}
	backend.release()
	testdb.WaitDone(t, j, 4, 10*time.Second)
}

// A stream of claims that keeps every slot busy must not starve the rows in
// the journal: freed slots go first to the claims waiting for one, so the
// fetcher would never find a free slot. A row announced by a Wake (a
// pending commit, a NOTIFY, a hand-back) is leased at once to wait for a
// slot in turn with the claims, and a row nobody announced (a retry coming
// due) after pollsBeforeProbe polls without a lease.
func TestUnannouncedRowNotStarvedByClaims(t *testing.T) {
	t.Parallel()
	testRowNotStarvedByClaims(t, false)
}

func TestAnnouncedRowNotStarvedByClaims(t *testing.T) {
	t.Parallel()
	testRowNotStarvedByClaims(t, true)
}

func testRowNotStarvedByClaims(t *testing.T, announce bool) {
	j := openJournal(t, "postgres")
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowFor(r.Context(), 20*time.Millisecond) // slots stay busy while claims refill them
	}))
	t.Cleanup(backend.Close)
	poll := 5 * time.Millisecond
	if announce {
		poll = time.Hour // only the Wake can bring it
	}
	f, _ := startForwarder(t, j, backend.URL, func(c *forwarder.Config) {
		c.Concurrency, c.PollInterval = 4, poll
	})
	// Slots busy with claims first, then a row appears in the journal.
	next := 0
	claim := func() { // as many as are accepted: claims wait for every slot
		for range 16 {
			leaseFor, ok := f.Claim()
			if !ok {
				return
			}
			f.Dispatch(appendClaimed(t, j, fmt.Sprintf("evt_claimed_%d", next), leaseFor))
			next++
		}
	}
	claim()
	starved := appendEvent(t, j, "evt_in_the_journal")
	if announce {
		f.Wake()
	}
	// Claims refill the slots as they free up until the row is done.
	var d *journal.Detail
	if !eventually(20*time.Second, time.Millisecond, func() bool {
		if d = get(t, j, starved); d.Status == journal.StatusDone {
			return true
		}
		claim()
		return false
	}) {
		t.Fatalf("the journal's row is still %s after %d claimed deliveries", d.Status, next)
	}
	if next < 8 {
		t.Fatalf("only %d claims accepted: the slots were not kept busy by claims", next)
	}
}

// A claimed event that finds no slot while its lease still has room for a
// whole attempt goes back to the journal, its attempt not spent, and is
// leased and delivered later like any other. So do claims still waiting
// when the shutdown deadline passes.
func TestClaimHandedBackWithoutASlot(t *testing.T) {
	t.Parallel()
	forEachStore(t, testClaimHandedBackWithoutASlot)
}

func testClaimHandedBackWithoutASlot(t *testing.T, store string) {
	j := openJournal(t, store)
	backend, srv := newHeldBackend(t)
	// A lease of 1 min + 1 s: a claim waits for a slot at most 0.5 s (half
	// the margin). No polling: the row handed back is leased when the slot
	// frees up.
	f, _ := startQuiet(t, j, srv.URL, func(c *forwarder.Config) {
		c.Concurrency, c.LeaseMargin, c.Timeout = 1, time.Second, time.Minute
	})
	dispatch := func(id string) int64 {
		t.Helper()
		leaseFor, ok := f.Claim()
		if !ok {
			t.Fatalf("claim for %s declined", id)
		}
		d := appendClaimed(t, j, id, leaseFor)
		f.Dispatch(d)
		return d.ID
	}
	first := dispatch("evt_first")
	backend.waitArrived(t, 1)
	waiting := dispatch("evt_waiting")
	// Handed back after at most 0.5 s, while the slot stays busy until
	// the release below: it never got the slot.
	waitHandedBack(t, j, waiting, 10*time.Second)
	if n := backend.arrived.Load(); n != 1 {
		t.Fatalf("%d requests reached the backend with its one slot busy", n)
	}
	backend.release()
	for _, id := range []int64{first, waiting} {
		d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second)
		if d.Attempts != 1 || len(d.AttemptLog) != 1 || d.AttemptLog[0].Number != 1 {
			t.Fatalf("event %d: %+v", id, d)
		}
	}

	stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer stopCancel()
	if err := f.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}

	// At the shutdown deadline, a delivery in flight and a claim waiting
	// behind it both go back to the journal.
	backend2, srv2 := newHeldBackend(t)
	f2, _ := startQuiet(t, j, srv2.URL, func(c *forwarder.Config) { c.Concurrency, c.Timeout = 1, time.Minute })
	f = f2
	inFlight := dispatch("evt_in_flight")
	backend2.waitArrived(t, 1)
	behind := dispatch("evt_behind")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := f2.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v, want the deadline", err)
	}
	for _, id := range []int64{inFlight, behind} {
		d, err := j.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != journal.StatusPending || d.Attempts != 0 {
			t.Fatalf("event %d after Stop: %s, %d attempts; want pending, 0", id, d.Status, d.Attempts)
		}
	}
}

// waitHandedBack waits until row id is back in the journal, pending with
// its attempt unspent.
func waitHandedBack(t *testing.T, j journal.Store, id int64, within time.Duration) {
	t.Helper()
	if d := waitStatus(t, j, id, journal.StatusPending, within); d.Attempts != 0 || len(d.AttemptLog) != 0 {
		t.Fatalf("event %d handed back with its attempt spent: %+v", id, d)
	}
}

// A row the fetcher leased for a slot that a claim then took waits for a
// slot like a claim does, and goes back to the journal in time: the
// fetcher never blocks on it.
func TestLeasedRowWaitsBehindAClaim(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	backend, srv := newHeldBackend(t)
	g := &gatedLeases{Store: j, waiting: make(chan struct{}, 1)}
	f, _ := startQuiet(t, g, srv.URL, func(c *forwarder.Config) {
		c.Concurrency, c.LeaseMargin, c.Timeout = 1, time.Second, time.Minute
	})
	row := appendEvent(t, j, "evt_leased")
	// The fetcher counts the one free slot and waits at the gate with it.
	g.close()
	f.Wake()
	select {
	case <-g.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetcher did not lease")
	}
	// Meanwhile a claim takes that slot, and its delivery holds it.
	leaseFor, ok := f.Claim()
	if !ok {
		t.Fatal("claim declined with a free slot")
	}
	claimed := appendClaimed(t, j, "evt_claimed", leaseFor)
	f.Dispatch(claimed)
	backend.waitArrived(t, 1)
	g.open()
	// The leased row finds no slot: it goes back within half the margin
	// (0.5 s), while the claim holds the slot until the release below.
	waitHandedBack(t, j, row, 10*time.Second)
	backend.release()
	for _, id := range []int64{claimed.ID, row} {
		if d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second); d.Attempts != 1 {
			t.Fatalf("event %d: %+v", id, d)
		}
	}
}

// Deliveries reuse the goroutines of earlier ones (their stacks already
// grown), and none is left once the forwarder has stopped.
func TestDeliveryGoroutinesAreReused(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	_, srv := newRecorder(t)
	f, _ := startForwarder(t, j, srv.URL, func(c *forwarder.Config) { c.Concurrency = 2; c.PollInterval = 20 * time.Millisecond })
	for i := range 20 {
		waitStatus(t, j, appendEvent(t, j, fmt.Sprintf("evt_reuse_%d", i)), journal.StatusDone, 10*time.Second)
	}
	// One at a time: a goroutine finishing its delivery waits for the
	// next; allow one more for a delivery leased just before that.
	if started, _ := forwarder.Workers(f); started < 1 || started > 3 {
		t.Fatalf("%d delivery goroutines started for 20 deliveries one after another, want 1 to 3", started)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Stop ends the idle ones (which would otherwise wait 10 s for more).
	waitUntil(t, 5*time.Second, "no delivery goroutine alive after Stop", func() bool {
		_, live := forwarder.Workers(f)
		return live == 0
	})
}

// BuildRequest targets the backend's base path plus the received (or the
// configured) path and the received query, on the backend's host.
func TestBuildRequestURL(t *testing.T) {
	t.Parallel()
	d := journal.Delivery{ID: 7, Provider: "acme", EventID: "e", Attempt: 1, Path: "/webhooks/acme", RawQuery: "a=1&b=%2F",
		Body: []byte("{}"), Headers: http.Header{"Host": {"sender.example"}}}
	for _, c := range []struct {
		target forwarder.Target
		line   string
	}{
		{forwarder.Target{BackendURL: "http://backend:8080/base/"}, "POST /base/webhooks/acme?a=1&b=%2F HTTP/1.1"},
		{forwarder.Target{BackendURL: "http://backend:8080", ForwardPath: "/hooks/in"}, "POST /hooks/in?a=1&b=%2F HTTP/1.1"},
		// A query in the backend URL is kept (it was silently dropped).
		{forwarder.Target{BackendURL: "http://backend:8080/in?token=abc"}, "POST /in/webhooks/acme?token=abc&a=1&b=%2F HTTP/1.1"},
	} {
		req, err := forwarder.BuildRequest(context.Background(), c.target, d, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := req.Write(&b); err != nil {
			t.Fatal(err)
		}
		wire := b.String()
		if !strings.HasPrefix(wire, c.line+"\r\n") || !strings.Contains(wire, "\r\nHost: backend:8080\r\n") {
			t.Errorf("%+v: request\n%s", c.target, wire)
		}
	}
}

// gatedLeases is the real journal with a gate on Lease: once closed,
// every Lease call waits for it to open again (and says it is waiting),
// so a test can hold the fetcher still while slots are free.
type gatedLeases struct {
	journal.Store
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	waiting chan struct{}
}

func (g *gatedLeases) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate == nil {
		g.gate = make(chan struct{})
	}
}

func (g *gatedLeases) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedLeases) Lease(ctx context.Context, n int, leaseFor time.Duration) ([]journal.Delivery, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case g.waiting <- struct{}{}:
		default:
		}
		<-gate
	}
	return g.Store.Lease(ctx, n, leaseFor)
}

// Rows waiting in the journal and claims of new events take turns for the
// delivery slots: claims are not held back by a backlog (each one held back
// would cost a lease statement), and the fetcher leases up to half the
// limit of rows to wait for slots with them even while every slot is busy,
// so a backlog drains as new events keep coming.
func TestBacklogRowsWaitInTurnWithClaims(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	for i := range 20 {
		appendEvent(t, j, fmt.Sprintf("evt_backlog_%d", i))
	}
	var (
		mu    sync.Mutex
		order []string
	)
	tokens, hold := make(chan struct{}, 64), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, r.Header.Get(forwarder.HeaderSourceEventID))
		mu.Unlock()
		select {
		case <-tokens:
		case <-hold:
		}
	}))
	t.Cleanup(backend.Close)
	f, _ := startForwarder(t, j, backend.URL, func(c *forwarder.Config) { c.Concurrency = 8; c.PollInterval = time.Hour })
	t.Cleanup(sync.OnceFunc(func() { close(hold) })) // before Stop: no delivery stays blocked
	arrived := func() int { mu.Lock(); defer mu.Unlock(); return len(order) }
	processing := func() int {
		st, err := j.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.ByStatus[journal.StatusProcessing]
	}
	// The first lease fills the eight slots; 12 rows wait.
	waitUntil(t, 10*time.Second, "8 deliveries in flight", func() bool { return arrived() >= 8 })
	// A backlog does not hold claims back: four claimed events wait for
	// a slot.
	claim := func(i int) {
		leaseFor, ok := f.Claim()
		if !ok {
			t.Fatalf("claim %d declined with rows waiting", i+1)
		}
		f.Dispatch(appendClaimed(t, j, fmt.Sprintf("evt_claimed_%d", i), leaseFor))
	}
	for i := range 4 {
		claim(i)
	}
	// Rows announced while every slot is busy: the fetcher leases half
	// the limit of them (4) to wait in turn with the claims.
	f.Wake()
	// The fetcher queues the rows it leased, then plans again: rows
	// queued and a later plan that found every slot busy (the plan that
	// leased them cleared that) mean it has decided what else to lease,
	// and every lease statement it made has returned.
	waitUntil(t, 10*time.Second, "4 claims and 4 leased rows queued for a slot, then the fetcher waiting for one", func() bool {
		claims, rows := forwarder.Queued(f)
		return claims == 4 && rows >= 4 && forwarder.FetcherWaitsForSlot(f)
	})
	if got := processing(); got != 16 {
		t.Fatalf("%d rows processing, want 16 (8 delivering, 4 claimed, 4 leased to wait): the fetcher leased more than half the limit to wait", got)
	}
	if _, rows := forwarder.Queued(f); rows != 4 {
		t.Fatalf("%d leased rows queued for a slot, want 4 (half the limit)", rows)
	}
	// Four more claims, behind the rows.
	for i := 4; i < 8; i++ {
		claim(i)
	}
	for range 64 {
		tokens <- struct{}{}
	}
	testdb.WaitDone(t, j, 28, 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	// The next eight slots went to the waiting, in turn: rows of the
	// backlog among them, not only claims (without leasing while the slots
	// were busy, the eight claims would all have gone first).
	rows := 0
	for _, id := range order[8:16] {
		if strings.HasPrefix(id, "evt_backlog_") {
			rows++
		}
	}
	if rows == 0 {
		t.Fatalf("the eight slots freed first all went to claims: %v", order)
	}
}

// heldOutcomes is a journal whose Complete waits while its gate is closed.
type heldOutcomes struct {
	journal.Store
	gate chan struct{}
}

func (h *heldOutcomes) Complete(ctx context.Context, fs []journal.Finish) ([]int64, error) {
	select {
	case <-h.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Store.Complete(ctx, fs)
}

// A delivery's slot is free once the backend has answered: the next
// delivery starts while the outcome waits to be written. The outcomes
// waiting are bounded too (Concurrency of them): then the slots stay
// held and nothing more is leased.
func TestNextDeliveryStartsWhileOutcomesAreWritten(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	const events = 10
	for i := range events {
		appendEvent(t, j, fmt.Sprintf("evt_pipelined_%d", i))
	}
	var arrived, inFlight, most atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		slowFor(r.Context(), 5*time.Millisecond)
		inFlight.Add(-1)
	}))
	defer backend.Close()
	h := &heldOutcomes{Store: j, gate: make(chan struct{})}
	openGate := sync.OnceFunc(func() { close(h.gate) })
	t.Cleanup(openGate) // before Stop: nothing may stay blocked
	_, reg := startForwarder(t, h, backend.URL, func(c *forwarder.Config) { c.Concurrency = 2; c.PollInterval = 20 * time.Millisecond })

	// Two attempts, their outcomes held; two more attempts; then both
	// the slots and the outcome places are taken.
	waitUntil(t, 10*time.Second, "4 deliveries to reach the backend", func() bool { return arrived.Load() >= 4 })
	// A fixed window in which nothing more may happen: ten polls, room
	// for a fifth delivery if anything allowed it.
	time.Sleep(200 * time.Millisecond)
	if got := arrived.Load(); got != 4 {
		t.Fatalf("%d deliveries reached the backend while outcomes were held, want 4 (2 recording, 2 waiting to)", got)
	}
	// Operators see it: both slots taken (by deliveries waiting to record)
	// and both outcome places.
	if in, pending := metricValue(t, reg, "whguard_deliveries_in_flight", nil), metricValue(t, reg, "whguard_outcomes_pending", nil); in != 2 || pending != 2 {
		t.Errorf("in flight %v, outcomes pending %v; want 2 and 2", in, pending)
	}
	openGate()
	testdb.WaitDone(t, j, events, 10*time.Second)
	if got := arrived.Load(); got != events {
		t.Errorf("backend saw %d requests for %d events", got, events)
	}
	// The last outcome's flush returns after its rows are done: wait for
	// the gauges (the check below says what they read).
	eventually(10*time.Second, pollEvery, func() bool {
		return metricValue(t, reg, "whguard_deliveries_in_flight", nil) == 0 && metricValue(t, reg, "whguard_outcomes_pending", nil) == 0
	})
	if in, pending := metricValue(t, reg, "whguard_deliveries_in_flight", nil), metricValue(t, reg, "whguard_outcomes_pending", nil); in != 0 || pending != 0 {
		t.Errorf("after the drain: in flight %v, outcomes pending %v; want 0 and 0", in, pending)
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d requests in flight at once, want at most Concurrency (2)", m)
	}
}

// A claim that is never dispatched nor given back (a caller's bug) does
// not hang the shutdown: Stop returns shortly after its deadline.
func TestStopDoesNotHangOnALeakedClaim(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "postgres")
	f, err := forwarder.New(forwarder.Config{
		Store: j, Targets: map[string]forwarder.Target{"acme": {BackendURL: "http://127.0.0.1:1"}},
		PollInterval: time.Hour, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	forwarder.SetStopGrace(f, 200*time.Millisecond)
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Claim(); !ok {
		t.Fatal("claim refused with every slot free")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- f.Stop(ctx) }()
	select {
	case err := <-stopped:
		if err == nil {
			t.Error("Stop reported no interruption")
		}
		if took := time.Since(start); took < 250*time.Millisecond {
			t.Errorf("Stop returned after %s, before its deadline and grace", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop hung on a leaked claim")
	}
	// Stop left a goroutine waiting for the claim to end: end it, as the
	// caller's fix would, so that it is not reported as a leak.
	f.Unclaim()
}

// refusingStore refuses, like a database refusing one value, every batch
// of outcomes holding an attempt whose excerpt contains "poison".
type refusingStore struct {
	journal.Store
	batches atomic.Int32
}

func (r *refusingStore) Complete(ctx context.Context, fs []journal.Finish) ([]int64, error) {
	r.batches.Add(1)
	for _, f := range fs {
		if strings.Contains(f.Attempt.ResponseExcerpt, "poison") {
			return nil, fmt.Errorf("complete %d deliveries: %w", len(fs), errors.New("invalid byte sequence (SQLSTATE 22021)"))
		}
	}
	return r.Store.Complete(ctx, fs)
}

// TestOneBadOutcomeCannotFailItsBatch: a batch of outcomes that fails is
// written again row by row; the row that still fails is written without
// its reply excerpt, counted, and its event is not delivered again. (It
// failed before the fix: the whole batch failed, every event in it was
// delivered again after its lease expired.)
func TestOneBadOutcomeCannotFailItsBatch(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := &refusingStore{Store: openJournal(t, store)}
		var calls atomic.Int32
		backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			b, _ := io.ReadAll(r.Body)
			// Hold every reply a moment, so that their outcomes tend to
			// share batches (what is checked holds either way).
			slowFor(r.Context(), 50*time.Millisecond)
			if strings.Contains(string(b), "bad") {
				io.WriteString(w, "poison\x00reply")
				return
			}
			io.WriteString(w, "fine")
		}))
		t.Cleanup(backend.Close)
		ids := []int64{appendEvent(t, j, "good1"), appendEvent(t, j, "bad"), appendEvent(t, j, "good2"), appendEvent(t, j, "good3")}
		_, reg := startForwarder(t, j, backend.URL, func(c *forwarder.Config) {
			c.Timeout = time.Second
			c.LeaseMargin = time.Second
		})
		for _, id := range ids {
			d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second)
			if len(d.AttemptLog) != 1 {
				t.Fatalf("event %d: %d attempts recorded, want 1", id, len(d.AttemptLog))
			}
		}
		if n := calls.Load(); n != int32(len(ids)) {
			t.Fatalf("backend called %d times, want %d (an event was delivered again)", n, len(ids))
		}
		if got := metricValue(t, reg, "whguard_outcomes_refused_total", nil); got != 1 {
			t.Fatalf("whguard_outcomes_refused_total = %v, want 1", got)
		}
	})
}

// TestAnyReplyIsRecorded: replies with a NUL byte, invalid UTF-8 or 1 MB
// are recorded like any other, each event delivered once (before the fix,
// PostgreSQL refused the NUL excerpt and the events were delivered again
// and again).
func TestAnyReplyIsRecorded(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := openJournal(t, store)
		replies := map[string]string{"nul": "a\x00b", "utf8": "\xff\xfe\xc3", "big": strings.Repeat("y", 1<<20)}
		var calls atomic.Int32
		backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			var body struct{ ID string }
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			io.WriteString(w, replies[body.ID])
		}))
		t.Cleanup(backend.Close)
		var ids []int64
		for id := range replies {
			ids = append(ids, appendEvent(t, j, id))
		}
		startForwarder(t, j, backend.URL, nil)
		for _, id := range ids {
			d := waitStatus(t, j, id, journal.StatusDone, 10*time.Second)
			if len(d.AttemptLog) != 1 || strings.ContainsRune(d.AttemptLog[0].ResponseExcerpt, 0) {
				t.Fatalf("event %d: attempts %+v", id, d.AttemptLog)
			}
		}
		if n := calls.Load(); n != int32(len(replies)) {
			t.Fatalf("backend called %d times, want %d", n, len(replies))
		}
	})
}

// TestNoTargetHoldsWithoutAttempts: an event whose provider has no target
// (removed from the configuration after it was journaled) is held: no
// attempt spent, shown as held, counted, and delivered once a forwarder
// with a target for it runs. (Before, it was attempted, failed and went
// dead after the whole retry budget.)
func TestNoTargetHoldsWithoutAttempts(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := openJournal(t, store)
		rec, srv := newRecorder(t)
		id := appendEvent(t, j, "orphan")
		f, reg := startForwarder(t, j, srv.URL, func(c *forwarder.Config) {
			c.Targets = map[string]forwarder.Target{"other": {BackendURL: srv.URL}}
			c.NoBackendHold = 100 * time.Millisecond
			c.Policy.MaxAttempts = 2
		})
		waitUntil(t, 10*time.Second, "the event held three times", func() bool {
			return metricValue(t, reg, "whguard_deliveries_held_total", map[string]string{"provider": "acme", "reason": "no_backend"}) >= 3
		})
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.Stop(stop); err != nil {
			t.Fatal(err)
		}
		d := get(t, j, id)
		if d.Status != journal.StatusPending || d.Attempts != 0 || len(d.AttemptLog) != 0 || d.Held != forwarder.HoldNoBackend {
			t.Fatalf("held event: %+v, %d attempts logged", d.Summary, len(d.AttemptLog))
		}
		if n := len(rec.requests()); n != 0 {
			t.Fatalf("backend called %d times", n)
		}
		startForwarder(t, j, srv.URL, nil) // a target for acme again
		d = waitStatus(t, j, id, journal.StatusDone, 10*time.Second)
		if d.Attempts != 1 || d.Held != "" {
			t.Fatalf("delivered: %+v", d.Summary)
		}
		if got := rec.requests()[0].header.Get("X-Whguard-Attempt"); got != "1" {
			t.Fatalf("X-Whguard-Attempt %q, want 1", got)
		}
	})
}

func get(t *testing.T, j journal.Store, id int64) *journal.Detail {
	t.Helper()
	d, err := j.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStopFitsItsDeadlineWhenTheJournalStalls: deliveries finish while a
// table lock held by the test stalls the journal, so their outcomes cannot
// be written. Stop must still end within its deadline plus about a second
// (checked with stopOverrun's room for a loaded machine; it waited up to
// ~26 s before), and nothing is lost: once the journal is back, every
// event ends done.
func TestStopFitsItsDeadlineWhenTheJournalStalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openJournal(t, "postgres")
	pg := j.(*journal.Postgres)
	rec, srv := newRecorder(t)
	var ids []int64
	for i := range 4 {
		ids = append(ids, appendEvent(t, j, fmt.Sprintf("evt_stall_%d", i)))
	}
	lock, err := pg.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	// Leased first, then the lock: the answers' outcomes stall behind it.
	rec.delay = 300 * time.Millisecond
	f, err := forwarder.New(forwarder.Config{
		Store: j, Targets: map[string]forwarder.Target{"acme": {BackendURL: srv.URL}},
		Timeout: time.Second, LeaseMargin: time.Second, PollInterval: 50 * time.Millisecond,
		Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range ids {
		select {
		case <-rec.received:
		case <-time.After(10 * time.Second):
			t.Fatal("not delivered")
		}
	}
	if _, err := lock.Exec(ctx, `LOCK TABLE whguard_events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	const timeout = 500 * time.Millisecond
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	_ = f.Stop(sctx)
	// The journal stays locked until Stop has returned: a stop that
	// waited for it would wait out the statements' 10 s time-outs.
	if took := time.Since(start); took > timeout+stopOverrun {
		t.Fatalf("Stop took %s with a %s deadline and a stalled journal", took, timeout)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The journal is back: whatever was not recorded comes back through
	// the reaper and is delivered again; nothing stays stranded.
	startForwarder(t, j, srv.URL, nil)
	for _, id := range ids {
		waitStatus(t, j, id, journal.StatusDone, 15*time.Second)
	}
}

// TestStartContextEndsLeasing: cancelling Start's context stops leasing
// (it was ignored before); Stop then returns at once.
func TestStartContextEndsLeasing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := openJournal(t, store)
		rec, srv := newRecorder(t)
		f, err := forwarder.New(forwarder.Config{
			Store: j, Targets: map[string]forwarder.Target{"acme": {BackendURL: srv.URL}},
			PollInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if err := f.Start(ctx); err != nil {
			t.Fatal(err)
		}
		first := appendEvent(t, j, "before")
		f.Wake()
		waitStatus(t, j, first, journal.StatusDone, 10*time.Second)
		cancel()
		forwarder.WaitLoops(f) // the loops end with Start's context
		id := appendEvent(t, j, "after")
		f.Wake()
		// Stop returns at once (nothing is under way) and waits for any
		// delivery started meanwhile: with the loops ended, nothing may
		// have leased the row the Wake announced.
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		if err := f.Stop(sctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if d := get(t, j, id); d.Status != journal.StatusPending || len(rec.requests()) != 1 {
			t.Fatalf("after Start's context ended: %s, %d requests", d.Status, len(rec.requests()))
		}
	})
}

// TestBuildRequestHostAndIDs: the backend gets the provider's id beside the
// row id, and with PreserveHost the Host the sender used (recorded by the
// ingress in X-Forwarded-Host) instead of its own; the re-signing hook
// sees the exact body and the attempt's time.
func TestBuildRequestHostAndIDs(t *testing.T) {
	t.Parallel()
	d := journal.Delivery{ID: 7, Provider: "acme", EventID: "evt_123", Attempt: 2, Path: "/webhooks/acme",
		Body: []byte(`{"id":"evt_123"}`), Headers: http.Header{"X-Forwarded-Host": {"hooks.example.com"}, "Stripe-Signature": {"t=1,v1=old"}}}
	at := time.Unix(1_800_000_000, 0)
	var seenBody string
	var seenAt time.Time
	target := forwarder.Target{BackendURL: "http://backend:8080", PreserveHost: true, Resign: func(h http.Header, body []byte, when time.Time) {
		seenBody, seenAt = string(body), when
		h.Set("Stripe-Signature", "t=new")
	}}
	req, err := forwarder.BuildRequest(context.Background(), target, d, at)
	if err != nil {
		t.Fatal(err)
	}
	if req.Host != "hooks.example.com" || req.URL.Host != "backend:8080" {
		t.Errorf("Host %q, URL host %q", req.Host, req.URL.Host)
	}
	if got := req.Header.Get("X-Whguard-Source-Event-Id"); got != "evt_123" {
		t.Errorf("X-Whguard-Source-Event-Id %q", got)
	}
	if got := req.Header.Get("X-Whguard-Event-Id"); got != "7" {
		t.Errorf("X-Whguard-Event-Id %q", got)
	}
	if req.Header.Get("Stripe-Signature") != "t=new" || seenBody != string(d.Body) || !seenAt.Equal(at) {
		t.Errorf("re-sign: header %q, body %q, at %v", req.Header.Get("Stripe-Signature"), seenBody, seenAt)
	}
	target.PreserveHost, target.Resign = false, nil
	req, err = forwarder.BuildRequest(context.Background(), target, d, at)
	if err != nil {
		t.Fatal(err)
	}
	if req.Host != "backend:8080" || req.Header.Get("Stripe-Signature") != "t=1,v1=old" {
		t.Errorf("without the options: Host %q, signature %q", req.Host, req.Header.Get("Stripe-Signature"))
	}
}

// TestRedirectSaysWhere: a 3xx is permanent (redirects are not followed),
// and the event's last error names where the backend wanted to send it.
func TestRedirectSaysWhere(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "sqlite")
	_, srv := newRecorder(t, status(307, "Location", "https://app.example.com/webhooks/acme"))
	id := appendEvent(t, j, "redirected")
	startForwarder(t, j, srv.URL, nil)
	d := waitStatus(t, j, id, journal.StatusDead, 10*time.Second)
	if !strings.Contains(d.LastError, "307") || !strings.Contains(d.LastError, "redirect to https://app.example.com/webhooks/acme") {
		t.Fatalf("last error %q", d.LastError)
	}
}

// TestStartWarnsAboutABackendThatDoesNotAnswer: a backend down or on the
// wrong port is said at start-up, with its origin, not only once events
// start retrying; one that answers is not.
func TestStartWarnsAboutABackendThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "sqlite")
	_, up := newRecorder(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	core, logs := observer.New(zap.WarnLevel)
	startForwarder(t, j, up.URL, func(c *forwarder.Config) {
		c.Targets = map[string]forwarder.Target{"acme": {BackendURL: up.URL}, "other": {BackendURL: down + "/hooks"}}
		c.Logger = zap.New(core)
	})
	waitUntil(t, 10*time.Second, "a warning about the backend that does not answer", func() bool {
		return logs.FilterMessageSnippet("backend does not answer").Len() > 0
	})
	warned := logs.FilterMessageSnippet("backend does not answer").All()
	if len(warned) != 1 || warned[0].ContextMap()["backend"] != down {
		t.Fatalf("warnings %+v, want one for %s", warned, down)
	}
}

// TestOldestPendingAgeIsZeroWhenNothingWaits: the gauge reads 0 for every
// provider with a target when nothing is pending (it disappeared before,
// and dashboards showed "no data").
func TestOldestPendingAgeIsZeroWhenNothingWaits(t *testing.T) {
	t.Parallel()
	j := openJournal(t, "sqlite")
	_, srv := newRecorder(t)
	_, reg := startForwarder(t, j, srv.URL, nil)
	waitUntil(t, 10*time.Second, `whguard_oldest_pending_age_seconds{provider="acme"} 0 with nothing pending`, func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "whguard_oldest_pending_age_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "acme" && m.GetGauge().GetValue() == 0 {
					return true
				}
			}
		}
		return false
	})
}

// waitListening waits until a session of the journal's database LISTENs
// for new events (the forwarder's LISTEN connection is up).
func waitListening(t *testing.T, pg *journal.Postgres) {
	t.Helper()
	waitUntil(t, 10*time.Second, "the forwarder's LISTEN connection to come up", func() bool {
		var n int
		err := pg.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN '||$1`, journal.NotifyChannel).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// A sync delivery that ends with a 2xx answers its waiting sender the
// reply it stored first; one interrupted by the shutdown deadline answers
// nil (the ingress then sends the usual 202) and hands its lease back.
func TestDispatchSyncAnswers(t *testing.T) {
	t.Parallel()
	forEachStore(t, testDispatchSyncAnswers)
}

func testDispatchSyncAnswers(t *testing.T, store string) {
	j := openJournal(t, store)
	hold, arrived := make(chan struct{}), make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "slow") {
			arrived <- struct{}{}
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "thanks")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hold) }) // runs first: lets the handler go before Close
	f, _ := startQuiet(t, j, srv.URL, func(cfg *forwarder.Config) {
		cfg.Targets = map[string]forwarder.Target{"acme": {BackendURL: srv.URL, Sync: true}}
	})

	// Answered: the reply is stored before it is handed over.
	if _, claimed := f.Claim(); !claimed {
		t.Fatal("claim declined")
	}
	d := appendClaimed(t, j, "fine-1", time.Minute)
	select {
	case r := <-f.DispatchSync(d):
		stored, err := j.StoredReply(context.Background(), d.ID)
		if r == nil || r.Status != 200 || string(r.Body) != "thanks" || r.ContentType != "text/plain" ||
			err != nil || stored == nil || string(stored.Body) != "thanks" {
			t.Fatalf("answer %+v, stored %+v %v", r, stored, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}

	// Interrupted by the shutdown deadline: nil, and the row handed back.
	if _, claimed := f.Claim(); !claimed {
		t.Fatal("claim declined")
	}
	d2 := appendClaimed(t, j, "slow-1", time.Minute)
	answer := f.DispatchSync(d2)
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow delivery never reached the backend")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = f.Stop(ctx)
	select {
	case r := <-answer:
		if r != nil {
			t.Fatalf("an interrupted delivery answered %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting sender was never answered")
	}
	if det := waitStatus(t, j, d2.ID, journal.StatusPending, 10*time.Second); det.Reply != nil {
		t.Fatalf("reply stored for an interrupted delivery: %+v", det.Reply)
	}
}

// waitUntil waits until cond holds, looking at it every pollEvery, and
// fails the test with what after within. within is a bound for a test
// that hangs, not a measure: set it well above what a loaded machine
// needs.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !eventually(within, pollEvery, cond) {
		t.Fatalf("waited %s for %s", within, what)
	}
}

// pollEvery is how often waitUntil looks at its condition.
const pollEvery = 5 * time.Millisecond

// eventually reports whether cond holds within, looking at it at once,
// then every tick, and a last time at the deadline. It runs cond on the
// caller's goroutine, so cond may call t.Fatal.
func eventually(within, every time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}

// slowFor waits d, like a backend taking d to answer, or less when ctx
// ends first (the client gave up, or the test's server is closing).
func slowFor(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
