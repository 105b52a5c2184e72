package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A lone call is flushed at once, alone: in a bubble of fake time, no
// time passes before its answer (no timer, no linger).
func TestLoneCallFlushesAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var flushes atomic.Int32
		g := New(Config{}, func(_ context.Context, items []int) ([]int, error) {
			flushes.Add(1)
			out := make([]int, len(items))
			for i, v := range items {
				out[i] = v * 10
			}
			return out, nil
		})
		start := time.Now()
		res, err := g.Do(context.Background(), []int{1, 2})
		if err != nil || len(res) != 2 || res[0] != 10 || res[1] != 20 {
			t.Fatalf("%v %v", res, err)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("lone call waited %s", took)
		}
		if flushes.Load() != 1 {
			t.Fatalf("%d flushes", flushes.Load())
		}
	})
}

// Calls arriving during a flush share the next one, each gets its own
// results, and no batch exceeds MaxBatch.
func TestConcurrentCallsShareFlushes(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		batches []int
	)
	g := New(Config{MaxBatch: 50}, func(_ context.Context, items []int) ([]int, error) {
		time.Sleep(2 * time.Millisecond) // a commit
		mu.Lock()
		batches = append(batches, len(items))
		mu.Unlock()
		out := make([]int, len(items))
		for i, v := range items {
			out[i] = -v
		}
		return out, nil
	})
	var wg sync.WaitGroup
	for i := 1; i <= 400; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := g.Do(context.Background(), []int{i})
			if err != nil || len(res) != 1 || res[0] != -i {
				t.Errorf("call %d got %v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, b := range batches {
		if b > 50 {
			t.Fatalf("batch of %d over MaxBatch", b)
		}
		total += b
	}
	if total != 400 {
		t.Fatalf("flushed %d items, want 400", total)
	}
	if len(batches) > 100 {
		t.Fatalf("%d flushes for 400 concurrent calls: no grouping", len(batches))
	}
}

// A failed flush fails exactly the calls of its batch.
func TestFailedFlushFailsOnlyItsBatch(t *testing.T) {
	t.Parallel()
	boom := errors.New("commit failed")
	g := New(Config{MaxBatch: 1}, func(_ context.Context, items []string) ([]bool, error) {
		if items[0] == "poison" {
			return nil, boom
		}
		return []bool{true}, nil
	})
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			item := "ok"
			if i == 7 {
				item = "poison"
			}
			_, errs[i] = g.Do(context.Background(), []string{item})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i == 7) != errors.Is(err, boom) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// A caller's deadline bounds its flush, so an error from Do means "not
// written": the flush sees the deadline, and Do answers only once the
// flush is over (before, Do returned at the deadline while the flush went
// on and could still write the items).
func TestCallerDeadlineBoundsTheFlush(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var ended atomic.Bool
		g := New(Config{}, func(ctx context.Context, items []int) ([]int, error) {
			<-ctx.Done() // a stalled database, interrupted by the deadline
			ended.Store(true)
			return nil, ctx.Err()
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if _, err := g.Do(ctx, []int{1}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		if !ended.Load() {
			t.Fatal("Do returned before its flush was over")
		}
		if took := time.Since(start); took != time.Second {
			t.Fatalf("the flush ended after %s, want at the caller's deadline (1s)", took)
		}
	})
}

// A call whose deadline passed while it was queued is failed unwritten,
// and the calls after it are written as usual.
func TestExpiredCallIsNotWritten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var written []int
		g := New(Config{}, func(ctx context.Context, items []int) ([]int, error) {
			if items[0] == 0 {
				<-release
			}
			mu.Lock()
			written = append(written, items...)
			mu.Unlock()
			return items, nil
		})
		go g.Do(context.Background(), []int{0}) // occupies the only flush
		synctest.Wait()
		short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		errc := make(chan error, 1)
		go func() { _, err := g.Do(short, []int{1}); errc <- err }()
		synctest.Wait() // queued behind the first flush
		time.Sleep(20 * time.Millisecond)
		close(release)
		if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("expired call: %v", err)
		}
		if res, err := g.Do(context.Background(), []int{2}); err != nil || res[0] != 2 {
			t.Fatalf("later call: %v %v", res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, v := range written {
			if v == 1 {
				t.Fatalf("the expired call was written: %v", written)
			}
		}
	})
}

// A call with less than the minimum budget left when its flush starts is
// failed unwritten, and does not cut short the flush of the others: the
// flush keeps the deadline of the calls that can use it.
func TestNearlyExpiredCallDoesNotShortenTheFlush(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var flushed []int
		var flushTook time.Duration
		g := New(Config{MinBudget: 250 * time.Millisecond}, func(ctx context.Context, items []int) ([]int, error) {
			if items[0] == 0 {
				<-release
				return items, nil
			}
			start := time.Now()
			time.Sleep(time.Second) // a slow commit, still within the budget of the live call
			flushTook = time.Since(start)
			flushed = append(flushed, items...)
			return items, ctx.Err()
		})
		go g.Do(context.Background(), []int{0}) // occupies the only flush
		synctest.Wait()
		nearly, cancel1 := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel1()
		roomy, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel2()
		errs := make(chan error, 2)
		go func() { _, err := g.Do(nearly, []int{1}); errs <- err }()
		go func() { _, err := g.Do(roomy, []int{2}); errs <- err }()
		synctest.Wait()
		time.Sleep(100 * time.Millisecond) // the first call has 200 ms left
		close(release)
		var failed, ok int
		for range 2 {
			if err := <-errs; errors.Is(err, context.DeadlineExceeded) {
				failed++
			} else if err == nil {
				ok++
			}
		}
		if failed != 1 || ok != 1 || len(flushed) != 1 || flushed[0] != 2 || flushTook != time.Second {
			t.Fatalf("failed %d ok %d flushed %v in %s; want the nearly expired call failed unwritten and the other flushed", failed, ok, flushed, flushTook)
		}
	})
}

// A caller that is cancelled (no deadline) does not cancel the flush of
// the others, and still learns the flush's result.
func TestCallerCancelDoesNotCancelFlush(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	g := New(Config{}, func(ctx context.Context, items []int) ([]int, error) {
		<-release
		return items, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errc := make(chan error, 1)
	go func() { _, err := g.Do(ctx, []int{1}); errc <- err }()
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("the flush was cancelled with its caller: %v", err)
	}
}

// With Linger, calls arriving one after another within the linger share
// one flush; a full batch does not wait (fake time: exact).
func TestLingerGathersCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			batches []int
		)
		g := New(Config{MaxBatch: 4, Linger: 500 * time.Millisecond}, func(_ context.Context, items []int) ([]int, error) {
			mu.Lock()
			batches = append(batches, len(items))
			mu.Unlock()
			return items, nil
		})
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 3 { // arriving 10 ms apart, well within the linger
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := g.Do(context.Background(), []int{i}); err != nil {
					t.Error(err)
				}
			}()
			time.Sleep(10 * time.Millisecond)
		}
		wg.Wait()
		if took := time.Since(start); took != 500*time.Millisecond {
			t.Errorf("lingering calls answered after %s, want the linger, 500ms", took)
		}
		mu.Lock()
		if len(batches) != 1 || batches[0] != 3 {
			t.Fatalf("batches %v, want one of 3", batches)
		}
		batches = nil
		mu.Unlock()

		// A call of MaxBatch items is flushed without lingering.
		start = time.Now()
		if _, err := g.Do(context.Background(), []int{1, 2, 3, 4}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("a full batch waited %s", took)
		}
	})
}

// DoBatch tells each call the size of the flush that carried it: calls
// queued behind a running flush share the next one and learn its size.
func TestDoBatchTellsTheFlushSize(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		g := New(Config{}, func(_ context.Context, items []int) ([]int, error) {
			if items[0] == 0 {
				<-release // the first flush runs until the others queue
			}
			return make([]int, len(items)), nil
		})
		sizes := make([]int, 4)
		var wg sync.WaitGroup
		wg.Go(func() { _, sizes[0], _ = g.DoBatch(context.Background(), []int{0}) })
		synctest.Wait() // the first flush is running
		for i := 1; i < 4; i++ {
			wg.Go(func() { _, sizes[i], _ = g.DoBatch(context.Background(), []int{i, i}) })
		}
		synctest.Wait() // the rest are queued behind it
		close(release)
		wg.Wait()
		if want := []int{1, 6, 6, 6}; !slices.Equal(sizes, want) {
			t.Fatalf("batch sizes %v, want %v", sizes, want)
		}
	})
}
