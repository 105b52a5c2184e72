package alert_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/whguard/whguard/internal/alert"
)

// TestCatchupAlerts: what catch-up tells operators, as JSON messages:
// events recovered (once per pass), passes failing (a condition: once
// when it starts, once when it clears), and GitHub deliveries given up on.
func TestCatchupAlerts(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t)
	n, _ := start(t, alert.Config{URL: srv.URL, Format: alert.FormatJSON})
	n.Recovered("stripe", 3)
	n.Failing("github", true, "list the hook's deliveries: GitHub answered 401 Unauthorized")
	n.Failing("github", true, "list the hook's deliveries: GitHub answered 401 Unauthorized") // still: not repeated yet
	n.Failing("github", false, "")
	n.GaveUp("github", []string{"g1", "g2"})
	n.GaveUp("github", nil) // nothing to say
	got := rcv.wait(t, 4)
	var ms []alert.Message
	for _, b := range got {
		var m alert.Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	want := []struct{ typ, severity, provider, text string }{
		{alert.TypeCatchupRecovered, alert.SeverityInfo, "stripe", "3 events of stripe were missed and recovered"},
		{alert.TypeCatchupFailing, alert.SeverityWarning, "github", "Catch-up of github is failing: list the hook's deliveries: GitHub answered 401"},
		{alert.TypeCatchupOK, alert.SeverityResolved, "github", "Catch-up of github works again"},
		{alert.TypeCatchupGaveUp, alert.SeverityCritical, "github", "2 deliveries of github were asked for again three times and never arrived: g1, g2"},
	}
	if len(ms) != len(want) {
		t.Fatalf("%d messages, want %d: %+v", len(ms), len(want), ms)
	}
	for i, w := range want {
		m := ms[i]
		if m.Type != w.typ || m.Severity != w.severity || m.Provider != w.provider || !strings.Contains(m.Summary, w.text) {
			t.Errorf("message %d: %+v, want %s/%s for %s saying %q", i, m, w.typ, w.severity, w.provider, w.text)
		}
	}
	if rcv.count() != 4 {
		t.Errorf("%d messages sent, want 4", rcv.count())
	}
}
