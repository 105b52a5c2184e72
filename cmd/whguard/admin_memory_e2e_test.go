package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// TestE2EAdminSearchMemoryIsBounded: the admin side holds bounded memory
// whatever the journal holds. Over 400 bodies of 700 KB, four concurrent
// worst-case body searches (match= that matches nothing, so every body is
// read) and a filtered bulk replay keep the process under 250 MB and
// answer within their deadline (5 s per search, plus a little), 200 or 422,
// never 503. (Found: one such search took RSS from 47 to 783 MB, four to
// 3.2 GB, and ran 8-16 s past its 5 s bound; a filtered bulk replay over
// a large journal answered 503.)
func TestE2EAdminSearchMemoryIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.CreateMigrated(ctx, "admmem")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	j, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("p", 700<<10)
	for b := range 40 {
		var evs []journal.Event
		for i := range 10 {
			n := b*10 + i
			customer := fmt.Sprintf("cus_%d", n)
			if n%50 == 0 {
				customer = "cus_target"
			}
			evs = append(evs, journal.Event{Provider: "shop", EventID: fmt.Sprintf("big-%d", n), EventType: "order.paid",
				ContentHash: fmt.Sprint("h", n), Ignored: true, Path: "/webhooks/shop",
				Body: []byte(`{"data":{"customer":"` + customer + `","pad":"` + pad + `"}}`)})
		}
		if _, err := j.Append(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()

	backend := newProbeBackend(t, 0)
	listen, admin := freePort(t), freePort(t)
	p := start(t, binary, []string{
		"WHGUARD_DATABASE_URL=" + u, "WHGUARD_LISTEN=" + listen, "WHGUARD_ADMIN_LISTEN=" + admin,
		"WHGUARD_ADMIN_TOKEN=tok", "WHGUARD_PROVIDERS=shop", "WHGUARD_SHOP_SCHEME=standard",
		"WHGUARD_SHOP_SECRET=" + e2eSecret, "WHGUARD_BACKEND_URL=" + backend.srv.URL, "WHGUARD_LOG_LEVEL=warn",
	})
	waitHTTP(t, "http://"+admin+"/readyz", 30*time.Second)

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if mb := int64(procRSS(t, p.cmd.Process.Pid)); mb > peak.Load() {
				peak.Store(mb)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			code := adminCall(t, admin, "tok", http.MethodGet, "/api/events?status=ignored&limit=100&match=/data/customer=cus_nobody", "", nil)
			if took := time.Since(began); took > 7*time.Second {
				t.Errorf("search %d answered after %v: past its 5 s bound", i, took)
			}
			if code != http.StatusOK && code != http.StatusUnprocessableEntity {
				t.Errorf("search %d: %d", i, code)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var out struct {
			Replayed int    `json:"replayed"`
			Error    string `json:"error"`
		}
		code := adminCall(t, admin, "tok", http.MethodPost, "/api/replay",
			`{"status":"ignored","match":["/data/customer=cus_target"],"reason":"memory test"}`, &out)
		switch {
		case code == http.StatusOK && out.Replayed != 8:
			t.Errorf("bulk replay replayed %d, want the 8 matching events", out.Replayed)
		case code != http.StatusOK && code != http.StatusUnprocessableEntity:
			t.Errorf("bulk replay: %d %+v", code, out)
		}
	}()
	wg.Wait()
	close(stop)
	<-sampled
	if mb := peak.Load(); mb >= 250 {
		t.Errorf("peak RSS %d MB during the searches; want under 250", mb)
	} else {
		t.Logf("peak RSS %d MB", mb)
	}
}
