package main

import (
	"errors"
	"strings"
	"testing"
)

// FuzzLoadConfig feeds arbitrary values to the configuration: loading never
// panics, and every error names the WHGUARD_ variable it is about.
func FuzzLoadConfig(f *testing.F) {
	f.Add("x", "standard", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "/hooks", "1048576", "10s", "http://127.0.0.1:3000")
	f.Add("a,b", "hmac", " \n", "hooks?x", "9223372036854775807", "-1s", "ftp://x")
	f.Add("x,x_forward", "stripe", "sk_live_1", "%2F", "0", "1h", "http://u:p@h/?q=1")
	f.Fuzz(func(t *testing.T, providers, scheme, secret, path, maxBody, timeout, backend string) {
		environ := []string{
			"WHGUARD_PROVIDERS=" + providers,
			"WHGUARD_MAX_BODY_BYTES=" + maxBody,
			"WHGUARD_FORWARD_TIMEOUT=" + timeout,
			"WHGUARD_BACKEND_URL=" + backend,
		}
		for _, name := range strings.Split(providers, ",") {
			prefix := "WHGUARD_" + strings.ToUpper(strings.TrimSpace(name)) + "_"
			environ = append(environ, prefix+"SCHEME="+scheme, prefix+"SECRET="+secret, prefix+"PATH="+path)
		}
		_, _, err := loadConfig(environ)
		if err == nil {
			return
		}
		for _, e := range configErrors(err) {
			var ce *configError
			if !errors.As(e, &ce) || !strings.HasPrefix(ce.key, "WHGUARD_") {
				t.Fatalf("an error without its variable: %v", e)
			}
			if secret != "" && len(secret) > 3 && strings.Contains(ce.msg, secret) {
				t.Fatalf("an error shows the secret: %v", e)
			}
		}
	})
}
