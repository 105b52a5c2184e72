package main

import (
	"strings"
	"testing"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/proxy/admin"
)

// TestEventsRetryUsage: `whguard events retry` takes one event id or -all,
// and says so (exit 2) otherwise; a missing event is a failure (exit 1).
func TestEventsRetryUsage(t *testing.T) {
	t.Parallel()
	cli := adminCLI(t, admin.APIConfig{Store: testdb.OpenStore(t, "sqlite", true)})
	for _, args := range [][]string{{"events", "retry"}, {"events", "retry", "42", "-all"}, {"events", "retry", "-bogus"}} {
		if code, _, errOut := cli(args...); code != 2 || !strings.Contains(errOut, "usage:") {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
	}
	if code, _, errOut := cli("events", "retry", "evt_missing"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("retry of a missing event: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := cli("events", "retry", "-all", "-dry-run", "-type", "invoice.*"); code != 0 || !strings.Contains(out, "would make 0 events") {
		t.Fatalf("dry run over an empty journal: exit %d\n%s%s", code, out, errOut)
	}
}
