package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxOpenInFlight bounds the requests in flight in an open-loop run; when
// it is reached the pacer waits, and the lateness shows in the latencies
// (measured from each request's scheduled start).
const maxOpenInFlight = 4096

// outcome is what happened to one request: its (scheduled) start relative
// to the run's start, its latency, and its status (0: transport error).
type outcome struct {
	start, latency time.Duration
	status         int
}

// load is one load run against one URL: the per-request outcomes and, per
// unique event, when its first delivery was acknowledged.
type load struct {
	src     source
	url     string
	client  *http.Client
	t0      time.Time
	out     []outcome
	ackNs   []int64 // unix ns of the 2xx ack of each unique event's first request
	issued  int     // requests started
	window  [2]time.Duration
	stopped time.Time // when the last request completed

	exhausted atomic.Bool
	mu        sync.Mutex
	errSample []string
}

// newLoadClient returns a client with enough idle connections for conns
// concurrent requests.
func newLoadClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns + 16,
			MaxIdleConnsPerHost: conns + 16,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

func newLoad(client *http.Client, url string, src source) *load {
	return &load{src: src, url: url, client: client, out: make([]outcome, src.Len()), ackNs: make([]int64, src.Uniques())}
}

// do sends request i, due at due (its start in a closed loop, its
// scheduled start in an open one), and records the outcome.
func (l *load) do(ctx context.Context, i int, due time.Time) {
	r := l.src.At(i)
	status, err := post(ctx, l.client, l.url, r)
	end := time.Now()
	l.out[i] = outcome{start: due.Sub(l.t0), latency: end.Sub(due), status: status}
	switch {
	case err != nil:
		l.noteError(err.Error())
	case status < 200 || status > 299:
		l.noteError(fmt.Sprintf("HTTP %d", status))
	case !r.dup:
		l.ackNs[r.unique] = end.UnixNano()
	}
}

func (l *load) noteError(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errSample) < 5 {
		l.errSample = append(l.errSample, s)
	}
}

// post sends one signed request and drains the answer.
func post(ctx context.Context, client *http.Client, url string, r request) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.body))
	if err != nil {
		return 0, err
	}
	req.Header = http.Header{
		"Content-Type":      {"application/json"},
		"Webhook-Id":        {r.id},
		"Webhook-Timestamp": {r.ts},
		"Webhook-Signature": {r.sig},
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// runClosed keeps senders requests in flight, each sender sending its next
// request as soon as the previous one is answered, for warmup+measure (or
// until the source runs out). Only requests started after warmup count.
func runClosed(ctx context.Context, l *load, senders int, warmup, measure time.Duration) {
	var next atomic.Int64
	var exhaustedAt atomic.Int64
	l.t0 = time.Now()
	stopAt := l.t0.Add(warmup + measure)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for ctx.Err() == nil {
				now := time.Now()
				if !now.Before(stopAt) {
					return
				}
				i := int(next.Add(1) - 1)
				if i >= l.src.Len() {
					if l.exhausted.CompareAndSwap(false, true) {
						exhaustedAt.Store(int64(now.Sub(l.t0)))
					}
					return
				}
				l.do(ctx, i, now)
			}
		})
	}
	wg.Wait()
	l.stopped = time.Now()
	l.issued = min(int(next.Load()), l.src.Len())
	l.window = [2]time.Duration{warmup, warmup + measure}
	if l.exhausted.Load() {
		l.window[1] = min(l.window[1], time.Duration(exhaustedAt.Load()))
	}
}

// runOpen starts requests at a fixed rate regardless of completions for
// warmup+measure; latencies run from each request's scheduled start, so a
// stalled server is not hidden by the pacer waiting (no coordinated
// omission).
func runOpen(ctx context.Context, l *load, rate int, warmup, measure time.Duration) {
	interval := time.Second / time.Duration(rate)
	n := min(l.src.Len(), int((warmup+measure)/interval))
	sem := make(chan struct{}, maxOpenInFlight)
	var wg sync.WaitGroup
	l.t0 = time.Now()
	i := 0
	for ; i < n && ctx.Err() == nil; i++ {
		due := l.t0.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		req := i // i outlives the iteration
		wg.Go(func() {
			defer func() { <-sem }()
			l.do(ctx, req, due)
		})
	}
	wg.Wait()
	l.stopped = time.Now()
	l.issued = i
	l.window = [2]time.Duration{warmup, warmup + measure}
}
