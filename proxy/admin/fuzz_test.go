package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// FuzzAdminAPI sends arbitrary queries and replay and retry bodies to the admin API
// over a real journal: it never answers 5xx (the journal is up) and always
// answers JSON.
func FuzzAdminAPI(f *testing.F) {
	f.Add("status=dead&limit=5", `{"reason":"x"}`)
	f.Add("provider=%00&before=-1", `{"reason":"a\u0000","status":"done","since":"2026-01-01T00:00:00Z","limit":-3}`)
	f.Add("limit=99999999999999999999", `{"reason":"`+strings.Repeat("r", 2000)+`"}`)
	j := testdb.OpenStore(f, "sqlite", true)
	if _, err := j.Append(context.Background(), []journal.Event{{Provider: "p", EventID: "e", ContentHash: "h", Body: []byte("{}"), Path: "/"}}); err != nil {
		f.Fatal(err)
	}
	adm := admin.NewAdmin(admin.AdminConfig{
		Ready: j.Ready, Gatherer: prometheus.NewRegistry(), Token: "tok",
		API: admin.NewAPI(admin.APIConfig{Store: j}),
	})
	f.Fuzz(func(t *testing.T, query, body string) {
		for _, r := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "/api/events", nil),
			httptest.NewRequest(http.MethodPost, "/api/replay", strings.NewReader(body)),
			httptest.NewRequest(http.MethodPost, "/api/events/1/replay", strings.NewReader(body)),
			httptest.NewRequest(http.MethodPost, "/api/retry", strings.NewReader(body)),
			httptest.NewRequest(http.MethodPost, "/api/events/1/retry", strings.NewReader(body)),
		} {
			r.URL.RawQuery = query
			r.Header.Set("Authorization", "Bearer tok")
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			rec := httptest.NewRecorder()
			adm.ServeHTTP(rec, r.WithContext(ctx))
			cancel()
			if rec.Code >= 500 || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s?%s: %d %s", r.Method, r.URL.Path, query, rec.Code, rec.Body)
			}
		}
	})
}
