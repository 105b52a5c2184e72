package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/whguard/whguard/proxy/admin"
)

// GET /api/refusals without a ring answers an empty list; a filter too
// long to be a name is refused.
func TestRefusalsAPIBounds(t *testing.T) {
	api := admin.NewAPI(admin.APIConfig{})
	for _, tc := range []struct {
		query  string
		status int
		body   string
	}{
		{"", http.StatusOK, `{"refusals":[]}`},
		{"provider=" + strings.Repeat("p", 201), http.StatusBadRequest, "at most 200 bytes"},
	} {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/refusals?"+tc.query, nil))
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%.20s: %d %s", tc.query, rec.Code, rec.Body)
		}
	}
}
