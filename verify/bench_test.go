package verify

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchBody is a ~1 KB event, like the benchmark's payloads.
func benchBody() string {
	var items []string
	for i := range 12 {
		items = append(items, fmt.Sprintf(`{"sku":"SKU-%04d","qty":%d,"price":"%d.99","name":"Item number %d of the order"}`, i, i+1, 10+i, i))
	}
	return `{"type":"order.paid","id":"evt_1234567890","created":1764500000,"data":{"order_id":"o-42","customer":{"id":"cus_9","email":"a@example.com"},"amount":123456,"currency":"eur","items":[` +
		strings.Join(items, ",") + `]}}`
}

// The whole ingress-side cost of one Standard Webhooks request: verify the
// signature and timestamp, derive the key and the content hash.
func BenchmarkCheckStandard(b *testing.B) {
	body := benchBody()
	p, err := NewProvider(ProviderConfig{Name: "bench", Scheme: SchemeStandard, Secrets: []string{swSecret}})
	if err != nil {
		b.Fatal(err)
	}
	ts := time.Now().Unix()
	h := headers("webhook-id", "msg_bench", "webhook-timestamp", strconv.FormatInt(ts, 10),
		"webhook-signature", signStandardB(swSecret, "msg_bench", ts, body), "Content-Type", "application/json")
	in := Input{Header: h, Body: []byte(body)}
	now := time.Unix(ts, 0)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Check(in, now); err != nil {
			b.Fatal(err)
		}
	}
}

// Signature verification alone.
func BenchmarkVerifyStandardSignature(b *testing.B) {
	body := benchBody()
	keys, _ := secretKeys([]string{swSecret}, decodeStandardSecret)
	s := newStandardScheme(keys, 5*time.Minute, false)
	ts := time.Now().Unix()
	in := Input{Header: headers("webhook-id", "msg_bench", "webhook-timestamp", strconv.FormatInt(ts, 10),
		"webhook-signature", signStandardB(swSecret, "msg_bench", ts, body)), Body: []byte(body)}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(in, time.Unix(ts, 0)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	body := []byte(benchBody())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(body); err != nil {
			b.Fatal(err)
		}
	}
}

// Key derivation for a provider without an id of its own: the digest of
// the canonical body.
func BenchmarkDigestKey(b *testing.B) {
	body := []byte(benchBody())
	h := headers("Content-Type", "application/json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Digest(h, body); err != nil {
			b.Fatal(err)
		}
	}
}

func signStandardB(secret, id string, ts int64, body string) string {
	t := &testing.T{}
	return signStandard(t, secret, id, ts, body)
}
