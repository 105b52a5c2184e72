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
	for _, ordered := range []bool{false, true} {
		name := "unordered"
		if ordered {
			name = "ordered" // 1000 keys: most appends find their key held
		}
		b.Run(name, func(b *testing.B) { benchmarkAppend(b, ordered) })
	}
}

func benchmarkAppend(b *testing.B, ordered bool) {
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
					n := seq.Add(1)
					batch[i] = journal.Event{Provider: "bench", EventID: fmt.Sprintf("e%d", n), ContentHash: "h",
						Headers: h, Body: body, Path: "/webhooks/bench"}
					if ordered {
						batch[i].OrderKey = fmt.Sprintf("k%d", n%1000)
					}
				}
				if _, err := s.Append(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*16)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
