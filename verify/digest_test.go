package verify

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func mustDigest(t *testing.T, h http.Header, body string) string {
	t.Helper()
	d, err := Digest(h, []byte(body))
	if err != nil {
		t.Fatalf("Digest(%q): %v", body, err)
	}
	return d
}

func TestDigestJSON(t *testing.T) {
	want := sha256Hex(`{"a":[1,{"c":true,"d":null}],"b":"é"}`)
	for _, body := range []string{
		`{"a":[1,{"c":true,"d":null}],"b":"é"}`,
		`{"b":"\u00e9","a":[1.0,{"d":null,"c":true}]}`,
		"{\n  \"b\": \"é\",\n  \"a\": [ 1e0, { \"c\": true, \"d\": null } ]\n}\n",
	} {
		// The Content-Type does not matter for JSON.
		for _, h := range []http.Header{nil, headers("Content-Type", "application/json"), headers("Content-Type", "text/plain")} {
			if got := mustDigest(t, h, body); got != want {
				t.Errorf("Digest(%q) = %s, want %s", body, got, want)
			}
		}
	}
	if mustDigest(t, nil, `{"id":9007199254740993}`) == mustDigest(t, nil, `{"id":9007199254740992}`) {
		t.Error("ids beyond 2^53 collide")
	}
	if mustDigest(t, nil, `{"a":1}`) == mustDigest(t, nil, `{"a":2}`) {
		t.Error("different values collide")
	}
}

func TestDigestRaw(t *testing.T) {
	for _, body := range []string{"", "hello", "b=2&a=1", "{\"a\":\"\xff\"}", `{"a":1} trailing`, `"\ud800"`} {
		if got, want := mustDigest(t, nil, body), sha256Hex(body); got != want {
			t.Errorf("Digest(%q) = %s, want the raw digest %s", body, got, want)
		}
	}
	if mustDigest(t, nil, "b=2&a=1") == mustDigest(t, nil, "a=1&b=2") {
		t.Error("without a form Content-Type, parameter order must count")
	}
}

func TestDigestForm(t *testing.T) {
	form := headers("Content-Type", "application/x-www-form-urlencoded")
	formCharset := headers("Content-Type", "Application/X-WWW-Form-Urlencoded; charset=utf-8")
	want := sha256Hex("a=1&a=3&b=2&c=")
	for _, body := range []string{"a=1&a=3&b=2&c=", "b=2&a=1&c=&a=3", "c&a=1&b=2&a=3", "a=%31&a=3&b=2&c="} {
		for _, h := range []http.Header{form, formCharset} {
			if got := mustDigest(t, h, body); got != want {
				t.Errorf("Digest(form %q) = %s, want %s", body, got, want)
			}
		}
	}
	// Repeated names keep their order: a=3 before a=1 is another event.
	if mustDigest(t, form, "a=3&b=2&a=1&c=") == want {
		t.Error("reordering the values of a repeated name kept the digest")
	}
	// A Slack-like body with encoded characters.
	slack := "token=x&text=hello+world&response_url=https%3A%2F%2Fhooks.slack.com%2Fx"
	slackReordered := "response_url=https%3A%2F%2Fhooks.slack.com%2Fx&text=hello%20world&token=x"
	if mustDigest(t, form, slack) != mustDigest(t, form, slackReordered) {
		t.Error("reordered, re-encoded form parameters differ")
	}
	for _, bad := range []string{"a=%zz", "a=1;b=2", "%"} {
		_, err := Digest(form, []byte(bad))
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("Digest(form %q) err = %v, want ErrBadRequest", bad, err)
		}
	}
}

func TestDigestUnparseableJSON(t *testing.T) {
	for body, cause := range map[string]error{
		`{"a":1,"a":2}`: ErrDuplicateKey,
		strings.Repeat("[", 65) + strings.Repeat("]", 65): ErrTooDeep,
	} {
		for _, f := range []func() (string, error){
			func() (string, error) { return Digest(nil, []byte(body)) },
			func() (string, error) { return ContentDigest(nil, []byte(body), []string{"a"}) },
		} {
			d, err := f()
			if !errors.Is(err, ErrBadRequest) || !errors.Is(err, cause) || d != "" {
				t.Errorf("%.20s: %q, %v; want ErrBadRequest wrapping %v", body, d, err, cause)
			}
			if !strings.Contains(err.Error(), "body unparseable") {
				t.Errorf("error %q does not say the body is unparseable", err)
			}
		}
	}
}

func TestContentDigestVolatile(t *testing.T) {
	vol := []string{"pending_webhooks", "delivery_attempts"}
	cd := func(body string) string {
		t.Helper()
		d, err := ContentDigest(nil, []byte(body), vol)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := cd(`{"id":"evt_1","pending_webhooks":3,"data":{"amount":100}}`)
	if got := cd(`{"data":{"amount":100},"pending_webhooks":1,"id":"evt_1"}`); got != first {
		t.Error("a changed volatile field changed the content hash")
	}
	if got := cd(`{"id":"evt_1","data":{"amount":100}}`); got != first {
		t.Error("an absent volatile field changed the content hash")
	}
	if got := cd(`{"id":"evt_1","pending_webhooks":3,"data":{"amount":101}}`); got == first {
		t.Error("a changed amount kept the content hash")
	}
	if first != sha256Hex(`{"data":{"amount":100},"id":"evt_1"}`) {
		t.Errorf("content hash %s is not the digest of the canonical body without volatile fields", first)
	}
	// Only top-level members of an object are volatile.
	if cd(`{"data":{"pending_webhooks":1}}`) == cd(`{"data":{"pending_webhooks":2}}`) {
		t.Error("a nested field named like a volatile one was dropped")
	}
	if cd(`[{"pending_webhooks":1}]`) == cd(`[{"pending_webhooks":2}]`) {
		t.Error("a field inside an array was dropped")
	}
	// "[].name" drops a member of each item of a top-level array, from the
	// key (the plain digest) as well as the content hash.
	items := []string{"[].attemptNumber"}
	a, err := digestBody(nil, []byte(`[{"eventId":1,"attemptNumber":0},{"eventId":2,"attemptNumber":0}]`), items)
	if err != nil {
		t.Fatal(err)
	}
	b, err := digestBody(nil, []byte(`[{"eventId":1,"attemptNumber":3},{"attemptNumber":3,"eventId":2}]`), items)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.plain != sha256Hex(`[{"eventId":1},{"eventId":2}]`) {
		t.Errorf("item volatile field kept: %+v vs %+v", a, b)
	}
	if c, _ := digestBody(nil, []byte(`[{"eventId":1,"attemptNumber":0},{"eventId":3,"attemptNumber":0}]`), items); c == a {
		t.Error("a changed item kept the digests")
	}
	if d, _ := digestBody(nil, []byte(`{"attemptNumber":1}`), items); d == (bodyDigests{}) || d.plain != sha256Hex(`{"attemptNumber":1}`) {
		t.Error("an item entry touched an object body")
	}
	// Without volatile fields, ContentDigest is Digest.
	body := []byte(`{"b":1,"a":2}`)
	d1, _ := ContentDigest(nil, body, nil)
	d2, _ := Digest(nil, body)
	if d1 != d2 || d1 != sha256Hex(`{"a":2,"b":1}`) {
		t.Errorf("ContentDigest(nil volatile) = %s, Digest = %s", d1, d2)
	}
	// Raw and form bodies ignore the volatile list.
	if d, _ := ContentDigest(nil, []byte("pending_webhooks"), vol); d != sha256Hex("pending_webhooks") {
		t.Error("raw body changed by the volatile list")
	}
	form := headers("Content-Type", "application/x-www-form-urlencoded")
	if d, _ := ContentDigest(form, []byte("pending_webhooks=1&a=2"), vol); d != sha256Hex("a=2&pending_webhooks=1") {
		t.Error("form body changed by the volatile list")
	}
}
