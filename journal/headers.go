package journal

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeHeaders decodes stored headers, a JSON object of string arrays
// ({"Name": ["v1", "v2"]}, as jsonb or encoding/json writes them), exactly
// as json.Unmarshal into an http.Header would, and returns them as they
// are forwarded (without the receivedPrefix keys). Every leased row carries
// them: reflection-driven json.Unmarshal was 7.6 % of whguard's CPU while
// draining a backlog. Anything outside the plain shape (null, a surrogate
// escape, invalid UTF-8, a syntax error) takes json.Unmarshal's path, so
// the result and the errors are always its own.
func decodeHeaders(s string) (http.Header, error) {
	h, _, err := decodeStoredHeaders(s)
	return h, err
}

// decodeStoredHeaders decodes stored headers as decodeHeaders does, and
// also returns them as they were received: with every header the ingress
// set before journaling put back as it came (receivedPrefix).
func decodeStoredHeaders(s string) (forwarded, received http.Header, err error) {
	h, ok := parseHeaders(s)
	if !ok {
		h = http.Header{}
		if err := json.Unmarshal([]byte(s), &h); err != nil {
			return nil, nil, err
		}
	}
	if h, err = restoreRawValues(h); err != nil {
		return nil, nil, err
	}
	var was map[string][]string
	for key, vs := range h {
		if strings.HasPrefix(key, receivedPrefix) {
			if was == nil {
				was = map[string][]string{}
			}
			if name := key[len(receivedPrefix):]; name != "" {
				was[name] = vs
			} else {
				for _, name := range vs {
					was[name] = nil // absent when received
				}
			}
			delete(h, key)
		}
	}
	return h, asReceived(h, was), nil
}

// receivedPrefix marks, in stored headers, what a header the ingress set
// before journaling (X-Forwarded-For and the like: Event.AsReceived) was
// when received: receivedPrefix and its name hold its values then, and
// receivedPrefix alone lists those that were not received (older rows
// hold an empty list under each one's name instead). A colon never
// appears in a header name, so the key cannot clash with a received
// header; a replica that knows only the older form still drops the list
// from what it forwards.
const receivedPrefix = ":received:"

// asReceived is h with each header of was put back as it was received (an
// empty list: absent), as a new map; h itself when was is empty.
func asReceived(h http.Header, was map[string][]string) http.Header {
	if len(was) == 0 {
		return h
	}
	out := make(http.Header, len(h))
	for name, vs := range h {
		out[name] = vs
	}
	for name, vs := range was {
		if len(vs) == 0 {
			delete(out, name)
			continue
		}
		out[name] = vs
	}
	return out
}

// rawPrefix marks, in stored headers, a header whose values are not valid
// UTF-8 (JSON would turn their bytes into U+FFFD): it is stored under
// rawPrefix + its name with base64 values, and restored with its exact
// bytes. A colon never appears in a header name, so the key cannot clash.
const rawPrefix = ":raw:"

// rawHeaderValues returns h, or a copy of it in which every header with a
// value that is not valid UTF-8, or holds a NUL (which PostgreSQL's jsonb
// refuses), is moved to its rawPrefix key, base64.
func rawHeaderValues(h http.Header) http.Header {
	var out http.Header
	for name, vs := range h {
		for _, v := range vs {
			if utf8.ValidString(v) && strings.IndexByte(v, 0) < 0 {
				continue
			}
			if out == nil {
				out = h.Clone()
			}
			enc := make([]string, len(vs))
			for i, v := range vs {
				enc[i] = base64.StdEncoding.EncodeToString([]byte(v))
			}
			delete(out, name)
			out[rawPrefix+name] = enc
			break
		}
	}
	if out == nil {
		return h
	}
	return out
}

// restoreRawValues undoes rawHeaderValues in place.
func restoreRawValues(h http.Header) (http.Header, error) {
	for key, vs := range h {
		if !strings.HasPrefix(key, rawPrefix) {
			continue
		}
		dec := make([]string, len(vs))
		for i, v := range vs {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return nil, fmt.Errorf("decode raw header %s: %w", key[len(rawPrefix):], err)
			}
			dec[i] = string(b)
		}
		delete(h, key)
		h[key[len(rawPrefix):]] = dec
	}
	return h, nil
}

// parseHeaders is decodeHeaders' plain path; ok is false when it cannot
// tell what json.Unmarshal would do.
// Names and values without escapes are slices of s.
func parseHeaders(s string) (h http.Header, ok bool) {
	if !utf8.ValidString(s) {
		return nil, false
	}
	p := headerParser{b: s}
	if !p.skip('{') {
		return nil, false
	}
	h = http.Header{}
	if p.skip('}') {
		return h, p.end()
	}
	for {
		name, ok := p.str()
		if !ok || !p.skip(':') || !p.skip('[') {
			return nil, false
		}
		vs := make([]string, 0, 1)
		if !p.skip(']') {
			for {
				v, ok := p.str()
				if !ok {
					return nil, false
				}
				vs = append(vs, v)
				if p.skip(']') {
					break
				}
				if !p.skip(',') {
					return nil, false
				}
			}
		}
		h[name] = vs
		if p.skip('}') {
			return h, p.end()
		}
		if !p.skip(',') {
			return nil, false
		}
	}
}

type headerParser struct {
	b string
	i int
}

func (p *headerParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// skip consumes c after optional white space.
func (p *headerParser) skip(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *headerParser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// str reads a string, refusing what the plain path leaves to
// json.Unmarshal (control characters, surrogate escapes, bad escapes).
func (p *headerParser) str() (string, bool) {
	if !p.skip('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", false
		default:
			p.i++
		}
	}
	return "", false
}

// escaped finishes a string that has escapes, from its start.
func (p *headerParser) escaped(start int) (string, bool) {
	out := append(make([]byte, 0, p.i-start+16), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		switch e := p.b[p.i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if p.i+6 > len(p.b) {
				return "", false
			}
			r, err := strconv.ParseUint(p.b[p.i+2:p.i+6], 16, 16)
			if err != nil || (r >= 0xD800 && r < 0xE000) {
				return "", false // surrogates: json.Unmarshal's rules
			}
			out = utf8.AppendRune(out, rune(r))
			p.i += 6
			continue
		default:
			return "", false
		}
		p.i += 2
	}
	return "", false
}
