package catchup

import (
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

func TestDecideGUID(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	const iv = 5 * time.Minute
	asked := func(n int, ago time.Duration) *journal.CatchupRequest {
		return &journal.CatchupRequest{Requests: n, LastAt: now.Add(-ago)}
	}
	for _, c := range []struct {
		name                 string
		inJournal, delivered bool
		req                  *journal.CatchupRequest
		want                 Action
	}{
		{"in the journal", true, false, nil, Nothing},
		{"a delivery got a 2xx", false, true, nil, Nothing},
		{"missed, never asked", false, false, nil, Ask},
		{"arrived after asking", true, false, asked(1, time.Hour), Nothing},
		{"first wait not over", false, false, asked(1, iv-time.Second), Nothing},
		{"first wait over", false, false, asked(1, iv), Ask},
		{"second wait is twice", false, false, asked(2, 2*iv-time.Second), Nothing},
		{"second wait over", false, false, asked(2, 2*iv), Ask},
		{"third wait not over", false, false, asked(3, 4*iv-time.Second), Nothing},
		{"asked three times, never came", false, false, asked(3, 4*iv), GiveUp},
		{"given up before", false, false, &journal.CatchupRequest{Requests: 3, GaveUp: true}, Nothing},
	} {
		if got := DecideGUID(c.inJournal, c.delivered, c.req, now, iv); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStripeTypes(t *testing.T) {
	t.Parallel()
	many := make([]string, 21)
	for i := range many {
		many[i] = "t" + string(rune('a'+i))
	}
	for _, c := range []struct {
		name      string
		enabled   []string
		query     int
		keep, not string
	}{
		{"no endpoint", nil, 0, "anything", ""},
		{"every type", []string{"*"}, 0, "anything", ""},
		{"a few types go in the query", []string{"invoice.paid", "charge.refunded"}, 2, "invoice.paid", ""},
		{"more than 20 filtered after listing", many, 0, "ta", "invoice.paid"},
	} {
		q, keep := StripeTypes(c.enabled)
		if len(q) != c.query || !keep(c.keep) || (c.not != "" && keep(c.not)) {
			t.Errorf("%s: query %v, keep(%q) %v, keep(%q) %v", c.name, q, c.keep, keep(c.keep), c.not, keep(c.not))
		}
	}
}

func TestPaced(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		remaining, limit int
		want             bool
	}{{0, 0, false}, {1000, 5000, false}, {999, 5000, true}, {0, 5000, true}} {
		if got := Paced(c.remaining, c.limit); got != c.want {
			t.Errorf("Paced(%d, %d) = %v", c.remaining, c.limit, got)
		}
	}
}
