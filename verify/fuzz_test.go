package verify

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzCanonicalize: Canonicalize never panics; what it accepts is JSON, its
// output is JSON, and canonicalizing the output again changes nothing.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,{"c":"\u00e9"}]}`, `1.0`, `-0`, `1e999999999`, `9007199254740993`,
		`"\ud83d\ude00"`, `{"a":1,"a":2}`, strings.Repeat("[", 70), `[1,]`, "\"\xff\"", `0.000001`, `1e21`,
		`{"\ue000":1,"😀":2}`, `"\u0000\u001f\/"`, ` [ ] `, `-12.5e-3`, `123456789012345678901234567890`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if !errors.Is(err, ErrNotJSON) && !errors.Is(err, ErrDuplicateKey) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if out != nil {
				t.Fatalf("output with an error")
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted %q, which encoding/json rejects", in)
		}
		if !json.Valid(out) {
			t.Fatalf("output %q is not JSON", out)
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("output %q refused: %v", out, err)
		}
		if string(again) != string(out) {
			t.Fatalf("not idempotent: %q → %q → %q", in, out, again)
		}
	})
}

// FuzzCanonicalNumber: a canonical number keeps the value of the input (as
// far as float64 can tell: the exact check is the table test).
func FuzzCanonicalNumber(f *testing.F) {
	f.Add(1.0)
	f.Add(-0.0)
	f.Add(1e21)
	f.Add(1.5e-7)
	f.Add(123.456)
	f.Add(math.MaxFloat64)
	f.Add(5e-324)
	f.Fuzz(func(t *testing.T, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		for _, format := range []byte{'g', 'e', 'f'} {
			in := strconv.FormatFloat(x, format, -1, 64)
			out, err := Canonicalize([]byte(in))
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			y, err := strconv.ParseFloat(string(out), 64)
			if err != nil || y != x {
				t.Fatalf("%s → %s = %v (%v)", in, out, y, err)
			}
			// For a shortest float64 form, the output is what ECMAScript
			// (and so RFC 8785) prints.
			if format == 'g' {
				if want := es6Number(x); string(out) != want {
					t.Fatalf("%s → %s, ECMAScript prints %s", in, out, want)
				}
			}
		}
	})
}

// es6Number formats x as ECMAScript's Number::toString does, from Go's
// shortest digits (the reference algorithm of RFC 8785 appendix B).
func es6Number(x float64) string {
	if x == 0 {
		return "0"
	}
	s := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±xx
	neg := s[0] == '-'
	s = strings.TrimPrefix(s, "-")
	mant, expStr, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(expStr)
	n := e + 1
	k := len(digits)
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		out = digits[:1]
		if k > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if n-1 < 0 {
			sign = "-"
		}
		out += "e" + sign + strconv.Itoa(abs(n-1))
	}
	if neg {
		out = "-" + out
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// checkSchemeError asserts a Verify error wraps exactly one sentinel and
// carries a reason code.
func checkSchemeError(t *testing.T, err error) {
	t.Helper()
	if err != nil && errors.Is(err, ErrUnauthorized) == errors.Is(err, ErrBadRequest) {
		t.Fatalf("error %v must wrap exactly one sentinel", err)
	}
	if err != nil && Reason(err) == ReasonOther {
		t.Fatalf("error %v carries no reason code", err)
	}
}

// FuzzStripeHeader: parsing and verifying any Stripe-Signature header never
// panics and keeps within its bounds.
func FuzzStripeHeader(f *testing.F) {
	good := "t=1700000000,v1=" + signStripe(stripeSecret, 1700000000, stripeBody)
	for _, s := range []string{good, good + ",v1=" + strings.Repeat("0", 64) + ",v0=00", "t=", "t=1,t=2", ",,,", "v1=zz", "t=99999999999999999999,v1=00"} {
		f.Add(s)
	}
	p := &stripeScheme{keys: [][]byte{[]byte(stripeSecret)}, tolerance: 5 * time.Minute}
	f.Fuzz(func(t *testing.T, h string) {
		ts, sigs, err := parseStripeHeader(h)
		if err == nil && (len(sigs) == 0 || len(sigs) > maxSignatures || ts < 0) {
			t.Fatalf("parse(%q) = %d, %d signatures", h, ts, len(sigs))
		}
		_, err = p.Verify(Input{Header: headers("Stripe-Signature", h), Body: []byte(stripeBody)}, time.Unix(1700000000, 0))
		checkSchemeError(t, err)
		if err == nil && !strings.Contains(strings.ToLower(h), good[len("t=1700000000,"):]) {
			t.Fatalf("%q verified", h)
		}
	})
}

// FuzzStandardSignatures: parsing and verifying any Standard Webhooks (or
// Svix) signature list never panics and keeps within its bounds.
func FuzzStandardSignatures(f *testing.F) {
	for _, s := range []string{swSignature, "v1a,abc " + swSignature, "v1,", "   ", "v1,=", strings.Repeat("v1,AAAA ", 40)} {
		f.Add(s, "1614265330")
	}
	key, err := decodeStandardSecret(swSecret)
	if err != nil {
		f.Fatal(err)
	}
	schemes := []*standardScheme{newStandardScheme([][]byte{key}, 5*time.Minute, false), newStandardScheme([][]byte{key}, 5*time.Minute, true)}
	f.Fuzz(func(t *testing.T, sig, ts string) {
		sigs, err := parseStandardSignatures(sig)
		if err == nil && (len(sigs) == 0 || len(sigs) > maxSignatures) {
			t.Fatalf("parse(%q): %d signatures", sig, len(sigs))
		}
		for _, s := range schemes {
			h := headers("webhook-id", swID, "webhook-timestamp", ts, "webhook-signature", sig, "svix-id", swID, "svix-timestamp", ts, "svix-signature", sig)
			_, err := s.Verify(Input{Header: h, Body: []byte(swPayload)}, time.Unix(swTimestamp, 0))
			checkSchemeError(t, err)
		}
	})
}

// FuzzGitHubSignature: parsing and verifying any X-Hub-Signature-256 header
// never panics; only the right signature verifies.
func FuzzGitHubSignature(f *testing.F) {
	for _, s := range []string{ghSignature, "sha256=", "sha1=abc", strings.ToUpper(ghSignature), ghSignature + "00"} {
		f.Add(s)
	}
	s := &githubScheme{keys: [][]byte{[]byte(ghSecret)}}
	f.Fuzz(func(t *testing.T, h string) {
		_, _ = parseGitHubSignature(h)
		_, err := s.Verify(Input{Header: headers("X-Hub-Signature-256", h), Body: []byte(ghPayload)}, time.Time{})
		checkSchemeError(t, err)
		if err == nil && !strings.EqualFold(h, ghSignature) {
			t.Fatalf("%q verified", h)
		}
	})
}

// FuzzDigest: digests never panic, and form and JSON bodies fail only with
// ErrBadRequest.
func FuzzDigest(f *testing.F) {
	f.Add([]byte(`{"a":1}`), false)
	f.Add([]byte(`b=2&a=1&a=0`), true)
	f.Add([]byte(`a=%zz`), true)
	form := headers("Content-Type", "application/x-www-form-urlencoded")
	f.Fuzz(func(t *testing.T, body []byte, isForm bool) {
		var h http.Header
		if isForm {
			h = form
		}
		d, err := ContentDigest(h, body, []string{"a"})
		if err != nil {
			if !errors.Is(err, ErrBadRequest) || Reason(err) != ReasonMalformedBody {
				t.Fatalf("error %v does not wrap ErrBadRequest with reason %s", err, ReasonMalformedBody)
			}
			return
		}
		if !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
			t.Fatalf("digest %q", d)
		}
	})
}
