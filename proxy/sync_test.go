package proxy_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	twilioclient "github.com/twilio/twilio-go/client"

	"github.com/whguard/whguard/examples/backends/twiml"
	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

const (
	twilioToken = "twilio auth token for sync tests"
	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
)

// syncStack is whguard's ingress and forwarder over real HTTP in front of
// a journal of its own and a backend, with a twilio and a slack provider in
// sync mode.
type syncStack struct {
	url string // the ingress's base URL
	j   journal.Store
	fwd *forwarder.Forwarder
	reg *prometheus.Registry
}

// synced reads whguard_sync_replies_total for a provider and outcome.
func (s *syncStack) synced(provider, outcome string) float64 {
	mfs, _ := s.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "whguard_sync_replies_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func newSyncStack(t *testing.T, store string, backend http.Handler, syncTimeout time.Duration) *syncStack {
	t.Helper()
	j := testdb.OpenStore(t, store, true)
	be := httptest.NewServer(backend)
	t.Cleanup(be.Close)
	// The ingress's URL is part of Twilio's signature: listen first.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	fwd, err := forwarder.New(forwarder.Config{
		Store: j, Concurrency: 4, Timeout: 5 * time.Second,
		Policy: forwarder.Policy{BaseDelay: 20 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
		Targets: map[string]forwarder.Target{
			"twilio": {BackendURL: be.URL, Sync: true},
			"slack":  {BackendURL: be.URL, Sync: true},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := fwd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = fwd.Stop(ctx)
	})
	reg := prometheus.NewRegistry()
	mk := func(cfg verify.ProviderConfig) *verify.Provider {
		p, err := verify.NewProvider(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{
			{Path: "/webhooks/twilio", Sync: true, SyncTimeout: syncTimeout, Provider: mk(verify.ProviderConfig{
				Name: "twilio", Scheme: "twilio", Secrets: []string{twilioToken}, PublicURL: base + "/webhooks/twilio"})},
			{Path: "/webhooks/slack", Sync: true, SyncTimeout: syncTimeout, Provider: mk(verify.ProviderConfig{
				Name: "slack", Scheme: "slack", Secrets: []string{slackSecret}})},
		},
		Intake: newIntake(t, j, fwd), Replies: j, Receipts: j, Metrics: proxy.NewMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(in)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return &syncStack{url: base, j: j, fwd: fwd, reg: reg}
}

// twilioSMS is an incoming SMS as Twilio posts it, signed the way Twilio
// signs (written from Twilio's docs, not from verify's code): base64
// HMAC-SHA1 of the full URL followed by each parameter's name and value,
// sorted by name.
func twilioSMS(t *testing.T, fullURL, text string) (http.Header, string) {
	t.Helper()
	params := url.Values{
		"MessageSid": {"SM" + strings.Repeat("a", 32)}, "AccountSid": {"AC" + strings.Repeat("b", 32)},
		"From": {"+14155550100"}, "To": {"+14155550199"}, "Body": {text}, "NumMedia": {"0"},
	}
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	signed := fullURL
	for _, k := range names {
		signed += k + params.Get(k)
	}
	mac := hmac.New(sha1.New, []byte(twilioToken))
	mac.Write([]byte(signed))
	sig := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	flat := map[string]string{}
	for k := range params {
		flat[k] = params.Get(k)
	}
	rv := twilioclient.NewRequestValidator(twilioToken)
	if !rv.Validate(fullURL, flat, sig) {
		t.Fatal("twilio-go refuses the test's signature")
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Twilio-Signature", sig)
	return h, params.Encode()
}

// slackCommand is a slash command as Slack posts it, signed with Slack's
// v0 scheme.
func slackCommand(text string) (http.Header, string) {
	body := url.Values{
		"token": {"xyzz0WbapA4vBCDEFasx0q6G"}, "team_id": {"T1DC2JH3J"}, "channel_id": {"G8PSS9T3V"},
		"user_id": {"U2CERLKJA"}, "command": {"/weather"}, "text": {text},
		"response_url": {"https://hooks.slack.com/commands/T1DC2JH3J/1/x"}, "trigger_id": {"398738663015.47445629121"},
	}.Encode()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(slackSecret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h, body
}

func (s *syncStack) post(t *testing.T, path string, h http.Header, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b), resp.Header}
}

// only returns the one event of the journal.
func (s *syncStack) only(t *testing.T) journal.Summary {
	t.Helper()
	evs, _, err := s.j.List(context.Background(), journal.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("%d events journaled, want 1", len(evs))
	}
	return evs[0]
}

func (s *syncStack) waitStatus(t *testing.T, id int64, want journal.Status) *journal.Detail {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := s.j.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status == want {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d is %s, want %s", id, d.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isAccepted(r reply) bool {
	var b struct{ Status string }
	return json.Unmarshal([]byte(r.body), &b) == nil && b.Status == "accepted"
}

// TestSyncTwilioGetsTheTwiML: a Twilio SMS webhook gets the backend's TwiML
// back; its duplicate gets the same TwiML while the backend would now
// answer something else, and the backend is not called for it.
func TestSyncTwilioGetsTheTwiML(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		app := twiml.New()
		s := newSyncStack(t, store, app, 2*time.Second)
		h, body := twilioSMS(t, s.url+"/webhooks/twilio", "hello")
		first := s.post(t, "/webhooks/twilio", h, body)
		want := `<Response><Message>You said: hello</Message></Response>`
		if first.status != http.StatusOK || first.header.Get("Content-Type") != "text/xml" || !strings.HasSuffix(first.body, want) {
			t.Fatalf("first: %d %q %s", first.status, first.header.Get("Content-Type"), first.body)
		}
		if app.Calls() != 1 {
			t.Fatalf("backend called %d times", app.Calls())
		}
		ev := s.only(t)
		d := s.waitStatus(t, ev.ID, journal.StatusDone)
		if d.Reply == nil || d.Reply.Status != 200 || d.Reply.ContentType != "text/xml" || d.Reply.BodyExcerpt != first.body {
			t.Fatalf("stored reply %+v", d.Reply)
		}

		app.SetPrefix("Something else: ")
		dup := s.post(t, "/webhooks/twilio", h, body)
		if dup.status != first.status || dup.header.Get("Content-Type") != "text/xml" || dup.body != first.body {
			t.Fatalf("duplicate: %d %q %s", dup.status, dup.header.Get("Content-Type"), dup.body)
		}
		// Its timeline says what the sender and its duplicate were
		// answered: the backend's reply, not the usual 202.
		waitTimeline(t, s.j, ev.ID, func(tl []journal.TimelineEntry) bool {
			return tl[0].Answer == http.StatusOK && tl[0].Duplicates == 1 && tl[len(tl)-1].Kind == journal.TimelineDuplicate &&
				tl[len(tl)-1].Answer == http.StatusOK
		})
		if app.Calls() != 1 {
			t.Fatalf("backend called %d times for one event and its duplicate", app.Calls())
		}
		// A replay delivers the event again, but the stored reply stays
		// the one its sender got.
		if err := s.j.Replay(context.Background(), ev.ID, "test"); err != nil {
			t.Fatal(err)
		}
		s.fwd.Wake()
		deadline := time.Now().Add(10 * time.Second)
		for app.Calls() != 2 || s.waitStatus(t, ev.ID, journal.StatusDone) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("replay not delivered: %d calls", app.Calls())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if dup := s.post(t, "/webhooks/twilio", h, body); dup.body != first.body {
			t.Fatalf("duplicate after a replay: %s", dup.body)
		}
		if s.synced("twilio", "replied") != 1 || s.synced("twilio", "stored") != 2 {
			t.Fatalf("sync metrics: replied %v, stored %v", s.synced("twilio", "replied"), s.synced("twilio", "stored"))
		}
		// A new message does reach the backend, with its new answer.
		h2, body2 := twilioSMS(t, s.url+"/webhooks/twilio", "again")
		if r := s.post(t, "/webhooks/twilio", h2, body2); !strings.Contains(r.body, "Something else: again") {
			t.Fatalf("second message: %d %s", r.status, r.body)
		}
	})
}

// TestSyncSlackSlashCommand: a slash command's sender sees the app's
// answer within Slack's 3 s.
func TestSyncSlackSlashCommand(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		var calls atomic.Int32
		s := newSyncStack(t, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			_ = r.ParseForm()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"response_type":"in_channel","text":"Sunny in %s"}`, r.PostForm.Get("text"))
		}), 2*time.Second)
		h, body := slackCommand("Paris")
		began := time.Now()
		r := s.post(t, "/webhooks/slack", h, body)
		took := time.Since(began)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" ||
			r.body != `{"response_type":"in_channel","text":"Sunny in Paris"}` {
			t.Fatalf("slash command: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
		}
		if took >= 3*time.Second {
			t.Fatalf("answered after %s; Slack gives up after 3 s", took)
		}
		// Slack retries a command it got no answer to: the retry gets the
		// same answer, without a second call.
		if dup := s.post(t, "/webhooks/slack", h, body); dup.body != r.body || calls.Load() != 1 {
			t.Fatalf("duplicate: %d %s, backend calls %d", dup.status, dup.body, calls.Load())
		}
	})
}

// TestSyncFallbacks: without a storable 2xx in time the sender gets the
// usual 202 and the event carries on like any other.
func TestSyncFallbacks(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		t.Run("SlowBackend", func(t *testing.T) {
			release := make(chan struct{})
			var calls atomic.Int32
			s := newSyncStack(t, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				<-release
				w.Header().Set("Content-Type", "text/xml")
				io.WriteString(w, "<Response/>")
			}), 300*time.Millisecond)
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			h, body := twilioSMS(t, s.url+"/webhooks/twilio", "slow")
			if r := s.post(t, "/webhooks/twilio", h, body); r.status != http.StatusAccepted || !isAccepted(r) {
				t.Fatalf("past the sync timeout: %d %s", r.status, r.body)
			}
			// A duplicate while the first attempt still runs: nothing stored
			// yet, so the acknowledgement, and no second call.
			if r := s.post(t, "/webhooks/twilio", h, body); r.status != http.StatusOK || !isAccepted(r) {
				t.Fatalf("duplicate during the attempt: %d %s", r.status, r.body)
			}
			close(release)
			if n := s.synced("twilio", "timeout"); n != 1 {
				t.Fatalf("timeouts counted: %v", n)
			}
			ev := s.only(t)
			s.waitStatus(t, ev.ID, journal.StatusDone)
			// The late answer was stored: a later duplicate gets it.
			if r := s.post(t, "/webhooks/twilio", h, body); r.status != http.StatusOK || r.body != "<Response/>" || calls.Load() != 1 {
				t.Fatalf("duplicate after the late answer: %d %s, calls %d", r.status, r.body, calls.Load())
			}
		})
		t.Run("BackendFails", func(t *testing.T) {
			var calls atomic.Int32
			s := newSyncStack(t, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					http.Error(w, "warming up", http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "text/xml")
				io.WriteString(w, "<Response><Message>second try</Message></Response>")
			}), 2*time.Second)
			h, body := twilioSMS(t, s.url+"/webhooks/twilio", "fail")
			if r := s.post(t, "/webhooks/twilio", h, body); r.status != http.StatusAccepted || !isAccepted(r) {
				t.Fatalf("backend 500: %d %s", r.status, r.body)
			}
			ev := s.only(t)
			d := s.waitStatus(t, ev.ID, journal.StatusDone)
			if len(d.AttemptLog) != 2 || d.AttemptLog[0].StatusCode != 500 || d.AttemptLog[1].StatusCode != 200 {
				t.Fatalf("attempts %+v", d.AttemptLog)
			}
		})
		t.Run("ProviderPaused", func(t *testing.T) {
			// A held delivery is not an attempt and cannot answer in time:
			// the sender gets the 202 as soon as it is held, not after the
			// timeout, and the event is delivered once the pause ends.
			var calls atomic.Int32
			s := newSyncStack(t, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				io.WriteString(w, "<Response/>")
			}), 10*time.Second)
			ctx := context.Background()
			if _, err := s.fwd.Pause(ctx, journal.Pause{Kind: journal.PauseProvider, Name: "twilio", Reason: "test"}); err != nil {
				t.Fatal(err)
			}
			h, body := twilioSMS(t, s.url+"/webhooks/twilio", "paused")
			began := time.Now()
			if r := s.post(t, "/webhooks/twilio", h, body); r.status != http.StatusAccepted || !isAccepted(r) {
				t.Fatalf("paused: %d %s", r.status, r.body)
			}
			if took := time.Since(began); took >= 10*time.Second {
				t.Fatalf("answered after the whole sync timeout (%s), not when held", took)
			}
			ev := s.only(t)
			if d, _ := s.j.Get(ctx, ev.ID); d.Status == journal.StatusDone || calls.Load() != 0 || len(d.AttemptLog) != 0 {
				t.Fatalf("delivered while paused: %s, %d calls, %d attempts", d.Status, calls.Load(), len(d.AttemptLog))
			}
			if _, err := s.fwd.Resume(ctx, journal.PauseProvider, "twilio", "test"); err != nil {
				t.Fatal(err)
			}
			s.waitStatus(t, ev.ID, journal.StatusDone)
			if calls.Load() != 1 {
				t.Fatalf("%d calls", calls.Load())
			}
		})
		t.Run("NoContent", func(t *testing.T) {
			// A 204 is a reply like any other: stored, and given back
			// without a body.
			s := newSyncStack(t, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNoContent)
			}), 2*time.Second)
			h, body := slackCommand("quiet")
			for i := range 2 {
				if r := s.post(t, "/webhooks/slack", h, body); r.status != http.StatusNoContent || r.body != "" {
					t.Fatalf("request %d: %d %q", i, r.status, r.body)
				}
			}
		})
		t.Run("ReplyTooLarge", func(t *testing.T) {
			var calls atomic.Int32
			s := newSyncStack(t, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "text/plain")
				io.WriteString(w, strings.Repeat("x", journal.MaxReplyBytes+1))
			}), 2*time.Second)
			h, body := slackCommand("big")
			if r := s.post(t, "/webhooks/slack", h, body); r.status != http.StatusAccepted || !isAccepted(r) {
				t.Fatalf("oversize answer: %d %.100s", r.status, r.body)
			}
			ev := s.only(t)
			if d := s.waitStatus(t, ev.ID, journal.StatusDone); d.Reply != nil {
				t.Fatalf("an oversize answer was stored: %+v", d.Reply)
			}
			if n := s.synced("slack", "no_reply"); n != 1 {
				t.Fatalf("no_reply counted: %v", n)
			}
			// Delivered, so done: its duplicate is acknowledged, not sent.
			if r := s.post(t, "/webhooks/slack", h, body); r.status != http.StatusOK || !isAccepted(r) || calls.Load() != 1 {
				t.Fatalf("duplicate: %d %.100s, calls %d", r.status, r.body, calls.Load())
			}
		})
	})
}
