package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"io"
	"sync"
)

// macPool hands out HMAC-SHA256 states keyed with one key. hmac.New
// allocates two hash states and hashes the key's pads on every call: half
// the cost of a Standard Webhooks check or re-signing in the closed loop's
// profile. A state from the pool is Reset to its keyed start instead, which
// restores a saved state. Safe for concurrent use; the key lives as long as
// the scheme that holds the pool (a rotation builds a new scheme).
type macPool struct{ p sync.Pool }

// newMACPools returns one pool per key, in keys' order.
func newMACPools(keys [][]byte) []*macPool {
	pools := make([]*macPool, len(keys))
	for i, key := range keys {
		m := &macPool{}
		m.p.New = func() any { return hmac.New(sha256.New, key) }
		pools[i] = m
	}
	return pools
}

// sum appends HMAC-SHA256(key, prefix+body) to dst.
func (m *macPool) sum(dst []byte, prefix string, body []byte) []byte {
	h := m.p.Get().(hash.Hash)
	h.Reset()
	io.WriteString(h, prefix)
	h.Write(body)
	dst = h.Sum(dst)
	m.p.Put(h)
	return dst
}

// anyMatches tells whether HMAC-SHA256(key, prefix+body) equals one of
// sigs for the key of one of pools, comparing in constant time (what
// anyKeyMatches does with hmac.New).
func anyMatches(pools []*macPool, sigs []signature, prefix string, body []byte) bool {
	var sum signature
	for _, m := range pools {
		m.sum(sum[:0], prefix, body)
		for i := range sigs {
			if hmac.Equal(sum[:], sigs[i][:]) {
				return true
			}
		}
	}
	return false
}
