package journaltest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

func testListFiltersAndCursor(t *testing.T, s journal.Store) {
	ctx := context.Background()
	for i := range 7 {
		p := "alpha"
		if i%2 == 1 {
			p = "beta"
		}
		AppendOne(t, s, Event(p, fmt.Sprintf("e%d", i), "h"))
	}
	page, next, err := s.List(ctx, journal.Filter{Limit: 3})
	if err != nil || len(page) != 3 || next == 0 {
		t.Fatalf("page 1: %d %d %v", len(page), next, err)
	}
	if page[0].ID <= page[1].ID {
		t.Fatal("not newest first")
	}
	if n := Count(t, s, journal.Filter{}); n != 7 {
		t.Fatalf("paged %d, want 7", n)
	}
	if n := Count(t, s, journal.Filter{Provider: "beta"}); n != 3 {
		t.Fatalf("beta %d", n)
	}
	if n := Count(t, s, journal.Filter{Status: journal.StatusDone}); n != 0 {
		t.Fatalf("done %d", n)
	}
	if n := Count(t, s, journal.Filter{Since: time.Now().Add(time.Hour)}); n != 0 {
		t.Fatalf("since the future: %d", n)
	}
	evs, _, err := s.List(ctx, journal.Filter{Before: 3_000_000_000})
	if err != nil || len(evs) != 7 {
		t.Fatalf("cursor beyond int32: %d %v", len(evs), err)
	}
}

// testFindByEventIDAndConflicts: events are found by the provider's id,
// exactly or by prefix, within a provider or a set of them; conflicting
// copies are listed with their payloads.
func testFindByEventIDAndConflicts(t *testing.T, s journal.Store) {
	ctx := context.Background()
	a := AppendOne(t, s, Event("stripe", "evt_123", "h1")).ID
	AppendOne(t, s, Event("stripe", "evt_1234", "h"))
	AppendOne(t, s, Event("github", "evt_123", "h"))
	ids := func(f journal.Filter) []string {
		evs, _, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.Provider+"/"+e.EventID)
		}
		return out
	}
	if got := ids(journal.Filter{EventID: "evt_123"}); len(got) != 2 {
		t.Fatalf("exact evt_123: %v", got)
	}
	if got := ids(journal.Filter{EventID: "evt_123", Provider: "stripe"}); len(got) != 1 || got[0] != "stripe/evt_123" {
		t.Fatalf("exact within stripe: %v", got)
	}
	if got := ids(journal.Filter{EventID: "evt_123", Providers: []string{"stripe", "shopify"}}); len(got) != 1 || got[0] != "stripe/evt_123" {
		t.Fatalf("exact within a provider set: %v", got)
	}
	if got := ids(journal.Filter{EventID: "evt_12", EventIDPrefix: true, Provider: "stripe"}); len(got) != 2 {
		t.Fatalf("prefix evt_12 within stripe: %v", got)
	}
	if got := ids(journal.Filter{EventID: "evt_12"}); len(got) != 0 {
		t.Fatalf("exact evt_12 matched: %v", got)
	}
	if got := ids(journal.Filter{EventID: "%", EventIDPrefix: true}); len(got) != 0 {
		t.Fatalf("prefix %% matched: %v", got)
	}

	if r := AppendOne(t, s, Event("stripe", "evt_123", "h2")); r.Outcome != journal.Conflict {
		t.Fatalf("outcome %v", r.Outcome)
	}
	cs, err := s.Conflicts(ctx, a)
	if err != nil || len(cs) != 1 {
		t.Fatalf("conflicts: %v %v", cs, err)
	}
	if cs[0].ContentHash != "h2" || cs[0].Body != `{"id":"evt_123","h":"h2"}` || cs[0].Headers.Get("Webhook-Id") != "evt_123" || cs[0].ReceivedAt.IsZero() {
		t.Fatalf("conflict %+v", cs[0])
	}
	if _, err := s.Conflicts(ctx, 999999); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("conflicts of no event: %v", err)
	}
}

// journal.TypeMatches, which the ingress filters with, agrees with the
// store's type= listing on every pattern, LIKE and GLOB metacharacters
// included.
func testTypeMatchesLikeTheListFilter(t *testing.T, s journal.Store) {
	types := []string{"invoice.paid", "invoice.payment_failed", "customer.subscription.created", "customer.created",
		"a_b", "axb", "a%b", `a\b`, "x[1]", "x1", "q?", "qq", "Push Hook", "INVOICE.paid", "invoice."}
	for i, typ := range types {
		e := Event("p", fmt.Sprint("t", i), "h")
		e.EventType = typ
		AppendOne(t, s, e)
	}
	patterns := []string{"invoice.*", "*.created", "customer.*.created", "a_b", "a%b", `a\b`, "x[1]", "q?",
		"*", "Push*", "*Hook", "invoice.paid", "in*ce*", "*i*i*", "invoice.*.*"}
	for _, pat := range patterns {
		listed, _, err := s.List(context.Background(), journal.Filter{Types: []string{pat}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, sm := range listed {
			got[sm.EventType] = true
		}
		for _, typ := range types {
			if journal.TypeMatches(pat, typ) != got[typ] {
				t.Errorf("pattern %q, type %q: TypeMatches %v, listed %v", pat, typ, !got[typ], got[typ])
			}
		}
	}
}
