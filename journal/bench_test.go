package journal_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// BenchmarkAppend measures one batch of 16 new ~1 KB events per operation
// on each store, the size group commit reaches under load.
func BenchmarkAppend(b *testing.B) {
	body := []byte(strings.Repeat("x", 1000))
	h := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg"}, "Webhook-Signature": {"v1,abc"}}
	for _, store := range testdb.Stores {
		b.Run(store, func(b *testing.B) {
			s := testdb.OpenStore(b, store, true)
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				batch := make([]journal.Event, 16)
				for i := range batch {
					batch[i] = journal.Event{Provider: "bench", EventID: fmt.Sprintf("e%d", seq.Add(1)), ContentHash: "h",
						Headers: h, Body: body, Path: "/webhooks/bench"}
				}
				if _, err := s.Append(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*16)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
