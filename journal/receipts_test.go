package journal_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/whguard/whguard/journal"
)

// fakeReceipts records each RecordReceipts call's receipts.
type fakeReceipts struct {
	mu    sync.Mutex
	calls [][]journal.Receipt
	err   error
}

func (f *fakeReceipts) RecordReceipts(_ context.Context, rs []journal.Receipt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, append([]journal.Receipt(nil), rs...))
	return f.err
}

func (f *fakeReceipts) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeReceipts) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []int
	for _, c := range f.calls {
		n = append(n, len(c))
	}
	return n
}

// Receipts recorded together are written with one call after the linger,
// in the order recorded; the caller never waits for the store.
func TestReceiptWriterBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceipts{}
		w := journal.NewReceiptWriter(f, 0, nil)
		for i := range 50 {
			if err := w.RecordReceipts(context.Background(), []journal.Receipt{{ID: int64(i), Answer: 200}}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if got := f.sizes(); len(got) != 0 {
			t.Fatalf("written before the linger: %v", got)
		}
		time.Sleep(journal.ReceiptLinger)
		synctest.Wait()
		if got := f.sizes(); len(got) != 1 || got[0] != 50 {
			t.Fatalf("calls %v, want one of 50", got)
		}
		for i, r := range f.calls[0] {
			if r.ID != int64(i) {
				t.Fatalf("receipt %d is event %d: order not kept", i, r.ID)
			}
		}
		// A later receipt starts another batch.
		_ = w.RecordReceipts(context.Background(), []journal.Receipt{{ID: 99}})
		time.Sleep(journal.ReceiptLinger)
		synctest.Wait()
		if got := f.sizes(); len(got) != 2 || got[1] != 1 {
			t.Fatalf("calls %v, want a second of 1", got)
		}
		if err := w.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// More than a batch's worth is written in several calls of at most
// MaxReceiptBatch; past MaxQueued waiting, the caller writes its own.
func TestReceiptWriterBoundsBatchesAndQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceipts{}
		w := journal.NewReceiptWriter(f, 0, nil)
		many := make([]journal.Receipt, journal.MaxQueued)
		if err := w.RecordReceipts(context.Background(), many); err != nil {
			t.Fatal(err)
		}
		f.fail(errors.New("store down"))
		if err := w.RecordReceipts(context.Background(), []journal.Receipt{{ID: 1}}); err == nil {
			t.Fatal("a receipt past the queue's bound was queued, or its write's error lost")
		}
		f.fail(nil)
		time.Sleep(journal.ReceiptLinger)
		synctest.Wait()
		got := f.sizes()
		if len(got) != 1+journal.MaxQueued/journal.MaxReceiptBatch || got[0] != 1 {
			t.Fatalf("calls %v: want the direct write, then batches of %d", got, journal.MaxReceiptBatch)
		}
		for _, n := range got[1:] {
			if n != journal.MaxReceiptBatch {
				t.Fatalf("calls %v: a batch over or under %d", got, journal.MaxReceiptBatch)
			}
		}
		_ = w.Stop(context.Background())
	})
}

// Stop writes what is queued without waiting for the linger; after it,
// callers write their own.
func TestReceiptWriterStopWritesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceipts{}
		w := journal.NewReceiptWriter(f, 0, nil)
		_ = w.RecordReceipts(context.Background(), []journal.Receipt{{ID: 1}, {ID: 2}})
		if err := w.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := f.sizes(); len(got) != 1 || got[0] != 2 {
			t.Fatalf("calls %v at Stop, want the two queued", got)
		}
		_ = w.RecordReceipts(context.Background(), []journal.Receipt{{ID: 3}})
		if got := f.sizes(); len(got) != 2 {
			t.Fatalf("calls %v: a receipt after Stop was not written by its caller", got)
		}
	})
}

// blockingReceipts holds every write until its context ends.
type blockingReceipts struct{ ended chan error }

func (b *blockingReceipts) RecordReceipts(ctx context.Context, _ []journal.Receipt) error {
	<-ctx.Done()
	b.ended <- ctx.Err()
	return ctx.Err()
}

// A Stop whose deadline passes interrupts the write still running, so it
// does not outlive the shutdown (the journal closes next).
func TestReceiptWriterStopInterruptsAStuckWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blockingReceipts{ended: make(chan error, 1)}
		w := journal.NewReceiptWriter(b, time.Hour, nil)
		_ = w.RecordReceipts(context.Background(), []journal.Receipt{{ID: 1}})
		time.Sleep(journal.ReceiptLinger)
		synctest.Wait() // the write is running, blocked
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := w.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want its deadline", err)
		}
		if err := <-b.ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("the stuck write ended with %v, want it cancelled by Stop", err)
		}
	})
}
