package verify

// JSON numbers, kept as exact decimals and printed the way ECMAScript
// prints a double, but with all the digits.

import (
	"fmt"
	"strconv"
)

// maxExponentDigits bounds the significant digits of a number's exponent, so
// that exponent arithmetic stays exact in an int64 (|e| < 10^18 plus offsets
// bounded by the input length).
const maxExponentDigits = 18

// parseNumber reads the number at p.b[p.i] and returns its canonical text.
//
// The value is kept exactly as sign × digits × 10^exp, with digits free of
// leading and trailing zeros and exp an int64; it is then printed like
// ECMAScript's Number::toString prints a double, but with all the digits.
func (p *jsonParser) parseNumber() (string, error) {
	start := p.i
	neg := false
	if p.b[p.i] == '-' {
		neg = true
		p.i++
	}
	digits := p.buf[:0]

	// Integer part: 0 or [1-9][0-9]*.
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		digits = append(digits, '0')
		p.i++
	case p.i < len(p.b) && '1' <= p.b[p.i] && p.b[p.i] <= '9':
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			digits = append(digits, p.b[p.i])
			p.i++
		}
	default:
		return "", p.syntaxError("a digit")
	}

	// A plain integer other than 0 and -0, up to 21 digits, is already
	// canonical: the literal itself.
	intEnd := p.i
	if digits[0] != '0' && len(digits) <= 21 && (p.i >= len(p.b) || (p.b[p.i] != '.' && p.b[p.i] != 'e' && p.b[p.i] != 'E')) {
		p.buf = digits
		if p.tooDeep {
			return "", nil
		}
		return p.s[start:intEnd], nil
	}

	// Fraction: '.' [0-9]+ ; its digits shift the exponent.
	var exp int64
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		n := 0
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			digits = append(digits, p.b[p.i])
			p.i++
			n++
		}
		if n == 0 {
			return "", p.syntaxError("a digit after '.'")
		}
		exp -= int64(n)
	}

	// Exponent: [eE] [+-]? [0-9]+, at most maxExponentDigits significant.
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		expNeg := false
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			expNeg = p.b[p.i] == '-'
			p.i++
		}
		var e int64
		n, significant := 0, 0
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			if e != 0 || p.b[p.i] != '0' {
				significant++
			}
			if significant <= maxExponentDigits {
				e = e*10 + int64(p.b[p.i]-'0')
			}
			p.i++
			n++
		}
		if n == 0 {
			return "", p.syntaxError("a digit in the exponent")
		}
		if significant > maxExponentDigits {
			return "", fmt.Errorf("%w: number exponent out of range at offset %d", ErrNotJSON, start)
		}
		if expNeg {
			e = -e
		}
		exp += e
	}
	p.buf = digits // keep the grown scratch

	if p.tooDeep {
		return "", nil // only checking syntax
	}

	// Normalize: strip leading zeros, then trailing ones into the exponent.
	i := 0
	for i < len(digits) && digits[i] == '0' {
		i++
	}
	digits = digits[i:]
	if len(digits) == 0 {
		return "0", nil // every zero, -0 included
	}
	j := len(digits)
	for digits[j-1] == '0' {
		j--
	}
	exp += int64(len(digits) - j)
	digits = digits[:j]
	return formatDecimal(neg, digits, exp), nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// formatDecimal prints sign × 0.digits × 10^(exp+len(digits)) the way
// ECMAScript's Number::toString (ECMA-262 section 6.1.6.1.20) lays out a
// number, with digits as given (no leading or trailing zeros). The output
// grows with len(digits) only: zero padding is at most 20 characters.
func formatDecimal(neg bool, digits []byte, exp int64) string {
	k := int64(len(digits))
	n := exp + k // the decimal point sits after n digits
	out := make([]byte, 0, len(digits)+24)
	if neg {
		out = append(out, '-')
	}
	switch {
	case k <= n && n <= 21:
		out = append(out, digits...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(out, digits[:n]...)
		out = append(out, '.')
		out = append(out, digits[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, digits...)
	default:
		out = append(out, digits[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, digits[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, n-1, 10)
	}
	return string(out)
}
