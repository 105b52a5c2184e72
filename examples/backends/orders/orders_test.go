package orders_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/whguard/whguard/examples/backends/orders"
)

// The service is naive on purpose: the same event twice is applied twice.
func TestNaiveServiceAppliesDuplicates(t *testing.T) {
	svc := orders.New(orders.Config{FailFirst: 1, RejectType: "order.bogus", FlakyType: "order.flaky"})
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	post := func(body string) int {
		resp, err := http.Post(srv.URL+"/webhooks/shop", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ev := `{"type":"order.paid","data":{"order_id":"o-1"}}`
	if s := post(ev); s != 503 {
		t.Fatalf("first call %d, want 503 (FailFirst)", s)
	}
	if s := post(ev); s != 200 {
		t.Fatalf("second %d", s)
	}
	if s := post(ev); s != 200 {
		t.Fatalf("third %d", s)
	}
	if s := post(`{"type":"order.bogus","order_id":"o-2"}`); s != 422 {
		t.Fatalf("rejected type %d", s)
	}
	if s := post(`{"type":"order.flaky","order_id":"o-3"}`); s != 503 {
		t.Fatalf("first flaky %d, want 503", s)
	}
	if s := post(`{"type":"order.flaky","order_id":"o-3"}`); s != 200 {
		t.Fatalf("second flaky %d, want 200", s)
	}
	if s := post(`{"id":"evt_1","object":"event","type":"order.paid","data":{"object":{"order_id":"o-4"}}}`); s != 200 {
		t.Fatalf("a Stripe-shaped event %d, want 200", s)
	}
	if s := post(`{"type":"x"}`); s != 422 {
		t.Fatalf("no order id %d", s)
	}
	resp, err := http.Get(srv.URL + "/orders/o-1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o orders.Order
	json.NewDecoder(resp.Body).Decode(&o)
	if o.StateChanges != 2 || o.Status != "order.paid" {
		t.Fatalf("order %+v, want 2 state changes (duplicates applied)", o)
	}
	if r, _ := http.Get(srv.URL + "/health"); r.StatusCode != 200 {
		t.Fatalf("health %d", r.StatusCode)
	}
}
