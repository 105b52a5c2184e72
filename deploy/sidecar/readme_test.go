package sidecar

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The snippets of docs/sidecar.md are the tested files: each YAML block
// there must appear verbatim in one of deploy/sidecar's files.
func TestDocSnippetsAreShipped(t *testing.T) {
	page, err := os.ReadFile("../../docs/sidecar.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(page)
	files, _ := filepath.Glob("*.yaml")
	var shipped []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		shipped = append(shipped, string(b))
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 4 {
		t.Fatalf("only %d YAML snippets in the section", len(blocks))
	}
	for _, b := range blocks {
		found := false
		for _, s := range shipped {
			found = found || strings.Contains(s, b[1])
		}
		if !found {
			t.Errorf("this docs/sidecar.md snippet is in none of deploy/sidecar/*.yaml:\n%s", b[1])
		}
	}
}
