package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WHGUARD_<NAME>_BACKEND_SECRET and _BACKEND_SECRET_FILE: taken by the
// schemes that re-sign, decoded as the scheme's secrets are, refused
// elsewhere, beside RESIGN=false and when both are set, each error naming
// its variable and never the value.
func TestBackendSecretSetting(t *testing.T) {
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := file("good", "\n  \nbackend-from-file\nignored-second-line\n")
	blank := file("blank", " \n\n")
	cases := []struct {
		name    string
		env     []string
		key     string // the variable the one error names; "" for none
		hint    string
		secret  bool // the provider signs with a backend secret
		warning string
	}{
		{"slack", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET=b"}, "", "", true, ""},
		{"slack from a file", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET_FILE=" + good}, "", "", true, ""},
		{"zoom, spaces removed", []string{"WHGUARD_X_SCHEME=zoom", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET= b\n"}, "", "", true,
			"WHGUARD_X_BACKEND_SECRET: whitespace around the secret removed"},
		{"standard whsec", []string{"WHGUARD_X_SCHEME=standard", "WHGUARD_X_SECRET=" + whsec, "WHGUARD_X_BACKEND_SECRET=" + whsec}, "", "", true, ""},
		{"unset", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s"}, "", "", false, ""},
		{"standard not base64", []string{"WHGUARD_X_SCHEME=standard", "WHGUARD_X_SECRET=" + whsec, "WHGUARD_X_BACKEND_SECRET=whsec_!!!"},
			"WHGUARD_X_BACKEND_SECRET", "base64", false, ""},
		{"stripe API key from a file", []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_a", "WHGUARD_X_BACKEND_SECRET_FILE=" + file("key", "sk_live_backendkey\n")},
			"WHGUARD_X_BACKEND_SECRET_FILE", "Stripe API key", false, ""},
		{"github", []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET=b"},
			"WHGUARD_X_BACKEND_SECRET", "does not re-sign deliveries (not needed (no timestamp))", false, ""},
		{"discord from a file", []string{"WHGUARD_X_SCHEME=discord", "WHGUARD_X_PUBLIC_KEY=" + strings.Repeat("ab", 32), "WHGUARD_X_BACKEND_SECRET_FILE=" + good},
			"WHGUARD_X_BACKEND_SECRET_FILE", "cannot (public key)", false, ""},
		{"hmac without timestamp", []string{"WHGUARD_X_SCHEME=hmac", "WHGUARD_X_SECRET=s", "WHGUARD_X_SIGNATURE_HEADER=X-Sig", "WHGUARD_X_BACKEND_SECRET=b"},
			"WHGUARD_X_BACKEND_SECRET", "WHGUARD_X_TIMESTAMP_HEADER", false, ""},
		{"with RESIGN=false", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET=b", "WHGUARD_X_RESIGN=false"},
			"WHGUARD_X_BACKEND_SECRET", "RESIGN=false", false, ""},
		{"both", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET=b", "WHGUARD_X_BACKEND_SECRET_FILE=" + good},
			"WHGUARD_X_BACKEND_SECRET", "set one", false, ""},
		{"only whitespace", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET=  "},
			"WHGUARD_X_BACKEND_SECRET", "only whitespace", false, ""},
		{"blank file", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_BACKEND_SECRET_FILE=" + blank},
			"WHGUARD_X_BACKEND_SECRET_FILE", "holds no secret", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := loadConfig(append([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x"}, tc.env...))
			if tc.key != "" {
				errs := configErrors(err)
				var ce *configError
				if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != tc.key || !strings.Contains(ce.msg, tc.hint) {
					t.Fatalf("want one %s error saying %q, got: %v", tc.key, tc.hint, err)
				}
				for _, v := range []string{"whsec_!!!", "sk_live_backendkey", "backend-from-file"} {
					if strings.Contains(err.Error(), v) {
						t.Errorf("the error quotes the secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := c.providers[0]
			if got := p.provider.BackendSigned(); got != tc.secret || !p.resign {
				t.Fatalf("BackendSigned = %v (resign %v), want %v", got, p.resign, tc.secret)
			}
			if tc.warning != "" && !strings.Contains(strings.Join(warnings, "\n"), tc.warning) {
				t.Errorf("warnings %q lack %q", warnings, tc.warning)
			}
		})
	}
}
