package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/proxy/admin"
)

// TestBackendsCommand: `whguard backends pause`, `list` and `resume`
// through the admin API to a real forwarder and journal.
func TestBackendsCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := testdb.OpenStore(t, "sqlite", true)
	gov, err := governor.NewLocal(governor.Config{
		Backend:     governor.Limit{Rate: governor.Rate{N: 20, Per: time.Second}},
		MaxInFlight: 4, SlotTTL: time.Minute,
		Breaker: governor.BreakerConfig{Enabled: true, Window: time.Minute, MinAttempts: 20, FailureRatio: 0.5, Cooldown: time.Second},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := forwarder.New(forwarder.Config{Store: j, Governor: gov,
		Targets: map[string]forwarder.Target{"stripe": {BackendURL: "http://app:3000"}, "github": {BackendURL: "http://app:3000/gh"}}})
	if err != nil {
		t.Fatal(err)
	}
	admin := adminCLI(t, admin.APIConfig{Store: j, Backends: backendControl{fwd}, Origins: []string{"http://app:3000"}, Providers: []string{"stripe", "github"}})
	cli := func(args ...string) (int, string) {
		code, out, errOut := admin(append([]string{"backends"}, args...)...)
		return code, out + errOut
	}
	// host:port alone names the configured origin that has them.
	if code, out := cli("pause", "-backend", "app:3000", "-reason", "deploy"); code != 0 || !strings.Contains(out, "backend http://app:3000: paused") {
		t.Fatalf("pause: %d %s", code, out)
	}
	if code, out := cli("pause", "-provider", "stripe", "-reason", "noisy"); code != 0 {
		t.Fatalf("pause provider: %d %s", code, out)
	}
	code, out := cli("list")
	if code != 0 {
		t.Fatalf("list: %d %s", code, out)
	}
	for _, want := range []string{"http://app:3000", "github,stripe", "20/s burst 20", "0/4", "closed", "(deploy)", "provider stripe paused"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	ps, err := j.Pauses(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("stored pauses: %+v %v", ps, err)
	}
	if code, out := cli("resume", "-backend", "http://app:3000", "-reason", "done"); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("resume: %d %s", code, out)
	}
	if code, out := cli("pause", "-reason", "x"); code != 2 || !strings.Contains(out, "exactly one of -backend or -provider") {
		t.Fatalf("pause without a target: %d %s", code, out)
	}
	if code, out := cli("resume", "-provider", "stripe"); code != 2 || !strings.Contains(out, "-reason is required") {
		t.Fatalf("resume without a reason: %d %s", code, out)
	}
	// A pause that names nothing configured exits 1, saying what is.
	for _, tc := range []struct{ target, names []string }{
		{[]string{"-backend", "app:3001"}, []string{"configured: http://app:3000"}},
		{[]string{"-backend", "http://app:3001"}, []string{"configured: http://app:3000", "-force"}},
		{[]string{"-provider", "shopify"}, []string{"configured: stripe, github"}},
	} {
		code, out := cli(append(append([]string{"pause"}, tc.target...), "-reason", "typo")...)
		for _, want := range append(tc.names, "404") {
			if code != 1 || !strings.Contains(out, want) {
				t.Errorf("pause %v: %d %s; want exit 1 saying %q", tc.target, code, out, want)
			}
		}
	}
	if code, out := cli("pause", "-backend", "http://app:3001", "-reason", "coming", "-force"); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("forced pause: %d %s", code, out)
	}
	if ps, err := j.Pauses(ctx); err != nil || len(ps) != 2 { // stripe's, and the forced one
		t.Fatalf("stored pauses after the refused ones: %+v %v", ps, err)
	}
}
