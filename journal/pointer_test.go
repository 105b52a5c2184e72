package journal

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// pointerValue resolves an RFC 6901 JSON Pointer over a decoded document
// ("" is the whole document): the reference the byte walkers are checked
// against.
func pointerValue(doc any, pointer string) (any, bool) {
	if pointer == "" {
		return doc, true
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// matchesDecoded is matchesBody by decoding the whole body.
func matchesDecoded(body []byte, ms []Match) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if !json.Valid(body) || dec.Decode(&doc) != nil {
		return false
	}
	for _, m := range ms {
		v, ok := pointerValue(doc, m.Pointer)
		if !ok {
			return false
		}
		var eq bool
		switch x := v.(type) {
		case string:
			eq = x == m.Value
		case json.Number:
			eq = x.String() == m.Value
		case bool:
			eq = strconv.FormatBool(x) == m.Value
		case nil:
			eq = m.Value == "null"
		}
		if !eq {
			return false
		}
	}
	return true
}

// FuzzMatchesBodyLikeDecoding: the body search's byte walk agrees with
// decoding the body.
func FuzzMatchesBodyLikeDecoding(f *testing.F) {
	f.Add([]byte(`{"data":{"object":{"customer":"cus_1","n":1.50,"ok":true,"z":null}}}`), "/data/object/customer", "cus_1")
	f.Add([]byte(`{"a":[1,{"b":"\u0041"}],"a":[2]}`), "/a/0", "2")
	f.Add([]byte(`{"t":true}`), "/t", "true")
	f.Add([]byte(`{"z":null}`), "/z", "null")
	f.Add([]byte("{\"k\":\"\xff\"}"), "/k", "\ufffd")
	f.Fuzz(func(t *testing.T, body []byte, ptr, value string) {
		if !strings.HasPrefix(ptr, "/") {
			return // ParseMatch refuses it
		}
		m := []Match{{Pointer: ptr, Value: value}}
		if got, want := matchesBody(body, m), matchesDecoded(body, m); got != want {
			t.Fatalf("%q = %q in %q: walked %v, decoded %v", ptr, value, body, got, want)
		}
	})
}

// pointerTextDecoded is PointerText by decoding the whole body: the
// reference the walk is checked against.
func pointerTextDecoded(body []byte, pointer string) (string, bool) {
	if !json.Valid(body) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return "", false
	}
	if pointer == "" {
		return "", false
	}
	v, found := pointerValue(doc, pointer)
	if !found {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, x != ""
	case json.Number:
		return x.String(), true
	}
	return "", false
}

func TestPointerTextMatchesDecoding(t *testing.T) {
	t.Parallel()
	body := []byte(` {"data" : {"object":{"id":"sub_1","n":-12.5e3,"esc":"a\"b\\u00e9","arr":[ {"x":1}, "two", [3] ],"dup":"first","dup":"last","":"empty name","a/b":"slash","m~n":"tilde"}} , "e":"" } `)
	for _, ptr := range []string{"/data/object/id", "/data/object/n", "/data/object/esc", "/data/object/arr/0/x", "/data/object/arr/1",
		"/data/object/arr/2/0", "/data/object/arr/3", "/data/object/arr/01", "/data/object/arr/-", "/data/object/dup",
		"/data/object/", "/data/object/a~1b", "/data/object/m~0n", "/e", "/data", "/nope", "/data/object/id/x", ""} {
		got, gotOK := PointerText(body, ptr)
		want, wantOK := pointerTextDecoded(body, ptr)
		if got != want || gotOK != wantOK {
			t.Errorf("%q: walked %q %v, decoded %q %v", ptr, got, gotOK, want, wantOK)
		}
	}
}

func FuzzPointerTextMatchesDecoding(f *testing.F) {
	f.Add([]byte(`{"data":{"object":{"id":"sub_1"}}}`), "/data/object/id")
	f.Add([]byte(`{"a":[1,{"b":"\u0041"}],"a":[2]}`), "/a/0")
	f.Add([]byte(`[true,null,"x"]`), "/2")
	f.Add([]byte("{\"k\":\"\xff\"}"), "/k")
	f.Add([]byte("{\"\xff\":\"v\"}"), "/\ufffd")
	f.Fuzz(func(t *testing.T, body []byte, ptr string) {
		got, gotOK := PointerText(body, ptr)
		want, wantOK := pointerTextDecoded(body, ptr)
		if got != want || gotOK != wantOK {
			t.Fatalf("%q in %q: walked %q %v, decoded %q %v", ptr, body, got, gotOK, want, wantOK)
		}
	})
}
