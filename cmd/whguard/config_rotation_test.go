package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/whguard/whguard/internal/rotation"
	"github.com/whguard/whguard/verify"
)

// The files a provider's credentials come from are mapped onto its keys:
// a rotated SECRET_FILE keeps SECRET before it and SECRET_PREVIOUS after
// it, with the file's previous secret between them until the overlap
// ends; a rotated PUBLIC_KEY_FILE keeps the previous key accepted; a
// rotated BACKEND_SECRET_FILE signs deliveries with the new backend
// secret.
func TestWatchedFilesRekeyTheProviders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	put := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	oldKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	newKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))
	publicHex := func(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }
	cfg, warnings, err := loadConfig([]string{
		"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=pay,dsc,slk",
		"WHGUARD_PAY_SCHEME=stripe", "WHGUARD_PAY_SECRET=whsec_head", "WHGUARD_PAY_SECRET_FILE=" + put("pay", "whsec_old\n"),
		"WHGUARD_PAY_SECRET_PREVIOUS=whsec_tail", "WHGUARD_PAY_ROTATION_OVERLAP=10m",
		"WHGUARD_DSC_SCHEME=discord", "WHGUARD_DSC_PUBLIC_KEY_FILE=" + put("dsc", publicHex(oldKey)+"\n"),
		"WHGUARD_DSC_ROTATION_OVERLAP=10m",
		"WHGUARD_SLK_SCHEME=slack", "WHGUARD_SLK_SECRET=sender", "WHGUARD_SLK_BACKEND_SECRET_FILE=" + put("slk", "backend-1\n"),
	})
	if err != nil {
		t.Fatal(err, warnings)
	}
	if d := cfg.provider("slk").overlap; d != defaultRotationOverlap {
		t.Errorf("default overlap %s", d)
	}
	now := time.Now()
	w, err := rotation.New(rotation.Config{Providers: cfg.watchedFiles(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	w.Poll() // the files as start-up read them: nothing changes

	pay, dsc, slk := cfg.provider("pay").provider, cfg.provider("dsc").provider, cfg.provider("slk").provider
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid","data":{"object":{}}}`)
	resigned := func() string {
		h := http.Header{}
		pay.Resign(h, body, now)
		return h.Get("Stripe-Signature")
	}
	verifiesWith := func(header string, secrets ...string) string {
		var out []string
		for _, s := range secrets {
			if _, err := webhook.ConstructEventWithOptions(body, header, s, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true}); err == nil {
				out = append(out, s)
			}
		}
		return strings.Join(out, ",")
	}
	all := []string{"whsec_head", "whsec_old", "whsec_new", "whsec_tail"}
	first := func(header string) string { // the secret of the first v1
		ts, rest, _ := strings.Cut(strings.TrimPrefix(header, "t="), ",v1=")
		sig, _, _ := strings.Cut(rest, ",")
		for _, s := range all {
			if sig == hexMAC(sha256.New, s, ts, ".", string(body)) {
				return s
			}
		}
		return ""
	}
	if got := verifiesWith(resigned(), all...); got != "whsec_head,whsec_old,whsec_tail" {
		t.Fatalf("before: signed with %s", got)
	}
	interaction := `{"id":"1","type":2,"data":{"name":"x"},"application_id":"a","token":"t","version":1}`
	checkDiscord := func(k ed25519.PrivateKey) error {
		ts := fmt.Sprint(now.Unix())
		h := http.Header{"X-Signature-Ed25519": {hex.EncodeToString(ed25519.Sign(k, []byte(ts+interaction)))}, "X-Signature-Timestamp": {ts}}
		_, err := dsc.Check(verify.Input{Header: h, Body: []byte(interaction)}, now)
		return err
	}

	put("pay", "whsec_new\n")
	put("dsc", publicHex(newKey)+"\n")
	put("slk", "backend-2\n")
	now = now.Add(time.Minute)
	w.Poll()
	if got := verifiesWith(resigned(), all...); got != "whsec_head,whsec_old,whsec_new,whsec_tail" {
		t.Errorf("during the overlap: signed with %s", got)
	}
	if f := first(resigned()); f != "whsec_head" {
		t.Errorf("the first signature is %s's, want SECRET's", f)
	}
	for _, k := range []ed25519.PrivateKey{oldKey, newKey} {
		if err := checkDiscord(k); err != nil {
			t.Errorf("discord during the overlap: %v", err)
		}
	}
	h := http.Header{}
	slk.Resign(h, body, now)
	ts := h.Get("X-Slack-Request-Timestamp")
	if want := "v0=" + hexMAC(sha256.New, "backend-2", "v0:", ts, ":", string(body)); h.Get("X-Slack-Signature") != want {
		t.Errorf("slack re-signed with %s, want the new backend secret's", h.Get("X-Slack-Signature"))
	}

	now = now.Add(10 * time.Minute)
	w.Poll()
	if got := verifiesWith(resigned(), all...); got != "whsec_head,whsec_new,whsec_tail" {
		t.Errorf("after the overlap: signed with %s", got)
	}
	if err := checkDiscord(oldKey); !errors.Is(err, verify.ErrUnauthorized) {
		t.Errorf("discord's previous key after the overlap: %v", err)
	}
	if err := checkDiscord(newKey); err != nil {
		t.Errorf("discord's new key: %v", err)
	}
}

// PUBLIC_KEY_FILE and ROTATION_OVERLAP: start-up errors name the variable
// and never the value; an overlap without a watched file is warned about.
func TestPublicKeyFileAndOverlapSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := strings.Repeat("ab", 32)
	base := []string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=discord"}
	cases := []struct {
		name     string
		env      []string
		key      string // the one error's variable; "" for none
		hint     string
		warning  string
		keysRead int
	}{
		{"two keys, current first", []string{"WHGUARD_X_PUBLIC_KEY_FILE=" + file("two", "\n "+good+" \n"+strings.Repeat("cd", 32)+"\n")}, "", "", "", 2},
		{"both set", []string{"WHGUARD_X_PUBLIC_KEY=" + good, "WHGUARD_X_PUBLIC_KEY_FILE=" + file("one", good)}, "WHGUARD_X_PUBLIC_KEY", "set one", "", 0},
		{"empty file", []string{"WHGUARD_X_PUBLIC_KEY_FILE=" + file("empty", "\n\n")}, "WHGUARD_X_PUBLIC_KEY_FILE", "holds no public key", "", 0},
		{"not a key", []string{"WHGUARD_X_PUBLIC_KEY_FILE=" + file("bad", "zz-secret-looking\n")}, "WHGUARD_X_PUBLIC_KEY_FILE", "64 hex digits", "", 0},
		{"a bad second key", []string{"WHGUARD_X_PUBLIC_KEY_FILE=" + file("bad2", good+"\nzz\n")}, "WHGUARD_X_PUBLIC_KEY_FILE", "key 2 of 2", "", 0},
		{"placeholder", []string{"WHGUARD_X_PUBLIC_KEY_FILE=" + file("ph", "abcd...\n")}, "WHGUARD_X_PUBLIC_KEY_FILE", "placeholder", "", 0},
		{"overlap without a file", []string{"WHGUARD_X_PUBLIC_KEY=" + good, "WHGUARD_X_ROTATION_OVERLAP=5m"}, "", "", "ROTATION_OVERLAP has no effect", 1},
		{"overlap 0", []string{"WHGUARD_X_PUBLIC_KEY_FILE=" + file("z", good), "WHGUARD_X_ROTATION_OVERLAP=0s"}, "", "", "", 1},
		{"overlap not a duration", []string{"WHGUARD_X_PUBLIC_KEY=" + good, "WHGUARD_X_ROTATION_OVERLAP=1 hour"}, "WHGUARD_X_ROTATION_OVERLAP", "Go duration", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := loadConfig(append(append([]string{}, base...), tc.env...))
			if tc.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := len(c.providers[0].keys.PublicKeys); got != tc.keysRead {
					t.Errorf("%d keys read, want %d", got, tc.keysRead)
				}
				if tc.warning != "" && !strings.Contains(strings.Join(warnings, "\n"), tc.warning) {
					t.Errorf("warnings %q lack %q", warnings, tc.warning)
				}
				return
			}
			var ce *configError
			if errs := configErrors(err); len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != tc.key || !strings.Contains(ce.msg, tc.hint) {
				t.Fatalf("want one error naming %s with %q, got %v", tc.key, tc.hint, err)
			}
			if strings.Contains(err.Error(), "zz-secret-looking") {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}
