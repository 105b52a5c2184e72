package proxy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// claimAll is a dispatcher that claims every event it is offered and
// records what it was handed.
type claimAll struct {
	mu               sync.Mutex
	claims, unclaims int
	dispatched       []string
}

func (c *claimAll) Claim() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims++
	return time.Minute, true
}

func (c *claimAll) Unclaim() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unclaims++
}

func (c *claimAll) Dispatch(d journal.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dispatched = append(c.dispatched, d.EventID)
}

// An event-type filter at ingest: a matching event and one without a type
// are journaled for delivery (and offered to the dispatcher); one of
// another type is acknowledged alike but journaled as ignored, never
// claimed, and counted; its resend is a plain duplicate.
func TestEventTypeFilterAtIngest(t *testing.T) {
	t.Parallel()
	testdb.ForEachStoreParallel(t, testEventTypeFilterAtIngest)
}

func testEventTypeFilterAtIngest(t *testing.T, store string) {
	j := testdb.OpenStore(t, store, true)
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "open", Scheme: "none"})
	if err != nil {
		t.Fatal(err)
	}
	d := &claimAll{}
	reg := prometheus.NewRegistry()
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes:  []proxy.Route{{Path: "/webhooks/open", Provider: p, EventTypes: []string{"invoice.*", "customer.subscription.*"}}},
		Intake:  newIntake(t, j, d),
		Metrics: proxy.NewMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, j: j, reg: reg, ingress: in}

	h := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		body   string
		status journal.Status
	}{
		{`{"type":"invoice.paid","n":1}`, journal.StatusProcessing}, // claimed for delivery
		{`{"type":"charge.refunded","n":2}`, journal.StatusIgnored}, // another type
		{`{"n":3}`, journal.StatusProcessing},                       // no type: forwarded
		{`{"type":"Invoice.paid","n":4}`, journal.StatusIgnored},    // case-sensitive
	} {
		r := f.post(t, "/webhooks/open", h, tc.body)
		if r.status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", tc.body, r.status, r.body)
		}
		var ack struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal([]byte(r.body), &ack); err != nil {
			t.Fatal(err)
		}
		var got journal.Status
		for _, e := range f.events(t) {
			if e.EventID == ack.EventID {
				got = e.Status
			}
		}
		if got != tc.status {
			t.Errorf("%s journaled as %q, want %q", tc.body, got, tc.status)
		}
	}
	first := f.post(t, "/webhooks/open", h, `{"type":"charge.refunded","n":2}`)
	if first.status != http.StatusOK {
		t.Fatalf("resend of an ignored event: %d %s", first.status, first.body)
	}
	d.mu.Lock()
	claims, unclaims, dispatched := d.claims, d.unclaims, len(d.dispatched)
	d.mu.Unlock()
	if claims != 2 || dispatched != 2 || unclaims != 0 {
		t.Errorf("dispatcher: %d claims, %d dispatched, %d unclaimed; want 2, 2, 0 (ignored events are never claimed)", claims, dispatched, unclaims)
	}
	var ignored float64
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "whguard_events_ignored_total" {
			for _, m := range mf.GetMetric() {
				ignored += m.GetCounter().GetValue()
			}
		}
	}
	if ignored != 2 {
		t.Errorf("whguard_events_ignored_total = %v, want 2", ignored)
	}
	if n := f.count("open", "accepted"); n != 4 {
		t.Errorf("accepted requests %v, want 4", n)
	}
}
