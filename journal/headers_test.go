package journal

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// decodeHeaders gives exactly what json.Unmarshal into an http.Header
// gives: the same headers, or an error when it errs. Seeds: jsonb's
// output (as PostgreSQL prints it), encoding/json's (the embedded
// journal), and shapes the plain path leaves to json.Unmarshal.
func FuzzDecodeHeaders(f *testing.F) {
	for _, s := range []string{
		`{"B": [], "X-A": ["q\"u\\o\nte\u0001", "é  <>&😀"], "Content-Type": ["application/json"]}`,
		`{"Content-Type":["application/json"],"X-A":["\u003cb\u003e \u0026 \u2028","\ud83d\ude00"]}`,
		`{}`, ` { } `, `null`, `{"A":null}`, `{"A":["x"],"A":["y"]}`, `{"A":["\ud800"]}`,
		`{"A":["a\/b\b\f\r\t"]}`, `{"A":[1]}`, `{"A":["x",]}`, `{"A":["x"]`, `{"A":["x"]}x`,
		"{\"A\":[\"\xff\"]}", `{"A":["\u00e9\u00E9"]}`, `{"A":["\x"]}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := http.Header{}
		wantErr := json.Unmarshal(b, &want)
		for k := range want {
			if strings.HasPrefix(k, receivedPrefix) {
				delete(want, k) // kept apart: the headers as received
			}
		}
		got, err := decodeHeaders(string(b))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, json.Unmarshal's %v", b, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %#v, json.Unmarshal gives %#v", b, got, want)
		}
	})
}

// The plain path takes the shapes the journal stores (else it would only
// ever fall back to json.Unmarshal and the fuzz target would prove little).
func TestParseHeadersTakesStoredShapes(t *testing.T) {
	for _, s := range []string{
		`{"B": [], "X-A": ["q\"u\\o\nte\u0001", "é  <>&😀"], "Content-Type": ["application/json"]}`,
		`{"Content-Type":["application/json"],"X-A":["\u003cb\u003e \u0026 \u2028"]}`,
		`{}`,
	} {
		if _, ok := parseHeaders(s); !ok {
			t.Errorf("%s: left to json.Unmarshal", s)
		}
	}
}

func BenchmarkDecodeHeaders(b *testing.B) {
	h := (`{"Accept": ["*/*"], "User-Agent": ["Svix-Webhooks/1.24.0"], "Content-Type": ["application/json"], "Webhook-Id": ["msg_2yZwUhtgs5Ai8T9yRQJXA"], "Content-Length": ["1024"], "Webhook-Signature": ["v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="], "Webhook-Timestamp": ["1764500000"]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeHeaders(h); err != nil {
			b.Fatal(err)
		}
	}
}
