package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testwait"
)

func TestHealthcheckTarget(t *testing.T) {
	for _, c := range []struct{ admin, metrics, want string }{
		{defaultAdminListen, "", "http://127.0.0.1:9090/readyz"},
		{":9090", "", "http://127.0.0.1:9090/readyz"},
		{"0.0.0.0:9090", "", "http://127.0.0.1:9090/readyz"},
		{"[::]:9090", "", "http://127.0.0.1:9090/readyz"},
		{"10.1.2.3:9090", "", "http://10.1.2.3:9090/readyz"},
		{"127.0.0.1:9090", ":9091", "http://127.0.0.1:9091/readyz"},
		{"127.0.0.1:9090", "0.0.0.0:9091", "http://127.0.0.1:9091/readyz"},
		{"127.0.0.1:9090", "[::1]:9091", "http://[::1]:9091/readyz"},
	} {
		got := probeConfig{AdminListen: c.admin, MetricsListen: c.metrics}.readyzURL()
		if got != c.want {
			t.Errorf("admin %q metrics %q: probed %s, want %s", c.admin, c.metrics, got, c.want)
		}
	}
}

// The check fails while nothing listens, passes once the sidecar is ready,
// on the metrics listener when there is one and on the loopback-only admin
// listener otherwise (bound to every interface, so the Host check matters).
func TestHealthcheckAgainstServe(t *testing.T) {
	for _, withMetrics := range []bool{true, false} {
		t.Run(map[bool]string{true: "metrics", false: "admin"}[withMetrics], func(t *testing.T) {
			listen, admin, metrics := freePort(t), freePort(t), freePort(t)
			_, adminPort, _ := strings.Cut(admin, ":")
			_, metricsPort, _ := strings.Cut(metrics, ":")
			probeEnv := []string{"WHGUARD_ADMIN_LISTEN=0.0.0.0:" + adminPort}
			if withMetrics {
				probeEnv = append(probeEnv, "WHGUARD_METRICS_LISTEN=:"+metricsPort)
			}
			if code, _, errOut := runCmd([]string{"healthcheck"}, probeEnv...); code != 1 || !strings.Contains(errOut, "/readyz") {
				t.Fatalf("nothing listening: exit %d, stderr %q; want 1 naming the endpoint", code, errOut)
			}

			cmd := exec.Command(binary, "serve")
			cmd.Env = append([]string{
				"WHGUARD_DATABASE_URL=sqlite:" + filepath.Join(t.TempDir(), "whguard.db"),
				"WHGUARD_PROVIDERS=github",
				"WHGUARD_GITHUB_SCHEME=github",
				"WHGUARD_GITHUB_SECRET=It's a Secret to Everybody",
				"WHGUARD_BACKEND_URL=http://127.0.0.1:1",
				"WHGUARD_LISTEN=" + listen,
			}, probeEnv...)
			var logs bytes.Buffer
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

			var out, errOut string
			if !testwait.Until(20*time.Second, 50*time.Millisecond, func() bool {
				var code int
				code, out, errOut = runCmd([]string{"healthcheck"}, probeEnv...)
				if code != 0 && code != 1 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				return code == 0
			}) {
				t.Fatalf("never healthy: %s\nlogs:\n%s", errOut, logs.String())
			}
			if !strings.Contains(out, "ready") {
				t.Errorf("healthy, but stdout %q", out)
			}
		})
	}
}

func TestHealthcheckUsage(t *testing.T) {
	if code, out, _ := runCmd([]string{"healthcheck", "-h"}); code != 0 || !strings.Contains(out, "WHGUARD_METRICS_LISTEN") {
		t.Errorf("-h: exit %d, %q", code, out)
	}
	if code, _, _ := runCmd([]string{"healthcheck", "extra"}); code != 2 {
		t.Errorf("an extra argument: exit %d, want 2", code)
	}
}
