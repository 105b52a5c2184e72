package journal

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// matchesBody reports whether body is JSON holding every match's value at
// its pointer. A body that is not JSON matches nothing.
func matchesBody(body []byte, ms []Match) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return false
	}
	for _, m := range ms {
		v, ok := pointerValue(doc, m.Pointer)
		if !ok || !valueEquals(v, m.Value) {
			return false
		}
	}
	return true
}

// pointerValue resolves an RFC 6901 JSON Pointer ("" is the whole
// document; "/a/0/b~1c" walks a, index 0, "b/c").
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

// valueEquals compares a JSON value with the text a person typed: a
// string by its text, a number as written (1 and 1.0 differ only if
// written so), true, false and null by name; objects and arrays never.
func valueEquals(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return x == want
	case json.Number:
		return x.String() == want
	case bool:
		return strconv.FormatBool(x) == want
	case nil:
		return want == "null"
	}
	return false
}

// ParseMatch reads "POINTER=VALUE" (e.g. "/data/object/customer=cus_123");
// the pointer must start with "/".
func ParseMatch(s string) (Match, bool) {
	ptr, val, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(ptr, "/") {
		return Match{}, false
	}
	return Match{Pointer: ptr, Value: val}, true
}

// likePattern turns a type pattern with * wildcards into a LIKE pattern
// (backslash escapes the LIKE metacharacters the user meant literally).
func likePattern(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`, `*`, `%`)
	return r.Replace(p)
}

// globPattern turns a type pattern with * wildcards into an SQLite GLOB
// pattern (case-sensitive, like PostgreSQL's LIKE): the other GLOB
// metacharacters are bracketed to stand for themselves.
func globPattern(p string) string {
	r := strings.NewReplacer(`[`, `[[]`, `?`, `[?]`)
	return r.Replace(p)
}

// PointerText returns the text of the JSON value at pointer (RFC 6901) in
// body: a string's text or a number as written. ok is false when body is
// not JSON, or the value is missing, empty, null, a boolean, an object or
// an array: such an event has no order key.
func PointerText(body []byte, pointer string) (text string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
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
