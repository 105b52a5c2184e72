package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
)

// pgbouncer is a real PgBouncer (Debian's package) in transaction pooling
// mode with its defaults, in front of the test server, started once for
// the package's tests that use it.
var pgbouncer struct {
	once sync.Once
	addr string
	log  string
	err  error
}

func startPgBouncer(t *testing.T) string {
	t.Helper()
	pgbouncer.once.Do(func() {
		bin, err := exec.LookPath("pgbouncer")
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); err != nil && serr == nil {
			bin, err = "/usr/sbin/pgbouncer", nil // Debian's, outside a user's PATH
		}
		if err != nil {
			pgbouncer.err = fmt.Errorf("pgbouncer not found: `make test` installs Debian's package")
			return
		}
		server, err := url.Parse(testdb.ServerURL())
		if err != nil {
			pgbouncer.err = err
			return
		}
		dir, err := os.MkdirTemp("", "whguard-pgbouncer-")
		if err != nil {
			pgbouncer.err = err
			return
		}
		_ = os.Chmod(dir, 0o777)
		pgbouncer.addr, pgbouncer.log = freePort(t), filepath.Join(dir, "pgbouncer.log")
		host, port, _ := strings.Cut(pgbouncer.addr, ":")
		conf := filepath.Join(dir, "pgbouncer.ini")
		// Transaction pooling, and otherwise PgBouncer's defaults: no
		// ignore_startup_parameters, no prepared-statement support.
		text := fmt.Sprintf(`[databases]
* = host=%s port=%s user=postgres

[pgbouncer]
listen_addr = %s
listen_port = %s
unix_socket_dir = %s
auth_type = any
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
logfile = %s
pidfile = %s
`, server.Hostname(), server.Port(), host, port, dir, pgbouncer.log, filepath.Join(dir, "pgbouncer.pid"))
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			pgbouncer.err = err
			return
		}
		cmd := exec.Command(bin, conf)
		if os.Geteuid() == 0 {
			cmd = exec.Command("runuser", "-u", "postgres", "--", bin, conf) // PgBouncer refuses to run as root
		}
		if err := cmd.Start(); err != nil {
			pgbouncer.err = err
			return
		}
		go func() { _ = cmd.Wait() }() // stopped by pgbouncerStop, from TestMain
		deadline := time.Now().Add(10 * time.Second)
		for {
			if c, err := net.DialTimeout("tcp", pgbouncer.addr, time.Second); err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(pgbouncer.log)
				pgbouncer.err = fmt.Errorf("pgbouncer did not listen within 10 s:\n%s", b)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		pgbouncerStop = func() {
			// runuser does not pass SIGKILL on: end PgBouncer by its pid.
			if b, err := os.ReadFile(filepath.Join(dir, "pgbouncer.pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGTERM)
				}
			}
			_ = cmd.Process.Kill()
			os.RemoveAll(dir)
		}
	})
	if pgbouncer.err != nil {
		t.Fatal(pgbouncer.err)
	}
	return pgbouncer.addr
}

// pgbouncerStop ends PgBouncer after the package's tests (TestMain).
var pgbouncerStop = func() {}

// throughPgBouncer is a fresh test database's URL through PgBouncer, and
// its direct URL.
func throughPgBouncer(t *testing.T) (pooled, direct string) {
	t.Helper()
	addr := startPgBouncer(t)
	direct, drop, err := testdb.Create(context.Background(), "bouncer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String(), direct
}

// The duplicate storms (sequential, concurrent and re-serialized resends)
// through PgBouncer: answered and delivered exactly as on a direct
// connection.
func TestE2EDuplicateStormsThroughPgBouncer(t *testing.T) { testDuplicateStorms(t, "pgbouncer") }

// Through PgBouncer in transaction mode, with and without a direct
// connection for LISTEN and the session locks: whguard becomes ready,
// the duplicate storms are answered and delivered once, and 500 events
// from 16 senders are all delivered once, with no prepared-statement
// error anywhere.
func TestE2EThroughPgBouncer(t *testing.T) {
	for _, listen := range []bool{false, true} {
		name := map[bool]string{false: "pooled-only", true: "with-listen-url"}[listen]
		t.Run(name, func(t *testing.T) {
			pooled, direct := throughPgBouncer(t)
			env := []string{"WHGUARD_LOG_LEVEL=info"}
			if listen {
				env = append(env, "WHGUARD_DATABASE_LISTEN_URL="+direct)
			}
			s := newStack(t, "postgres", env...)
			s.dbURL = pooled
			s.startOrders()
			s.startWhguard(true)
			client := &http.Client{Timeout: 10 * time.Second}
			const n = 500
			var next, unacked atomic.Int32
			var wg sync.WaitGroup
			deadline := time.Now().Add(60 * time.Second)
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
						order := fmt.Sprintf("pb-%04d", i)
						if !s.sendUntilAcked(client, "msg_"+order, orderEvent(order, "order.paid"), deadline) {
							unacked.Add(1)
						}
						if i%10 == 0 { // and a resend, answered as a duplicate
							if code, _ := s.send(client, "msg_"+order, orderEvent(order, "order.paid")); code != 200 {
								t.Errorf("resend of %s answered %d, want 200", order, code)
							}
						}
					}
				}()
			}
			wg.Wait()
			if unacked.Load() != 0 {
				t.Fatalf("%d events never acknowledged", unacked.Load())
			}
			s.waitDelivered(n, 60*time.Second)
			for id, c := range s.backendOrders() {
				if c != 1 {
					t.Errorf("order %s applied %d times", id, c)
				}
			}
			out := s.whguard.out.String()
			b, _ := os.ReadFile(pgbouncer.log)
			for where, text := range map[string]string{"whguard's log": out, "PgBouncer's log": string(b)} {
				if strings.Contains(text, "prepared statement") {
					t.Errorf("%s mentions a prepared statement:\n%s", where, tail(text, 2000))
				}
			}
			if !strings.Contains(out, "behind a connection pooler") {
				t.Error("whguard did not say it found itself behind a pooler")
			}
			polling := strings.Contains(out, "found by polling")
			if polling == listen {
				t.Errorf("with a LISTEN URL %v, whguard says wake-ups are polled: %v", listen, polling)
			}
		})
	}
}
