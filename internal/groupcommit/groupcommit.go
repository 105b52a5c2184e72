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
	// Timeout bounds one flush; 0 means 10 s. A flush ends earlier at
	// the earliest deadline of the calls it carries (see Do). Flushes do
	// not use the callers' contexts otherwise: a caller that gives up must
	// not cancel the others.
	Timeout time.Duration
	// OnFlush, when set, is told the size and duration of every flush.
	OnFlush func(items int, took time.Duration, err error)
	// Context, when set, is the parent of every flush's context:
	// cancelling it interrupts the flushes running and fails the next
	// ones (a shutdown past its deadline). Nil means none.
	Context context.Context
	// MinBudget is the least time a call must have left when its flush
	// starts, or it is failed unwritten; 0 means 250 ms.
	MinBudget time.Duration
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
	base     context.Context
	// minBudget: see Config.MinBudget.
	minBudget time.Duration

	mu       sync.Mutex
	queue    []*call[T, R]
	inflight int
}

type call[T, R any] struct {
	items []T
	// deadline is the caller's context deadline (zero: none).
	deadline time.Time
	res      []R
	err      error
	// batch is how many items the flush that carried the call wrote.
	batch int
	done  chan struct{}
}

// New returns a Group that writes through flush.
func New[T, R any](cfg Config, flush Flush[T, R]) *Group[T, R] {
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	return &Group[T, R]{
		flush:     flush,
		maxBatch:  cmp.Or(cfg.MaxBatch, 100),
		maxIn:     cmp.Or(cfg.MaxInFlight, 1),
		timeout:   cmp.Or(cfg.Timeout, 10*time.Second),
		onFlush:   cfg.OnFlush,
		linger:    cfg.Linger,
		base:      cfg.Context,
		minBudget: cmp.Or(cfg.MinBudget, 250*time.Millisecond),
	}
}

// Do queues items and waits for the flush that carries them. The flush
// ends by the deadline of ctx (if it has one): a call whose deadline has
// passed before its flush starts is failed unwritten, and a flush ends at
// the earliest deadline of its calls, so an error from Do means the items
// were not written, not "maybe later" (a flush that outlived its callers
// once committed events whose senders had been answered 503). Do waits for
// that flush even when ctx is cancelled, which the flush deadline bounds.
//
// One window remains, as with any database client: a commit that lands
// just as its deadline passes can be reported as failed; such items are
// written and a retry of them meets them as duplicates.
func (g *Group[T, R]) Do(ctx context.Context, items []T) ([]R, error) {
	res, _, err := g.DoBatch(ctx, items)
	return res, err
}

// DoBatch is Do that also says how many items the flush that carried
// items wrote, theirs included (0 when they were failed before a flush).
func (g *Group[T, R]) DoBatch(ctx context.Context, items []T) (res []R, batch int, err error) {
	if len(items) == 0 {
		return nil, 0, nil
	}
	c := &call[T, R]{items: items, done: make(chan struct{})}
	c.deadline, _ = ctx.Deadline()
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.inflight < g.maxIn {
		g.inflight++
		go g.run()
	}
	g.mu.Unlock()
	<-c.done
	return c.res, c.batch, c.err
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

		// Calls with less than MinBudget left are failed unwritten; the
		// flush ends by the earliest deadline of the rest. (Without the
		// floor, the oldest call of a batch, which already waited for the
		// previous flush, would cut every batch short once commits slow
		// down: a partial outage out of a slow journal.)
		start := time.Now()
		deadline := start.Add(g.timeout)
		live := batch[:0]
		for _, c := range batch {
			switch {
			case c.deadline.IsZero():
			case c.deadline.Sub(start) < g.minBudget:
				c.err = context.DeadlineExceeded
				close(c.done)
				continue
			case c.deadline.Before(deadline):
				deadline = c.deadline
			}
			live = append(live, c)
		}
		batch = live
		if len(batch) == 0 {
			continue
		}
		items := make([]T, 0, size)
		for _, c := range batch {
			items = append(items, c.items...)
		}
		ctx, cancel := context.WithDeadline(g.base, deadline)
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
			c.batch = len(items)
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
