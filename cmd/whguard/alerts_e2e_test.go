package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/whguard/whguard/internal/testdb"
)

// alertInbox is a real HTTP server standing in for a Slack incoming
// webhook: it keeps the text of every message, parsed with Slack's types.
type alertInbox struct {
	mu    sync.Mutex
	texts []string
}

func newAlertInbox(t *testing.T) (*alertInbox, string) {
	in := &alertInbox{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m slack.WebhookMessage
		if err := json.Unmarshal(b, &m); err != nil || m.Text == "" || m.Blocks == nil || len(m.Blocks.BlockSet) == 0 {
			t.Errorf("not a Slack message with text and blocks: %v %s", err, b)
		}
		in.mu.Lock()
		in.texts = append(in.texts, m.Text)
		in.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return in, srv.URL
}

func (in *alertInbox) all() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.texts...)
}

func (in *alertInbox) has(sub string) bool {
	for _, s := range in.all() {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestE2EAlerts: a real whguard with WHGUARD_ALERT_URL, a backend refusing
// every event (each goes dead at once) and an operator pausing it: the
// receiver hears of the pause, and of the thirty dead events in one
// message (reported at shutdown at the latest), and nothing more.
func TestE2EAlerts(t *testing.T) { testdb.ForEachStore(t, testE2EAlerts) }

func testE2EAlerts(t *testing.T, store string) {
	inbox, inboxURL := newAlertInbox(t)
	s := newStack(t, store, "WHGUARD_ALERT_URL="+inboxURL)
	ln, err := net.Listen("tcp", s.backend)
	if err != nil {
		t.Fatal(err)
	}
	refusing := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
	})}
	go refusing.Serve(ln)
	t.Cleanup(func() { refusing.Close() })
	s.startWhguard(true)
	client := &http.Client{Timeout: 5 * time.Second}
	const n = 30
	for i := range n {
		order := fmt.Sprintf("al-%02d", i)
		if code, body := s.send(client, "msg_"+order, orderEvent(order, "order.paid")); code != 202 {
			t.Fatalf("send %d: %d %s", i, code, body)
		}
	}
	waitFor(t, 20*time.Second, "every event dead", func() bool { return s.countStatus("dead") == n })

	req, _ := http.NewRequest(http.MethodPost, "http://"+s.admin+"/api/backends/pause",
		strings.NewReader(`{"backend":"http://`+s.backend+`","reason":"bad deploy"}`))
	req.Header.Set("Authorization", "Bearer e2e-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("pause: %v %v", resp, err)
	}
	resp.Body.Close()
	waitFor(t, 25*time.Second, "the pause alert", func() bool { return inbox.has("is paused (bad deploy)") })

	if err := s.whguard.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.whguard.wait(t, 15*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	got := inbox.all()
	dead := 0
	for _, text := range got {
		if strings.Contains(text, "went dead") {
			dead++
			if !strings.Contains(text, fmt.Sprintf("%d events of shop went dead", n)) {
				t.Errorf("dead events not grouped into one message: %q", text)
			}
		}
	}
	if dead != 1 || len(got) != 2 {
		t.Fatalf("want 2 messages (the pause, %d dead events in one), got %d: %q", n, len(got), got)
	}
	if strings.Contains(s.whguard.out.String(), inboxURL) {
		t.Error("the alert URL (it may hold a token) appears in the logs")
	}
}
