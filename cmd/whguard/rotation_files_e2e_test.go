package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripe "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/whguard/whguard/internal/rotation/rotationtest"
)

// Secrets of the file rotations: the sender's old and new ones per scheme.
const (
	fileStripeOld = "whsec_fileRotationOldStripe0123"
	fileStripeNew = "whsec_fileRotationNewStripe0123"
	fileStdOld    = "whsec_b2xkLWZpbGUtcm90YXRpb24tc2VjcmV0LTAx"
	fileStdNew    = "whsec_bmV3LWZpbGUtcm90YXRpb24tc2VjcmV0LTAy"
)

// fileBackend is the app behind whguard: a Stripe handler verifying with
// stripe-go's ConstructEvent and a Standard Webhooks handler verifying with
// the Standard Webhooks library, each with the one secret it holds at the
// time (switched from the old to the new one mid-rotation). A delivery
// that does not verify is answered 401 and counted.
type fileBackend struct {
	mu       sync.Mutex
	secret   map[string]string // provider → the secret it verifies with
	accepted map[string]bool   // event id → verified and answered 200
	refused  map[string]int    // provider → 401s answered
}

func newFileBackend(t *testing.T, secrets map[string]string) (*fileBackend, string) {
	b := &fileBackend{secret: secrets, accepted: map[string]bool{}, refused: map[string]int{}}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv.URL
}

func (b *fileBackend) hold(provider, secret string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secret[provider] = secret
}

func (b *fileBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	provider, id := r.Header.Get("X-Whguard-Provider"), ""
	switch provider {
	case "pay":
		if ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), b.secret[provider]); err == nil {
			id = ev.ID
		}
	case "std":
		if wh, err := standardwebhooks.NewWebhook(b.secret[provider]); err == nil && wh.Verify(body, r.Header) == nil {
			id = r.Header.Get("Webhook-Id")
		}
	case "dsc": // signed by Discord's key, forwarded as received
		var ev struct{ ID string }
		_ = json.Unmarshal(body, &ev)
		id = ev.ID
	}
	if id == "" {
		b.refused[provider]++
		http.Error(w, `{"error":"signature verification failed"}`, http.StatusUnauthorized)
		return
	}
	b.accepted[id] = true
	w.WriteHeader(http.StatusOK)
}

// delivered waits until the backend has accepted every event of ids (a
// refused delivery is retried: a refusal shows as a timeout here, and in
// the refusal counts).
func (b *fileBackend) delivered(t *testing.T, phase string, ids ...string) {
	t.Helper()
	waitAccepted(t, phase, &b.mu, b.accepted, ids...)
}

// waitAccepted waits until accepted (guarded by mu) holds every event of
// ids: what a rotation test's verifying backend has answered 200.
func waitAccepted(t *testing.T, phase string, mu *sync.Mutex, accepted map[string]bool, ids ...string) {
	t.Helper()
	waitFor(t, 30*time.Second, phase+": the backend to accept "+strings.Join(ids, ", "), func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if !accepted[id] {
				return false
			}
		}
		return true
	})
}

// fileSender posts signed events to a whguard's ingress, each with a
// fresh id, and returns the status and the id.
type fileSender struct {
	t      *testing.T
	listen string
	client *http.Client
	n      int
}

func (s *fileSender) post(provider, secret string) (int, string) {
	s.t.Helper()
	s.n++
	now := time.Now()
	h := http.Header{"Content-Type": {"application/json"}}
	var id string
	var body []byte
	switch provider {
	case "pay":
		id = fmt.Sprintf("evt_filerot_%03d", s.n)
		body = []byte(`{"id":"` + id + `","object":"event","type":"invoice.paid","api_version":"` + stripe.APIVersion + `","data":{"object":{}}}`)
		h.Set("Stripe-Signature", webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: now}).Header)
	case "std":
		id = fmt.Sprintf("msg_filerot_%03d", s.n)
		body = []byte(`{"type":"user.created","data":{"n":` + fmt.Sprint(s.n) + `}}`)
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			s.t.Fatal(err)
		}
		sig, err := wh.Sign(id, now, body)
		if err != nil {
			s.t.Fatal(err)
		}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", fmt.Sprint(now.Unix()))
		h.Set("Webhook-Signature", sig)
	}
	return s.send(provider, h, body), id
}

// accepted posts and fails unless whguard answered 202.
func (s *fileSender) accepted(provider, secret, which string) string {
	s.t.Helper()
	code, id := s.post(provider, secret)
	if code != http.StatusAccepted {
		s.t.Fatalf("%s signed with the %s secret: whguard answered %d, want 202", provider, which, code)
	}
	return id
}

func (s *fileSender) send(provider string, h http.Header, body []byte) int {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.listen+"/webhooks/"+provider, bytes.NewReader(body))
	req.Header = h
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// startFileWhguard runs whguard with the providers' env in front of
// backendURL, and returns its ingress and admin addresses.
func startFileWhguard(t *testing.T, backendURL string, env ...string) (*proc, string, string) {
	t.Helper()
	listen, admin := freePort(t), freePort(t)
	wh := start(t, binary, append([]string{
		"WHGUARD_DATABASE_URL=sqlite:" + filepath.Join(t.TempDir(), "journal.db"),
		"WHGUARD_LISTEN=" + listen, "WHGUARD_ADMIN_LISTEN=" + admin, "WHGUARD_ADMIN_TOKEN=tok",
		"WHGUARD_BACKEND_URL=" + backendURL,
		"WHGUARD_RETRY_BASE_DELAY=100ms", "WHGUARD_RETRY_MAX_DELAY=1s", "WHGUARD_SHUTDOWN_TIMEOUT=5s",
	}, env...))
	waitHTTP(t, "http://"+admin+"/readyz", 30*time.Second)
	return wh, listen, admin
}

// reloads is whguard_secret_reloads_total of provider for result.
func reloads(admin, provider, result string) float64 {
	return metricAt(admin, `whguard_secret_reloads_total{provider="`+provider+`",result="`+result+`"}`)
}

// rotationOverlap is the tests' ROTATION_OVERLAP: long enough for a few
// requests and deliveries on a loaded machine, short enough to wait for.
const rotationOverlap = 6 * time.Second

// TestE2ESecretFileRotatedByKubernetes: the senders' secrets rotate in a
// mounted Kubernetes Secret (the ..data link swapped), without a restart,
// and no delivery is refused: a backend verifying with stripe-go and one
// verifying with the Standard Webhooks library, each holding only the old
// secret and then only the new one, accept every delivery. Requests signed
// with the old secret pass during ROTATION_OVERLAP and are refused after
// it; nothing whguard writes holds a secret.
func TestE2ESecretFileRotatedByKubernetes(t *testing.T) {
	t.Parallel()
	be, url := newFileBackend(t, map[string]string{"pay": fileStripeOld, "std": fileStdOld})
	ks := rotationtest.NewKubeSecret(t, map[string]string{"stripe-secret": fileStripeOld + "\n", "standard-secret": fileStdOld + "\n"})
	wh, listen, admin := startFileWhguard(t, url, "WHGUARD_PROVIDERS=pay,std",
		"WHGUARD_PAY_SCHEME=stripe", "WHGUARD_PAY_SECRET_FILE="+ks.Path("stripe-secret"),
		"WHGUARD_STD_SCHEME=standard", "WHGUARD_STD_SECRET_FILE="+ks.Path("standard-secret"),
		"WHGUARD_PAY_ROTATION_OVERLAP="+rotationOverlap.String(), "WHGUARD_STD_ROTATION_OVERLAP="+rotationOverlap.String())
	s := &fileSender{t: t, listen: listen, client: &http.Client{Timeout: 10 * time.Second}}
	sent := 0
	ok := func(provider, secret, which string) string { sent++; return s.accepted(provider, secret, which) }

	be.delivered(t, "before", ok("pay", fileStripeOld, "old"), ok("std", fileStdOld, "old"))

	ks.Update(map[string]string{"stripe-secret": fileStripeNew + "\n", "standard-secret": fileStdNew + "\n"})
	waitFor(t, 15*time.Second, "both files reloaded", func() bool {
		return reloads(admin, "pay", "ok") == 1 && reloads(admin, "std", "ok") == 1
	})
	// The senders sign with the new secrets; retries signed with the old
	// ones still come. The backends hold the old secrets, then the new.
	be.delivered(t, "during, backends on the old secrets",
		ok("pay", fileStripeNew, "new"), ok("pay", fileStripeOld, "old"), ok("std", fileStdNew, "new"), ok("std", fileStdOld, "old"))
	be.hold("pay", fileStripeNew)
	be.hold("std", fileStdNew)
	be.delivered(t, "during, backends on the new secrets",
		ok("pay", fileStripeNew, "new"), ok("pay", fileStripeOld, "old"), ok("std", fileStdNew, "new"), ok("std", fileStdOld, "old"))

	// After the overlap the old secrets are refused.
	var late []string // accepted while waiting for the end of the overlap
	for _, tc := range []struct{ provider, old string }{{"pay", fileStripeOld}, {"std", fileStdOld}} {
		waitFor(t, 3*rotationOverlap, tc.provider+"'s old secret refused", func() bool {
			code, id := s.post(tc.provider, tc.old)
			if code == http.StatusAccepted {
				sent++
				late = append(late, id)
			}
			return code == http.StatusUnauthorized
		})
	}
	be.delivered(t, "after", append(late, ok("pay", fileStripeNew, "new"), ok("std", fileStdNew, "new"))...)

	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.refused) != 0 {
		t.Errorf("the backends refused %v; want none", be.refused)
	}
	if len(be.accepted) != sent {
		t.Errorf("%d events accepted by the backends, %d sent", len(be.accepted), sent)
	}
	out := wh.out.String()
	for _, secret := range []string{fileStripeOld, fileStripeNew, fileStdOld, fileStdNew} {
		if strings.Contains(out, secret) || strings.Contains(out, strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("a secret appears in whguard's output")
		}
	}
	for _, line := range []string{"secret file reloaded", "rotation overlap ended"} {
		if !strings.Contains(out, line) {
			t.Errorf("whguard's log lacks %q", line)
		}
	}
}

// renameInto writes content to path as a Vault agent does: a temporary
// file in the same directory renamed over it.
func renameInto(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestE2ESecretFileRenamedAndRefused: files replaced by an atomic rename
// (a Vault agent) are followed: a Standard Webhooks secret, and a Discord
// public key (PUBLIC_KEY_FILE), each with the old one accepted during the
// overlap and refused after it. An empty file, and one whose secret the
// scheme cannot decode, keep the secrets in use, each counted as an error.
func TestE2ESecretFileRenamedAndRefused(t *testing.T) {
	t.Parallel()
	be, url := newFileBackend(t, map[string]string{"std": fileStdOld})
	_, oldKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, newKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	publicHex := func(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }
	dir := t.TempDir()
	stdFile, keyFile := filepath.Join(dir, "standard-secret"), filepath.Join(dir, "discord-key")
	renameInto(t, stdFile, fileStdOld+"\n")
	renameInto(t, keyFile, publicHex(oldKey)+"\n")
	_, listen, admin := startFileWhguard(t, url, "WHGUARD_PROVIDERS=std,dsc",
		"WHGUARD_STD_SCHEME=standard", "WHGUARD_STD_SECRET_FILE="+stdFile, "WHGUARD_STD_ROTATION_OVERLAP="+rotationOverlap.String(),
		"WHGUARD_DSC_SCHEME=discord", "WHGUARD_DSC_PUBLIC_KEY_FILE="+keyFile, "WHGUARD_DSC_ROTATION_OVERLAP="+rotationOverlap.String())
	s := &fileSender{t: t, listen: listen, client: &http.Client{Timeout: 10 * time.Second}}
	interaction := func(k ed25519.PrivateKey) int {
		s.n++
		ts := fmt.Sprint(time.Now().Unix())
		body := fmt.Sprintf(`{"application_id":"1187340000000000000","data":{"id":"1187340000000000001","name":"blep","type":1},"id":"11873434593481850%02d","token":"dG9rZW4","type":2,"version":1}`, s.n)
		h := http.Header{"Content-Type": {"application/json"}, "X-Signature-Timestamp": {ts},
			"X-Signature-Ed25519": {hex.EncodeToString(ed25519.Sign(k, []byte(ts+body)))}}
		return s.send("dsc", h, []byte(body))
	}

	// A bad file keeps the secret in use: emptied, then a secret the
	// scheme cannot decode.
	for i, bad := range []string{"\n", "whsec_!!!not-base64\n"} {
		renameInto(t, stdFile, bad)
		waitFor(t, 15*time.Second, fmt.Sprintf("bad file %d counted", i+1), func() bool { return reloads(admin, "std", "error") == float64(i+1) })
		be.delivered(t, "after a bad file", s.accepted("std", fileStdOld, "old"))
	}
	if code, _ := s.post("std", fileStdNew); code != http.StatusUnauthorized {
		t.Fatalf("the new secret, not yet in the file: %d", code)
	}

	renameInto(t, stdFile, fileStdNew+"\n")
	renameInto(t, keyFile, publicHex(newKey)+"\n")
	waitFor(t, 15*time.Second, "both files reloaded", func() bool {
		return reloads(admin, "std", "ok") == 1 && reloads(admin, "dsc", "ok") == 1
	})
	be.delivered(t, "during the overlap, the backend on the old secret", s.accepted("std", fileStdNew, "new"), s.accepted("std", fileStdOld, "old"))
	be.hold("std", fileStdNew)
	for _, k := range []ed25519.PrivateKey{newKey, oldKey} {
		if code := interaction(k); code != http.StatusOK {
			t.Fatalf("discord during the overlap: %d", code)
		}
	}
	waitFor(t, 3*rotationOverlap, "the old secret and key refused", func() bool {
		code, _ := s.post("std", fileStdOld)
		return code == http.StatusUnauthorized && interaction(oldKey) == http.StatusUnauthorized
	})
	if code := interaction(newKey); code != http.StatusOK {
		t.Errorf("discord's new key after the overlap: %d", code)
	}
	if n := reloads(admin, "std", "error"); n != 2 {
		t.Errorf("%v errors counted, want 2", n)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.refused) != 0 {
		t.Errorf("the backend refused %v; want none", be.refused)
	}
}
