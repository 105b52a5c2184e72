package proxy_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/whguard/whguard/proxy"
)

// TestSlowClientsAreCut: a client trickling its headers (slowloris) is cut
// after the header timeout, and every phase of a connection is bounded, so
// slow or idle clients cannot hold connections forever.
func TestSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	srv := proxy.NewServer("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), nil)
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("an unbounded phase: %+v", srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	// One header byte a second, never finishing the headers.
	buf := make([]byte, 1)
	for time.Since(start) < srv.ReadHeaderTimeout+5*time.Second {
		if _, err := c.Write([]byte("X")); err != nil {
			break
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			break // closed by the server
		}
	}
	if took := time.Since(start); took > srv.ReadHeaderTimeout+3*time.Second {
		t.Fatalf("a slowloris client held its connection %s (header timeout %s)", took, srv.ReadHeaderTimeout)
	}
}
