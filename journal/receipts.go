package journal

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ReceiptWriter records receipts in batches, off the request's path. A
// receipt is recorded after its sender was answered, so nobody waits for
// it: RecordReceipts queues it and returns, and one goroutine (started by
// the first receipt queued, gone when the queue is empty) lingers a
// moment for more and writes what gathered with one call to the store. On
// PostgreSQL a batch is one statement: a statement and a commit per
// duplicate cost ingest more than the duplicates themselves.
//
// Nothing is dropped to keep up: past MaxQueued receipts waiting, or once
// stopped, RecordReceipts writes its own at once. A batch that fails is
// logged and lost (receipts are history, never an event).
type ReceiptWriter struct {
	store interface {
		RecordReceipts(ctx context.Context, rs []Receipt) error
	}
	log     *zap.Logger
	linger  time.Duration
	timeout time.Duration
	// base is the parent of every write's context: Stop cancels it when
	// its deadline passes, so a write still running ends with it.
	base   context.Context
	cancel context.CancelFunc

	// mu guards queue, running and stopped; the writing goroutine takes
	// the queue under it and writes without it.
	mu      sync.Mutex
	queue   []Receipt
	running bool
	stopped bool
	done    sync.WaitGroup
}

// Receipt batches: how long the writer waits for more receipts before it
// writes (a receipt shows in its event's timeline that much later), how
// many it writes in one call, and how many may wait.
const (
	ReceiptLinger   = 20 * time.Millisecond
	MaxReceiptBatch = 500
	MaxQueued       = 10_000
)

// NewReceiptWriter batches receipts for store; each write is bounded by
// timeout (0: 10 s).
func NewReceiptWriter(store interface {
	RecordReceipts(ctx context.Context, rs []Receipt) error
}, timeout time.Duration, log *zap.Logger) *ReceiptWriter {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if log == nil {
		log = zap.NewNop()
	}
	base, cancel := context.WithCancel(context.Background())
	return &ReceiptWriter{store: store, log: log, linger: ReceiptLinger, timeout: timeout, base: base, cancel: cancel}
}

// RecordReceipts queues rs to be written shortly; it writes them itself
// (and returns the store's error) when the queue is full or the writer
// stopped.
func (w *ReceiptWriter) RecordReceipts(ctx context.Context, rs []Receipt) error {
	w.mu.Lock()
	if w.stopped || len(w.queue)+len(rs) > MaxQueued {
		w.mu.Unlock()
		return w.store.RecordReceipts(ctx, rs)
	}
	w.queue = append(w.queue, rs...)
	if !w.running {
		w.running = true
		w.done.Add(1)
		go w.run()
	}
	w.mu.Unlock()
	return nil
}

// run writes the queue until it is empty (the only goroutine that does).
func (w *ReceiptWriter) run() {
	defer w.done.Done()
	for {
		w.mu.Lock()
		stopping := w.stopped
		w.mu.Unlock()
		if !stopping {
			time.Sleep(w.linger)
		}
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		if len(batch) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), MaxReceiptBatch)
			ctx, cancel := context.WithTimeout(w.base, w.timeout)
			if err := w.store.RecordReceipts(ctx, batch[:n]); err != nil {
				w.log.Warn("record receipts failed", zap.Int("receipts", n), zap.Error(err))
			}
			cancel()
			batch = batch[n:]
		}
	}
}

// Start does nothing: the writing goroutine starts with the first
// receipt queued.
func (w *ReceiptWriter) Start(context.Context) error { return nil }

// Stop writes what is queued, waiting until ctx is done (then the write
// running is interrupted and what is left is lost, logged); receipts
// recorded after it are written by their callers.
func (w *ReceiptWriter) Stop(ctx context.Context) error {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		w.done.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		w.cancel()
		return ctx.Err()
	}
}
