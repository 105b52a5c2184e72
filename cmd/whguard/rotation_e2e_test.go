package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slack-go/slack"
	stripe "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

// rotationBackend is the app behind whguard during a rotation: a Slack
// handler verifying with slack-go and the backend secret it was given
// once, and a Stripe handler verifying with stripe-go's ConstructEvent
// and the one Stripe secret it holds at the time (switched from the old
// to the new one mid-rotation). A request that does not verify is
// answered 401 and counted.
type rotationBackend struct {
	slackSecret string
	// senderSlack are the sender's Slack secrets: a delivery verifying
	// with one of them was signed with the sender's secret, not the
	// backend's.
	senderSlack []string

	mu           sync.Mutex
	stripeSecret string
	accepted     map[string]bool // event id → verified and answered 200
	refused      map[string]int  // provider → 401s answered
	senderSigned int
}

func (b *rotationBackend) holdStripe(secret string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stripeSecret = secret
}

func (b *rotationBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	slackOK := func(secret string) bool {
		v, err := slack.NewSecretsVerifier(r.Header, secret)
		if err != nil {
			return false
		}
		_, _ = v.Write(body)
		return v.Ensure() == nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var id string
	provider := r.Header.Get("X-Whguard-Provider")
	switch provider {
	case "slk":
		for _, s := range b.senderSlack {
			if slackOK(s) {
				b.senderSigned++
			}
		}
		if slackOK(b.slackSecret) {
			var ev struct {
				EventID string `json:"event_id"`
			}
			_ = json.Unmarshal(body, &ev)
			id = ev.EventID
		}
	case "pay":
		if ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), b.stripeSecret); err == nil {
			id = ev.ID
		}
	}
	if id == "" {
		b.refused[provider]++
		http.Error(w, `{"error":"signature verification failed"}`, http.StatusUnauthorized)
		return
	}
	b.accepted[id] = true
	w.WriteHeader(http.StatusOK)
}

// TestE2ERotationNeverReachesTheBackend: the senders' secrets rotate
// (SECRET=new with SECRET_PREVIOUS=old, then new alone) across restarts of
// the real binary, and no delivery is refused:
//   - slack, a one-signature scheme, is re-signed with
//     WHGUARD_SLK_BACKEND_SECRET (then _BACKEND_SECRET_FILE): its backend,
//     verifying with slack-go, never learns of the rotation, and no delivery
//     verifies with a sender's secret;
//   - stripe, a multi-signature scheme, is re-signed with both secrets while
//     both are accepted: its backend (stripe-go's ConstructEvent) holding
//     only the old secret, then only the new one, accepts every delivery,
//     whichever secret the sender signed with.
func TestE2ERotationNeverReachesTheBackend(t *testing.T) {
	t.Parallel()
	const (
		slackOld, slackNew, slackBackend = "slack-old-signing-secret-01", "slack-new-signing-secret-02", "slack-backend-secret-03"
		stripeOld, stripeNew             = "whsec_rotationE2EOldSecret0123", "whsec_rotationE2ENewSecret0123"
	)
	be := &rotationBackend{slackSecret: slackBackend, senderSlack: []string{slackOld, slackNew}, stripeSecret: stripeOld,
		accepted: map[string]bool{}, refused: map[string]int{}}
	srv := httptest.NewServer(be)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	backendFile := filepath.Join(dir, "slack-backend-secret")
	if err := os.WriteFile(backendFile, []byte("\n"+slackBackend+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen, admin := freePort(t), freePort(t)
	base := []string{
		"WHGUARD_DATABASE_URL=sqlite:" + filepath.Join(dir, "journal.db"),
		"WHGUARD_LISTEN=" + listen, "WHGUARD_ADMIN_LISTEN=" + admin, "WHGUARD_ADMIN_TOKEN=tok",
		"WHGUARD_BACKEND_URL=" + srv.URL, "WHGUARD_PROVIDERS=slk,pay",
		"WHGUARD_SLK_SCHEME=slack", "WHGUARD_PAY_SCHEME=stripe",
		"WHGUARD_RETRY_BASE_DELAY=100ms", "WHGUARD_RETRY_MAX_DELAY=1s", "WHGUARD_SHUTDOWN_TIMEOUT=5s",
	}
	var wh *proc
	run := func(env ...string) {
		t.Helper()
		if wh != nil {
			_ = wh.cmd.Process.Signal(syscall.SIGTERM)
			_ = wh.wait(t, 15*time.Second)
		}
		wh = start(t, binary, append(append([]string{}, base...), env...))
		waitHTTP(t, "http://"+admin+"/readyz", 30*time.Second)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	n := 0
	post := func(provider, secret string) string {
		t.Helper()
		n++
		now := time.Now()
		var (
			id   string
			body []byte
			h    = http.Header{"Content-Type": {"application/json"}}
		)
		switch provider {
		case "slk":
			id = fmt.Sprintf("EvRotation%02d", n)
			body = []byte(`{"token":"XXYYZZ","team_id":"T1","api_app_id":"A1","event":{"type":"app_mention","text":"hi"},"type":"event_callback","event_id":"` + id + `","event_time":1}`)
			ts := fmt.Sprint(now.Unix())
			h.Set("X-Slack-Request-Timestamp", ts)
			h.Set("X-Slack-Signature", "v0="+hexMAC(sha256.New, secret, "v0:", ts, ":", string(body)))
		case "pay":
			id = fmt.Sprintf("evt_rotation_%02d", n)
			body = []byte(`{"id":"` + id + `","object":"event","type":"invoice.paid","api_version":"` + stripe.APIVersion + `","data":{"object":{}}}`)
			h.Set("Stripe-Signature", webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: now}).Header)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/webhooks/"+provider, bytes.NewReader(body))
		req.Header = h
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s signed with its %s secret: whguard answered %d, want 202", provider, secret, resp.StatusCode)
		}
		return id
	}
	// delivered waits until the backend has accepted every event of ids; a
	// refused delivery is retried, so a refusal shows as a timeout here
	// and in the counts below.
	delivered := func(phase string, ids ...string) {
		t.Helper()
		waitAccepted(t, phase, &be.mu, be.accepted, ids...)
	}

	// Before: one secret each.
	run("WHGUARD_SLK_SECRET="+slackOld, "WHGUARD_SLK_BACKEND_SECRET="+slackBackend, "WHGUARD_PAY_SECRET="+stripeOld)
	delivered("before", post("slk", slackOld), post("pay", stripeOld))

	// During: the senders sign with the new secrets (and resend old ones);
	// whguard accepts both. The Stripe backend still holds the old secret,
	// then is given the new one.
	during := []string{"WHGUARD_SLK_SECRET=" + slackNew, "WHGUARD_SLK_SECRET_PREVIOUS=" + slackOld, "WHGUARD_SLK_BACKEND_SECRET_FILE=" + backendFile,
		"WHGUARD_PAY_SECRET=" + stripeNew, "WHGUARD_PAY_SECRET_PREVIOUS=" + stripeOld}
	run(during...)
	delivered("during, stripe backend on the old secret",
		post("slk", slackNew), post("slk", slackOld), post("pay", stripeNew), post("pay", stripeOld))
	be.holdStripe(stripeNew)
	delivered("during, stripe backend on the new secret",
		post("slk", slackNew), post("pay", stripeNew), post("pay", stripeOld))

	// After: the new secrets alone.
	run("WHGUARD_SLK_SECRET="+slackNew, "WHGUARD_SLK_BACKEND_SECRET_FILE="+backendFile, "WHGUARD_PAY_SECRET="+stripeNew)
	delivered("after", post("slk", slackNew), post("pay", stripeNew))

	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.refused) != 0 || be.senderSigned != 0 {
		t.Errorf("the backend refused %v and got %d Slack deliveries signed with a sender's secret; want none", be.refused, be.senderSigned)
	}
	if len(be.accepted) != n {
		t.Errorf("%d events accepted, %d sent", len(be.accepted), n)
	}
	if strings.Contains(wh.out.String(), slackBackend) {
		t.Error("the backend secret appears in whguard's output")
	}
}
