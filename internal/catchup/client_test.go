package catchup

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The providers' APIs are read through a client that ends an answer past
// its bound with an error (a hostile or broken API cannot fill memory)
// and follows no redirect (the API token would go along, found: the
// default client followed them).
func TestAPIClientBoundsAnswersAndFollowsNoRedirect(t *testing.T) {
	var tokenSeen bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenSeen = r.Header.Get("Authorization") != ""
	}))
	defer elsewhere.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/huge":
			chunk := strings.Repeat("x", 1<<20)
			for range maxResponseBytes>>20 + 1 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
		case "/exact":
			_, _ = io.WriteString(w, strings.Repeat("x", maxResponseBytes))
		default:
			http.Redirect(w, r, elsewhere.URL+"/v1/events", http.StatusFound)
		}
	}))
	defer api.Close()
	c := apiClient(10 * time.Second)
	get := func(path string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest(http.MethodGet, api.URL+path, nil)
		req.Header.Set("Authorization", "Bearer sk_test_x")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	if _, b, err := get("/huge"); !errors.Is(err, errTooLarge) || len(b) > maxResponseBytes {
		t.Errorf("an answer past the bound: %d bytes read, %v", len(b), err)
	}
	if _, b, err := get("/exact"); err != nil || len(b) != maxResponseBytes {
		t.Errorf("an answer of the bound exactly: %d bytes, %v", len(b), err)
	}
	if resp, _, err := get("/redirect"); err != nil || resp.StatusCode != http.StatusFound || tokenSeen {
		t.Errorf("a redirect: %v, %v; token sent elsewhere: %v", resp.StatusCode, err, tokenSeen)
	}
}
