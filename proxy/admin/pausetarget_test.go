package admin

import (
	"testing"

	"github.com/whguard/whguard/journal"
)

// TestResolvePauseTarget: how what a pause or resume names is matched
// against the configuration, and what is stored when nothing matches.
func TestResolvePauseTarget(t *testing.T) {
	t.Parallel()
	origins := []string{"http://127.0.0.1:15001", "http://App.internal:3000", "https://api:443", "http://api:443"}
	providers := []string{"stripe", "github"}
	cases := []struct {
		kind, in   string
		want       pauseTarget
		configured []string
	}{
		{journal.PauseBackend, "http://127.0.0.1:15001", pauseTarget{name: "http://127.0.0.1:15001", configured: true}, origins},
		{journal.PauseBackend, "http://127.0.0.1:15001/", pauseTarget{name: "http://127.0.0.1:15001", configured: true}, origins},
		{journal.PauseBackend, "HTTP://127.0.0.1:15001/webhooks", pauseTarget{name: "http://127.0.0.1:15001", configured: true}, origins},
		{journal.PauseBackend, " http://app.internal:3000 ", pauseTarget{name: "http://App.internal:3000", configured: true}, origins},
		// Without a scheme: the one origin with that host:port.
		{journal.PauseBackend, "127.0.0.1:15001", pauseTarget{name: "http://127.0.0.1:15001", configured: true}, origins},
		{journal.PauseBackend, "app.internal:3000", pauseTarget{name: "http://App.internal:3000", configured: true}, origins},
		// Two origins have api:443: the scheme must say which.
		{journal.PauseBackend, "api:443", pauseTarget{name: "api:443", noScheme: true}, origins},
		{journal.PauseBackend, "https://api", pauseTarget{name: "https://api:443", configured: true}, origins},
		// A wrong port, a host alone, another scheme: nothing.
		{journal.PauseBackend, "127.0.0.1:15002", pauseTarget{name: "127.0.0.1:15002", noScheme: true}, origins},
		{journal.PauseBackend, "127.0.0.1", pauseTarget{name: "127.0.0.1", noScheme: true}, origins},
		{journal.PauseBackend, "https://127.0.0.1:15001", pauseTarget{name: "https://127.0.0.1:15001"}, origins},
		{journal.PauseBackend, "http://127.0.0.1:15002/", pauseTarget{name: "http://127.0.0.1:15002"}, origins},
		{journal.PauseBackend, "http://new-app", pauseTarget{name: "http://new-app:80"}, origins},
		{journal.PauseBackend, "http://127.0.0.1:15001", pauseTarget{name: "http://127.0.0.1:15001"}, nil},
		{journal.PauseProvider, "stripe", pauseTarget{name: "stripe", configured: true}, providers},
		{journal.PauseProvider, "GitHub", pauseTarget{name: "github", configured: true}, providers},
		{journal.PauseProvider, "Shopify", pauseTarget{name: "shopify"}, providers},
		{journal.PauseProvider, "http://127.0.0.1:15001", pauseTarget{name: "http://127.0.0.1:15001"}, providers},
	}
	for _, tc := range cases {
		if got := resolvePauseTarget(tc.kind, tc.in, tc.configured); got != tc.want {
			t.Errorf("%s %q among %q: %+v, want %+v", tc.kind, tc.in, tc.configured, got, tc.want)
		}
	}
}
