package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
)

func TestParseOrderKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want proxy.OrderKey
		bad  string
	}{
		{in: "", want: proxy.OrderKey{}},
		{in: "/data/object/id", want: proxy.OrderKey{Pointer: "/data/object/id"}},
		{in: "/a~1b/~0c", want: proxy.OrderKey{Pointer: "/a~1b/~0c"}},
		{in: "header:x-shopify-order-id", want: proxy.OrderKey{Header: "X-Shopify-Order-Id"}},
		{in: "/a~2", bad: "~ must be followed by 0 or 1"},
		{in: "/a~", bad: "~ must be followed by 0 or 1"},
		{in: "data/object/id", bad: "JSON Pointer"},
		{in: "header:", bad: "header name"},
		{in: "header:bad name", bad: "header name"},
	} {
		got, err := proxy.ParseOrderKey(tc.in)
		switch {
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.bad)
		case tc.bad == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestOrderKeyValue(t *testing.T) {
	t.Parallel()
	stripe := proxy.OrderKey{Pointer: "/data/object/id"}
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		key  proxy.OrderKey
		h    http.Header
		body string
		want string
	}{
		{stripe, nil, `{"data":{"object":{"id":"sub_123"}}}`, "sub_123"},
		{stripe, nil, `{"data":{"object":{"id":12345678901234567890123}}}`, "12345678901234567890123"}, // never through float64
		{stripe, nil, `{"data":{"object":{}}}`, ""},
		{stripe, nil, `{"data":{"object":{"id":""}}}`, ""},
		{stripe, nil, `{"data":{"object":{"id":null}}}`, ""},
		{stripe, nil, `{"data":{"object":{"id":{"a":1}}}}`, ""},
		{stripe, nil, `Body=not+json`, ""},
		{proxy.OrderKey{Pointer: "/items/0/sku"}, nil, `{"items":[{"sku":"A-1"}]}`, "A-1"},
		{proxy.OrderKey{Header: "X-Order-Id"}, http.Header{"X-Order-Id": {" 42 "}}, `{}`, "42"},
		{proxy.OrderKey{Header: "X-Order-Id"}, http.Header{}, `{}`, ""},
		{proxy.OrderKey{}, nil, `{"data":{"object":{"id":"sub_123"}}}`, ""},
	} {
		// Every key is stored as the digest of its value.
		if got := tc.key.Value(tc.h, []byte(tc.body)); got != journal.OrderKeyDigest(tc.want) {
			t.Errorf("%+v over %s: %q, want the digest of %q", tc.key, tc.body, got, tc.want)
		}
	}
	// Any value, long or hostile, is a fixed-size storable digest: the
	// same value, the same key; another value, another key.
	for _, v := range []string{long, `\u0000`, `\udc00`, `a\u0000b`} {
		a := stripe.Value(nil, []byte(`{"data":{"object":{"id":"`+v+`"}}}`))
		b := stripe.Value(nil, []byte(`{"data":{"object":{"id":"`+v+`"}}}`))
		if !strings.HasPrefix(a, "sha256:") || a != b || len(a) != 71 || !utf8.ValidString(a) {
			t.Errorf("key %q stored as %q", v, a)
		}
	}
	h1 := proxy.OrderKey{Header: "X-Entity"}.Value(http.Header{"X-Entity": {"\xff\xfe"}}, nil)
	h2 := proxy.OrderKey{Header: "X-Entity"}.Value(http.Header{"X-Entity": {"\xff\xfd"}}, nil)
	if h1 == h2 || len(h1) != 71 || !utf8.ValidString(h1) {
		t.Errorf("invalid UTF-8 header keys stored as %q and %q", h1, h2)
	}
}

func FuzzOrderKeyValue(f *testing.F) {
	f.Add("/data/object/id", []byte(`{"data":{"object":{"id":"sub_1"}}}`))
	f.Add("/a/0", []byte(`{"a":[1]}`))
	f.Fuzz(func(t *testing.T, ptr string, body []byte) {
		k, err := proxy.ParseOrderKey(ptr)
		if err != nil {
			return
		}
		if v := k.Value(http.Header{}, body); len(v) > 200 {
			t.Fatalf("key of %d bytes", len(v))
		}
	})
}
