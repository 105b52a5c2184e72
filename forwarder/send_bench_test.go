package forwarder_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

// BenchmarkBuildRequest builds the delivery request of a 1 KB Standard
// Webhooks event with the headers the ingress stores for it.
func BenchmarkBuildRequest(b *testing.B) {
	body := make([]byte, 1024)
	d := journal.Delivery{ID: 123456, Provider: "bench", EventID: "msg_2abcdefghijklmnop", Attempt: 1, Path: "/webhooks/bench",
		Body: body, Headers: http.Header{
			"Content-Type":      {"application/json"},
			"Content-Length":    {"1024"},
			"Accept-Encoding":   {"gzip"},
			"User-Agent":        {"Go-http-client/1.1"},
			"Webhook-Id":        {"msg_2abcdefghijklmnop"},
			"Webhook-Timestamp": {"1800000000"},
			"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
			"X-Forwarded-For":   {"127.0.0.1"},
			"X-Forwarded-Host":  {"127.0.0.1:8080"},
			"X-Forwarded-Proto": {"http"},
		}}
	t := forwarder.Target{BackendURL: "http://127.0.0.1:9000"}
	at := time.Unix(1_800_000_000, 0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := forwarder.BuildRequest(ctx, t, d, at); err != nil {
			b.Fatal(err)
		}
	}
}
