package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
)

// A pooled state, reset and reused across keys and goroutines, gives
// what a fresh hmac.New gives.
func TestMACPoolMatchesHMACNew(t *testing.T) {
	keys := [][]byte{[]byte("first key"), bytes.Repeat([]byte{0xA5}, 100), {}} // longer than a block; empty
	pools := newMACPools(keys)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for n := range 200 {
				i := (g + n) % len(keys)
				prefix, body := fmt.Sprintf("msg_%d.%d.", g, n), bytes.Repeat([]byte{byte(n)}, n*7)
				ref := hmac.New(sha256.New, keys[i])
				ref.Write([]byte(prefix))
				ref.Write(body)
				want := ref.Sum(nil)
				if got := pools[i].sum([]byte("x"), prefix, body); !bytes.Equal(got[1:], want) || got[0] != 'x' {
					t.Errorf("key %d, %q: got %x, want %x after x", i, prefix, got, want)
					return
				}
				if !anyMatches(pools, []signature{signature(want)}, prefix, body) {
					t.Errorf("key %d, %q: anyMatches does not find its own signature", i, prefix)
					return
				}
				if anyMatches(pools, []signature{signature(want)}, prefix+"x", body) {
					t.Errorf("key %d, %q: anyMatches matched other content", i, prefix)
					return
				}
			}
		})
	}
	wg.Wait()
}
