package alert_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.uber.org/zap/zaptest"

	"github.com/whguard/whguard/internal/alert"
	"github.com/whguard/whguard/internal/fields"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/verify"
)

// receiver is a real HTTP server keeping every message it is sent.
type receiver struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	status  int
}

func newReceiver(t *testing.T) (*receiver, *httptest.Server) {
	r := &receiver{status: 200}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, b)
	r.headers = append(r.headers, req.Header.Clone())
	w.WriteHeader(r.status)
}

// wait returns the first n messages once they have arrived.
func (r *receiver) wait(t *testing.T, n int) [][]byte {
	t.Helper()
	var got [][]byte
	if !testwait.Until(5*time.Second, testwait.Poll, func() bool {
		r.mu.Lock()
		got = append([][]byte(nil), r.bodies...)
		r.mu.Unlock()
		return len(got) >= n
	}) {
		t.Fatalf("%d alert messages arrived, want %d: %s", len(got), n, got)
	}
	return got
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func start(t *testing.T, cfg alert.Config) (*alert.Notifier, *clock) {
	t.Helper()
	clk := &clock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	cfg.Now, cfg.Logger = clk.Now, zaptest.NewLogger(t)
	n, err := alert.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = n.Stop(ctx)
	})
	return n, clk
}

// slackMsg parses a message as Slack's own types do and checks it has what
// an incoming webhook needs: a text, and blocks Slack knows.
func slackMsg(t *testing.T, b []byte) (text string, blocks []slack.Block) {
	t.Helper()
	var m slack.WebhookMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a Slack webhook message: %v: %s", err, b)
	}
	if m.Text == "" || m.Blocks == nil || len(m.Blocks.BlockSet) == 0 {
		t.Fatalf("Slack message without text or blocks: %s", b)
	}
	for _, bl := range m.Blocks.BlockSet {
		if _, unknown := bl.(*slack.UnknownBlock); unknown {
			t.Fatalf("block Slack does not know: %s", b)
		}
	}
	sec, ok := m.Blocks.BlockSet[0].(*slack.SectionBlock)
	if !ok || sec.Text == nil || sec.Text.Type != slack.MarkdownType || sec.Text.Text == "" {
		t.Fatalf("first block is not a mrkdwn section: %s", b)
	}
	if _, ok := m.Blocks.BlockSet[1].(*slack.ContextBlock); !ok {
		t.Fatalf("second block is not a context: %s", b)
	}
	return m.Text, m.Blocks.BlockSet
}

// TestDeadEventsAreGrouped: an outage of ten thousand dead events is one
// message per provider per window, then at most one per Repeat.
func TestDeadEventsAreGrouped(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t)
	n, clk := start(t, alert.Config{URL: srv.URL, Format: alert.FormatSlack, Repeat: 15 * time.Minute})
	began := time.Now()
	for i := range 10_000 {
		n.Dead("stripe", "http://app:3000", "evt_"+string(rune('a'+i%26)))
	}
	n.Dead("github", "http://app:3000", "gh_1")
	if took := time.Since(began); took > time.Second {
		t.Errorf("10 001 Dead calls took %v: they must not wait on anything", took)
	}
	n.FlushDead() // not a minute yet: nothing
	clk.add(61 * time.Second)
	n.FlushDead()
	got := rcv.wait(t, 2)
	texts := map[string]string{}
	for _, b := range got {
		text, _ := slackMsg(t, b)
		switch {
		case strings.Contains(text, "stripe"):
			texts["stripe"] = text
		case strings.Contains(text, "github"):
			texts["github"] = text
		}
	}
	if !strings.Contains(texts["stripe"], "10000 events of stripe went dead") || !strings.Contains(texts["stripe"], "…") {
		t.Errorf("stripe message: %q", texts["stripe"])
	}
	if !strings.Contains(texts["github"], "1 event of github went dead") || !strings.Contains(texts["github"], "gh_1") {
		t.Errorf("github message: %q", texts["github"])
	}
	// More deaths within Repeat: gathered, not sent...
	for range 500 {
		n.Dead("stripe", "http://app:3000", "evt_late")
	}
	clk.add(5 * time.Minute)
	n.FlushDead()
	// ...until Repeat after the last message; a new provider is sent at
	// once after its own window, and FIFO order proves nothing was sent
	// for stripe in between.
	n.Dead("shopify", "http://app:3000", "sh_1")
	clk.add(61 * time.Second)
	n.FlushDead()
	got = rcv.wait(t, 3)
	if text, _ := slackMsg(t, got[2]); !strings.Contains(text, "shopify") {
		t.Fatalf("third message is not shopify's: %q", text)
	}
	clk.add(10 * time.Minute)
	n.FlushDead()
	got = rcv.wait(t, 4)
	if text, _ := slackMsg(t, got[3]); !strings.Contains(text, "500 events of stripe") {
		t.Fatalf("the repeat gathers the later deaths: %q", text)
	}
}

type probeState struct {
	mu      sync.Mutex
	journal error
	redis   error
	bs      alert.Backends
}

func (p *probeState) probes() alert.Probes {
	return alert.Probes{
		Journal:  func(context.Context) error { p.mu.Lock(); defer p.mu.Unlock(); return p.journal },
		Redis:    func(context.Context) error { p.mu.Lock(); defer p.mu.Unlock(); return p.redis },
		Backends: func(context.Context) (alert.Backends, error) { p.mu.Lock(); defer p.mu.Unlock(); return p.bs, nil },
	}
}

func (p *probeState) set(fn func(p *probeState)) { p.mu.Lock(); defer p.mu.Unlock(); fn(p) }

// TestConditionsRepeatAndRecover: a condition is reported when it starts,
// again every Repeat while it lasts, and once when it clears; one that
// starts again within Repeat (a flapping breaker) is not reported again.
func TestConditionsRepeatAndRecover(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t)
	reg := prometheus.NewRegistry()
	n, clk := start(t, alert.Config{URL: srv.URL, Format: alert.FormatSlack, Repeat: 15 * time.Minute,
		BacklogAge: 5 * time.Minute, Metrics: alert.NewMetrics(reg)})
	ps := &probeState{bs: alert.Backends{Backends: []alert.BackendState{{Backend: "http://app:3000", Breaker: "closed"}}}}
	ctx := context.Background()
	n.Check(ctx, ps.probes()) // all well: nothing
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "open"; p.bs.Backends[0].Waiting = 42 })
	n.Check(ctx, ps.probes())
	clk.add(time.Minute)
	n.Check(ctx, ps.probes()) // still open, within Repeat: nothing
	ps.set(func(p *probeState) { p.journal = errors.New("down") })
	n.Check(ctx, ps.probes())
	got := rcv.wait(t, 2)
	if text, _ := slackMsg(t, got[0]); !strings.Contains(text, "Circuit breaker open for http://app:3000") || !strings.Contains(text, "42 waiting") {
		t.Fatalf("first message: %q", text)
	}
	if text, _ := slackMsg(t, got[1]); !strings.Contains(text, "journal is unreachable") {
		t.Fatalf("second message (the breaker's must not repeat within Repeat): %q", text)
	}
	// While the journal is down the backends are unknown: the breaker
	// stays reported as open, not cleared.
	ps.set(func(p *probeState) { p.journal = nil })
	clk.add(15 * time.Minute)
	n.Check(ctx, ps.probes())
	got = rcv.wait(t, 4)
	texts := []string{}
	for _, b := range got[2:4] {
		text, _ := slackMsg(t, b)
		texts = append(texts, text)
	}
	joined := strings.Join(texts, "\n")
	if !strings.Contains(joined, "journal answers again") || !strings.Contains(joined, "Still: Circuit breaker open") {
		t.Fatalf("want the journal's recovery and the breaker's repeat, got %q", texts)
	}
	// Closed: one recovery. Open again: its last start was reported 16
	// minutes ago, so this one is too; a flap within Repeat of that is not.
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "closed" })
	n.Check(ctx, ps.probes())
	got = rcv.wait(t, 5)
	if text, _ := slackMsg(t, got[4]); !strings.Contains(text, "Circuit breaker closed") {
		t.Fatalf("recovery: %q", text)
	}
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "open" })
	n.Check(ctx, ps.probes())
	got = rcv.wait(t, 6)
	if text, _ := slackMsg(t, got[5]); !strings.Contains(text, "Circuit breaker open") {
		t.Fatalf("reopened after Repeat: %q", text)
	}
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "closed" })
	n.Check(ctx, ps.probes())
	got = rcv.wait(t, 7)
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "open" }) // flap within Repeat
	n.Check(ctx, ps.probes())
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "closed" })
	n.Check(ctx, ps.probes())
	// A backlog and a provider pause, to end with a known message.
	ps.set(func(p *probeState) {
		p.bs.Backends[0].OldestAge = 400 * time.Second
		p.bs.PausedProviders = map[string]string{"stripe": "deploy"}
	})
	n.Check(ctx, ps.probes())
	got = rcv.wait(t, 9)
	var rest []string
	for _, b := range got[7:] {
		text, _ := slackMsg(t, b)
		rest = append(rest, text)
	}
	joined = strings.Join(rest, "\n")
	if strings.Contains(joined, "breaker") || !strings.Contains(joined, "Backlog for http://app:3000") || !strings.Contains(joined, "Provider stripe is paused (deploy)") {
		t.Fatalf("after a flap within Repeat: want only the backlog and the pause, got %q", rest)
	}
	ps.set(func(p *probeState) { p.bs.Backends[0].OldestAge = 0; p.bs.PausedProviders = nil })
	n.Check(ctx, ps.probes())
	got = rcv.wait(t, 11)
	if rcv.count() != 11 {
		t.Fatalf("%d messages, want 11", rcv.count())
	}
	if !testwait.Until(5*time.Second, testwait.Poll, func() bool { return counter(reg, "whguard_alerts_sent_total") == 11 }) {
		t.Fatalf("whguard_alerts_sent_total = %v, want 11", counter(reg, "whguard_alerts_sent_total"))
	}
}

// counter sums a counter's series.
func counter(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	var total float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// TestJSONAlertsSigned: the json format carries every field and, with a
// secret, a Standard Webhooks signature the official library verifies.
func TestJSONAlertsSigned(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "alerts", Scheme: verify.SchemeStandard, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	rcv, srv := newReceiver(t)
	n, clk := start(t, alert.Config{URL: srv.URL, Format: alert.FormatJSON, Sign: p.Resign})
	clk.add(time.Since(clk.Now())) // the library checks the timestamp against its clock
	n.Dead("stripe", "http://app:3000", "evt_1")
	clk.add(2 * time.Minute)
	n.FlushDead()
	got := rcv.wait(t, 1)
	var m map[string]any
	if err := json.Unmarshal(got[0], &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "severity", "summary", "provider", "backend", "event_id", "at"} {
		if _, ok := m[k]; !ok {
			t.Errorf("field %q missing: %s", k, got[0])
		}
	}
	if m["type"] != alert.TypeEventDead || m["provider"] != "stripe" || m["event_id"] != "evt_1" || m["severity"] != alert.SeverityCritical {
		t.Errorf("message %s", got[0])
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	h := rcv.headers[0]
	rcv.mu.Unlock()
	if err := wh.Verify(got[0], h); err != nil {
		t.Fatalf("standard-webhooks refuses the alert's signature: %v", err)
	}
	if err := wh.Verify([]byte(strings.Replace(string(got[0]), "stripe", "strip3", 1)), h); err == nil {
		t.Fatal("a changed body still verifies")
	}
}

// TestReceiverDownNeverBlocks: with the receiver failing, messages are
// tried a few times, counted as failed, and nothing waits on them.
func TestReceiverDownNeverBlocks(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t)
	rcv.status = 500
	reg := prometheus.NewRegistry()
	n, clk := start(t, alert.Config{URL: srv.URL, Format: alert.FormatSlack, Metrics: alert.NewMetrics(reg)})
	began := time.Now()
	for i := range 200 {
		n.Dead("p"+string(rune('a'+i%100)), "http://app:3000", "e")
	}
	clk.add(2 * time.Minute)
	n.FlushDead() // 100 messages: more than the queue holds
	if took := time.Since(began); took > time.Second {
		t.Fatalf("alerting took %v with the receiver failing", took)
	}
	var failed, dropped float64
	if !testwait.Until(10*time.Second, testwait.Poll, func() bool {
		failed, dropped = counter(reg, "whguard_alerts_failed_total"), counter(reg, "whguard_alerts_dropped_total")
		return failed >= 1 && dropped >= 1 && rcv.count() >= 3
	}) {
		t.Fatalf("failed %v dropped %v tries %d: want at least one of each and three tries", failed, dropped, rcv.count())
	}
}

// Validate reports every bad setting by its field, and New refuses them.
func TestConfigNamesItsFields(t *testing.T) {
	t.Parallel()
	cfg := alert.Config{URL: "hooks.example/x", Format: "teams", Repeat: -1}.WithDefaults()
	var got []string
	for _, fe := range fields.All(cfg.Validate()) {
		got = append(got, fe.Field)
	}
	if want := []string{"URL", "Format", "Repeat"}; !slices.Equal(got, want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	signed := alert.Config{URL: "http://x", Sign: func(http.Header, []byte, time.Time) {}}.WithDefaults()
	if fes := fields.All(signed.Validate()); len(fes) != 1 || fes[0].Field != "Sign" || !strings.Contains(fes[0].Message(strings.ToLower), "format to json") {
		t.Fatalf("signed slack alerts: %v", fes)
	}
	if _, err := alert.New(alert.Config{URL: "http://x", Format: "teams"}); err == nil {
		t.Fatal("New accepted a bad format")
	}
	if _, err := alert.New(alert.Config{}); err == nil {
		t.Fatal("New accepted no URL")
	}
}

// TestFlapThatStaysIsReported: a condition that starts again soon after
// it cleared is silent at first (a flap), but once it has lasted a repeat
// interval it is reported, and so is its recovery: the last message is
// never "closed" during an outage.
func TestFlapThatStaysIsReported(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t)
	n, clk := start(t, alert.Config{URL: srv.URL, Format: alert.FormatSlack, Repeat: 15 * time.Minute})
	ps := &probeState{bs: alert.Backends{Backends: []alert.BackendState{{Backend: "http://app:3000", Breaker: "open"}}}}
	ctx := context.Background()
	n.Check(ctx, ps.probes()) // open: reported
	clk.add(time.Minute)
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "closed" })
	n.Check(ctx, ps.probes()) // closed: reported
	clk.add(time.Minute)
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "open" })
	n.Check(ctx, ps.probes()) // open again within the interval: silent
	for range 20 {            // ...and it stays open
		clk.add(time.Minute)
		n.Check(ctx, ps.probes())
	}
	got := rcv.wait(t, 3)
	if text, _ := slackMsg(t, got[2]); !strings.Contains(text, "Still: Circuit breaker open") {
		t.Fatalf("third message %q, want the lasting breaker reported", text)
	}
	ps.set(func(p *probeState) { p.bs.Backends[0].Breaker = "closed" })
	n.Check(ctx, ps.probes())
	got = rcv.wait(t, 4)
	if text, _ := slackMsg(t, got[3]); !strings.Contains(text, "Circuit breaker closed") {
		t.Fatalf("fourth message %q, want its recovery", text)
	}
	if c := rcv.count(); c != 4 {
		t.Fatalf("%d messages, want 4", c)
	}
}

// TestSlackTextIsEscaped: event ids, provider names and backends come from
// senders and configuration; in a Slack message they are text, never
// mrkdwn controls: &, < and > are escaped as Slack asks, so an event id of
// "<!channel>" or "<https://evil.example|click>" neither pings the channel
// nor makes a link. (Found: event ids injected mentions and links.)
func TestSlackTextIsEscaped(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t)
	n, clk := start(t, alert.Config{URL: srv.URL, Format: alert.FormatSlack})
	n.Dead("stripe", "http://app:3000", "<!channel> <https://evil.example|click> & more")
	clk.add(61 * time.Second)
	n.FlushDead()
	b := rcv.wait(t, 1)[0]
	var raw struct {
		Text   string `json:"text"`
		Blocks []struct {
			Text     *struct{ Text string }  `json:"text"`
			Elements []struct{ Text string } `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	texts := []string{raw.Text}
	for _, bl := range raw.Blocks {
		if bl.Text != nil {
			texts = append(texts, bl.Text.Text)
		}
		for _, e := range bl.Elements {
			texts = append(texts, e.Text)
		}
	}
	found := false
	for _, s := range texts {
		if strings.ContainsAny(s, "<>") || strings.Contains(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(s, "&amp;", ""), "&lt;", ""), "&gt;", ""), "&") {
			t.Errorf("unescaped Slack control character in %q", s)
		}
		found = found || strings.Contains(s, "&lt;!channel&gt;")
	}
	if !found {
		t.Errorf("the event id is not shown escaped: %q", texts)
	}
}
