package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twilio/twilio-go/client"
)

// The Twilio docs vector ("Webhooks security").
const (
	twilioDocToken = "12345"
	twilioDocURL   = "https://mycompany.com/myapp.php"
	twilioDocQuery = "foo=1&bar=2"
	twilioDocSig   = "GvWf1cFY/Q7PnoempGyD5oXAezc="

	twilioToken      = "twilio-auth-token-0123456789abcdef"
	twilioOtherToken = "twilio-auth-token-previous-fedcba98"
	twilioURL        = "https://hooks.example.com/twilio/sms"
)

var twilioDocParams = map[string]string{
	"CallSid": "CA1234567890ABCDE",
	"Caller":  "+14158675310",
	"Digits":  "1234",
	"From":    "+14158675310",
	"To":      "+18005551212",
}

// signTwilio returns an X-Twilio-Signature value computed here independently
// of the package: base64(HMAC-SHA1(token, fullURL + name+value of each
// parameter sorted by name, a repeated name's values sorted)).
func signTwilio(token, fullURL string, params url.Values) string {
	s := fullURL
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		vs := slices.Clone(params[name])
		sort.Strings(vs)
		for _, v := range vs {
			s += name + v
		}
	}
	m := hmac.New(sha1.New, []byte(token))
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func twilioForm(m map[string]string) url.Values {
	v := url.Values{}
	for name, value := range m {
		v.Set(name, value)
	}
	return v
}

func twilioHeaders(sig string, kv ...string) http.Header {
	return headers(append([]string{"X-Twilio-Signature", sig, "Content-Type", "application/x-www-form-urlencoded"}, kv...)...)
}

func TestTwilioPublishedVector(t *testing.T) {
	form := twilioForm(twilioDocParams)
	full := twilioDocURL + "?" + twilioDocQuery
	if got := signTwilio(twilioDocToken, full, form); got != twilioDocSig {
		t.Fatalf("test signer gives %s, Twilio docs %s", got, twilioDocSig)
	}
	rv := client.NewRequestValidator(twilioDocToken)
	if !rv.Validate(full, twilioDocParams, twilioDocSig) {
		t.Fatalf("twilio-go refuses the docs vector")
	}
	p := mustProvider(t, ProviderConfig{Name: "twilio", Scheme: SchemeTwilio, Secrets: []string{twilioDocToken}, PublicURL: twilioDocURL})
	body := form.Encode()
	ev, err := p.Check(Input{Header: twilioHeaders(twilioDocSig), Body: []byte(body), RawQuery: twilioDocQuery}, time.Unix(0, 0))
	if err != nil {
		t.Fatalf("published vector refused: %v", err)
	}
	// No idempotency token: the key is the digest of the sorted parameters.
	want := Event{ID: sha256Hex(body), ContentHash: sha256Hex(body)}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("event = %+v, want %+v", ev, want)
	}
	// The same parameters in another order are the same signed request.
	reordered := "To=%2B18005551212&From=%2B14158675310&Digits=1234&Caller=%2B14158675310&CallSid=CA1234567890ABCDE"
	if ev2, err := p.Check(Input{Header: twilioHeaders(twilioDocSig), Body: []byte(reordered), RawQuery: twilioDocQuery}, time.Time{}); err != nil || ev2.ID != ev.ID {
		t.Errorf("reordered parameters: %+v, %v", ev2, err)
	}
	for name, in := range map[string]Input{
		"query dropped":    {Header: twilioHeaders(twilioDocSig), Body: []byte(body)},
		"query reordered":  {Header: twilioHeaders(twilioDocSig), Body: []byte(body), RawQuery: "bar=2&foo=1"},
		"parameter added":  {Header: twilioHeaders(twilioDocSig), Body: []byte(body + "&X=1"), RawQuery: twilioDocQuery},
		"parameter edited": {Header: twilioHeaders(twilioDocSig), Body: []byte(strings.Replace(body, "1234", "1235", 1)), RawQuery: twilioDocQuery},
	} {
		if _, err := p.Check(in, time.Time{}); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: err = %v, want ErrUnauthorized", name, err)
		}
	}
}

func TestTwilioConfig(t *testing.T) {
	for _, tc := range []struct {
		publicURL string
		want      string // error substring; "" = accepted
	}{
		{"", "public URL (the webhook URL configured in Twilio) is required"},
		{"/twilio/sms", "absolute http or https"},
		{"hooks.example.com/twilio", "absolute http or https"},
		{"ftp://hooks.example.com/x", "absolute http or https"},
		{"https:///x", "must name a host"},
		{"https:opaque", "must name a host"},
		{"https://hooks.example.com/x?a=1", "must not have a query"},
		{"https://hooks.example.com/x?", "must not have a query"},
		{"https://hooks.example.com/x#rc=3", "must not have a fragment"},
		{"https://hooks.example.com/x#", "must not have a fragment"},
		{"https://user:hunter2pass@hooks.example.com/x", "must not hold credentials"},
		{"https://hooks.example.com:bad/x", "not a valid URL"},
		{"https://hooks.example.com/x", ""},
		{"http://hooks.example.com:8080/x", ""},
		{"HTTPS://hooks.example.com", ""},
	} {
		_, err := NewProvider(ProviderConfig{Name: "tw", Scheme: SchemeTwilio, Secrets: []string{twilioToken}, PublicURL: tc.publicURL})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q refused: %v", tc.publicURL, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: err = %v, want %q", tc.publicURL, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "hunter2pass"):
			t.Errorf("error %q quotes the URL's password", err)
		}
	}
	if _, err := NewProvider(ProviderConfig{Name: "tw", Scheme: SchemeTwilio, PublicURL: twilioURL}); err == nil || !strings.Contains(err.Error(), "no secret") {
		t.Errorf("no token: err = %v", err)
	}
}

func TestTwilioURLVariants(t *testing.T) {
	for raw, want := range map[string][]string{
		"https://a.example/x":        {"https://a.example/x", "https://a.example:443/x"},
		"https://a.example:443/x":    {"https://a.example:443/x", "https://a.example/x"},
		"http://a.example/x":         {"http://a.example/x", "http://a.example:80/x"},
		"http://a.example:80":        {"http://a.example:80", "http://a.example"},
		"https://a.example:8443/x":   {"https://a.example:8443/x"},
		"http://a.example:443/x":     {"http://a.example:443/x"},
		"https://[2001:db8::1]/x":    {"https://[2001:db8::1]/x", "https://[2001:db8::1]:443/x"},
		"https://[2001:db8::1]:443/": {"https://[2001:db8::1]:443/", "https://[2001:db8::1]/"},
		"HTTPS://A.example/%7Ex":     {"HTTPS://A.example/%7Ex", "HTTPS://A.example:443/%7Ex"},
		"https://a.example:/x":       {"https://a.example:/x"},
	} {
		got, err := twilioURLVariants(raw)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestTwilioCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	params := url.Values{"MessageSid": {"SM0123"}, "Body": {"Hello & bye+ü"}, "From": {"+15551234567"}, "To": {"+15557654321"}, "NumMedia": {"0"}}
	body := params.Encode()
	good := signTwilio(twilioToken, twilioURL, params)
	const token = "b1ccb5a0-1c4f-4b6a-9c45-c7d2f3a1e3f0"
	base := ProviderConfig{Name: "twilio", Scheme: SchemeTwilio, Secrets: []string{twilioToken}, PublicURL: twilioURL}
	run := func(name string, cfg func(*ProviderConfig), in Input, wantErr error, wantID, wantMsg string) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			c := base
			if cfg != nil {
				cfg(&c)
			}
			ev, err := mustProvider(t, c).Check(in, now)
			if wantErr == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if wantID != "" && ev.ID != wantID {
					t.Errorf("ID = %q, want %q", ev.ID, wantID)
				}
				if ev.Type != "" || ev.Handshake != nil {
					t.Errorf("event = %+v", ev)
				}
				return
			}
			if !errors.Is(err, wantErr) {
				t.Fatalf("err = %v, want %v", err, wantErr)
			}
			if other := map[error]error{ErrBadRequest: ErrUnauthorized, ErrUnauthorized: ErrBadRequest}[wantErr]; errors.Is(err, other) {
				t.Errorf("error %v wraps both sentinels", err)
			}
			if wantMsg != "" && !strings.Contains(err.Error(), wantMsg) {
				t.Errorf("error %q does not mention %q", err, wantMsg)
			}
			if !reflect.DeepEqual(ev, Event{}) {
				t.Errorf("event %+v returned with an error", ev)
			}
		})
	}
	in := func(h http.Header, body, query string) Input {
		return Input{Header: h, Body: []byte(body), RawQuery: query}
	}

	run("valid", nil, in(twilioHeaders(good, "I-Twilio-Idempotency-Token", token), body, ""), nil, token, "")
	run("no idempotency token: form digest", nil, in(twilioHeaders(good), body, ""), nil, sha256Hex(body), "")
	run("no Content-Type: still the signed parameters", nil, in(headers("X-Twilio-Signature", good), body, ""), nil, "", "")
	run("signed with the default port", nil, in(twilioHeaders(signTwilio(twilioToken, "https://hooks.example.com:443/twilio/sms", params)), body, ""), nil, "", "")
	run("configured with the default port, signed without", func(c *ProviderConfig) { c.PublicURL = "https://hooks.example.com:443/twilio/sms" },
		in(twilioHeaders(good), body, ""), nil, "", "")
	run("signed with another port", nil, in(twilioHeaders(signTwilio(twilioToken, "https://hooks.example.com:8443/twilio/sms", params)), body, ""),
		ErrUnauthorized, "", "")
	run("signed for http", nil, in(twilioHeaders(signTwilio(twilioToken, "http://hooks.example.com/twilio/sms", params)), body, ""), ErrUnauthorized, "", "")
	run("signed for another path", nil, in(twilioHeaders(signTwilio(twilioToken, twilioURL+"/", params)), body, ""), ErrUnauthorized, "", "")
	run("wrong token", func(c *ProviderConfig) { c.Secrets = []string{twilioOtherToken} }, in(twilioHeaders(good), body, ""), ErrUnauthorized, "", "no signature matches")
	run("rotated: second token signs", func(c *ProviderConfig) { c.Secrets = []string{twilioOtherToken, twilioToken} }, in(twilioHeaders(good), body, ""), nil, "", "")
	run("tampered parameter", nil, in(twilioHeaders(good), strings.Replace(body, "SM0123", "SM0124", 1), ""), ErrUnauthorized, "", "")
	run("added parameter", nil, in(twilioHeaders(good), body+"&Extra=1", ""), ErrUnauthorized, "", "")
	run("added empty parameter", nil, in(twilioHeaders(good), body+"&Extra=", ""), ErrUnauthorized, "", "")
	run("query added", nil, in(twilioHeaders(good), body, "x=1"), ErrUnauthorized, "", "")
	run("missing header", nil, in(headers("Content-Type", "application/x-www-form-urlencoded"), body, ""), ErrBadRequest, "", "missing X-Twilio-Signature header")
	run("hex signature", nil, in(twilioHeaders(hex.EncodeToString(make([]byte, 20))), body, ""), ErrUnauthorized, "", "base64 of 20 bytes")
	run("unpadded", nil, in(twilioHeaders(strings.TrimRight(good, "=")), body, ""), ErrUnauthorized, "", "")
	run("sha256-size signature", nil, in(twilioHeaders(base64.StdEncoding.EncodeToString(make([]byte, 32))), body, ""), ErrUnauthorized, "", "")
	run("two signatures", nil, in(twilioHeaders(good+","+good), body, ""), ErrUnauthorized, "", "")
	run("too long", nil, in(twilioHeaders(strings.Repeat(good, 200)), body, ""), ErrUnauthorized, "", "longer than")
	run("unparseable form", nil, in(twilioHeaders(good), "a=%zz", ""), ErrBadRequest, "", "form body unparseable")
	run("semicolon separator", nil, in(twilioHeaders(good), "a=1;b=2", ""), ErrBadRequest, "", "")

	// A GET webhook: parameters in the (signed) query, empty body.
	query := params.Encode()
	getSig := signTwilio(twilioToken, twilioURL+"?"+query, nil)
	run("GET: query only", nil, in(headers("X-Twilio-Signature", getSig), "", query), nil, "", "")
	run("GET: query tampered", nil, in(headers("X-Twilio-Signature", getSig), "", strings.Replace(query, "SM0123", "SM9", 1)), ErrUnauthorized, "", "")

	// Repeated names: each value signed, values sorted (twilio-python,
	// twilio-node), whatever their order in the body.
	repeated := "Addr=%2B2&Addr=%2B1&Name=x"
	sortedSig := signTwilio(twilioToken, twilioURL, url.Values{"Addr": {"+2", "+1"}, "Name": {"x"}})
	receivedOrder := base64HMACSHA1(twilioToken, twilioURL+"Addr+2Addr+1Namex")
	firstOnly := base64HMACSHA1(twilioToken, twilioURL+"Addr+2Namex")
	run("repeated name: sorted values", nil, in(twilioHeaders(sortedSig), repeated, ""), nil, "", "")
	run("repeated name: received order", nil, in(twilioHeaders(receivedOrder), repeated, ""), ErrUnauthorized, "", "")
	run("repeated name: first value only", nil, in(twilioHeaders(firstOnly), repeated, ""), ErrUnauthorized, "", "")

	// JSON bodies: only the URL (with bodySHA256) is signed; the body must
	// hash to bodySHA256.
	jsonBody := `{"MessageSid":"SM0123","Body":"Hello"}`
	sum := sha256.Sum256([]byte(jsonBody))
	jq := "bodySHA256=" + hex.EncodeToString(sum[:])
	jsonSig := signTwilio(twilioToken, twilioURL+"?"+jq, nil)
	jh := func(sig string) http.Header {
		return headers("X-Twilio-Signature", sig, "Content-Type", "application/json")
	}
	run("JSON: valid", nil, in(jh(jsonSig), jsonBody, jq), nil, sha256Hex(`{"Body":"Hello","MessageSid":"SM0123"}`), "")
	run("JSON: tampered body", nil, in(jh(jsonSig), strings.Replace(jsonBody, "Hello", "Hullo", 1), jq), ErrUnauthorized, "", "bodySHA256")
	run("JSON: body hash swapped", nil, in(jh(jsonSig), jsonBody, "bodySHA256="+strings.Repeat("0", 64)), ErrUnauthorized, "", "no signature matches")
	upper := "bodySHA256=" + strings.ToUpper(hex.EncodeToString(sum[:]))
	run("JSON: upper-case body hash (twilio-go compares exactly)", nil, in(jh(signTwilio(twilioToken, twilioURL+"?"+upper, nil)), jsonBody, upper),
		ErrUnauthorized, "", "bodySHA256")
	run("JSON: signed without bodySHA256", nil, in(jh(signTwilio(twilioToken, twilioURL, nil)), jsonBody, ""), ErrUnauthorized, "", "")
	run("JSON: with the default port", nil, in(jh(signTwilio(twilioToken, "https://hooks.example.com:443/twilio/sms?"+jq, nil)), jsonBody, jq), nil, "", "")
}

func base64HMACSHA1(key, msg string) string {
	m := hmac.New(sha1.New, []byte(key))
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestTwilioSDK: for the same requests, the scheme accepts exactly what
// twilio-go's RequestValidator accepts (ValidateBody is given the full URL
// Twilio posted to, as its docs ask).
func TestTwilioSDK(t *testing.T) {
	rv := client.NewRequestValidator(twilioToken)
	p := mustProvider(t, ProviderConfig{Name: "twilio", Scheme: SchemeTwilio, Secrets: []string{twilioToken}, PublicURL: twilioURL})
	params := url.Values{"CallSid": {"CA1"}, "CallStatus": {"ringing"}, "Reason": {"Participant x"}, "ReasonConferenceEnded": {"left"}, "Digits": {""}}
	form := params.Encode()
	jsonBody := `{"a":1}`
	sum := sha256.Sum256([]byte(jsonBody))
	jq := "bodySHA256=" + hex.EncodeToString(sum[:])
	type req struct {
		name, query, body, sig string
	}
	reqs := []req{
		{"form", "", form, signTwilio(twilioToken, twilioURL, params)},
		{"form with query", "a=1&b=%20", form, signTwilio(twilioToken, twilioURL+"?a=1&b=%20", params)},
		{"form, default port signed", "", form, signTwilio(twilioToken, "https://hooks.example.com:443/twilio/sms", params)},
		{"form, tampered", "", strings.Replace(form, "ringing", "busy", 1), signTwilio(twilioToken, twilioURL, params)},
		{"form, other token", "", form, signTwilio(twilioOtherToken, twilioURL, params)},
		{"form, query not signed", "a=1", form, signTwilio(twilioToken, twilioURL, params)},
		{"empty body", "From=%2B1", "", signTwilio(twilioToken, twilioURL+"?From=%2B1", nil)},
		{"JSON", jq, jsonBody, signTwilio(twilioToken, twilioURL+"?"+jq, nil)},
		{"JSON, default port signed", jq, jsonBody, signTwilio(twilioToken, "https://hooks.example.com:443/twilio/sms?"+jq, nil)},
		{"JSON, tampered body", jq, `{"a":2}`, signTwilio(twilioToken, twilioURL+"?"+jq, nil)},
		{"JSON, other token", jq, jsonBody, signTwilio(twilioOtherToken, twilioURL+"?"+jq, nil)},
		{"JSON, extra query", jq + "&x=1", jsonBody, signTwilio(twilioToken, twilioURL+"?"+jq, nil)},
	}
	for _, r := range reqs {
		full := twilioURL
		if r.query != "" {
			full += "?" + r.query
		}
		sdk := rv.ValidateBody(full, []byte(r.body), r.sig)
		_, err := p.Check(Input{Header: twilioHeaders(r.sig), Body: []byte(r.body), RawQuery: r.query}, time.Time{})
		if (err == nil) != sdk {
			t.Errorf("%s: twilio-go accepts %v, Check error %v", r.name, sdk, err)
		}
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: err = %v, want ErrUnauthorized", r.name, err)
		}
	}
	// Sanity: the table holds both outcomes.
	if !rv.ValidateBody(twilioURL, []byte(form), reqs[0].sig) || rv.ValidateBody(twilioURL, []byte(form), reqs[4].sig) {
		t.Fatal("twilio-go does not separate the table's cases")
	}

	// Repeated names, the one documented difference: twilio-go signs only
	// a name's first value, which leaves the later ones unsigned; the
	// scheme signs them all, sorted, as twilio-python and twilio-node do.
	repeated := "Addr=%2B2&Addr=%2B1"
	firstOnly := base64HMACSHA1(twilioToken, twilioURL+"Addr+2")
	allSorted := signTwilio(twilioToken, twilioURL, url.Values{"Addr": {"+2", "+1"}})
	if !rv.ValidateBody(twilioURL, []byte(repeated), firstOnly) || rv.ValidateBody(twilioURL, []byte(repeated), allSorted) {
		t.Fatal("twilio-go's treatment of repeated names changed: revisit twilioSortedParams")
	}
	if _, err := p.Check(Input{Header: twilioHeaders(firstOnly), Body: []byte(repeated)}, time.Time{}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("first-value-only signature: err = %v, want ErrUnauthorized", err)
	}
	if _, err := p.Check(Input{Header: twilioHeaders(allSorted), Body: []byte(repeated)}, time.Time{}); err != nil {
		t.Errorf("all-values signature refused: %v", err)
	}
}
