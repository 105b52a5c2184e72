package rotation

import (
	"fmt"
	"testing"
	"time"
)

// The decision: what is accepted once the file is found to hold file at
// now, given what it held; and what stays once the overlaps ending at
// later are over.
func TestHeldNext(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	hour := time.Hour
	cases := []struct {
		name    string
		held    Held
		file    []string
		now     time.Time
		overlap time.Duration
		want    []string // Accepted right after
		later   time.Time
		after   []string // Accepted at later, after Expire
	}{
		{name: "a new secret: the old one overlaps", held: Held{Current: []string{"a"}}, file: []string{"b"}, now: t0, overlap: hour,
			want: []string{"b", "a"}, later: t0.Add(hour), after: []string{"b"}},
		{name: "still accepted just before its end", held: Held{Current: []string{"a"}}, file: []string{"b"}, now: t0, overlap: hour,
			want: []string{"b", "a"}, later: t0.Add(hour - time.Nanosecond), after: []string{"b", "a"}},
		{name: "no overlap: dropped at once", held: Held{Current: []string{"a"}}, file: []string{"b"}, now: t0, overlap: 0,
			want: []string{"b"}, later: t0, after: []string{"b"}},
		{name: "the same values", held: Held{Current: []string{"a", "b"}}, file: []string{"a", "b"}, now: t0, overlap: hour,
			want: []string{"a", "b"}, later: t0.Add(2 * hour), after: []string{"a", "b"}},
		{name: "the old line removed from a two-line file", held: Held{Current: []string{"b", "a"}}, file: []string{"b"}, now: t0, overlap: hour,
			want: []string{"b", "a"}, later: t0.Add(hour), after: []string{"b"}},
		{name: "a new line added first: nothing retired", held: Held{Current: []string{"a"}}, file: []string{"b", "a"}, now: t0, overlap: hour,
			want: []string{"b", "a"}, later: t0.Add(hour), after: []string{"b", "a"}},
		{name: "two rotations within the overlap: the first keeps its end", overlap: hour, now: t0.Add(30 * time.Minute),
			held: Held{Current: []string{"b"}, Retired: []Retired{{Value: "a", Until: t0.Add(hour)}}}, file: []string{"c"},
			want: []string{"c", "b", "a"}, later: t0.Add(hour), after: []string{"c", "b"}},
		{name: "rolled back: the old secret is current again", overlap: hour, now: t0.Add(time.Minute),
			held: Held{Current: []string{"b"}, Retired: []Retired{{Value: "a", Until: t0.Add(hour)}}}, file: []string{"a"},
			want: []string{"a", "b"}, later: t0.Add(time.Minute + hour), after: []string{"a"}},
		{name: "an overlap already over is not carried", overlap: hour, now: t0.Add(2 * hour),
			held: Held{Current: []string{"b"}, Retired: []Retired{{Value: "a", Until: t0.Add(hour)}}}, file: []string{"c"},
			want: []string{"c", "b"}, later: t0.Add(3 * hour), after: []string{"c"}},
		{name: "a duplicate line counts once", held: Held{Current: []string{"a", "a"}}, file: []string{"b"}, now: t0, overlap: hour,
			want: []string{"b", "a"}, later: t0.Add(hour), after: []string{"b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next := tc.held.Next(tc.file, tc.now, tc.overlap)
			if got := fmt.Sprint(next.Accepted()); got != fmt.Sprint(tc.want) {
				t.Errorf("accepted %s, want %s", got, fmt.Sprint(tc.want))
			}
			if fmt.Sprint(next.Current) != fmt.Sprint(tc.file) {
				t.Errorf("current %v, want the file's %v", next.Current, tc.file)
			}
			expired, changed := next.Expire(tc.later)
			if got := fmt.Sprint(expired.Accepted()); got != fmt.Sprint(tc.after) {
				t.Errorf("at %s: accepted %s, want %s", tc.later.Sub(t0), got, fmt.Sprint(tc.after))
			}
			if changed != (len(expired.Retired) != len(next.Retired)) {
				t.Errorf("Expire says changed=%v, retired %d → %d", changed, len(next.Retired), len(expired.Retired))
			}
		})
	}
}

// Until is the end of the last overlap.
func TestHeldUntil(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := Held{Current: []string{"c"}, Retired: []Retired{{"b", t0.Add(2 * time.Hour)}, {"a", t0.Add(time.Hour)}}}
	if !h.Until().Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("until %v", h.Until())
	}
	if !(Held{Current: []string{"c"}}).Until().IsZero() {
		t.Error("nothing retired: want the zero time")
	}
}
