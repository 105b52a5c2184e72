package main

import (
	"sort"
	"strings"
)

// Mistakes of configuration that are no bad value of a variable whguard
// reads: a variable it does not read (a typo, a provider missing from
// WHGUARD_PROVIDERS), and a secret that is the docs' placeholder.

// unknownVariables returns one warning per WHGUARD_ variable of vars that
// whguard does not read (known), sorted, each with what was probably
// meant: the known variable closest to it (globals, and the WHGUARD_<NAME>_*
// of the configured providers), or the provider missing from
// WHGUARD_PROVIDERS when the rest of the name is a provider's setting.
//
// An unknown variable stays a warning when start-up otherwise succeeds: a
// typo in an optional setting must not stop production. When start-up
// fails, the warnings are printed beside the errors, since the typo is
// often their cause (WHGUARD_PROVIDER=stripe leaves WHGUARD_PROVIDERS
// empty).
func unknownVariables(vars map[string]string, known map[string]bool, providers []providerConfig) []string {
	candidates := make([]string, 0, len(known))
	for k := range known {
		candidates = append(candidates, k)
	}
	sort.Strings(candidates)
	configured := map[string]bool{}
	for _, p := range providers {
		configured[p.name] = true
	}
	var out []string
	for k := range vars {
		if !strings.HasPrefix(k, envPrefix) || known[k] || ignoredKeys[k] {
			continue
		}
		out = append(out, "unknown variable "+k+" ignored"+unknownHint(k, candidates, configured))
	}
	sort.Strings(out)
	return out
}

// unknownHint says what the unknown variable key probably meant, given
// the known variables (sorted) and the configured providers' names.
func unknownHint(key string, candidates []string, configured map[string]bool) string {
	var hints []string
	if s := closest(key, candidates); s != "" {
		hints = append(hints, "did you mean "+s+"?")
	}
	if name := unlistedProvider(key, configured); name != "" {
		q := "is provider " + name + " missing from WHGUARD_PROVIDERS?"
		if len(hints) > 0 {
			q = "(or " + q + ")"
		}
		hints = append(hints, q)
	}
	if len(hints) == 0 {
		return " (a typo, or a provider missing from WHGUARD_PROVIDERS?)"
	}
	return ": " + strings.Join(hints, " ")
}

// closest returns the candidate nearest to key by edit distance, letter
// case ignored, when it is near enough to be a typo of it: at most a
// quarter of the name's edits (after WHGUARD_), at least 1 and at most 3.
// Ties go to the first candidate. "" when none is.
func closest(key string, candidates []string) string {
	name := strings.ToUpper(strings.TrimPrefix(key, envPrefix))
	limit := min(max(len(name)/4, 1), 3)
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := editDistance(name, strings.TrimPrefix(c, envPrefix), limit); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// maxNameLen bounds the names editDistance compares: longer ones are
// never near, so a hostile environment costs bounded work per pair.
const maxNameLen = 64

// editDistance is the optimal string alignment distance between a and b
// (insertions, deletions, substitutions and transpositions of adjacent
// bytes, each counting 1), or limit+1 when it is more than limit. Names
// longer than maxNameLen are never within the limit; the work is at most
// maxNameLen² steps, and stops as soon as a row exceeds the limit.
func editDistance(a, b string, limit int) int {
	if len(a) > maxNameLen || len(b) > maxNameLen || len(a)-len(b) > limit || len(b)-len(a) > limit {
		return limit + 1
	}
	// rows[0] is two rows back, rows[1] the previous one, rows[2] the
	// current one.
	var rows [3][maxNameLen + 1]int
	for j := range len(b) + 1 {
		rows[1][j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := &rows[2]
		cur[0] = i
		rowMin := i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(rows[1][j]+1, cur[j-1]+1, rows[1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, rows[0][j-2]+1)
			}
			cur[j] = d
			rowMin = min(rowMin, d)
		}
		if rowMin > limit {
			return limit + 1
		}
		rows[0], rows[1] = rows[1], rows[2]
	}
	if d := rows[1][len(b)]; d <= limit {
		return d
	}
	return limit + 1
}

// unlistedProvider returns the provider name of key when key is
// WHGUARD_<NAME>_<a provider setting> for a valid NAME that is not
// configured (WHGUARD_GITHUB_SECRET without github in WHGUARD_PROVIDERS),
// else "". Of several ways to split key, the longest setting wins
// (SECRET_PREVIOUS over PREVIOUS).
func unlistedProvider(key string, configured map[string]bool) string {
	rest := strings.TrimPrefix(key, envPrefix)
	settings := knownKeys(&providerEnv{}, "")
	for i := 0; i < len(rest); i++ {
		if rest[i] != '_' || !settings[rest[i+1:]] {
			continue
		}
		name := strings.ToLower(rest[:i])
		if providerNameRE.MatchString(name) && !configured[name] {
			return name
		}
		return ""
	}
	return ""
}

// isPlaceholder tells whether a secret is a placeholder copied from the
// docs rather than a secret: `...` or `…`, alone or at its end
// (`whsec_...`, `whsec_…`, `sk_live_...`). A real secret that ends so
// cannot be configured; none of the providers' formats does.
func isPlaceholder(secret string) bool {
	s := strings.TrimSpace(secret)
	return strings.HasSuffix(s, "...") || strings.HasSuffix(s, "…")
}

// placeholderProblem is the error for a variable (or a secret file) that
// holds a placeholder secret. It never quotes the value.
const placeholderProblem = "holds a placeholder from the docs (a value ending with ... or …), not a secret; set the real one"
