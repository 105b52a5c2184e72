package verify

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonicalize(t *testing.T) {
	cases := []struct{ name, in, want string }{
		// Key order and whitespace.
		{"sorted keys", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"whitespace", " \t\r\n{ \"a\" : [ 1 , 2 ] ,\n\"b\":{ } } \n", `{"a":[1,2],"b":{}}`},
		{"nested", `{"z":{"y":[{"b":1,"a":0}],"x":null},"a":[]}`, `{"a":[],"z":{"x":null,"y":[{"a":0,"b":1}]}}`},
		{"array order kept", `[3,1,2,[{"b":0,"a":0}]]`, `[3,1,2,[{"a":0,"b":0}]]`},
		{"literals", `[ true , false , null ]`, `[true,false,null]`},
		{"scalar", ` "x" `, `"x"`},
		{"key prefix sorts first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},

		// Numbers: exact decimal value, one form.
		{"integer", `1`, `1`},
		{"1.0", `1.0`, `1`},
		{"1e0", `1e0`, `1`},
		{"1E+0", `1E+0`, `1`},
		{"10e-1", `10e-1`, `1`},
		{"0.1e1", `0.1e1`, `1`},
		{"-0", `-0`, `0`},
		{"-0.0e5", `-0.0e5`, `0`},
		{"0e-999", `0e-999`, `0`},
		{"trailing zeros", `-1.50`, `-1.5`},
		{"hundred", `100`, `100`},
		{"1e2", `1e2`, `100`},
		{"12.34e1", `12.34e1`, `123.4`},
		{"small", `0.001`, `0.001`},
		{"1e-6", `1e-6`, `0.000001`},
		{"1e-7", `1e-7`, `1e-7`},
		{"1.5e-7", `0.00000015`, `1.5e-7`},
		{"1e20", `1e20`, `100000000000000000000`},
		{"1e21", `1e21`, `1e+21`},
		{"2^53+1", `9007199254740993`, `9007199254740993`},
		{"2^53", `9007199254740992`, `9007199254740992`},
		{"many digits", `123456789012345678901234567890`, `1.2345678901234567890123456789e+29`},
		{"many fraction digits", `0.1000000000000000000000000000001`, `0.1000000000000000000000000000001`},
		{"huge exponent", `1e999999999`, `1e+999999999`},
		{"huge negative exponent", `-1.25e-999999999`, `-1.25e-999999999`},
		{"18-digit exponent", `1e999999999999999999`, `1e+999999999999999999`},
		{"leading exponent zeros", `1e0000000000000000000000001`, `10`},

		// Strings: decoded, re-escaped one way.
		{"unicode escape", `"\u00e9"`, `"é"`},
		{"raw unicode", `"é"`, `"é"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"uppercase hex", `"\uD83D\uDE00\u00C9"`, `"😀É"`},
		{"solidus", `"\/"`, `"/"`},
		{"short escapes", `"\b\f\n\r\t\"\\"`, `"\b\f\n\r\t\"\\"`},
		{"control escapes", `"\u0008\u000a\u0000\u001f\u001F"`, `"\b\n\u0000\u001f\u001f"`},
		{"DEL and U+2028 raw", `"\u007f\u2028"`, "\"\x7f\u2028\""},
		{"escaped keys", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},

		// RFC 8785 section 3.2.3: keys sort by UTF-16 code units.
		{"rfc8785 sorting",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"supplementary before U+E000", `{"\ue000":1,"\ud83d\ude00":2}`, "{\"\U0001F600\":2,\"\ue000\":1}"},
		// RFC 8785 section 3.2.2's example, except its first number, which
		// RFC 8785 rounds through float64 and we keep exactly.
		{"rfc8785 example",
			`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.33333329,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Errorf("Canonicalize(%q)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			again, err := Canonicalize(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s → %s (%v)", got, again, err)
			}
		})
	}
}

func TestCanonicalizeEqualValues(t *testing.T) {
	groups := [][]string{
		{`1`, `1.0`, `1e0`, `10e-1`, `0.1e1`, `1.000E+000`, `100e-2`},
		{`0`, `-0`, `0.0`, `0e10`, `-0E-3`},
		{`{"a":"é","b":[1,2]}`, `{ "b" : [ 1.0 , 2e0 ], "a" : "\u00e9" }`, `{"\u0062":[10e-1,0.2e1],"\u0061":"\u00E9"}`},
	}
	for _, g := range groups {
		first, err := Canonicalize([]byte(g[0]))
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range g[1:] {
			got, err := Canonicalize([]byte(in))
			if err != nil || string(got) != string(first) {
				t.Errorf("%s → %s (%v); %s → %s", in, got, err, g[0], first)
			}
		}
	}
	distinct := [][2]string{
		{`9007199254740993`, `9007199254740992`},
		{`{"id":18446744073709551617}`, `{"id":18446744073709551616}`},
		{`1e999999999`, `1e999999998`},
		{`0.1`, `0.10000000000000001`},
		{`-1`, `1`},
		{`"1"`, `1`},
		{`"\u00e9"`, `"e\u0301"`},
	}
	for _, d := range distinct {
		a, errA := Canonicalize([]byte(d[0]))
		b, errB := Canonicalize([]byte(d[1]))
		if errA != nil || errB != nil || string(a) == string(b) {
			t.Errorf("%s and %s canonicalize alike: %s %s (%v %v)", d[0], d[1], a, b, errA, errB)
		}
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	cases := []struct {
		name string
		in   string
		want error
	}{
		// Duplicates, compared after unescaping.
		{"duplicate", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"duplicate same value", `{"a":1,"b":0,"a":1}`, ErrDuplicateKey},
		{"duplicate after unescaping", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"duplicate surrogate pair", `{"😀":1,"\ud83d\ude00":2}`, ErrDuplicateKey},
		{"nested duplicate", `[{"x":{"k":1,"k":1}}]`, ErrDuplicateKey},

		// Depth.
		{"65 arrays", deep(MaxDepth+1, "[", "]"), ErrTooDeep},
		{"65 objects", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), ErrTooDeep},
		{"very deep", deep(200000, "[", "]"), ErrTooDeep},
		{"deep and malformed", strings.Repeat("[", MaxDepth+10) + "x", ErrNotJSON},
		{"deep then trailing garbage", deep(MaxDepth+1, "[", "]") + " x", ErrNotJSON},
		{"duplicate and too deep", `[{"a":1,"a":1},` + deep(MaxDepth, "[", "]") + `]`, ErrTooDeep},
		{"duplicate then malformed", `{"a":1,"a":1} x`, ErrNotJSON},

		// Syntax.
		{"empty", ``, ErrNotJSON},
		{"space", ` `, ErrNotJSON},
		{"unclosed object", `{`, ErrNotJSON},
		{"unclosed array", `[1,2`, ErrNotJSON},
		{"trailing comma array", `[1,]`, ErrNotJSON},
		{"trailing comma object", `{"a":1,}`, ErrNotJSON},
		{"leading comma", `[,1]`, ErrNotJSON},
		{"empty member", `{,}`, ErrNotJSON},
		{"key without value", `{"a"}`, ErrNotJSON},
		{"colon without value", `{"a":}`, ErrNotJSON},
		{"non-string key", `{1:2}`, ErrNotJSON},
		{"mismatched close", `[1}`, ErrNotJSON},
		{"mismatched close 2", `{"a":1]`, ErrNotJSON},
		{"lone close", `]`, ErrNotJSON},
		{"trailing garbage", `{} x`, ErrNotJSON},
		{"two values", `1 2`, ErrNotJSON},
		{"extra close", `{}}`, ErrNotJSON},
		{"leading zero", `01`, ErrNotJSON},
		{"negative leading zero", `-01`, ErrNotJSON},
		{"bare dot", `1.`, ErrNotJSON},
		{"leading dot", `.5`, ErrNotJSON},
		{"plus sign", `+1`, ErrNotJSON},
		{"minus only", `-`, ErrNotJSON},
		{"exponent without digits", `1e`, ErrNotJSON},
		{"exponent sign only", `1e+`, ErrNotJSON},
		{"hex number", `0x10`, ErrNotJSON},
		{"NaN", `NaN`, ErrNotJSON},
		{"Infinity", `-Infinity`, ErrNotJSON},
		{"19-digit exponent", `1e1234567890123456789`, ErrNotJSON},
		{"truncated literal", `tru`, ErrNotJSON},
		{"wrong literal", `nul1`, ErrNotJSON},
		{"capital literal", `True`, ErrNotJSON},
		{"single quotes", `{'a':1}`, ErrNotJSON},
		{"unterminated string", `"abc`, ErrNotJSON},
		{"unknown escape", `"\x"`, ErrNotJSON},
		{"short unicode escape", `"\u12"`, ErrNotJSON},
		{"bad unicode escape", `"\u12g4"`, ErrNotJSON},
		{"escape at end", `"\`, ErrNotJSON},
		{"lone high surrogate", `"\ud800"`, ErrNotJSON},
		{"lone low surrogate", `"\udc00"`, ErrNotJSON},
		{"high then letter", `"\ud800\u0041"`, ErrNotJSON},
		{"high then high", `"\ud800\ud800"`, ErrNotJSON},
		{"raw control character", "\"a\x01b\"", ErrNotJSON},
		{"raw newline", "\"a\nb\"", ErrNotJSON},
		{"invalid UTF-8", "\"\xff\"", ErrNotJSON},
		{"invalid UTF-8 key", "{\"\xc3\":1}", ErrNotJSON},
		{"overlong UTF-8", "\"\xc0\xaf\"", ErrNotJSON},
		{"UTF-8 surrogate", "\"\xed\xa0\x80\"", ErrNotJSON},
		{"byte order mark", "\xef\xbb\xbf{}", ErrNotJSON},
		{"invalid UTF-8 outside strings", "[1]\xff", ErrNotJSON},
		{"NUL after value", "{}\x00", ErrNotJSON},
		{"form body", `a=1&b=2`, ErrNotJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Canonicalize(%.40q) = %q, %v; want %v", tc.in, got, err, tc.want)
			}
			for _, other := range []error{ErrNotJSON, ErrDuplicateKey, ErrTooDeep} {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("error %v also wraps %v", err, other)
				}
			}
			if got != nil {
				t.Errorf("output %q returned with an error", got)
			}
		})
	}
}

func TestCanonicalizeDepthLimit(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth),
		`{"x":` + strings.Repeat("[", MaxDepth-2) + `{}` + strings.Repeat("]", MaxDepth-2) + `}`,
	} {
		got, err := Canonicalize([]byte(in))
		if err != nil {
			t.Errorf("depth %d refused: %v", MaxDepth, err)
			continue
		}
		if string(got) != in {
			t.Errorf("got %s", got)
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	ordered := []string{"", "\r", "1", "A", "a", "ab", "\u0080", "ö", "€", "\U0001F600", "\U0001F601", "\U0010FFFF", "\ue000", "\ufb33", "\uffff"}
	for i := range ordered {
		for j := range ordered {
			want := cmpInt(i, j)
			if got := compareUTF16(ordered[i], ordered[j]); got != want {
				t.Errorf("compareUTF16(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}
