package verify

import (
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// Every sample file in the repository loads (allSamples would panic
// on first use otherwise), and only the schemes whguard can sign for have
// any.
func TestSamplesLoad(t *testing.T) {
	got, err := loadSamples(samplesFS)
	if err != nil {
		t.Fatal(err)
	}
	for scheme := range got {
		if _, ok := lookupScheme(scheme); !ok {
			t.Errorf("samples/%s: no such scheme", scheme)
		}
	}
	if len(got) != len(KnownSchemes())-len(senderKeyHints) {
		t.Errorf("samples for %d schemes, want every one but the %d whose sender holds its key", len(got), len(senderKeyHints))
	}
}

func TestParseSampleRefusesMalformedFiles(t *testing.T) {
	cases := map[string]string{
		"no blank line":       "# type: x\nContent-Type: application/json\n{}\n",
		"no type":             "Content-Type: application/json\n\n{}\n",
		"not a header":        "# type: x\nContent-Type application/json\n\n{}\n",
		"space in the name":   "# type: x\nContent Type: application/json\n\n{}\n",
		"unknown placeholder": "# type: x\nContent-Type: application/json\n\n{\"id\":\"{{guid}}\"}\n",
		"in a header":         "# type: x\nX-Id: {{secret}}\n\n{}\n",
	}
	for name, raw := range cases {
		if _, err := parseSample("stripe", "x", []byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// One placeholder text is one value throughout a sample, headers
// included; another suffix is another value; the times are now's; the
// file's last newline is not part of the body.
func TestSampleFresh(t *testing.T) {
	fsys := fstest.MapFS{"samples/standard/a.http": {Data: []byte("# type: t.x\n# a comment\nwebhook-id: msg_{{id}}\n\n" +
		`{"a":"{{id}}","b":"{{id2}}","u":"{{uuid}}","h":"{{hex}}","s":"{{sha}}","n":{{int}},"t":{{unix}},"ms":{{unix_ms}},"iso":"{{iso}}","isoms":"{{iso_ms}}"}` + "\n")}}
	got, err := loadSamples(fsys)
	if err != nil {
		t.Fatal(err)
	}
	s := got["standard"][0]
	if s.Name != "a" || s.Type != "t.x" || s.Scheme != "standard" {
		t.Fatalf("sample %+v", s)
	}
	now := time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)
	h, body := s.Fresh(now)
	v, err := parseJSON(body)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	field := func(k string) string { f, _ := v.field(k); return f.text }
	if h.Get("Webhook-Id") != "msg_"+field("a") || field("a") == field("b") {
		t.Fatalf("header %q, a %q, b %q", h.Get("Webhook-Id"), field("a"), field("b"))
	}
	want := map[string]string{"t": "1772600767", "ms": "1772600767890", "iso": "2026-03-04T05:06:07Z", "isoms": "2026-03-04T05:06:07.890Z"}
	for k, w := range want {
		if field(k) != w {
			t.Errorf("%s = %q, want %q", k, field(k), w)
		}
	}
	shapes := map[string]string{"a": `^[A-Za-z0-9]{24}$`, "u": `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`,
		"h": `^[0-9a-f]{32}$`, "s": `^[0-9a-f]{40}$`, "n": `^[1-9][0-9]{9}$`}
	for k, re := range shapes {
		if !regexp.MustCompile(re).MatchString(field(k)) {
			t.Errorf("%s = %q, want %s", k, field(k), re)
		}
	}
	if strings.HasSuffix(string(body), "\n") {
		t.Error("the file's last newline is in the body")
	}
	if _, again := s.Fresh(now); string(again) == string(body) {
		t.Error("a second freshening gives the same body")
	}
}
