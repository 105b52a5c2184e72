package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCatchupSettings: catch-up's variables are read into the provider's
// catch-up, and each mistake is one error naming its variable, never the
// credential's value.
func TestCatchupSettings(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("  rk_test_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stripe := []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_x", "WHGUARD_X_CATCHUP=on"}
	github := []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s", "WHGUARD_X_CATCHUP=on", "WHGUARD_X_CATCHUP_TOKEN=ghp_abc"}
	cases := []struct {
		name string
		env  []string
		key  string // the one variable named, "" when valid
		msg  string
	}{
		{"stripe by variable", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=rk_test_secretvalue"), "", ""},
		{"stripe by file", append(stripe, "WHGUARD_X_CATCHUP_TOKEN_FILE="+file), "", ""},
		{"github", append(github, "WHGUARD_X_CATCHUP_HOOK=orgs/acme/hooks/9"), "", ""},
		{"another scheme", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_CATCHUP=on"}, "WHGUARD_X_CATCHUP", "Stripe and GitHub APIs only"},
		{"not on or off", append(stripe[:2:2], "WHGUARD_X_CATCHUP=yes"), "WHGUARD_X_CATCHUP", "expected off (the default) or on"},
		{"no credential", stripe, "WHGUARD_X_CATCHUP_TOKEN", "not set"},
		{"both", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=rk_test_a", "WHGUARD_X_CATCHUP_TOKEN_FILE="+file), "WHGUARD_X_CATCHUP_TOKEN", "set one"},
		{"unreadable file", append(stripe, "WHGUARD_X_CATCHUP_TOKEN_FILE=/nonexistent/key"), "WHGUARD_X_CATCHUP_TOKEN_FILE", "cannot read the file"},
		{"empty file", append(stripe, "WHGUARD_X_CATCHUP_TOKEN_FILE="+empty), "WHGUARD_X_CATCHUP_TOKEN_FILE", "holds no credential"},
		{"publishable key", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=pk_test_secretvalue"), "WHGUARD_X_CATCHUP_TOKEN", "publishable key"},
		{"signing secret", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=whsec_secretvalue"), "WHGUARD_X_CATCHUP_TOKEN", "signing secret"},
		{"http to another host", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=rk_test_a", "WHGUARD_X_CATCHUP_API_URL=http://stripe.internal"),
			"WHGUARD_X_CATCHUP_API_URL", "loopback"},
		{"github without hook", github, "WHGUARD_X_CATCHUP_HOOK", "is required"},
		{"github bad hook", append(github, "WHGUARD_X_CATCHUP_HOOK=acme/app/42"), "WHGUARD_X_CATCHUP_HOOK", "repos/OWNER/REPO/hooks/ID"},
		{"github window too long", append(github, "WHGUARD_X_CATCHUP_HOOK=repos/a/b/hooks/1", "WHGUARD_X_CATCHUP_WINDOW=96h"),
			"WHGUARD_X_CATCHUP_WINDOW", "at most 72h0m0s"},
		{"endpoint on github", append(github, "WHGUARD_X_CATCHUP_HOOK=repos/a/b/hooks/1", "WHGUARD_X_CATCHUP_ENDPOINT=we_1"),
			"WHGUARD_X_CATCHUP_ENDPOINT", "stripe only"},
		{"stripe bad endpoint", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=rk_test_a", "WHGUARD_X_CATCHUP_ENDPOINT=1234"),
			"WHGUARD_X_CATCHUP_ENDPOINT", "we_"},
		{"interval", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=rk_test_a", "WHGUARD_X_CATCHUP_INTERVAL=-1m"), "WHGUARD_X_CATCHUP_INTERVAL", "positive"},
		{"stripe with an id header", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=rk_test_a", "WHGUARD_X_ID_HEADER=X-Request-Id"), "WHGUARD_X_ID_HEADER", "unset one"},
		{"github with another id header", append(github, "WHGUARD_X_CATCHUP_HOOK=repos/a/b/hooks/1", "WHGUARD_X_ID_HEADER=X-Hub-Id"), "WHGUARD_X_ID_HEADER", "unset one"},
		{"github with its delivery id", append(github, "WHGUARD_X_CATCHUP_HOOK=orgs/acme/hooks/9", "WHGUARD_X_ID_HEADER=x-github-delivery"), "", ""},
		{"keys kept less than the window", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=rk_test_a", "WHGUARD_DEDUP_RETENTION=24h", "WHGUARD_PAYLOAD_RETENTION=24h"), "WHGUARD_DEDUP_RETENTION", "shorter than WHGUARD_X_CATCHUP_WINDOW"},
		{"keys kept as long as the window", append(stripe, "WHGUARD_X_CATCHUP_TOKEN=rk_test_secretvalue", "WHGUARD_DEDUP_RETENTION=72h", "WHGUARD_PAYLOAD_RETENTION=72h"), "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := loadConfig(append([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x"}, tc.env...))
			if strings.Contains(errText(err)+strings.Join(warnings, "\n"), "secretvalue") {
				t.Fatalf("a credential's value is quoted: %v %v", err, warnings)
			}
			if tc.key != "" {
				errs := configErrors(err)
				var ce *configError
				if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != tc.key || !strings.Contains(ce.msg, tc.msg) {
					t.Fatalf("want one %s error saying %q, got: %v", tc.key, tc.msg, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cu := c.providers[0].catchup
			if cu == nil || cu.Interval != 5*time.Minute || cu.Window != 72*time.Hour || cu.APIURL == "" {
				t.Fatalf("catch-up: %+v, want on with the defaults", cu)
			}
			tok, err := cu.Token()
			if err != nil || (tok != "rk_test_secretvalue" && tok != "rk_test_fromfile" && tok != "ghp_abc") {
				t.Fatalf("token %q (%v)", tok, err)
			}
		})
	}
}

// TestCatchupWarnings: a secret key works, with a warning naming the
// variable; catch-up settings without CATCHUP=on are said to do nothing.
func TestCatchupWarnings(t *testing.T) {
	t.Parallel()
	_, warnings, err := loadConfig([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=stripe",
		"WHGUARD_X_SECRET=whsec_x", "WHGUARD_X_CATCHUP=on", "WHGUARD_X_CATCHUP_TOKEN=sk_test_secretvalue"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(warnings, "\n")
	if !strings.Contains(all, "WHGUARD_X_CATCHUP_TOKEN: a secret key (sk_…)") || strings.Contains(all, "secretvalue") {
		t.Fatalf("warnings: %q", all)
	}
	_, warnings, err = loadConfig([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=stripe",
		"WHGUARD_X_SECRET=whsec_x", "WHGUARD_X_CATCHUP_TOKEN=rk_test_a"})
	if err != nil || !strings.Contains(strings.Join(warnings, "\n"), "WHGUARD_X_CATCHUP_TOKEN has no effect unless WHGUARD_X_CATCHUP=on") {
		t.Fatalf("warnings %q (%v)", warnings, err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
