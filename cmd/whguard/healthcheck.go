package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/caarlos0/env/v11"
)

// healthcheckTimeout bounds one probe: a container runtime runs the check
// with its own timeout, and an answer slower than this is as bad as none.
const healthcheckTimeout = 3 * time.Second

// probeConfig is what `whguard healthcheck` reads: the same listener
// variables the sidecar reads, so the check needs no flags in the image.
type probeConfig struct {
	AdminListen   string `env:"ADMIN_LISTEN"`
	MetricsListen string `env:"METRICS_LISTEN"`
}

// readyzURL is the local readiness endpoint: the metrics listener when
// there is one (it answers whatever the Host), else the admin listener. A
// listener on every interface (":9091", "0.0.0.0:9091") is probed on
// 127.0.0.1.
func (c probeConfig) readyzURL() string {
	addr := c.AdminListen
	if c.MetricsListen != "" {
		addr = c.MetricsListen
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/readyz"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz"
}

// healthcheck runs `whguard healthcheck`: exit 0 when the local /readyz
// answers 200, 1 otherwise. It is the container health check of images
// without a shell or curl.
func healthcheck(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if isHelp(args[0]) {
			fmt.Fprint(stdout, healthcheckUsage)
			return 0
		}
		fmt.Fprintf(stderr, "whguard healthcheck: unexpected argument %q\n\n%s", args[0], healthcheckUsage)
		return 2
	}
	cfg := probeConfig{AdminListen: defaultAdminListen}
	if err := parseEnv(&cfg, envPrefix, env.ToMap(environ)); err != nil {
		fmt.Fprintln(stderr, "whguard healthcheck:", err)
		return 2
	}
	target := cfg.readyzURL()
	ctx, cancel := context.WithTimeout(context.Background(), healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		fmt.Fprintln(stderr, "whguard healthcheck:", err)
		return 2
	}
	// The admin listener answers loopback Hosts only; a probe is local
	// whatever address the listener is bound to.
	req.Host = "localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "whguard healthcheck: %s: %v\n", target, err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "whguard healthcheck: %s answered %d: %s\n", target, resp.StatusCode, body)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s", target, body)
	return 0
}

const healthcheckUsage = `usage: whguard healthcheck

Exits 0 when the local readiness endpoint (/readyz) answers 200, 1 otherwise:
the health check of container images that have no shell or curl. It probes
WHGUARD_METRICS_LISTEN when set, else WHGUARD_ADMIN_LISTEN, on 127.0.0.1
when the listener's host is empty or 0.0.0.0.
`
