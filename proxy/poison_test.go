package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// hostileValues are what a sender controls and a journal column may
// refuse: NUL, invalid UTF-8, control characters, surrogate escapes, huge
// values.
var hostileValues = []string{
	"\x00", "a\x00b", "\xff\xfe", "\xc3\x28", "\xed\xa0\x80", "\x01\x02\x1b[31m", "\x7f",
	strings.Repeat("k", 70_000), strings.Repeat("\xff", 300), "ok\u2028\u2029", "\ufeffbom",
}

// jsonHostile are the same inside a JSON string, as escapes a decoder turns
// into the bytes above.
var jsonHostile = []string{
	`\u0000`, `a\u0000b`, `\udc00`, `\ud800x`, `\u0001\u001b`, `\u007f`,
	strings.Repeat("k", 70_000), `\uffff`,
}

// TestPoisonEventsNeverStopIngest: events whose every request-derived
// field carries NUL, invalid UTF-8, control characters or huge values,
// sent mixed with genuine events so that they share group commits: every
// genuine event is acknowledged, every hostile one gets a definite answer
// (never a 5xx), and no commit fails. (An order key of \xff\xfe once
// failed the advisory lock of the whole batch: 2 048 of 3 000 genuine
// events were answered 503.)
func TestPoisonEventsNeverStopIngest(t *testing.T) {
	forEachStore(t, testPoisonEventsNeverStopIngest)
}

func testPoisonEventsNeverStopIngest(t *testing.T, store string) {
	j := testdb.OpenStore(t, store, true)
	std, err := verify.NewProvider(verify.ProviderConfig{Name: "std", Scheme: "standard", Secrets: []string{stdSecret}})
	if err != nil {
		t.Fatal(err)
	}
	stripe, err := verify.NewProvider(verify.ProviderConfig{Name: "stripe", Scheme: "stripe", Secrets: []string{stripeSecret}})
	if err != nil {
		t.Fatal(err)
	}
	byHeader, _ := proxy.ParseOrderKey("header:X-Entity")
	byBody, _ := proxy.ParseOrderKey("/data/object/id")
	reg := prometheus.NewRegistry()
	metrics := proxy.NewMetrics(reg)
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{
			{Path: "/webhooks/std", Provider: std, Order: byHeader, MaxBodyBytes: 1 << 20},
			{Path: "/webhooks/stripe", Provider: stripe, Order: byBody, MaxBodyBytes: 1 << 20},
		},
		Intake:  newIntake(t, journal.NewGroupCommitter(j, 2, metrics.ObserveCommit), nil),
		Metrics: metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)

	rng := rand.New(rand.NewPCG(1, uint64(len(store))))
	type sent struct {
		genuine bool
		what    string
		raw     []byte
	}
	var reqs []sent
	now := time.Now()
	for i := range 120 {
		// Genuine: ordered by a plain header or body key.
		id := fmt.Sprintf("msg_genuine_%d", i)
		body := fmt.Sprintf(`{"type":"order.paid","n":%d}`, i)
		h := signStandard(id, now, body)
		h.Set("X-Entity", fmt.Sprintf("order-%d", i%7))
		reqs = append(reqs, sent{true, "std " + id, rawRequest("/webhooks/std", "", h, body)})
		sbody := fmt.Sprintf(`{"id":"evt_genuine_%d","type":"invoice.paid","data":{"object":{"id":"in_%d"}}}`, i, i%5)
		reqs = append(reqs, sent{true, "stripe " + fmt.Sprint(i), rawRequest("/webhooks/stripe", "", signStripe(now, sbody), sbody)})
	}
	for i := range 120 {
		v := hostileValues[rng.IntN(len(hostileValues))]
		jv := jsonHostile[rng.IntN(len(jsonHostile))]
		id := fmt.Sprintf("msg_hostile_%d", i)
		var r sent
		switch i % 6 {
		case 0: // the order key's header
			body := fmt.Sprintf(`{"type":"order.paid","h":%d}`, i)
			h := signStandard(id, now, body)
			h["X-Entity"] = []string{v}
			r = sent{false, "order header", rawRequest("/webhooks/std", "", h, body)}
		case 1: // the order key in the body
			body := fmt.Sprintf(`{"id":"evt_hostile_%d","type":"x","data":{"object":{"id":"%s"}}}`, i, jv)
			r = sent{false, "order pointer", rawRequest("/webhooks/stripe", "", signStripe(now, body), body)}
		case 2: // the event type
			body := fmt.Sprintf(`{"id":"evt_hostile_%d","type":"%s","data":{"object":{"id":"in_1"}}}`, i, jv)
			r = sent{false, "type", rawRequest("/webhooks/stripe", "", signStripe(now, body), body)}
		case 3: // the event id
			body := fmt.Sprintf(`{"id":"evt_%s","type":"x"}`, jv)
			r = sent{false, "id", rawRequest("/webhooks/stripe", "", signStripe(now, body), body)}
		case 4: // any other header, and the content type
			body := fmt.Sprintf(`{"type":"order.paid","h":%d}`, i)
			h := signStandard(id, now, body)
			h["X-Other"] = []string{v}
			h["Content-Type"] = []string{"application/json; " + v}
			r = sent{false, "header", rawRequest("/webhooks/std", "", h, body)}
		case 5: // the query string and the body's bytes
			body := fmt.Sprintf(`{"type":"order.paid","b":"%s"}`, v)
			r = sent{false, "query", rawRequest("/webhooks/std", "q="+v, signStandard(id, now, body), body)}
		}
		reqs = append(reqs, r)
	}
	rng.Shuffle(len(reqs), func(a, b int) { reqs[a], reqs[b] = reqs[b], reqs[a] })

	addr := strings.TrimPrefix(srv.URL, "http://")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	sem := make(chan struct{}, 32) // enough at once to share batches
	for _, r := range reqs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			status, err := sendRaw(addr, r.raw)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s: %v", r.what, err))
			case r.genuine && status != http.StatusAccepted:
				problems = append(problems, fmt.Sprintf("genuine %s: %d", r.what, status))
			case !r.genuine && status >= 500:
				problems = append(problems, fmt.Sprintf("hostile %s: %d (not a definite answer)", r.what, status))
			}
		}()
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	if n := gathered(t, reg, "whguard_journal_commit_failures_total"); n != 0 {
		t.Errorf("%v commit failures; want 0 (one event's bytes failed others' commits)", n)
	}
	// Every genuine event is in the journal.
	evs, _, err := j.List(context.Background(), journal.Filter{Limit: 500, EventID: "msg_genuine_", EventIDPrefix: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 120 {
		t.Errorf("%d genuine standard events journaled; want 120", len(evs))
	}
}

// rawRequest writes an HTTP/1.1 POST by hand, so that header values may
// hold bytes a Go client would refuse to send.
func rawRequest(path, query string, h http.Header, body string) []byte {
	var b strings.Builder
	target := path
	if query != "" {
		target += "?" + query
	}
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: whguard.test\r\nContent-Length: %d\r\nConnection: close\r\n", target, len(body))
	for k, vs := range h {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return []byte(b.String())
}

// sendRaw sends a raw request and returns the answer's status.
func sendRaw(addr string, raw []byte) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(raw); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// gathered sums the values of a counter or gauge family in reg.
func gathered(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
