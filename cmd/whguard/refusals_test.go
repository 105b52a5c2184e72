package main

import (
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/proxy/admin"
)

// fixedRefusals lists the same records whatever the filter.
type fixedRefusals []proxy.Refusal

func (f fixedRefusals) List(string, string) []proxy.Refusal { return f }

// TestRefusalsPrintsNoControlCharacters: a refused request's path is the
// sender's to choose, and arrives decoded (%1b is ESC): `whguard
// refusals` prints it escaped, so that nobody can write terminal control
// sequences, or new lines and tabs that break the table, to the
// operator's terminal.
func TestRefusalsPrintsNoControlCharacters(t *testing.T) {
	path := "/x\x1b]0;owned\x07\x1b[2J\r\n\tfake row"
	src := fixedRefusals{{At: time.Now(), Method: "POST", Path: path, Status: 404, Reason: proxy.RefusalNotFound,
		Diagnosis: "none", Detail: "no provider on this path: check the URL set at the sender"}}
	code, out, errOut := adminCLI(t, admin.APIConfig{Refusals: src})("refusals")
	if code != 0 {
		t.Fatalf("refusals: %d %s", code, errOut)
	}
	if strings.ContainsAny(out, "\x1b\x07\r\t") || strings.Count(out, "\n") != 2 {
		t.Fatalf("control characters printed: %q", out)
	}
	if !strings.Contains(out, `\x1b]0;owned`) {
		t.Fatalf("the path is not shown escaped: %q", out)
	}
}
