package forwarder

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/whguard/whguard/journal"
)

// handBacks is a journal that only records the leases handed back and the
// deliveries held (the rest of Store is not used by a wait for a slot).
type handBacks struct {
	Store
	mu             sync.Mutex
	released, held []int64
}

func (h *handBacks) Release(_ context.Context, ids []int64, _ []uuid.UUID) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = append(h.released, ids...)
	return len(ids), nil
}

func (h *handBacks) Hold(_ context.Context, hs []journal.Hold) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range hs {
		h.held = append(h.held, x.ID)
	}
	return len(hs), nil
}

// seen returns the rows handed back and held so far.
func (h *handBacks) seen() (released, held []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.released), slices.Clone(h.held)
}

// Settings of the forwarder in the slot-wait tests: a row leased for
// slotTimeout+slotMargin waits for a slot at most slotMargin/2, so that a
// whole attempt and half the margin are left when it starts.
const (
	slotTimeout = 10 * time.Second
	slotMargin  = 4 * time.Second
	slotWaitFor = slotMargin / 2
)

// slotWait is row 7 waiting for the only slot of a forwarder, run inside
// a synctest bubble: its clock moves only when every goroutine of the
// bubble waits, so waits are checked to the nanosecond.
type slotWait struct {
	f     *Forwarder
	store *handBacks
	done  chan struct{} // closed when waitForSlot has returned
}

// queueForSlot takes the forwarder's only slot, then queues row 7 for it
// (a committed claim when claim is set, else a leased row), leased now,
// and runs its wait for the slot. Its provider has no target: were it
// given the slot, its delivery would be held at once.
func queueForSlot(t *testing.T, claim bool) *slotWait {
	t.Helper()
	store := &handBacks{}
	f, err := New(Config{Store: store, Concurrency: 1, Timeout: slotTimeout, LeaseMargin: slotMargin,
		Targets: map[string]Target{"other": {BackendURL: "http://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if w := f.adm.acquire(false); w != nil {
		t.Fatal("the only slot is not free")
	}
	now := time.Now()
	j := job{
		d:        journal.Delivery{ID: 7, Provider: "acme", LeaseToken: uuid.New(), LeaseExpiresAt: now.Add(slotTimeout + slotMargin)},
		recordBy: now.Add(slotTimeout + slotMargin - time.Second), // as fetchOnce and Dispatch set it
		claimed:  claim,
	}
	if claim && !f.adm.claim() {
		t.Fatal("claim declined")
	}
	f.inflight.Add(1)
	w := f.adm.acquire(claim)
	if w == nil {
		t.Fatal("a second slot was free")
	}
	s := &slotWait{f: f, store: store, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		f.waitForSlot(j, w)
	}()
	return s
}

// advance moves the bubble's fake clock on by d, then waits until the
// goroutines that woke wait again. (In a synctest bubble a sleep takes no
// real time: it ends as soon as every goroutine of the bubble waits.)
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// returned reports whether the wait for a slot has returned.
func (s *slotWait) returned() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// TestWaitForSlotDeadline: a delivery waiting for a slot waits while its
// lease leaves room for a whole attempt and half the margin, and not a
// nanosecond longer: then its row goes back to the journal, its attempt
// unspent (a claim gives its claim back). A slot freed before then is
// its; the shutdown deadline ends the wait at once.
func TestWaitForSlotDeadline(t *testing.T) {
	t.Parallel()
	for _, claim := range []bool{false, true} {
		name := map[bool]string{false: "leased row", true: "claim"}[claim]
		t.Run(name+" waits out the room its lease leaves", func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := queueForSlot(t, claim)
				advance(slotWaitFor - time.Nanosecond)
				if released, _ := s.store.seen(); s.returned() || len(released) != 0 {
					t.Fatalf("wait over before %s (handed back %v)", slotWaitFor, released)
				}
				advance(time.Nanosecond)
				if released, held := s.store.seen(); !s.returned() || !slices.Equal(released, []int64{7}) || len(held) != 0 {
					t.Fatalf("after %s: returned %v, handed back %v, held %v; want row 7 handed back", slotWaitFor, s.returned(), released, held)
				}
				if o := s.f.adm.snapshot(); o.queuedClaims+o.queuedRows != 0 || o.claimsWaiting != 0 || o.inFlight != 1 {
					t.Fatalf("after the hand-back: %+v, want nothing queued or claimed, the other delivery's slot held", o)
				}
			})
		})
	}
	t.Run("a slot freed in time is the waiting row's", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := queueForSlot(t, false)
			advance(slotWaitFor - time.Millisecond)
			s.f.pokeIf(s.f.adm.release()) // the other delivery ends
			synctest.Wait()
			// Delivered: its provider has no target, so it is held.
			if released, held := s.store.seen(); !s.returned() || len(released) != 0 || !slices.Equal(held, []int64{7}) {
				t.Fatalf("returned %v, handed back %v, held %v; want row 7 delivered (held: no target)", s.returned(), released, held)
			}
		})
	})
	t.Run("the shutdown deadline ends the wait at once", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := queueForSlot(t, false)
			advance(time.Second)
			s.f.abort()
			synctest.Wait()
			if released, held := s.store.seen(); !s.returned() || !slices.Equal(released, []int64{7}) || len(held) != 0 {
				t.Fatalf("returned %v, handed back %v, held %v; want row 7 handed back at once", s.returned(), released, held)
			}
		})
	})
}
