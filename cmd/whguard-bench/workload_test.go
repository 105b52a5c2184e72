package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/whguard/whguard/verify"
)

// TestWorkload checks, in milliseconds, that the generated requests are
// what the bench claims: valid Standard Webhooks signatures whguard
// accepts, 1 KB JSON bodies, 10 % duplicates of earlier events carrying
// the same content, and unique-event indexes the backend can parse back.
func TestWorkload(t *testing.T) {
	sg := newSigner("t")
	now := time.Now()
	const n = 2000
	p := presign(sg, n, now)
	if p.Uniques() != uniquesIn(n) || uniquesIn(n) != n-n/dupEvery {
		t.Fatalf("uniques = %d, want %d", p.Uniques(), n-n/dupEvery)
	}
	prov, err := verify.NewProvider(verify.ProviderConfig{Name: "bench", Scheme: "standard", Secrets: []string{sg.secret}})
	if err != nil {
		t.Fatal(err)
	}
	naive := &naiveReceiver{key: sg.key}
	hashes := map[string]string{}
	seen := map[int]bool{}
	dups := 0
	for i := range n {
		r := p.At(i)
		if len(r.body) != bodySize || !json.Valid(r.body) {
			t.Fatalf("request %d: body of %d bytes, valid JSON %v", i, len(r.body), json.Valid(r.body))
		}
		h := http.Header{"Webhook-Id": {r.id}, "Webhook-Timestamp": {r.ts}, "Webhook-Signature": {r.sig}}
		ev, err := prov.Check(verify.Input{Header: h, Body: r.body}, now)
		if err != nil {
			t.Fatalf("request %d does not verify: %v", i, err)
		}
		if !naive.verify(r.id, r.ts, r.sig, r.body) {
			t.Fatalf("request %d rejected by the naive receiver", i)
		}
		if u, ok := parseUnique("t", ev.ID); !ok || u != r.unique {
			t.Fatalf("request %d: id %q parses to %d %v, want %d", i, ev.ID, u, ok, r.unique)
		}
		if r.dup {
			dups++
			if !seen[r.unique] || hashes[r.id] != ev.ContentHash {
				t.Fatalf("duplicate %d of event %d: seen before %v, same content %v", i, r.unique, seen[r.unique], hashes[r.id] == ev.ContentHash)
			}
			continue
		}
		if seen[r.unique] {
			t.Fatalf("event %d sent twice as unique", r.unique)
		}
		seen[r.unique], hashes[r.id] = true, ev.ContentHash
	}
	if dups != n/dupEvery {
		t.Fatalf("%d duplicates, want %d", dups, n/dupEvery)
	}
	if lazy := (lazy{s: sg, n: n}).At(n - 1); string(lazy.body) != string(p.At(n-1).body) {
		t.Fatal("lazy and pre-signed sources disagree")
	}
}
