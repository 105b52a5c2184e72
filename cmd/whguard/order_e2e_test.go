package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"encoding/json"
)

// End-to-end tests of per-key order: two real whguard processes on one
// PostgreSQL journal, senders interleaving sequences for several keys over
// both, and a backend that fails a third of the requests at random.

// orderBackend records, per order key, the sequence numbers it accepted,
// in the order it accepted them, and checks that no two requests of one
// key are ever in flight together.
type orderBackend struct {
	srv *httptest.Server

	mu        sync.Mutex
	rng       *rand.Rand
	accepted  map[string][]int // key → seqs answered 2xx, in order
	inFlight  map[string]int   // key → requests in flight
	overlap   []string         // violations: a key with two requests at once
	keysAtMax int              // most distinct keys in flight at once
	requests  int
	// cured: poisoned events of these keys are accepted from now on (the
	// backend was fixed).
	cured map[string]bool
}

type orderedBody struct {
	Type string `json:"type"`
	Data struct {
		Object struct {
			ID     string `json:"id"`
			Seq    int    `json:"seq"`
			Poison bool   `json:"poison"`
		} `json:"object"`
	} `json:"data"`
}

func newOrderBackend(t *testing.T, seed uint64) *orderBackend {
	b := &orderBackend{rng: rand.New(rand.NewPCG(seed, seed)), accepted: map[string][]int{}, inFlight: map[string]int{}, cured: map[string]bool{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var ev orderedBody
		if err := json.Unmarshal(raw, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		key, seq := ev.Data.Object.ID, ev.Data.Object.Seq
		b.mu.Lock()
		b.requests++
		if b.inFlight[key] > 0 {
			b.overlap = append(b.overlap, fmt.Sprintf("%s seq %d started while another of its key was in flight", key, seq))
		}
		b.inFlight[key]++
		b.keysAtMax = max(b.keysAtMax, len(b.inFlight))
		fail := b.rng.IntN(3) == 0
		b.mu.Unlock()

		time.Sleep(15 * time.Millisecond) // long enough for keys to overlap

		b.mu.Lock()
		defer b.mu.Unlock()
		if b.inFlight[key]--; b.inFlight[key] == 0 {
			delete(b.inFlight, key)
		}
		switch {
		case ev.Data.Object.Poison && !b.cured[key]:
			w.WriteHeader(http.StatusUnprocessableEntity) // permanent: dead at once
		case fail && !ev.Data.Object.Poison:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			b.accepted[key] = append(b.accepted[key], seq)
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *orderBackend) acceptedOf(key string) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.accepted[key])
}

func (b *orderBackend) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.accepted {
		n += len(s)
	}
	return n
}

// sendOrdered posts event seq of key to replica i until it is
// acknowledged.
func (s *protectedSet) sendOrdered(i int, key string, seq int, poison bool) {
	s.t.Helper()
	id := fmt.Sprintf("evt-%s-%03d", key, seq)
	body := fmt.Sprintf(`{"type":"customer.updated","data":{"object":{"id":%q,"seq":%d,"poison":%v}}}`, key, seq, poison)
	if !s.sendBody(i, id, body) {
		s.t.Errorf("event %s not acknowledged by replica %d", id, i)
	}
}

// sendSequences sends, for every key at once, its events 0..n-1 one after
// the other (each acknowledged before the next is sent, so the order of
// receipt is defined), alternating between the replicas. poison says which
// (key, seq) the backend refuses for good.
func (s *protectedSet) sendSequences(keys []string, n int, poison func(key string, seq int) bool) {
	var wg sync.WaitGroup
	for k, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range n {
				s.sendOrdered((k+seq)%len(s.replicas), key, seq, poison(key, seq))
			}
		}()
	}
	wg.Wait()
}

func seqs(from, to int, except ...int) []int {
	var out []int
	for i := from; i < to; i++ {
		if !slices.Contains(except, i) {
			out = append(out, i)
		}
	}
	return out
}

func newOrderSet(t *testing.T, b *orderBackend, onDead string) *protectedSet {
	pb := &probeBackend{srv: b.srv, okBy: map[string]int{}}
	return newProtectedSet(t, 2, pb,
		"WHGUARD_SHOP_ORDER_KEY=/data/object/id",
		"WHGUARD_SHOP_ORDER_ON_DEAD="+onDead,
		"WHGUARD_RETRY_MAX_ATTEMPTS=40", // a third fail: 40 in a row never happens
		"WHGUARD_RETRY_BASE_DELAY=20ms",
		"WHGUARD_RETRY_MAX_DELAY=200ms",
		"WHGUARD_FORWARD_CONCURRENCY=16",
	)
}

const (
	orderKeys   = 6
	orderPerKey = 12
	poisonSeq   = 4 // the event of key k0 that the backend refuses for good
)

func orderKeyNames() []string {
	keys := make([]string, orderKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("cus_%d", i)
	}
	return keys
}

func (b *orderBackend) checkNoOverlap(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.overlap) > 0 {
		t.Fatalf("one key delivered two at a time: %v", b.overlap[:min(5, len(b.overlap))])
	}
	if b.keysAtMax < 2 {
		t.Fatalf("at most %d key in flight at once: different keys must go in parallel", b.keysAtMax)
	}
}

// TestE2EOrderPerKeyAcrossReplicasSkip: under ORDER_ON_DEAD=skip every
// key's events reach the backend one at a time, in the order received,
// across two replicas and random failures; the dead event of cus_0 lets
// the rest of its key through.
func TestE2EOrderPerKeyAcrossReplicasSkip(t *testing.T) {
	t.Parallel()
	b := newOrderBackend(t, 1)
	s := newOrderSet(t, b, "skip")
	keys := orderKeyNames()
	poison := func(key string, seq int) bool { return key == keys[0] && seq == poisonSeq }
	began := time.Now()
	s.sendSequences(keys, orderPerKey, poison)
	sent := time.Since(began)
	waitFor(t, 90*time.Second, "every deliverable event accepted", func() bool {
		return b.total() == orderKeys*orderPerKey-1
	})
	t.Logf("sent in %s, all delivered after %s", sent, time.Since(began))
	for _, key := range keys {
		want := seqs(0, orderPerKey)
		if key == keys[0] {
			want = seqs(0, orderPerKey, poisonSeq)
		}
		if got := b.acceptedOf(key); !slices.Equal(got, want) {
			t.Errorf("%s accepted %v, want %v", key, got, want)
		}
	}
	b.checkNoOverlap(t)
	for i := range s.replicas {
		if v := s.metric(i, `whguard_deliveries_total{outcome="done",provider="shop"}`); v <= 0 {
			t.Errorf("replica %d delivered nothing (%v): both must share the work", i, v)
		}
	}
	var dead struct {
		HoldsKey bool `json:"holds_key"`
		Status   string
	}
	s.api(0, http.MethodGet, fmt.Sprintf("/api/events/evt-%s-%03d", keys[0], poisonSeq), "", &dead)
	if dead.Status != "dead" || dead.HoldsKey {
		t.Fatalf("poisoned event: %+v, want dead and holding nothing", dead)
	}
	b.mu.Lock()
	t.Logf("%d requests for %d events; up to %d keys in flight at once", b.requests, orderKeys*orderPerKey, b.keysAtMax)
	b.mu.Unlock()
}

// TestE2EOrderPerKeyAcrossReplicasBlock: under ORDER_ON_DEAD=block the
// dead events of cus_0 and cus_1 hold their keys: the events behind them
// wait, held for order and spending no attempt, while the other keys
// finish. A skip lets cus_0's through without its dead event; once the
// backend is fixed, a replay of cus_1's delivers it in its place, then the
// rest, in order.
func TestE2EOrderPerKeyAcrossReplicasBlock(t *testing.T) {
	t.Parallel()
	b := newOrderBackend(t, 2)
	s := newOrderSet(t, b, "block")
	keys := orderKeyNames()
	blocked := keys[:2]
	poison := func(key string, seq int) bool { return slices.Contains(blocked, key) && seq == poisonSeq }
	s.sendSequences(keys, orderPerKey, poison)
	waitFor(t, 90*time.Second, "every key but the blocked ones accepted", func() bool {
		return b.total() == (orderKeys-len(blocked))*orderPerKey+len(blocked)*poisonSeq
	})
	for _, key := range keys[len(blocked):] {
		if got := b.acceptedOf(key); !slices.Equal(got, seqs(0, orderPerKey)) {
			t.Errorf("%s accepted %v, want all in order", key, got)
		}
	}
	for _, key := range blocked {
		if got := b.acceptedOf(key); !slices.Equal(got, seqs(0, poisonSeq)) {
			t.Fatalf("%s accepted %v while blocked, want %v", key, got, seqs(0, poisonSeq))
		}
	}

	type detail struct {
		ID         int64  `json:"id"`
		Status     string `json:"status"`
		Held       string `json:"held"`
		Attempts   int    `json:"attempts"`
		HoldsKey   bool   `json:"holds_key"`
		WaitingFor int64  `json:"waiting_for"`
	}
	blockers := map[string]detail{}
	for i, key := range blocked {
		var blocker, next detail
		s.api(i, http.MethodGet, fmt.Sprintf("/api/events/evt-%s-%03d", key, poisonSeq), "", &blocker)
		s.api(1-i, http.MethodGet, fmt.Sprintf("/api/events/evt-%s-%03d", key, poisonSeq+1), "", &next)
		if blocker.Status != "dead" || !blocker.HoldsKey {
			t.Fatalf("%s blocker: %+v, want dead and holding its key", key, blocker)
		}
		if next.Held != "order" || next.WaitingFor != blocker.ID || next.Attempts != 0 {
			t.Fatalf("%s event behind the blocker: %+v, want held for order by %d, no attempt spent", key, next, blocker.ID)
		}
		// A skip of an event that holds nothing is refused.
		if code := s.api(i, http.MethodPost, fmt.Sprintf("/api/events/%d/skip", next.ID), `{"reason":"wrong one"}`, nil); code != http.StatusConflict {
			t.Fatalf("skip of a waiting event: %d, want 409", code)
		}
		blockers[key] = blocker
	}
	waitFor(t, 30*time.Second, "whguard_order_blocked_keys to count both blocked keys", func() bool {
		return s.metric(0, `whguard_order_blocked_keys{provider="shop"}`) == 2
	})

	// cus_0: skipped. Its dead event stays dead; the rest follows in order.
	if code := s.api(1, http.MethodPost, fmt.Sprintf("/api/events/%d/skip", blockers[blocked[0]].ID), `{"reason":"customer deleted upstream"}`, nil); code != http.StatusOK {
		t.Fatalf("skip: %d", code)
	}
	// cus_1: the backend is fixed, and the dead event replayed.
	b.mu.Lock()
	b.cured[blocked[1]] = true
	b.mu.Unlock()
	if code := s.api(0, http.MethodPost, fmt.Sprintf("/api/events/%d/replay", blockers[blocked[1]].ID), `{"reason":"fixed the backend"}`, nil); code != http.StatusOK {
		t.Fatalf("replay: %d", code)
	}
	waitFor(t, 60*time.Second, "the rest of the blocked keys accepted", func() bool {
		return len(b.acceptedOf(blocked[0])) == orderPerKey-1 && len(b.acceptedOf(blocked[1])) == orderPerKey
	})
	if got := b.acceptedOf(blocked[0]); !slices.Equal(got, seqs(0, orderPerKey, poisonSeq)) {
		t.Errorf("%s (skipped) accepted %v, want %v", blocked[0], got, seqs(0, orderPerKey, poisonSeq))
	}
	if got := b.acceptedOf(blocked[1]); !slices.Equal(got, seqs(0, orderPerKey)) {
		t.Errorf("%s (replayed) accepted %v, want all in order", blocked[1], got)
	}
	b.checkNoOverlap(t)
}
