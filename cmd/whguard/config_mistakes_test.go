package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEditDistance: insertions, deletions, substitutions and swapped
// neighbours count 1 each; beyond the limit, or for names longer than any
// variable, the answer is limit+1.
func TestEditDistance(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A", maxNameLen+1)
	cases := []struct {
		a, b  string
		limit int
		want  int
	}{
		{"PROVIDERS", "PROVIDERS", 2, 0},
		{"PROVIDER", "PROVIDERS", 2, 1},
		{"STRIPE_SECRTE", "STRIPE_SECRET", 3, 1}, // two letters swapped
		{"STRIPE_SCRET", "STRIPE_SECRET", 3, 1},
		{"LOG_LEVL", "LOG_LEVEL", 2, 1},
		{"KITTEN", "SITTING", 3, 3},
		{"KITTEN", "SITTING", 2, 3}, // over the limit
		{"", "AB", 2, 2},
		{"AB", "", 1, 2},
		{"A", "ABCD", 2, 3}, // the lengths alone exceed the limit
		{"CA", "ABC", 3, 3}, // a swap is not undone by a later edit (optimal string alignment)
		{long, long, 3, 4},  // too long to compare
	}
	for _, tc := range cases {
		if got := editDistance(tc.a, tc.b, tc.limit); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.limit, got, tc.want)
		}
	}
}

// TestUnknownVariableSuggestions: an unknown WHGUARD_ variable is warned
// about with the known variable it probably misspells (global ones, and
// those of the configured providers), or the provider missing from
// WHGUARD_PROVIDERS; start-up goes on.
func TestUnknownVariableSuggestions(t *testing.T) {
	t.Parallel()
	base := []string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=stripe", "WHGUARD_STRIPE_SCHEME=stripe",
		"WHGUARD_STRIPE_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	long := "WHGUARD_" + strings.Repeat("X", 300)
	cases := []struct{ key, want string }{
		{"WHGUARD_PROVIDER", "unknown variable WHGUARD_PROVIDER ignored: did you mean WHGUARD_PROVIDERS?"},
		{"WHGUARD_STRIPE_SECRTE", "unknown variable WHGUARD_STRIPE_SECRTE ignored: did you mean WHGUARD_STRIPE_SECRET?"},
		{"WHGUARD_STRIPE_SCEHME", ": did you mean WHGUARD_STRIPE_SCHEME?"},
		{"WHGUARD_STRIPE_SECRET_PREVOIUS", ": did you mean WHGUARD_STRIPE_SECRET_PREVIOUS?"},
		{"WHGUARD_stripe_secret", ": did you mean WHGUARD_STRIPE_SECRET?"},
		{"WHGUARD_LOG_LEVL", ": did you mean WHGUARD_LOG_LEVEL?"},
		{"WHGUARD_BACKEND_ULR", ": did you mean WHGUARD_BACKEND_URL?"},
		{"WHGUARD_STRPE_SECRET", ": did you mean WHGUARD_STRIPE_SECRET? (or is provider strpe missing from WHGUARD_PROVIDERS?)"},
		{"WHGUARD_GITHUB_SECRET", "unknown variable WHGUARD_GITHUB_SECRET ignored: is provider github missing from WHGUARD_PROVIDERS?"},
		{"WHGUARD_GITHUB_SECRET_PREVIOUS", ": is provider github missing from WHGUARD_PROVIDERS?"},
		{"WHGUARD_SOMETHING_ELSE_ENTIRELY", "unknown variable WHGUARD_SOMETHING_ELSE_ENTIRELY ignored (a typo, or a provider missing from WHGUARD_PROVIDERS?)"},
		{long, "unknown variable " + long + " ignored (a typo"},
	}
	for _, tc := range cases {
		t.Run(tc.key[:min(len(tc.key), 40)], func(t *testing.T) {
			c, warnings, err := loadConfig(append(append([]string{}, base...), tc.key+"=1", "NOT_OURS=1"))
			if err != nil || c == nil {
				t.Fatalf("an unknown variable stopped start-up: %v", err)
			}
			var got []string
			for _, w := range warnings {
				if strings.Contains(w, "unknown variable") {
					got = append(got, w)
				}
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], "unknown variable "+tc.key+" ") || !strings.Contains(got[0], tc.want) {
				t.Fatalf("warnings %q, want one about %s saying %q", got, tc.key, tc.want)
			}
		})
	}
}

// TestUnknownVariablesBesideStartupErrors: when start-up fails, the
// unknown variables are printed with the errors, first, since a typo is
// often what the errors are about; exit status 2.
func TestUnknownVariablesBesideStartupErrors(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd([]string{"serve"}, "WHGUARD_DATABASE_URL="+dbURL, "WHGUARD_BACKEND_URL=http://b",
		"WHGUARD_PROVIDER=stripe", "WHGUARD_STRIPE_SCHEME=stripe", "WHGUARD_STRIPE_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if code != 2 || stdout != "" {
		t.Fatalf("exit %d, stdout %q; want 2", code, stdout)
	}
	want := []string{
		"whguard: warning: unknown variable WHGUARD_PROVIDER ignored: did you mean WHGUARD_PROVIDERS?",
		"whguard: warning: unknown variable WHGUARD_STRIPE_SCHEME ignored: is provider stripe missing from WHGUARD_PROVIDERS?",
		"whguard: warning: unknown variable WHGUARD_STRIPE_SECRET ignored: is provider stripe missing from WHGUARD_PROVIDERS?",
		"whguard: invalid configuration: WHGUARD_PROVIDERS: no provider configured",
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("stderr:\n%s\nwant %d lines", stderr, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want %q", i+1, lines[i], w)
		}
	}
	if strings.Contains(stderr, "MfKQ9r8") {
		t.Errorf("stderr holds the secret:\n%s", stderr)
	}
}

// TestIsPlaceholder: what counts as a placeholder secret copied from the
// docs.
func TestIsPlaceholder(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"whsec_...": true, "whsec_…": true, "...": true, "…": true, " whsec_... \n": true, "sk_live_...": true, "user:...": true,
		"": false, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw": false, "a...b": false, "..a": false, "whsec_..": false, "It's a Secret to Everybody": false,
	} {
		if got := isPlaceholder(in); got != want {
			t.Errorf("isPlaceholder(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestPlaceholderSecretsRefused: a placeholder from the docs in any
// variable that holds a secret (or in a secret file) stops start-up with
// one error naming the variable.
func TestPlaceholderSecretsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	github := []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s"}
	cases := []struct {
		name, key string
		env       []string
	}{
		{"stripe whsec_...", "WHGUARD_X_SECRET", []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_..."}},
		{"stripe whsec_…", "WHGUARD_X_SECRET", []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_…"}},
		{"standard whsec_...", "WHGUARD_X_SECRET", []string{"WHGUARD_X_SCHEME=standard", "WHGUARD_X_SECRET=whsec_..."}},
		{"github ...", "WHGUARD_X_SECRET", []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=..."}},
		{"github …", "WHGUARD_X_SECRET", []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=…"}},
		{"previous", "WHGUARD_X_SECRET_PREVIOUS", []string{"WHGUARD_X_SCHEME=standard", "WHGUARD_X_SECRET=" + whsec, "WHGUARD_X_SECRET_PREVIOUS=whsec_…"}},
		{"a line of the secret file", "WHGUARD_X_SECRET_FILE", []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET_FILE=" + file("secrets", whsec+"\nwhsec_...\n")}},
		{"alert secret", "WHGUARD_ALERT_SECRET", append([]string{"WHGUARD_ALERT_FORMAT=json", "WHGUARD_ALERT_SECRET=whsec_..."}, github...)},
		{"admin token", "WHGUARD_ADMIN_TOKEN", append([]string{"WHGUARD_ADMIN_TOKEN=…"}, github...)},
		{"catch-up token", "WHGUARD_X_CATCHUP_TOKEN", append([]string{"WHGUARD_X_CATCHUP=on", "WHGUARD_X_CATCHUP_HOOK=repos/a/b/hooks/1", "WHGUARD_X_CATCHUP_TOKEN=ghp_..."}, github...)},
		{"catch-up token file", "WHGUARD_X_CATCHUP_TOKEN_FILE", append([]string{"WHGUARD_X_CATCHUP=on", "WHGUARD_X_CATCHUP_HOOK=repos/a/b/hooks/1", "WHGUARD_X_CATCHUP_TOKEN_FILE=" + file("token", "ghp_…\n")}, github...)},
		{"verify token", "WHGUARD_X_VERIFY_TOKEN", []string{"WHGUARD_X_SCHEME=meta", "WHGUARD_X_SECRET=s", "WHGUARD_X_VERIFY_TOKEN=..."}},
		{"backend secret", "WHGUARD_X_BACKEND_SECRET", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET=backend-secret..."}},
		{"basic auth", "WHGUARD_X_BASIC_AUTH", []string{"WHGUARD_X_SCHEME=postmark", "WHGUARD_X_BASIC_AUTH=user:..."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := loadConfig(append([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x"}, tc.env...))
			errs := configErrors(err)
			var ce *configError
			if err == nil || len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != tc.key || !strings.Contains(ce.msg, "placeholder from the docs") {
				t.Fatalf("want one %s error about a placeholder, got: %v", tc.key, err)
			}
			if strings.Contains(ce.msg, "whsec_") || strings.Contains(ce.msg, "MfKQ9r8") {
				t.Errorf("error %q quotes a secret", ce.msg)
			}
		})
	}
	// The same secrets, real, start.
	if _, _, err := loadConfig([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=standard",
		"WHGUARD_X_SECRET=" + whsec, "WHGUARD_X_SECRET_FILE=" + file("real", whsec+"\n"), "WHGUARD_ADMIN_TOKEN=a...b"}); err != nil {
		t.Fatalf("real secrets refused: %v", err)
	}
}
