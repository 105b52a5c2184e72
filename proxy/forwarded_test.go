package proxy

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// withForwarded copies the request's headers and adds the proxy headers;
// the request's own header map is left as it was, and the copy's values
// can grow without writing over one another.
func TestWithForwardedCopies(t *testing.T) {
	for _, c := range []struct {
		name     string
		in       http.Header
		wantFor  string
		wantFwd  string
		wantHost string
	}{
		{"bare", http.Header{"Webhook-Id": {"msg_1"}}, "192.0.2.1", `for=192.0.2.1;host=example.com;proto=http`, "example.com"},
		{"behind a proxy", http.Header{"X-Forwarded-For": {"203.0.113.9", "198.51.100.2"}, "X-Forwarded-Host": {"hooks.example.org"},
			"Forwarded": {"for=203.0.113.9"}},
			"203.0.113.9, 198.51.100.2, 192.0.2.1", `for=203.0.113.9, for=192.0.2.1;host=hooks.example.org;proto=http`, "hooks.example.org"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "http://example.com/webhooks/x", nil)
			r.RemoteAddr = "192.0.2.1:4711"
			r.Header = c.in.Clone()
			h, _ := withForwarded(r)
			if !equalHeaders(r.Header, c.in) {
				t.Fatalf("the request's headers changed: %v", r.Header)
			}
			for name, want := range map[string]string{"X-Forwarded-For": c.wantFor, "Forwarded": c.wantFwd,
				"X-Forwarded-Host": c.wantHost, "X-Forwarded-Proto": "http"} {
				if got := h.Values(name); len(got) != 1 || got[0] != want {
					t.Errorf("%s = %q, want [%q]", name, got, want)
				}
			}
			for name, vs := range c.in {
				if name == "X-Forwarded-For" || name == "Forwarded" {
					continue
				}
				if !slices.Equal(h[name], vs) {
					t.Errorf("%s = %q, want %q", name, h[name], vs)
				}
			}
			// Growing one value list must not write over another's.
			before := h.Clone()
			for name := range before {
				h.Add(name, "added")
			}
			for name, vs := range before {
				if got := h[name]; !slices.Equal(got[:len(got)-1], vs) {
					t.Errorf("after adding to every header, %s = %q, want %q then the addition", name, got, vs)
				}
			}
		})
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, vs := range a {
		if !slices.Equal(vs, b[k]) {
			return false
		}
	}
	return true
}

// BenchmarkWithForwarded: the journaled copy of a Stripe-like webhook's
// headers.
func BenchmarkWithForwarded(b *testing.B) {
	r := httptest.NewRequest(http.MethodPost, "http://example.com/webhooks/stripe", nil)
	r.RemoteAddr = "192.0.2.1:4711"
	for k, v := range map[string]string{"Content-Type": "application/json; charset=utf-8", "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
		"Stripe-Signature": "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd", "Accept": "*/*; q=0.5, application/xml",
		"Cache-Control": "no-cache", "Content-Length": "1024", "Accept-Encoding": "gzip"} {
		r.Header.Set(k, v)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = withForwarded(r)
	}
}

// withForwarded says what each header it set was when received: put back,
// they give the request's headers exactly as received, with or without a
// proxy in front (repeated lines, an empty value included).
func TestWithForwardedKeepsWhatWasReceived(t *testing.T) {
	for _, in := range []http.Header{
		{"Webhook-Id": {"msg_1"}},
		{"X-Forwarded-For": {"203.0.113.9", "198.51.100.2"}, "X-Forwarded-Host": {"hooks.example.org"}, "Forwarded": {"for=203.0.113.9"}},
		{"X-Forwarded-Proto": {""}, "A": {"1"}},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://example.com/webhooks/x", nil)
		r.Header = in.Clone()
		h, was := withForwarded(r)
		back := h.Clone()
		for name, vs := range was {
			if len(vs) == 0 {
				delete(back, name)
				continue
			}
			back[name] = vs
		}
		if !equalHeaders(back, in) {
			t.Errorf("received %v; forwarded %v with %v put back gives %v", in, h, was, back)
		}
		if len(was) == 0 {
			t.Errorf("received %v: nothing said about the headers set", in)
		}
	}
}
