package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The shipped manifests, the README and docs/ may only name variables whguard
// reads: a renamed variable must not leave stale docs behind.
func TestDocumentedVariablesExist(t *testing.T) {
	t.Parallel()
	known := knownKeys(&config{}, envPrefix)
	perProvider := knownKeys(&providerEnv{}, "")
	files, _ := filepath.Glob("../../deploy/sidecar/*")
	docs, _ := filepath.Glob("../../docs/*.md")
	files = append(append(files, "../../README.md"), docs...)
	re := regexp.MustCompile(`WHGUARD_[A-Z0-9_<>]+`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range re.FindAllString(string(b), -1) {
			name = strings.TrimRight(name, "_")
			checked++
			if known[name] {
				continue
			}
			// WHGUARD_<NAME>_X or WHGUARD_STRIPE_X: a per-provider variable.
			rest := strings.TrimPrefix(name, envPrefix)
			ok := false
			for i := 0; i < len(rest); i++ {
				if rest[i] == '_' && perProvider[rest[i+1:]] {
					ok = true
				}
			}
			if !ok && !strings.HasPrefix(name, "WHGUARD_TEST_") {
				t.Errorf("%s names %s, which whguard does not read", filepath.Base(f), name)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d variable mentions found: the test is not looking at the docs", checked)
	}
}
