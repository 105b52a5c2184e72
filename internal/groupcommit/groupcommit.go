// Package groupcommit gathers concurrent calls into shared batches, the way
// databases group commits: a call that arrives while no flush is running is
// flushed at once (a lone request never waits for a timer); calls that
// arrive while flushes are running queue up and go together in the next
// flush, up to a batch size. Under load, batches grow by themselves.
package groupcommit

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"
)

// Flush writes one batch and returns one result per item, in order. An
// error fails every call in the batch, and only those.
type Flush[T, R any] func(ctx context.Context, items []T) ([]R, error)

// Config tunes a Group. Zero fields take the defaults.
type Config struct {
	// MaxBatch bounds the items of one flush (a call is never split, so a
	// single call larger than MaxBatch is flushed alone); 0 means 100.
	MaxBatch int
	// MaxInFlight bounds concurrent flushes; 0 means 1 (pure group commit:
	// everything that arrives during a flush shares the next one).
	MaxInFlight int
	// Timeout bounds one flush; 0 means 10 s. Flushes do not use the
	// callers' contexts: a caller that gives up must not cancel the others.
	Timeout time.Duration
	// OnFlush, when set, is told the size and duration of every flush.
	OnFlush func(items int, took time.Duration, err error)
	// Linger, when set, makes every flush wait that long for more calls
	// unless MaxBatch items are already queued: larger batches for calls
	// whose latency does not matter (a lone call then waits Linger).
	Linger time.Duration
}

// Group batches calls to a Flush. It is safe for concurrent use.
type Group[T, R any] struct {
	flush    Flush[T, R]
	maxBatch int
	maxIn    int
	timeout  time.Duration
	onFlush  func(items int, took time.Duration, err error)
	linger   time.Duration

	mu       sync.Mutex
	queue    []*call[T, R]
	inflight int
}

type call[T, R any] struct {
	items []T
	res   []R
	err   error
	done  chan struct{}
}

// New returns a Group that writes through flush.
func New[T, R any](cfg Config, flush Flush[T, R]) *Group[T, R] {
	return &Group[T, R]{
		flush:    flush,
		maxBatch: cmp.Or(cfg.MaxBatch, 100),
		maxIn:    cmp.Or(cfg.MaxInFlight, 1),
		timeout:  cmp.Or(cfg.Timeout, 10*time.Second),
		onFlush:  cfg.OnFlush,
		linger:   cfg.Linger,
	}
}

// Do queues items and waits for the flush that carries them. When ctx ends
// first, Do returns ctx.Err() but the items may still be written: callers
// must treat an error as "not known to be written", never as "not written".
func (g *Group[T, R]) Do(ctx context.Context, items []T) ([]R, error) {
	if len(items) == 0 {
		return nil, nil
	}
	c := &call[T, R]{items: items, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.inflight < g.maxIn {
		g.inflight++
		go g.run()
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run flushes queued calls until the queue is empty.
func (g *Group[T, R]) run() {
	for {
		if g.linger > 0 {
			if n := g.queued(); n > 0 && n < g.maxBatch {
				time.Sleep(g.linger)
			}
		}
		g.mu.Lock()
		n, size := 0, 0
		for n < len(g.queue) && (n == 0 || size+len(g.queue[n].items) <= g.maxBatch) {
			size += len(g.queue[n].items)
			n++
		}
		if n == 0 {
			g.inflight--
			g.mu.Unlock()
			return
		}
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()

		items := make([]T, 0, size)
		for _, c := range batch {
			items = append(items, c.items...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		start := time.Now()
		res, err := g.flush(ctx, items)
		cancel()
		if g.onFlush != nil {
			g.onFlush(len(items), time.Since(start), err)
		}
		if err == nil && len(res) != len(items) {
			err = fmt.Errorf("group commit: flush returned %d results for %d items", len(res), len(items))
		}
		off := 0
		for _, c := range batch {
			if err != nil {
				c.err = err
			} else {
				c.res = res[off : off+len(c.items) : off+len(c.items)]
			}
			off += len(c.items)
			close(c.done)
		}
	}
}

// queued counts the items waiting for a flush.
func (g *Group[T, R]) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.queue {
		n += len(c.items)
	}
	return n
}
