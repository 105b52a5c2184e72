package proxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/whguard/whguard/proxy"
)

func BenchmarkOrderKeyValue(b *testing.B) {
	body := []byte(`{"type":"order.created","timestamp":"2026-01-15T10:00:00Z","data":{"object":"order","id":"ord_x_1","customer":"cus_000001","amount_cents":1234,"currency":"eur","items":[{"sku":"SKU-0001","quantity":1,"unit_price_cents":500},{"sku":"SKU-0002","quantity":1,"unit_price_cents":100}],"shipping":{"name":"Ada Lovelace","line1":"12 Analytical Engine Row","city":"London","postal_code":"N1 9GU","country":"GB"},"metadata":{"channel":"web","campaign":"spring","bench":true},"note":"` + strings.Repeat("a", 600) + `"}}`)
	k := proxy.OrderKey{Pointer: "/data/items/0/sku"}
	b.ReportAllocs()
	for b.Loop() {
		if k.Value(http.Header{}, body) != "SKU-0001" {
			b.Fatal("wrong key")
		}
	}
}
