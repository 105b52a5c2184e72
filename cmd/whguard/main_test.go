package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/testport"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/journal"
)

var (
	dbURL  string
	binary string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "whguard-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "whguard")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build whguard: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testdb.Main(m, "cmd", &dbURL)
	pgbouncerStop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func baseEnv() []string {
	return []string{
		"WHGUARD_DATABASE_URL=" + dbURL,
		"WHGUARD_PROVIDERS=github",
		"WHGUARD_GITHUB_SCHEME=github",
		"WHGUARD_GITHUB_SECRET=It's a Secret to Everybody",
		"WHGUARD_BACKEND_URL=http://127.0.0.1:1",
	}
}

func runCmd(args []string, env ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, env, &out, &errb)
	return code, out.String(), errb.String()
}

func TestInvalidConfigExits2NamingTheVariable(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(secretFile, []byte("\n"), 0o600)
	cases := []struct {
		name  string
		env   []string
		names string
	}{
		{"no providers", []string{"WHGUARD_DATABASE_URL=" + dbURL}, "WHGUARD_PROVIDERS"},
		{"bad duration", append(baseEnv(), "WHGUARD_GITHUB_TOLERANCE=5 minutes"), "WHGUARD_GITHUB_TOLERANCE"},
		{"bad number", append(baseEnv(), "WHGUARD_MAX_BODY_BYTES=lots"), "WHGUARD_MAX_BODY_BYTES"},
		{"negative size", append(baseEnv(), "WHGUARD_GITHUB_MAX_BODY_BYTES=-1"), "WHGUARD_GITHUB_MAX_BODY_BYTES"},
		{"unknown scheme", append(baseEnv(), "WHGUARD_GITHUB_SCHEME=gitbub"), "WHGUARD_GITHUB_SCHEME"},
		{"missing scheme", []string{"WHGUARD_DATABASE_URL=" + dbURL, "WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=acme", "WHGUARD_ACME_SECRET=x"}, "WHGUARD_ACME_SCHEME"},
		{"missing secret", []string{"WHGUARD_DATABASE_URL=" + dbURL, "WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=acme", "WHGUARD_ACME_SCHEME=stripe"}, "WHGUARD_ACME_SECRET"},
		{"bad standard secret", []string{"WHGUARD_DATABASE_URL=" + dbURL, "WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=acme", "WHGUARD_ACME_SCHEME=standard", "WHGUARD_ACME_SECRET=whsec_!!!notbase64"}, "WHGUARD_ACME_SECRET"},
		{"empty secret file", []string{"WHGUARD_DATABASE_URL=" + dbURL, "WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=acme", "WHGUARD_ACME_SCHEME=stripe", "WHGUARD_ACME_SECRET_FILE=" + secretFile}, "WHGUARD_ACME_SECRET_FILE"},
		{"missing secret file", []string{"WHGUARD_DATABASE_URL=" + dbURL, "WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=acme", "WHGUARD_ACME_SCHEME=stripe", "WHGUARD_ACME_SECRET_FILE=/nonexistent/x"}, "WHGUARD_ACME_SECRET_FILE"},
		{"bad path", append(baseEnv(), "WHGUARD_GITHUB_PATH=hooks"), "WHGUARD_GITHUB_PATH"},
		{"bad log format", append(baseEnv(), "WHGUARD_LOG_FORMAT=xml"), "WHGUARD_LOG_FORMAT"},
		{"bad log level", append(baseEnv(), "WHGUARD_LOG_LEVEL=loud"), "WHGUARD_LOG_LEVEL"},
		{"bad backend", append(baseEnv(), "WHGUARD_BACKEND_URL=localhost:3000"), "WHGUARD_BACKEND_URL"},
		{"no backend", []string{"WHGUARD_DATABASE_URL=" + dbURL, "WHGUARD_PROVIDERS=acme", "WHGUARD_ACME_SCHEME=none"}, "WHGUARD_BACKEND_URL"},
		{"bad provider backend", append(baseEnv(), "WHGUARD_GITHUB_BACKEND_URL=ftp://x"), "WHGUARD_GITHUB_BACKEND_URL"},
		{"bad forward path", append(baseEnv(), "WHGUARD_GITHUB_FORWARD_PATH=x"), "WHGUARD_GITHUB_FORWARD_PATH"},
		{"bad forward timeout", append(baseEnv(), "WHGUARD_FORWARD_TIMEOUT=0s"), "WHGUARD_FORWARD_TIMEOUT"},
		{"bad max attempts", append(baseEnv(), "WHGUARD_RETRY_MAX_ATTEMPTS=0"), "WHGUARD_RETRY_MAX_ATTEMPTS"},
		{"max delay below base", append(baseEnv(), "WHGUARD_RETRY_BASE_DELAY=1m", "WHGUARD_RETRY_MAX_DELAY=1s"), "WHGUARD_RETRY_MAX_DELAY"},
		{"bad provider name", []string{"WHGUARD_DATABASE_URL=" + dbURL, "WHGUARD_PROVIDERS=a-b"}, "WHGUARD_PROVIDERS"},
		{"shared path", append(baseEnv(), "WHGUARD_PROVIDERS=github,gh2", "WHGUARD_GH2_SCHEME=github", "WHGUARD_GH2_SECRET=x", "WHGUARD_GH2_PATH=/webhooks/github"), "WHGUARD_GH2_PATH"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd([]string{"serve"}, tc.env...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
			}
			if !strings.Contains(stderr, tc.names) {
				t.Fatalf("stderr does not name %s: %s", tc.names, stderr)
			}
			if strings.Contains(stderr, "Secret to Everybody") {
				t.Fatalf("stderr leaks the secret: %s", stderr)
			}
		})
	}
	if code, _, _ := runCmd([]string{"frobnicate"}, baseEnv()...); code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
}

func TestUnknownVariablesWarned(t *testing.T) {
	t.Parallel()
	cfg, warnings, err := loadConfig(append(baseEnv(), "WHGUARD_GITHUB_SECRT=typo", "WHGUARD_LISTN=:1", "OTHER_THING=1"))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(warnings, "\n")
	for _, want := range []string{"WHGUARD_GITHUB_SECRT", "WHGUARD_LISTN"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no warning for %s: %q", want, joined)
		}
	}
	if strings.Contains(joined, "OTHER_THING") || strings.Contains(joined, "WHGUARD_GITHUB_SECRET ") {
		t.Errorf("warned about a known or foreign variable: %q", joined)
	}
	if cfg.providers[0].env.Path != "/webhooks/github" || cfg.ingress.Routes[0].MaxBodyBytes != 1<<20 {
		t.Errorf("defaults not applied: %+v", cfg.providers[0].env)
	}
}

// Secrets come current first; whitespace around each is removed
// (TestSecretChecks covers the warnings).
func TestSecretsTrimmedAndRotation(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "secrets")
	os.WriteFile(file, []byte("from file one\r\nfrom file two\n\n"), 0o600)
	cfg, _, err := loadConfig([]string{
		"WHGUARD_DATABASE_URL=" + dbURL, "WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=acme", "WHGUARD_ACME_SCHEME=github",
		"WHGUARD_ACME_SECRET= spaced secret ", "WHGUARD_ACME_SECRET_FILE=" + file, "WHGUARD_ACME_SECRET_PREVIOUS=old",
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.providers[0].secrets()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"spaced secret", "from file one", "from file two", "old"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("secrets %q, want %q", got, want)
	}
}

// whguard migrate applies the migrations once and logs the version the
// journal is at: its own store's, on either store.
func TestMigrateCommandTwice(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"postgres", "sqlite"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			// A database of its own (of exec.Cmd's duplicate variables, the last is used).
			env := append(baseEnv(), "WHGUARD_DATABASE_URL="+journalURL(t, store))
			for i := range 2 {
				cmd := exec.Command(binary, "migrate")
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("migrate run %d: %v\n%s", i, err, out)
				}
				var line struct {
					Msg     string `json:"msg"`
					Applied []int  `json:"applied"`
					Version int    `json:"version"`
				}
				for _, l := range bytes.Split(out, []byte("\n")) {
					if json.Unmarshal(l, &line) == nil && line.Msg == "journal migrated" {
						break
					}
				}
				if line.Msg != "journal migrated" || line.Version != journal.LatestVersion() {
					t.Fatalf("run %d: version %d, want %d:\n%s", i, line.Version, journal.LatestVersion(), out)
				}
				if i == 1 && len(line.Applied) != 0 {
					t.Fatalf("second run applied %v", line.Applied)
				}
			}
		})
	}
}

// freePort is a loopback address for a server a test starts (see testport:
// outside the range the kernel takes outgoing connections' ports from).
func freePort(t *testing.T) string {
	t.Helper()
	return testport.Free(t)
}

// The real binary: starts, reports ready, accepts a signed webhook once,
// answers the duplicate, refuses a forgery, and exits 0 on SIGTERM.
func TestServeBinaryEndToEnd(t *testing.T) {
	t.Parallel()
	listen, admin := freePort(t), freePort(t)
	cmd := exec.Command(binary) // no subcommand: serve is the default
	// A database of its own (of exec.Cmd's duplicate variables, the last is used).
	cmd.Env = append(baseEnv(), "WHGUARD_DATABASE_URL="+journalURL(t, "postgres"), "WHGUARD_LISTEN="+listen, "WHGUARD_ADMIN_LISTEN="+admin, "WHGUARD_ADMIN_TOKEN=tok", "WHGUARD_TYPO=1")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	if !testwait.Until(20*time.Second, 50*time.Millisecond, func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("not ready in time; logs:\n%s", logs.String())
	}

	body := `{"action":"opened","number":7}`
	sign := func(b string) string {
		mac := hmac.New(sha256.New, []byte("It's a Secret to Everybody"))
		mac.Write([]byte(b))
		return "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}
	post := func(sig, b string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/webhooks/github", strings.NewReader(b))
		req.Header.Set("X-Hub-Signature-256", sig)
		req.Header.Set("X-GitHub-Delivery", "d-123")
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rb, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(rb)
	}
	s1, b1 := post(sign(body), body)
	s2, b2 := post(sign(body), body)
	s3, _ := post(sign(body+" "), body)
	if s1 != 202 || s2 != 200 || b1 != b2 || s3 != 401 {
		t.Fatalf("statuses %d %d %d bodies %q %q", s1, s2, s3, b1, b2)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
	out := logs.String()
	if !strings.Contains(out, "WHGUARD_TYPO") {
		t.Errorf("no warning about WHGUARD_TYPO in logs")
	}
	for _, leak := range []string{"Secret to Everybody", sign(body), `"number":7`} {
		if strings.Contains(out, leak) {
			t.Errorf("logs contain %q", leak)
		}
	}
	_ = context.Background
}
