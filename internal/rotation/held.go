// Package rotation reads secret and key files again while whguard runs, so
// that a secret rotated in a mounted Kubernetes Secret (a new timestamped
// directory behind the ..data symbolic link) or by a Vault agent (a new
// file renamed over the old one) is used without a restart. The values a
// file held before stay accepted for an overlap, so that requests signed
// with them, and backends still holding them, keep working while everyone
// moves to the new ones.
//
// Held is the decision (what is accepted, given what the file held, what
// it holds now and the time); Watcher reads the files and applies it.
package rotation

import (
	"slices"
	"time"
)

// Held is what one watched file stands for at a moment: the values it
// holds now (Current, in the file's order: current first) and the values
// it held before that are still accepted (Retired, most recently retired
// first).
type Held struct {
	Current []string
	Retired []Retired
}

// Retired is a value the file no longer holds, accepted until Until.
type Retired struct {
	Value string
	Until time.Time
}

// Next is what h becomes when the file is found to hold file at now, the
// values it no longer holds being accepted for overlap:
//   - the values of file are current, in the file's order;
//   - the values of h.Current that file leaves out are retired until
//     now+overlap (dropped at once when overlap is 0);
//   - values retired earlier keep their own end (a second rotation within
//     the overlap does not lengthen the first one's), and are no longer
//     retired once the file holds them again or their end has passed.
func (h Held) Next(file []string, now time.Time, overlap time.Duration) Held {
	next := Held{Current: slices.Clone(file)}
	if overlap > 0 {
		for _, v := range h.Current {
			if !slices.Contains(file, v) && !slices.ContainsFunc(next.Retired, func(r Retired) bool { return r.Value == v }) {
				next.Retired = append(next.Retired, Retired{Value: v, Until: now.Add(overlap)})
			}
		}
	}
	for _, r := range h.Retired {
		if r.Until.After(now) && !slices.Contains(file, r.Value) &&
			!slices.ContainsFunc(next.Retired, func(o Retired) bool { return o.Value == r.Value }) {
			next.Retired = append(next.Retired, r)
		}
	}
	return next
}

// Expire is h without the values whose overlap ended at now or before,
// and whether there were any.
func (h Held) Expire(now time.Time) (Held, bool) {
	kept := slices.DeleteFunc(slices.Clone(h.Retired), func(r Retired) bool { return !r.Until.After(now) })
	if len(kept) == len(h.Retired) {
		return h, false
	}
	return Held{Current: h.Current, Retired: kept}, true
}

// Accepted lists the values accepted: the current ones, then the retired
// ones, each once.
func (h Held) Accepted() []string {
	out := slices.Clone(h.Current)
	for _, r := range h.Retired {
		if !slices.Contains(out, r.Value) {
			out = append(out, r.Value)
		}
	}
	return out
}

// Until is when the last retired value stops being accepted (the zero
// time when none is retired).
func (h Held) Until() time.Time {
	var last time.Time
	for _, r := range h.Retired {
		if r.Until.After(last) {
			last = r.Until
		}
	}
	return last
}
