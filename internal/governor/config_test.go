package governor

import (
	"slices"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/fields"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Rate{"": {}, "20/s": {20, time.Second}, "90/m": {90, time.Minute}, "3600/h": {3600, time.Hour}} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"0/s", "1000001/s", "5/d", "5 per second", "-1/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	rate := Rate{N: 5, Per: time.Second}
	cases := []struct {
		name   string
		cfg    Config
		fields []string
	}{
		{"nothing limited", Config{}, nil},
		{"rate with its default burst", Config{Backend: Limit{Rate: rate}}, nil},
		{"burst without a rate", Config{Providers: map[string]Limit{"x": {Burst: 3}}}, []string{"Providers[x].Burst"}},
		{"burst above the bound", Config{Backend: Limit{Rate: rate, Burst: MaxBurst + 1}}, []string{"Backend.Burst"}},
		{"odd period", Config{Backend: Limit{Rate: Rate{N: 5, Per: time.Millisecond}, Burst: 1}}, []string{"Backend.Rate"}},
		{"negative in flight", Config{MaxInFlight: -1}, []string{"MaxInFlight"}},
		{"breaker out of range", Config{Breaker: BreakerConfig{Enabled: true, FailureRatio: 1.5, MinAttempts: -1}},
			[]string{"Breaker.FailureRatio", "Breaker.MinAttempts"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, fe := range fields.All(tc.cfg.WithDefaults().Validate()) {
				got = append(got, fe.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("fields at fault %v, want %v", got, tc.fields)
			}
		})
	}
	if l := (Limit{Rate: Rate{N: 90, Per: time.Minute}}).WithDefaults(); l.Burst != 2 {
		t.Fatalf("default burst of 90/m: %d, want 2", l.Burst)
	}
}
