package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestE2EPauseNamesSomethingReal: with the real binaries, `whguard backends
// pause` of an origin that matches no configured backend exits 1 naming
// the configured one and holds nothing; the configured backend named as
// host:port alone (no scheme) is paused under its origin, so the running
// forwarder holds its deliveries, and the same name resumes them.
func TestE2EPauseNamesSomethingReal(t *testing.T) {
	t.Parallel()
	s := newStack(t, "sqlite")
	s.startOrders()
	s.startWhguard(true)
	origin := "http://" + s.backend
	host, _, _ := strings.Cut(s.backend, ":")
	cli := func(args ...string) (int, string, string) {
		return runBinary(t, []string{"WHGUARD_ADMIN_URL=http://" + s.admin, "WHGUARD_ADMIN_TOKEN=e2e-token"},
			append([]string{"backends"}, args...)...)
	}

	_, port, _ := net.SplitHostPort(freePort(t))
	wrong := net.JoinHostPort(host, port) // the right host, another port
	for _, target := range []string{wrong, "http://" + wrong, "https://" + s.backend} {
		code, out, errOut := cli("pause", "-backend", target, "-reason", "typo")
		if code != 1 || !strings.Contains(errOut, "404") || !strings.Contains(errOut, "configured: "+origin) || out != "" {
			t.Errorf("pause -backend %s: exit %d, stdout %q, stderr %q; want exit 1 naming %s", target, code, out, errOut, origin)
		}
	}
	if code, _, errOut := cli("pause", "-provider", "shopify", "-reason", "typo"); code != 1 || !strings.Contains(errOut, "configured: shop") {
		t.Errorf("pause -provider shopify: exit %d, %q", code, errOut)
	}
	if got := metricAt(s.admin, `whguard_backend_paused{backend="`+origin+`"}`); got == 1 {
		t.Fatalf("whguard_backend_paused after refused pauses = %v", got)
	}

	// host:port alone: the configured origin is paused, and holds.
	code, out, errOut := cli("pause", "-backend", s.backend, "-reason", "deploy")
	if code != 0 || out != "backend "+origin+": paused\n" {
		t.Fatalf("pause -backend %s: exit %d, stdout %q, stderr %q", s.backend, code, out, errOut)
	}
	waitFor(t, 10*time.Second, "the forwarder to see the pause", func() bool {
		return metricAt(s.admin, `whguard_backend_paused{backend="`+origin+`"}`) == 1
	})
	if c, _ := s.send(http.DefaultClient, "msg_pause_1", orderEvent("o-1", "order.paid")); c != http.StatusAccepted {
		t.Fatalf("send: %d", c)
	}
	waitFor(t, 10*time.Second, "a delivery held by the pause", func() bool {
		return metricAt(s.admin, `whguard_deliveries_held_total{provider="shop",reason="paused"}`) >= 1
	})
	if got := s.backendOrders(); len(got) != 0 {
		t.Fatalf("backend got %v while paused", got)
	}
	code, out, errOut = cli("resume", "-backend", s.backend, "-reason", "deployed")
	if code != 0 || out != "backend "+origin+": resumed\n" {
		t.Fatalf("resume -backend %s: exit %d, stdout %q, stderr %q", s.backend, code, out, errOut)
	}
	s.waitDelivered(1, 20*time.Second)
}
