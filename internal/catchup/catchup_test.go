package catchup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// noIngest journals nothing: these tests run no pass that lists events.
type noIngest struct{}

func (noIngest) Inject(context.Context, string, string, string, []byte) (bool, error) {
	return false, nil
}

// alertLog records what the alerts heard.
type alertLog struct {
	mu      sync.Mutex
	failing []bool
	reasons []string
}

func (a *alertLog) Recovered(string, int)   {}
func (a *alertLog) GaveUp(string, []string) {}
func (a *alertLog) Failing(_ string, failing bool, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failing = append(a.failing, failing)
	a.reasons = append(a.reasons, reason)
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTest(t *testing.T, j journal.Store, clock *fakeClock, alerts Alerts) *Catchup {
	t.Helper()
	c, err := New(Options{
		Providers: []Config{{Provider: "stripe", Kind: KindStripe, Token: func() (string, error) { return "rk_test_x", nil },
			APIURL: "http://127.0.0.1:1", Interval: time.Minute}},
		Journal: j, Ingest: noIngest{}, Alerts: alerts, Now: clock.Now, Replica: "me",
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRunWaitsThenAnswersBusy: a pass asked for while another replica's
// runs waits for it, up to 30 s on the clock, then answers ErrBusy; an
// unknown provider and a since beyond Stripe's 30 days are refused at once.
func TestRunWaitsThenAnswersBusy(t *testing.T) {
	t.Parallel()
	j := testdb.OpenStore(t, "sqlite", true)
	clock := &fakeClock{now: time.Now()}
	c := newTest(t, j, clock, nil)
	ctx := context.Background()
	if ok, err := j.ClaimCatchup(ctx, "stripe", "another replica", time.Hour, true); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, "stripe", 0, false)
		done <- err
	}()
	// Each look at the clock moves it on: the 30 s wait runs out in a few
	// polls of 200 ms, not in 30 s.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				clock.add(10 * time.Second)
			}
		}
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("Run while another pass holds the lease: %v, want ErrBusy", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not give up waiting")
	}
	if _, err := c.Run(ctx, "github", 0, false); !errors.Is(err, ErrUnknownProvider) {
		t.Errorf("unknown provider: %v", err)
	}
	if _, err := c.Run(ctx, "stripe", 721*time.Hour, false); !errors.Is(err, ErrSinceTooFar) {
		t.Errorf("since beyond 30 days: %v", err)
	}
}

// TestFailingAlertAfterThreeIntervals: passes that fail are alerted only
// once they have failed for longer than three intervals, and cleared by
// the first good pass.
func TestFailingAlertAfterThreeIntervals(t *testing.T) {
	t.Parallel()
	j := testdb.OpenStore(t, "sqlite", true)
	clock := &fakeClock{now: time.Now()}
	alerts := &alertLog{}
	c := newTest(t, j, clock, alerts)
	ctx := context.Background()
	cfg := c.cfgs["stripe"]
	fail := func() {
		if ok, _ := j.ClaimCatchup(ctx, "stripe", "me", time.Minute, true); !ok {
			t.Fatal("claim refused")
		}
		now := clock.Now()
		if err := c.end(ctx, cfg, &journal.CatchupPass{Started: now, Finished: now, Error: "list the events: Stripe answered 500 (api_error)"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 { // at 0, 1, 2 and 3 intervals: not yet longer than three
		fail()
		clock.add(time.Minute)
	}
	if len(alerts.failing) != 0 {
		t.Fatalf("alerted %v before three intervals of failing", alerts.failing)
	}
	fail() // at 4 intervals
	if len(alerts.failing) != 1 || !alerts.failing[0] || alerts.reasons[0] == "" {
		t.Fatalf("after four intervals of failing: %v %q", alerts.failing, alerts.reasons)
	}
	if ok, _ := j.ClaimCatchup(ctx, "stripe", "me", time.Minute, true); !ok {
		t.Fatal("claim refused")
	}
	now := clock.Now()
	if err := c.end(ctx, cfg, &journal.CatchupPass{Started: now, Finished: now}); err != nil {
		t.Fatal(err)
	}
	if last := alerts.failing[len(alerts.failing)-1]; last {
		t.Fatal("a good pass did not clear the failing alert")
	}
}

// TestStopDuringAPassRecordsNothing: a pass interrupted by Stop is not a
// failure of the API: nothing is recorded, the lease is given back, and
// the pass is still due for the next start.
func TestStopDuringAPassRecordsNothing(t *testing.T) {
	t.Parallel()
	j := testdb.OpenStore(t, "sqlite", true)
	hung := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hung <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	t.Cleanup(api.Close)
	c, err := New(Options{
		Providers: []Config{{Provider: "stripe", Kind: KindStripe, Token: func() (string, error) { return "rk_test_x", nil },
			APIURL: api.URL, Interval: time.Hour}},
		Journal: j, Ingest: noIngest{}, Replica: "me",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("no pass reached the API")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	states, err := j.CatchupStates(context.Background())
	if err != nil || len(states) != 1 {
		t.Fatalf("states %+v (%v)", states, err)
	}
	if s := states[0]; s.LastPass != nil || s.LastError != nil || !s.NextPass.IsZero() {
		t.Fatalf("after a stop mid-pass: %+v, want nothing recorded and the pass still due", s)
	}
	if ok, err := j.ClaimCatchup(context.Background(), "stripe", "next start", time.Minute, false); err != nil || !ok {
		t.Fatalf("the next start cannot take the pass: %v %v", ok, err)
	}
}

// TestKnownInChunks: thousands of GUIDs (three days of a busy hook) are
// looked up in chunks the journal takes.
func TestKnownInChunks(t *testing.T) {
	t.Parallel()
	j := testdb.OpenStore(t, "sqlite", true)
	c := newTest(t, j, &fakeClock{now: time.Now()}, nil)
	var evs []journal.Event
	var ids []string
	for i := range 1500 {
		id := fmt.Sprintf("guid-%04d", i)
		ids = append(ids, id)
		if i%3 == 0 {
			evs = append(evs, journal.Event{Provider: "github", EventID: id, ContentHash: "h", Body: []byte("{}"), Path: "/webhooks/github"})
		}
	}
	if _, err := j.Append(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	known, err := c.known(context.Background(), "github", ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != 500 || !known["guid-0000"] || known["guid-0001"] || !known["guid-1497"] {
		t.Fatalf("%d known, want the 500 journaled", len(known))
	}
}

// TestGitHubGivesUpAfterThreeRequests: a GUID whose redelivery never
// arrives is asked for again after one interval, then two, three times in
// all, then given up on: listed as unarrived, alerted and counted once.
func TestGitHubGivesUpAfterThreeRequests(t *testing.T) {
	t.Parallel()
	j := testdb.OpenStore(t, "sqlite", true)
	var (
		mu    sync.Mutex
		asked []string
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/repos/acme/app/hooks/7/deliveries":
			// GitHub could not connect, once; a redelivery is accepted but
			// never arrives.
			fmt.Fprint(w, `[{"id":101,"guid":"lost","delivered_at":"`+time.Now().UTC().Format(time.RFC3339)+`","status":"failed to connect to host","status_code":0,"event":"push"}]`)
		case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/app/hooks/7/deliveries/101/attempts":
			mu.Lock()
			asked = append(asked, r.URL.Path)
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
		}
	}))
	t.Cleanup(api.Close)
	clock := &fakeClock{now: time.Now()}
	alerts := &gaveUpLog{}
	c, err := New(Options{
		Providers: []Config{{Provider: "gh", Kind: KindGitHub, Token: func() (string, error) { return "ghp_x", nil },
			APIURL: api.URL, Hook: "repos/acme/app/hooks/7", Interval: time.Minute}},
		Journal: j, Ingest: noIngest{}, Alerts: alerts, Now: clock.Now, Replica: "me",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pass := func() journal.CatchupPass {
		t.Helper()
		p, err := c.Run(ctx, "gh", 0, false)
		if err != nil || p.Error != "" {
			t.Fatalf("pass: %+v %v", p, err)
		}
		return p
	}
	// Asked at 0; waits of 1, then 2 intervals; given up after the third
	// request's wait of 4 intervals.
	for _, step := range []struct {
		advance time.Duration
		asked   int
	}{
		{0, 1},
		{30 * time.Second, 1}, // first wait not over
		{30 * time.Second, 2}, // one interval: asked again
		{time.Minute, 2},      // second wait is two intervals
		{time.Minute, 3},
		{3 * time.Minute, 3}, // third wait is four intervals
		{time.Minute, 3},     // over: given up, not asked again
		{time.Hour, 3},
	} {
		clock.add(step.advance)
		pass()
		mu.Lock()
		n := len(asked)
		mu.Unlock()
		if n != step.asked {
			t.Fatalf("after %s more: asked %d times, want %d", step.advance, n, step.asked)
		}
	}
	st, err := c.Status(ctx)
	if err != nil || len(st) != 1 || len(st[0].Unarrived) != 1 || st[0].Unarrived[0] != "lost" {
		t.Fatalf("status: %+v (%v), want lost listed as unarrived", st, err)
	}
	alerts.mu.Lock()
	defer alerts.mu.Unlock()
	if len(alerts.gaveUp) != 1 || alerts.gaveUp[0] != "lost" {
		t.Fatalf("given-up alerts %v, want lost once", alerts.gaveUp)
	}
}

// gaveUpLog records the GUIDs given up on.
type gaveUpLog struct {
	alertLog
	gaveUp []string
}

func (g *gaveUpLog) GaveUp(_ string, guids []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gaveUp = append(g.gaveUp, guids...)
}
