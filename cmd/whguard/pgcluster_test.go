package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/whguard/whguard/internal/testport"
)

// pgCluster is a PostgreSQL primary and a streaming standby built by the
// test from the installed server binaries (initdb, pg_basebackup -R,
// pg_ctl promote), each a real server on its own loopback port.
type pgCluster struct {
	t        *testing.T
	bin, dir string
	primary  pgNode
	standby  pgNode
}

type pgNode struct {
	data string
	port int
}

// pgBin finds the server binaries (Debian keeps them out of PATH).
func pgBin(t *testing.T) string {
	t.Helper()
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) > 0 {
		return filepath.Dir(m[len(m)-1])
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatal("no PostgreSQL server binaries (initdb) on this machine")
	return ""
}

// newPGCluster starts a primary with a standby; synchronous makes the
// standby synchronous (synchronous_standby_names = '*').
func newPGCluster(t *testing.T, synchronous bool) *pgCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "whguard-pgcluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &pgCluster{t: t, bin: pgBin(t), dir: dir,
		primary: pgNode{data: filepath.Join(dir, "primary"), port: freePortNumber(t)},
		standby: pgNode{data: filepath.Join(dir, "standby"), port: freePortNumber(t)}}
	t.Cleanup(func() {
		for _, n := range []pgNode{c.primary, c.standby} {
			c.signalAll(n, syscall.SIGCONT)
			_ = c.run("pg_ctl", "-D", n.data, "-m", "immediate", "-w", "stop")
		}
		if t.Failed() {
			for _, n := range []string{"primary.log", "standby.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
					t.Logf("%s:\n%s", n, tail(string(b), 3000))
				}
			}
		}
		os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := c.run("initdb", "-D", c.primary.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
		t.Fatal(err)
	}
	sync := "''"
	if synchronous {
		sync = "'*'"
	}
	c.start(c.primary, "primary.log", "-c", "wal_level=replica", "-c", "max_wal_senders=5",
		"-c", "synchronous_standby_names="+sync)
	if err := c.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.primary.port), "-U", "postgres",
		"-D", c.standby.data, "-R", "-X", "stream"); err != nil {
		t.Fatal(err)
	}
	c.start(c.standby, "standby.log")
	// Wait until the standby streams (and, when synchronous, is sync).
	want := "async"
	if synchronous {
		want = "sync"
	}
	c.waitSQL(c.primary, 30*time.Second, "SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = '"+want+"'")
	return c
}

// start runs a node's server in the background with the test's settings.
func (c *pgCluster) start(n pgNode, logName string, extra ...string) {
	c.t.Helper()
	opts := []string{"-p", strconv.Itoa(n.port), "-k", c.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "max_connections=100", "-c", "shared_buffers=32MB"}
	opts = append(opts, extra...)
	if err := c.run("pg_ctl", "-D", n.data, "-l", filepath.Join(c.dir, logName), "-w", "-t", "60",
		"-o", strings.Join(opts, " "), "start"); err != nil {
		c.t.Fatal(err)
	}
}

// run runs a server binary, as the postgres user when the test is root
// (the server refuses to run as root).
func (c *pgCluster) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(c.bin, name)}, args...)...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// url is a connection string to node's database db.
func (n pgNode) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.port, db)
}

// whguardURL names both hosts, as a failover-aware client is configured.
func (c *pgCluster) whguardURL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		c.primary.port, c.standby.port, db)
}

// exec runs one statement on node's postgres database.
func (c *pgCluster) exec(n pgNode, sql string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.url("postgres"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		c.t.Fatalf("%s: %v", sql, err)
	}
}

// waitSQL waits until a boolean query on node holds.
func (c *pgCluster) waitSQL(n pgNode, within time.Duration, query string) {
	c.t.Helper()
	waitFor(c.t, within, query, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, n.url("postgres"))
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var ok bool
		return conn.QueryRow(ctx, query).Scan(&ok) == nil && ok
	})
}

// pids are a node's server processes: the postmaster and its children.
func (c *pgCluster) pids(n pgNode) []int {
	b, err := os.ReadFile(filepath.Join(n.data, "postmaster.pid"))
	if err != nil {
		return nil
	}
	pm, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		return nil
	}
	out := []int{pm}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		st, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pm) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}

// signalAll sends sig to every process of node: SIGKILL kills the host's
// PostgreSQL at once, SIGSTOP freezes it with its sockets open.
func (c *pgCluster) signalAll(n pgNode, sig syscall.Signal) {
	for _, pid := range c.pids(n) {
		_ = syscall.Kill(pid, sig)
	}
}

// promote makes the standby the primary and waits until it accepts writes.
func (c *pgCluster) promote() {
	c.t.Helper()
	if err := c.run("pg_ctl", "-D", c.standby.data, "-w", "-t", "60", "promote"); err != nil {
		c.t.Fatal(err)
	}
	c.waitSQL(c.standby, 30*time.Second, "SELECT NOT pg_is_in_recovery()")
}

func freePortNumber(t *testing.T) int {
	t.Helper()
	return testport.Number(t)
}
