package verify

import (
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// keyCache holds keys fetched from a provider, per URL, until they expire,
// and makes a burst of requests that need the same missing or stale entry
// cause one fetch, not one each.
//
// Goroutines: the request goroutines running a scheme's Verify call get
// and refresh concurrently. mu guards m and is held only to read or
// write the map, never during a fetch. A fetch runs in the goroutine of
// the first request that needs it; the others asking for the same URL
// meanwhile wait in flight.Do and share its result (or its error). The
// cache starts no goroutine and has no background refresh: entries are
// renewed by the first request that finds them stale.
//
// Invariants:
//   - an entry is stored only after a successful fetch and parse; errors
//     are never cached, so a key host that comes back is used at once;
//   - fetched < expires for every entry, both on the clock of the request
//     that fetched it (Verify's now);
//   - len(m) <= limit: storing into a full cache first drops the
//     expired entries, then the one fetched longest ago;
//   - a stored value is never modified: readers share it without a copy.
type keyCache[V any] struct {
	limit  int
	mu     sync.Mutex
	m      map[string]keyEntry[V]
	flight singleflight.Group
}

// keyEntry is one cached value and when it was fetched and expires.
type keyEntry[V any] struct {
	val              V
	fetched, expires time.Time
}

// newKeyCache returns an empty cache of at most limit entries.
func newKeyCache[V any](limit int) *keyCache[V] {
	return &keyCache[V]{limit: limit, m: make(map[string]keyEntry[V])}
}

// get returns url's entry if it has one that has not expired at now.
func (c *keyCache[V]) get(url string, now time.Time) (keyEntry[V], bool) {
	c.mu.Lock()
	e, ok := c.m[url]
	c.mu.Unlock()
	if !ok || !now.Before(e.expires) {
		return keyEntry[V]{}, false
	}
	return e, true
}

// refresh fetches url's value with fetch, which also says how long it
// stays valid (at least a second is kept), stores it, and returns it.
// Concurrent refreshes of one url share a single fetch: the goroutines
// that join one in progress get its result even though they asked a moment
// later.
func (c *keyCache[V]) refresh(url string, now time.Time, fetch func() (V, time.Duration, error)) (keyEntry[V], error) {
	v, err, _ := c.flight.Do(url, func() (any, error) {
		val, ttl, err := fetch()
		if err != nil {
			return nil, err
		}
		e := keyEntry[V]{val: val, fetched: now, expires: now.Add(max(ttl, time.Second))}
		c.store(url, e, now)
		return e, nil
	})
	if err != nil {
		return keyEntry[V]{}, err
	}
	return v.(keyEntry[V]), nil
}

// store puts e under url, making room first when the cache is full.
func (c *keyCache[V]) store(url string, e keyEntry[V], now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[url]; !ok && len(c.m) >= c.limit {
		for k, old := range c.m {
			if !now.Before(old.expires) {
				delete(c.m, k)
			}
		}
		for len(c.m) >= c.limit {
			var oldest string
			for k, old := range c.m {
				if oldest == "" || old.fetched.Before(c.m[oldest].fetched) {
					oldest = k
				}
			}
			delete(c.m, oldest)
		}
	}
	c.m[url] = e
}
