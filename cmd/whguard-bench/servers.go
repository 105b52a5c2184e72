package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/testdb"
)

// The servers under test, by name.
const (
	serverNull          = "null"
	serverNaive         = "naive-pg"
	serverWhguardPG     = "whguard-pg"
	serverWhguardSQLite = "whguard-sqlite"
	// serverWhguardPGLimited is whguard-pg with generous limits shared in
	// Redis: a backlog run only, for the cost of the limits.
	serverWhguardPGLimited = "whguard-pg-limited"
	// serverWhguardPGSlow is whguard-pg draining to a backend that takes
	// slowBackendLatency per delivery: a backlog run only.
	serverWhguardPGSlow = "whguard-pg-50ms"
	// serverWhguardPGOrdered is whguard-pg with per-key order on many
	// keys: a backlog run only, for the cost of ordering.
	serverWhguardPGOrdered = "whguard-pg-ordered"
	// serverWhguardPGTraced is whguard-pg with traces on, every span
	// sampled and exported to a local sink: a throughput run only, for
	// the cost of traces (traces.go).
	serverWhguardPGTraced = "whguard-pg-traced"
)

// slowBackendLatency is the answer time of the slow backend: a typical
// application that does real work (a database write or two) per webhook.
const slowBackendLatency = 50 * time.Millisecond

// concurrencyLabel says the forward concurrency the whguard servers run
// with: the -forward-concurrency flag, or whguard's default.
func (h *harness) concurrencyLabel() string {
	if h.opts.forwardConcurrency > 0 {
		return strconv.Itoa(h.opts.forwardConcurrency)
	}
	return fmt.Sprintf("default (%d)", forwarder.DefaultConcurrency)
}

// webhookPath is where every server under test receives webhooks.
const webhookPath = "/webhooks/bench"

// readyTimeout bounds a server's start-up.
const readyTimeout = 60 * time.Second

// stopTimeout bounds a server's graceful stop.
const stopTimeout = 30 * time.Second

// serverNames lists the servers in the order they run.
func serverNames() []string {
	return []string{serverNull, serverNaive, serverWhguardPG, serverWhguardSQLite}
}

// forwards reports whether a server forwards to the fast backend.
func forwards(server string) bool { return strings.HasPrefix(server, "whguard") }

// target is a started server under test.
type target struct {
	proc *proc
	url  string // where webhooks are posted
}

// database returns a fresh, empty database for server (a PostgreSQL
// database created for the run, or an SQLite file path as a sqlite: URL),
// or "" for the null server, and a function that removes it.
func (h *harness) database(ctx context.Context, server string) (string, func(), error) {
	switch server {
	case serverNaive, serverWhguardPG:
		return testdb.Create(ctx, "bench")
	case serverWhguardSQLite:
		dir, err := os.MkdirTemp(h.tmp, "sqlite-")
		if err != nil {
			return "", nil, err
		}
		return "sqlite:" + filepath.Join(dir, "whguard.db"), func() { _ = os.RemoveAll(dir) }, nil
	}
	return "", func() {}, nil
}

// start starts server on a free loopback port against dbURL and waits
// until it is ready. The whguard servers forward to backendURL; extraEnv
// adds WHGUARD_* settings.
func (h *harness) start(ctx context.Context, server, dbURL, secret, backendURL string, extraEnv ...string) (*target, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// Nor OTEL_*: traces are on only in the run that measures them.
	env := environWithout("WHGUARD_", "OTEL_", secretEnvVariable)
	logPath := filepath.Join(h.tmp, fmt.Sprintf("%s-%d.log", server, time.Now().UnixNano()))
	var argv []string
	readyURL := "http://" + addr + "/healthz"
	switch server {
	case serverNull:
		argv = []string{h.self, cmdNullServer, addr}
	case serverNaive:
		argv = []string{h.self, cmdNaiveReceiver, addr, dbURL}
		env = append(env, secretEnvVariable+"="+secret)
	case serverWhguardPG, serverWhguardSQLite:
		admin, err := freeAddr()
		if err != nil {
			return nil, err
		}
		argv = []string{h.whguard, "serve"}
		env = append(env,
			"WHGUARD_LISTEN="+addr,
			"WHGUARD_ADMIN_LISTEN="+admin,
			"WHGUARD_DATABASE_URL="+dbURL,
			"WHGUARD_PROVIDERS=bench",
			"WHGUARD_BENCH_SCHEME=standard",
			"WHGUARD_BENCH_SECRET="+secret,
			"WHGUARD_BACKEND_URL="+backendURL,
			"WHGUARD_LOG_LEVEL=warn",
			// The admin API (and /debug/pprof) for profiling a run by hand.
			"WHGUARD_ADMIN_TOKEN=bench",
		)
		if h.opts.forwardConcurrency > 0 {
			// Only when asked: otherwise whguard runs at its own default,
			// as its users do.
			env = append(env, "WHGUARD_FORWARD_CONCURRENCY="+strconv.Itoa(h.opts.forwardConcurrency))
		}
		env = append(env, extraEnv...)
		readyURL = "http://" + admin + "/readyz"
		fmt.Fprintf(os.Stderr, "whguard-bench: %s admin (pprof, token \"bench\") at http://%s\n", server, admin)
	default:
		return nil, fmt.Errorf("unknown server %q (want one of %s)", server, strings.Join(serverNames(), ", "))
	}
	p, err := startProc(server, argv, env, logPath)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, readyURL, readyTimeout); err != nil {
		p.stop(stopTimeout)
		return nil, err
	}
	return &target{proc: p, url: "http://" + addr + webhookPath}, nil
}

// migrateWhguard applies whguard's migrations to dbURL (`whguard migrate`).
func (h *harness) migrateWhguard(ctx context.Context, dbURL string) error {
	cmd := exec.CommandContext(ctx, h.whguard, "migrate")
	cmd.Env = append(environWithout("WHGUARD_"),
		"WHGUARD_DATABASE_URL="+dbURL, "WHGUARD_PROVIDERS=bench", "WHGUARD_BENCH_SCHEME=none",
		"WHGUARD_BACKEND_URL=http://127.0.0.1:1", "WHGUARD_LOG_LEVEL=warn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("whguard migrate: %w: %s", err, out)
	}
	return nil
}

// environWithout is the bench's environment minus variables starting with
// any of prefixes, so a developer's own WHGUARD_* settings cannot leak in.
func environWithout(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}
