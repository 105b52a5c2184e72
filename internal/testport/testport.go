// Package testport hands tests (and the benchmark) loopback TCP ports for
// servers that other processes will bind (whguard, PostgreSQL, Redis,
// PgBouncer, Sentinel, containers).
//
// A port the kernel picks for "127.0.0.1:0" lies in its ephemeral range,
// the range it also draws the source ports of outgoing connections from:
// between the pick and the child's bind, any connection a parallel test
// opens may take it, and the child fails with "address already in use".
// Free picks below that range instead, where the kernel never assigns a
// port on its own, checks that the port binds, and never hands the same
// port out twice in one test process.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fallbackLow is where Linux's default ephemeral range starts, used when
// the running kernel's range cannot be read.
const fallbackLow = 32768

// floor is the lowest port handed out: above the usual fixed service ports.
const floor = 10000

var (
	mu    sync.Mutex
	given = map[int]bool{} // ports handed out by this process; guarded by mu
)

// Free returns "127.0.0.1:PORT" for a port nothing listens on, outside the
// kernel's ephemeral range when that range leaves room below it.
func Free(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Number(t)))
}

// Number is Free's port alone.
func Number(t testing.TB) int {
	t.Helper()
	p, err := Pick()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Pick is Number for a program that is not a test (the benchmark, which
// starts servers in processes of its own the same way).
func Pick() (int, error) {
	hi := ephemeralLow() - 1
	mu.Lock()
	defer mu.Unlock()
	if hi-floor >= 1000 {
		for range 200 {
			p := floor + rand.IntN(hi-floor+1)
			if given[p] {
				continue
			}
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				l.Close()
				given[p] = true
				return p, nil
			}
		}
	}
	// No room below the ephemeral range (or all tries taken): let the kernel pick.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	given[p] = true
	return p, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallbackLow
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return fallbackLow
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return fallbackLow
	}
	return n
}
