package verify

// JSON strings: decoding with escapes, the UTF-16 order of keys, and
// escaping on output.

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// the order RFC 8785 section 3.2.3 prescribes for object keys. It is UTF-8
// byte order except between a character above U+FFFF (lead byte 0xF0-0xF4,
// a high surrogate U+D800-U+DBFF in UTF-16) and one in U+E000-U+FFFF (lead
// byte 0xEE or 0xEF), where the former sorts first although its code point
// is larger. Two characters of different classes differ in their lead
// byte, so the first differing byte decides.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmpInt(len(a), len(b))
	}
	ca, cb := int(a[i]), int(b[i])
	if ca >= 0xEE && cb >= 0xEE && (ca >= 0xF0) != (cb >= 0xF0) {
		if ca >= 0xF0 {
			return -1
		}
		return 1
	}
	return cmpInt(ca, cb)
}

func cmpInt[T ~int | ~int32](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseString reads the string starting at p.b[p.i] (a '"') and returns its
// decoded text. It rejects raw control characters, invalid UTF-8, unknown
// escapes and lone surrogates.
func (p *jsonParser) parseString() (string, error) {
	p.i++ // opening quote
	// Most strings have no escape: they are their own decoded text, a
	// slice of p.s. An escape falls through to decoding into p.buf.
	for j := p.i; j < len(p.b); {
		c := p.b[j]
		if c == '"' {
			out := p.s[p.i:j]
			p.i = j + 1
			if p.tooDeep {
				return "", nil
			}
			return out, nil
		}
		if c == '\\' || c < 0x20 {
			break // decoded (or refused) below
		}
		if c < utf8.RuneSelf {
			j++
			continue
		}
		r, n := utf8.DecodeRune(p.b[j:])
		if r == utf8.RuneError && n == 1 {
			break // refused below, with its offset
		}
		j += n
	}
	p.buf = p.buf[:0]
	for {
		if p.i >= len(p.b) {
			return "", p.syntaxError("the end of the string")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if p.tooDeep {
				return "", nil // only checking syntax: spare the copy
			}
			return string(p.buf), nil
		case c == '\\':
			if err := p.parseEscape(); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", fmt.Errorf("%w: raw control character in a string at offset %d", ErrNotJSON, p.i)
		case c < utf8.RuneSelf:
			p.buf = append(p.buf, c)
			p.i++
		default:
			r, n := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && n == 1 {
				return "", fmt.Errorf("%w: invalid UTF-8 at offset %d", ErrNotJSON, p.i)
			}
			p.buf = append(p.buf, p.b[p.i:p.i+n]...)
			p.i += n
		}
	}
}

// parseEscape decodes the escape sequence at p.b[p.i] (a '\\') into p.buf.
func (p *jsonParser) parseEscape() error {
	if p.i+1 >= len(p.b) {
		p.i = len(p.b)
		return p.syntaxError("an escape sequence")
	}
	c := p.b[p.i+1]
	var out byte
	switch c {
	case '"', '\\', '/':
		out = c
	case 'b':
		out = '\b'
	case 'f':
		out = '\f'
	case 'n':
		out = '\n'
	case 'r':
		out = '\r'
	case 't':
		out = '\t'
	case 'u':
		r, ok := p.hex4(p.i + 2)
		if !ok {
			return fmt.Errorf("%w: bad \\u escape at offset %d", ErrNotJSON, p.i)
		}
		p.i += 6
		if utf16.IsSurrogate(r) {
			// Only a high surrogate followed by an escaped low one is a
			// character; anything else cannot be written as UTF-8.
			lo, ok := rune(0), false
			if r < 0xDC00 && p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
				lo, ok = p.hex4(p.i + 2)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("%w: lone surrogate escape at offset %d", ErrNotJSON, p.i-6)
			}
			p.i += 6
			r = utf16.DecodeRune(r, lo)
		}
		p.buf = utf8.AppendRune(p.buf, r)
		return nil
	default:
		p.i++
		return p.syntaxError("an escape character")
	}
	p.buf = append(p.buf, out)
	p.i += 2
	return nil
}

// hex4 reads four hex digits at p.b[at:].
func (p *jsonParser) hex4(at int) (rune, bool) {
	if at+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[at : at+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// appendString writes s (valid UTF-8) as a JSON string, escaping only '"',
// '\' and control characters below U+0020.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(dst, '"')
}
