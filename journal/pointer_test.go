package journal

import (
	"bytes"
	"encoding/json"
	"testing"
)

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
