package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// backend is the fast application behind whguard: it answers 200 at once
// and records when each event first arrived, keyed by the forwarded
// webhook-id header (the event id the bench sent).
type backend struct {
	tag      string
	recv     []atomic.Int64 // first receipt per unique event, unix ns; 0 = not yet
	received atomic.Int64   // unique events received
	total    atomic.Int64   // deliveries, redeliveries included
	foreign  atomic.Int64   // deliveries of ids this run did not send
	arrived  atomic.Int64   // requests that reached the handler (held ones included)
	srv      *http.Server
	url      string
	// gate, when not nil, holds every delivery until it is closed (the
	// backlog runs: whguard journals a backlog it cannot deliver yet).
	gate chan struct{}
	// latency is how long the backend takes to answer each delivery after
	// recording it (a slow application); 0 answers at once.
	latency time.Duration
}

// startBackend listens on a free loopback port for events of run tag with
// up to uniques unique events; a gated backend holds deliveries until
// release. Each answer takes latency.
func startBackend(tag string, uniques int, gated bool, latency time.Duration) (*backend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &backend{tag: tag, recv: make([]atomic.Int64, uniques), url: "http://" + ln.Addr().String(), latency: latency}
	if gated {
		b.gate = make(chan struct{})
	}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := b.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "whguard-bench: fast backend:", err)
		}
	}()
	return b, nil
}

// ServeHTTP reads the delivery, records it and answers 200.
func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	b.arrived.Add(1)
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-r.Context().Done():
			return
		}
	}
	now := time.Now().UnixNano()
	b.total.Add(1)
	u, ok := parseUnique(b.tag, r.Header.Get("Webhook-Id"))
	switch {
	case !ok || u >= len(b.recv):
		b.foreign.Add(1)
	case b.recv[u].CompareAndSwap(0, now):
		b.received.Add(1)
	}
	if b.latency > 0 {
		time.Sleep(b.latency)
	}
	w.WriteHeader(http.StatusOK)
}

// waitFor waits until want unique events have arrived, no new one arrived
// for idle, or timeout passed; it returns the number received.
func (b *backend) waitFor(ctx context.Context, want int64, idle, timeout time.Duration) int64 {
	deadline := time.Now().Add(timeout)
	last, lastChange := b.received.Load(), time.Now()
	for {
		n := b.received.Load()
		if n >= want || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		if n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) > idle {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// release opens the gate of a gated backend.
func (b *backend) release() {
	if b.gate != nil {
		select {
		case <-b.gate:
		default:
			close(b.gate)
		}
	}
}

// receipts returns the first-receipt times (unix ns, 0 = never).
func (b *backend) receipts() []int64 {
	out := make([]int64, len(b.recv))
	for i := range b.recv {
		out[i] = b.recv[i].Load()
	}
	return out
}

// close stops the backend.
func (b *backend) close() {
	b.release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.srv.Shutdown(ctx)
}
