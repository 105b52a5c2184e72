package alert_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/alert"
)

// TestBackendRefusingIsAlertedOncePerBackend: a backend answering 401 or
// 403 is reported once per backend and provider however many refusals
// follow (another provider's 2xx does not clear it), again
// every Repeat while it lasts, and once when it accepts again; the probe
// of the backends (which does not see refusals) never clears it, nor a
// failing catch-up.
func TestBackendRefusingIsAlertedOncePerBackend(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t)
	n, clk := start(t, alert.Config{URL: srv.URL, Format: alert.FormatJSON, Repeat: 15 * time.Minute})
	const app, other = "http://app:3000", "http://other:4000"
	for range 5 {
		n.Refuses(app, "stripe", 401, true)
	}
	n.Refuses(other, "slack", 403, true)
	n.Failing("gh", true, "HTTP 500")
	got := rcv.wait(t, 3)
	msgs := make([]alert.Message, 0, 8)
	decode := func(bs [][]byte) {
		msgs = msgs[:0]
		for _, b := range bs {
			var m alert.Message
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
	}
	decode(got)
	for i, want := range []struct{ backend, provider, status string }{{app, "stripe", "401"}, {other, "slack", "403"}} {
		m := msgs[i]
		if m.Type != alert.TypeBackendRefuses || m.Severity != alert.SeverityCritical || m.Backend != want.backend || m.Provider != want.provider ||
			!strings.Contains(m.Summary, "refuses whguard's requests: check its webhook secret") || !strings.Contains(m.Summary, want.status) {
			t.Errorf("message %d: %+v", i, m)
		}
	}

	// The probe sees both backends well: the refusals (and catch-up's
	// failure) are not its to clear.
	ps := &probeState{bs: alert.Backends{Backends: []alert.BackendState{{Backend: app, Breaker: "closed"}, {Backend: other, Breaker: "closed"}}}}
	n.Check(context.Background(), ps.probes())
	clk.add(15 * time.Minute)
	n.Refuses(app, "stripe", 401, true) // lasting: repeated
	n.Refuses(app, "stripe", 200, false)
	n.Refuses(app, "stripe", 200, false) // already accepting: nothing
	// Another provider of the other backend accepted (signed with another
	// secret): slack's refusal stays.
	n.Refuses(other, "github", 200, false)
	got = rcv.wait(t, 5)
	decode(got[3:])
	if m := msgs[0]; m.Type != alert.TypeBackendRefuses || !strings.HasPrefix(m.Summary, "Still: ") {
		t.Errorf("repeat after Repeat: %+v", m)
	}
	if m := msgs[1]; m.Type != alert.TypeBackendAccepts || m.Severity != alert.SeverityResolved || m.Backend != app ||
		!strings.Contains(m.Summary, "accepts whguard's requests again") {
		t.Errorf("recovery: %+v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = n.Stop(ctx)
	if c := rcv.count(); c != 5 {
		t.Errorf("%d messages, want 5 (2 starts, 1 catch-up, 1 repeat, 1 recovery): %s", c, rcv.wait(t, c))
	}
	if keys := strings.Join(n.Active(), ","); !strings.Contains(keys, "refuses "+other) || !strings.Contains(keys, "catchup:gh") {
		t.Errorf("active conditions %q: the other backend's refusal and catch-up's failure were cleared", keys)
	}
}
