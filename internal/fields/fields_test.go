package fields_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/whguard/whguard/internal/fields"
)

func TestNestAndMessage(t *testing.T) {
	t.Parallel()
	inner := errors.Join(
		fields.Errorf("MaxDelay", "1ms is shorter than {BaseDelay} (5s)"),
		fields.Errorf("MaxAttempts", "must be at least 1, got 0"),
	)
	outer := errors.Join(fields.Nest("Policy", inner), fields.Errorf("Timeout", "must be positive"), errors.New("not a field error"))
	all := fields.All(fmt.Errorf("config: %w", outer))
	var got []string
	for _, fe := range all {
		got = append(got, fe.Field)
	}
	if want := []string{"Policy.MaxDelay", "Policy.MaxAttempts", "Timeout"}; !slices.Equal(got, want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	vars := map[string]string{"Policy.BaseDelay": "RETRY_BASE_DELAY"}
	if msg := all[0].Message(func(f string) string { return vars[f] }); msg != "1ms is shorter than RETRY_BASE_DELAY (5s)" {
		t.Fatalf("message %q", msg)
	}
	if msg := all[0].Error(); msg != "1ms is shorter than Policy.BaseDelay (5s)" {
		t.Fatalf("Error() %q", msg)
	}
	// Lower-case braces are not references (a signed-content template).
	tpl := fields.Errorf("SignedContent", "use {id}, {timestamp} and {body}")
	if msg := tpl.Message(strings.ToUpper); msg != "use {id}, {timestamp} and {body}" {
		t.Fatalf("template rewritten: %q", msg)
	}
	if !errors.Is(all[0], errors.Unwrap(inner.(interface{ Unwrap() []error }).Unwrap()[0])) {
		t.Fatal("a nested error no longer unwraps to the original")
	}
}

func TestKeyAndChecks(t *testing.T) {
	t.Parallel()
	if got := fields.Key("Routes", 2) + "|" + fields.Key("Targets", "stripe"); got != "Routes[2]|Targets[stripe]" {
		t.Fatalf("keys %q", got)
	}
	for name, ok := range map[string]bool{"X-Signature": true, "": false, "bad header": false, "x:y": false, "Ünï": false} {
		if fields.HeaderName(name) != ok {
			t.Errorf("HeaderName(%q) = %v", name, !ok)
		}
	}
	for u, ok := range map[string]bool{"http://app:3000/x?y=1": true, "https://a": true, "ftp://hunter2@a": false, "app:3000": false, "http://?token=s3cret": false} {
		if err := fields.HTTPURL(u); (err == nil) != ok {
			t.Errorf("HTTPURL(%q) = %v", u, err)
		} else if err != nil && strings.Contains(err.Error(), u) {
			t.Errorf("HTTPURL quotes the URL: %v", err)
		}
	}
}
