package forwarder_test

import (
	"slices"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/fields"
)

// Each bad setting is refused by its field, never clamped; zero settings
// take the defaults only through WithDefaults.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mod    func(*forwarder.Config)
		fields []string
	}{
		{"defaults", func(*forwarder.Config) {}, nil},
		{"zero timeout", func(c *forwarder.Config) { c.Timeout = 0 }, []string{"Timeout"}},
		{"concurrency above the bound", func(c *forwarder.Config) { c.Concurrency = forwarder.MaxConcurrency + 1 }, []string{"Concurrency"}},
		{"negative in-flight bound", func(c *forwarder.Config) { c.MaxInFlight = -1 }, []string{"MaxInFlight"}},
		{"max delay under base", func(c *forwarder.Config) { c.Policy.MaxDelay = time.Millisecond }, []string{"Policy.MaxDelay"}},
		{"no attempts", func(c *forwarder.Config) { c.Policy.MaxAttempts = 0 }, []string{"Policy.MaxAttempts"}},
		{"lease margin above the bound (not clamped)", func(c *forwarder.Config) { c.LeaseMargin = time.Minute }, []string{"LeaseMargin"}},
		{"negative poll", func(c *forwarder.Config) { c.PollInterval = -time.Second }, []string{"PollInterval"}},
		{"keys kept too briefly", func(c *forwarder.Config) { c.KeyRetention = time.Minute }, []string{"KeyRetention"}},
		{"payloads outlive keys (not clamped)", func(c *forwarder.Config) { c.PayloadRetention = c.KeyRetention + time.Hour }, []string{"PayloadRetention"}},
		{"bad target", func(c *forwarder.Config) {
			c.Targets = map[string]forwarder.Target{"a": {BackendURL: "ftp://x", ForwardPath: "hooks"}, "b": {}}
		}, []string{"Targets[a].BackendURL", "Targets[a].ForwardPath", "Targets[b].BackendURL"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := forwarder.Config{}.WithDefaults()
			tc.mod(&c)
			var got []string
			for _, fe := range fields.All(c.Validate()) {
				got = append(got, fe.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("fields at fault %v, want %v", got, tc.fields)
			}
		})
	}
}

// Unset, the payload retention follows a key retention shorter than its
// default; WithDefaults changes no setting that is set.
func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	c := forwarder.Config{KeyRetention: 2 * time.Hour}.WithDefaults()
	if c.PayloadRetention != 2*time.Hour {
		t.Fatalf("payload retention %s, want the key retention", c.PayloadRetention)
	}
	set := forwarder.Config{Timeout: time.Second, LeaseMargin: time.Minute, PayloadRetention: time.Minute}
	if got := set.WithDefaults(); got.Timeout != time.Second || got.LeaseMargin != time.Minute || got.PayloadRetention != time.Minute {
		t.Fatalf("set values changed: %+v", got)
	}
	if _, err := forwarder.New(forwarder.Config{LeaseMargin: time.Minute}); err == nil {
		t.Fatal("New accepted a lease margin above the bound")
	}
}
