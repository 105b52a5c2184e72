package admin

import "testing"

// TestRedactBody: every string value of a clientState member, at any
// depth and however its name is escaped, becomes "[redacted]"; every other
// byte stays; what is not one JSON value is hidden whole.
func TestRedactBody(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"value":[{"clientState":"s3cret","changeType":"created"}]}`, `{"value":[{"clientState":"[redacted]","changeType":"created"}]}`},
		{"{\"value\" : [ {\"clientState\"\t:\n \"a\\\"b\\u0041\" } ]}", "{\"value\" : [ {\"clientState\"\t:\n \"[redacted]\" } ]}"},
		{`{"a":{"b":[{"client\u0053tate":"x"}]},"clientState":"y"}`, `{"a":{"b":[{"client\u0053tate":"[redacted]"}]},"clientState":"[redacted]"}`},
		{`{"note":"clientState","x":["clientState","s"]}`, `{"note":"clientState","x":["clientState","s"]}`},
		{`{"clientState":{"nested":"kept"},"clientState2":"kept"}`, `{"clientState":{"nested":"kept"},"clientState2":"kept"}`},
		{`{"clientState":null,"n":1.50}`, `{"clientState":null,"n":1.50}`},
		{`[{"clientState":"a"},{"clientState":"b"}]`, `[{"clientState":"[redacted]"},{"clientState":"[redacted]"}]`},
		{"", ""},
		{"  ", "  "},
		{`{"clientState":"s3cret"`, Redacted},
		{`{"clientState":"s3cret"} trailing`, Redacted},
		{`clientState=s3cret`, Redacted},
	} {
		if got := string(redactBody([]byte(c.in))); got != c.want {
			t.Errorf("redactBody(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
