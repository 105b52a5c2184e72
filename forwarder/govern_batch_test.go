package forwarder

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/whguard/whguard/internal/governor"
)

// batchLog is a batching governor that records the size of each batch and
// holds every batch until gate is closed. Each answer's RetryAfter echoes
// its ask's token, so a test can check that answers go to their askers.
type batchLog struct {
	gate  chan struct{}
	fail  error
	mu    sync.Mutex
	sizes []int
}

func (b *batchLog) Acquire(ctx context.Context, a governor.Ask) (governor.Decision, error) {
	ds, err := b.AcquireBatch(ctx, []governor.Ask{a})
	if err != nil {
		return governor.Decision{}, err
	}
	return ds[0], nil
}

func (b *batchLog) AcquireBatch(_ context.Context, asks []governor.Ask) ([]governor.Decision, error) {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(asks))
	b.mu.Unlock()
	<-b.gate
	if b.fail != nil {
		return nil, b.fail
	}
	ds := make([]governor.Decision, len(asks))
	for i, a := range asks {
		d, _ := time.ParseDuration(a.Token)
		ds[i] = governor.Decision{Allowed: true, RetryAfter: d}
	}
	return ds, nil
}

func (b *batchLog) Finish(context.Context, governor.Ask, governor.Outcome) error { return nil }
func (b *batchLog) Release(context.Context, governor.Ask) error                  { return nil }

// Deliveries that ask the governor one at a time while batches are out
// go together in the next batch (one round trip to Redis for all), each
// getting its own answer; a lone ask goes at once; a failed batch fails
// each of its asks, as a failed single ask would.
func TestAsksToTheGovernorAreBatched(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
	}{{"answered", nil}, {"governor down", errors.New("redis: connection refused")}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gov := &batchLog{gate: make(chan struct{}), fail: tc.fail}
				f := &Forwarder{cfg: Config{Governor: gov, Targets: map[string]Target{"acme": {}}}, origins: map[string]string{}}
				var cancel context.CancelFunc
				f.aborted, cancel = context.WithCancel(context.Background())
				defer cancel()
				f.asks = f.askGroups()
				type answer struct {
					d   governor.Decision
					err error
				}
				answers := make([]answer, 5)
				var wg sync.WaitGroup
				ask := func(i int) {
					wg.Go(func() {
						ctx, stop := context.WithTimeout(f.aborted, governorTimeout)
						defer stop()
						d, err := f.acquire(ctx, governor.Ask{Provider: "acme", Token: time.Duration(i + 1).String()})
						answers[i] = answer{d, err}
					})
				}
				// A lone ask goes at once, and so does the next (two
				// batches may be out); the other three queue behind them.
				ask(0)
				synctest.Wait()
				ask(1)
				synctest.Wait()
				ask(2)
				ask(3)
				ask(4)
				synctest.Wait()
				close(gov.gate)
				wg.Wait()
				gov.mu.Lock()
				sizes := append([]int(nil), gov.sizes...)
				gov.mu.Unlock()
				if len(sizes) != 3 || sizes[0] != 1 || sizes[1] != 1 || sizes[2] != 3 {
					t.Fatalf("batches of %v, want [1 1 3]", sizes)
				}
				for i, a := range answers {
					switch {
					case tc.fail != nil && !errors.Is(a.err, tc.fail):
						t.Errorf("ask %d: %v, want the governor's error", i, a.err)
					case tc.fail == nil && (a.err != nil || !a.d.Allowed || a.d.RetryAfter != time.Duration(i+1)):
						t.Errorf("ask %d: %+v, %v; want its own answer", i, a.d, a.err)
					}
				}
			})
		})
	}
}
