package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// TestOverview: counts by status, one entry per minute of the window with
// every replica's figures added, percentiles, and the window's bounds.
func TestOverview(t *testing.T) { forEachStore(t, testOverview) }

func testOverview(t *testing.T, store string) {
	a := newAPIFixture(t, store, 6, 2) // 4 pending, 2 dead
	// The API counts minutes from its own clock: keep clear of a minute's
	// end, so that both see the same minute.
	if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 3*time.Second {
		time.Sleep(left + 50*time.Millisecond)
	}
	now := time.Now().UTC().Truncate(time.Minute)
	fig := func(at time.Time, delivered, failed int64, lat time.Duration) journal.Minute {
		m := journal.Minute{Minute: at, Provider: "alpha", Delivered: delivered, Failed: failed}
		for range delivered {
			m.ObserveLatency(lat)
		}
		return m
	}
	ctx := context.Background()
	if err := a.j.RecordMinutes(ctx, "r1", []journal.Minute{fig(now, 10, 1, 8*time.Millisecond), fig(now.Add(-3*time.Minute), 4, 0, 30*time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if err := a.j.RecordMinutes(ctx, "r2", []journal.Minute{fig(now, 10, 2, 8*time.Millisecond), fig(now.Add(-20*time.Minute), 99, 0, time.Second)}); err != nil {
		t.Fatal(err)
	}
	code, body := a.do(t, "GET", "/api/overview?window=10m", "tok", "")
	if code != 200 || body["window"] != "10m" {
		t.Fatalf("overview: %d %v", code, body)
	}
	counts := body["counts"].(map[string]any)
	if counts["pending"] != float64(4) || counts["dead"] != float64(2) {
		t.Errorf("counts %v, want 4 pending and 2 dead", counts)
	}
	if bk, ok := body["blocked_keys"].(map[string]any); !ok || len(bk) != 0 {
		t.Errorf("blocked keys %v, want an empty object", body["blocked_keys"])
	}
	if age := body["oldest_pending_age_seconds"].(float64); age < 0 || age > 60 {
		t.Errorf("oldest pending age %v", age)
	}
	minutes := body["minutes"].([]any)
	if len(minutes) != 10 {
		t.Fatalf("%d minutes in a 10m window", len(minutes))
	}
	lastM := minutes[9].(map[string]any)
	if lastM["delivered"] != float64(20) || lastM["failed"] != float64(3) {
		t.Errorf("this minute, both replicas: %v", lastM)
	}
	if p50 := lastM["latency_p50_ms"].(float64); p50 <= 5 || p50 > 10 {
		t.Errorf("p50 %v ms, want within the 5-10 ms bucket", p50)
	}
	if m := minutes[6].(map[string]any); m["delivered"] != float64(4) {
		t.Errorf("three minutes ago: %v", m)
	}
	if m := minutes[0].(map[string]any); m["delivered"] != float64(0) || m["latency_p50_ms"] != nil {
		t.Errorf("a minute without deliveries: %v", m)
	}
	totals := body["totals"].(map[string]any)
	if totals["delivered"] != float64(24) { // the 20-minute-old row is outside the window
		t.Errorf("totals %v, want 24 delivered", totals)
	}
	for _, bad := range []string{"10s", "48h", "soon"} {
		if code, _ := a.do(t, "GET", "/api/overview?window="+bad, "tok", ""); code != 400 {
			t.Errorf("window=%s: %d, want 400", bad, code)
		}
	}
	if code, body := a.do(t, "GET", "/api/overview", "tok", ""); code != 200 || len(body["minutes"].([]any)) != 60 {
		t.Errorf("default window: %d, %d minutes", code, len(body["minutes"].([]any)))
	}
}

// tooSlowInspector is a journal whose searches run past their bound.
type tooSlowInspector struct{ admin.Inspector }

func (tooSlowInspector) List(context.Context, journal.Filter) ([]journal.Summary, int64, error) {
	return nil, 0, fmt.Errorf("list events: %w", journal.ErrSearchTooSlow)
}

// TestSearchTooSlowSaysHowToNarrow: a search stopped at its bound is a
// 422 telling what to narrow, not a 503 blaming the journal.
func TestSearchTooSlowSaysHowToNarrow(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: func(context.Context) error { return nil }, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: admin.NewAPI(admin.APIConfig{Store: tooSlowInspector{}}),
	}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/api/events?match=/a=b", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), "narrow it with since/until") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
