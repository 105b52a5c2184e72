package proxy

import (
	"golang.org/x/sync/semaphore"
)

// DefaultMaxBufferedBytes bounds the request bodies being read at once
// (WHGUARD_MAX_BUFFERED_BYTES): 64 MiB.
const DefaultMaxBufferedBytes = 64 << 20

// smallBody is the size up to which a body counts as small: every webhook
// of the common senders (Stripe events are a few KB, GitHub's mostly under
// 25 KB).
const smallBody = 64 << 10

// bodyBudget bounds the memory that request bodies being read may hold,
// whoever sends them: each request reserves its declared length (its
// limit when it declares none) before a byte of its body is read, and a
// request that finds the budget spent is answered 503 with Retry-After
// at once, its body unread. Large bodies may hold at most three quarters
// of the budget, so clients withholding the last byte of large bodies
// (an unauthenticated attack: the signature is checked only once the body
// is in) cannot keep small, genuine webhooks out.
type bodyBudget struct {
	all, large        *semaphore.Weighted
	total, largeShare int64
}

// largeShare is the part of a budget of total bytes that large bodies may
// hold: three quarters.
func largeShare(total int64) int64 { return max(total*3/4, 1) }

func newBodyBudget(total int64) *bodyBudget {
	share := largeShare(total)
	return &bodyBudget{
		all:        semaphore.NewWeighted(total),
		large:      semaphore.NewWeighted(share),
		total:      total,
		largeShare: share,
	}
}

// reserve takes n bytes of the budget without waiting; release gives them
// back. It reports false when the budget is spent.
func (b *bodyBudget) reserve(n int64) (release func(), ok bool) {
	n = min(max(n, 1), b.total)
	if n > smallBody {
		// A body larger than the whole large share takes all of it.
		n = min(n, b.largeShare)
		if !b.large.TryAcquire(n) {
			return nil, false
		}
		if !b.all.TryAcquire(n) {
			b.large.Release(n)
			return nil, false
		}
		return func() { b.all.Release(n); b.large.Release(n) }, true
	}
	if !b.all.TryAcquire(n) {
		return nil, false
	}
	return func() { b.all.Release(n) }, true
}
