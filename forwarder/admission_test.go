package forwarder

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// admissionRun drives an admission through a sequence of steps and
// checks each step's decision, without a database or a clock: every rule
// of who delivers when is visible here, in milliseconds.
type admissionRun struct {
	t       *testing.T
	a       *admission
	now     time.Time
	waiters map[string]*waiter
}

// step is one event and the decision it must produce; want is what the
// step returned, written as text ("slot", "queued", "true", "n=3", …).
type step struct {
	do   string
	want string
}

func (r *admissionRun) apply(s step) string {
	a := r.a
	f := strings.Fields(s.do)
	switch f[0] {
	case "claim":
		return fmt.Sprint(a.claim())
	case "unclaim":
		return "wake=" + fmt.Sprint(a.unclaim())
	case "acquire": // acquire claim|row NAME
		w := a.acquire(f[1] == "claim")
		if w == nil {
			return "slot"
		}
		r.waiters[f[2]] = w
		return "queued"
	case "granted": // granted NAME: was the waiter let in?
		select {
		case <-r.waiters[f[1]].ready:
			return "true"
		default:
			return "false"
		}
	case "withdraw":
		return "granted=" + fmt.Sprint(a.withdraw(r.waiters[f[1]]))
	case "release":
		return "wake=" + fmt.Sprint(a.release())
	case "record": // record NAME
		w, wake := a.toRecord()
		if w == nil {
			return "recording wake=" + fmt.Sprint(wake)
		}
		r.waiters[f[1]] = w
		return "queued"
	case "recorded":
		return "wake=" + fmt.Sprint(a.recorded())
	case "limit":
		var n int
		fmt.Sscan(f[1], &n)
		return "wake=" + fmt.Sprint(a.setLimit(n))
	case "announce":
		a.announce()
		return ""
	case "poll": // poll INTERVALS-SINCE-START
		var n int
		fmt.Sscan(f[1], &n)
		a.poll(r.now.Add(time.Duration(n)*time.Second), time.Second)
		return ""
	case "at": // at MS: the clock reads MS milliseconds after the start
		var ms int
		fmt.Sscan(f[1], &ms)
		r.now = time.Time{}.Add(time.Duration(ms) * time.Millisecond)
		return ""
	case "plan":
		p := a.planLease(r.now)
		switch {
		case p.n > 0 && p.start == 0:
			return fmt.Sprintf("n=%d to wait", p.n)
		case p.start != p.n:
			return fmt.Sprintf("n=%d start=%d", p.n, p.start)
		}
		return fmt.Sprintf("n=%d", p.n)
	case "leased": // leased GOT ASKED
		var got, asked int
		fmt.Sscan(f[1], &got)
		fmt.Sscan(f[2], &asked)
		a.leased(got, asked)
		return ""
	case "govwait":
		return fmt.Sprint(a.startGovernorWait())
	case "govdone":
		a.endGovernorWait()
		return ""
	case "snapshot":
		o := a.snapshot()
		return fmt.Sprintf("inflight=%d recording=%d claims=%d queued=%d+%d limit=%d",
			o.inFlight, o.recording, o.claimsWaiting, o.queuedClaims, o.queuedRows, o.limit)
	}
	r.t.Fatalf("unknown step %q", s.do)
	return ""
}

func TestAdmission(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		ceiling, limit int
		steps          []step
	}{
		{"claims take free slots, then wait in line", 8, 2, []step{
			{"claim", "true"}, {"claim", "true"}, {"claim", "true"},
			{"acquire claim a", "slot"}, {"acquire claim b", "slot"}, {"acquire claim c", "queued"},
			{"snapshot", "inflight=2 recording=0 claims=1 queued=1+0 limit=2"},
			{"release", "wake=false"}, {"granted c", "true"},
			{"snapshot", "inflight=2 recording=0 claims=0 queued=0+0 limit=2"},
		}},
		{"committed claims waiting are bounded by the limit, or a quarter of the ceiling", 16, 2, []step{
			{"claim", "true"}, {"acquire claim a", "slot"}, {"claim", "true"}, {"acquire claim b", "slot"},
			// bound: max(2, 16/4) = 4 waiting
			{"claim", "true"}, {"acquire claim c", "queued"}, {"claim", "true"}, {"acquire claim d", "queued"},
			{"claim", "true"}, {"acquire claim e", "queued"}, {"claim", "true"}, {"acquire claim f", "queued"},
			{"claim", "false"},
			{"release", "wake=false"}, {"granted c", "true"},
			{"claim", "true"},
		}},
		{"claims in their commit are bounded by the ceiling, not the limit", 4, 1, []step{
			{"claim", "true"}, {"claim", "true"}, {"claim", "true"}, {"claim", "true"}, {"claim", "false"},
			{"unclaim", "wake=false"}, {"claim", "true"},
		}},
		{"rows and claims take their turn first come, first served", 8, 1, []step{
			{"claim", "true"}, {"acquire claim a", "slot"},
			{"acquire row r1", "queued"}, {"claim", "true"}, {"acquire claim c2", "queued"}, {"acquire row r3", "queued"},
			{"release", "wake=false"}, {"granted r1", "true"}, {"granted c2", "false"},
			{"release", "wake=false"}, {"granted c2", "true"}, {"granted r3", "false"},
			{"release", "wake=false"}, {"granted r3", "true"},
		}},
		{"a lease takes the free slots; none free and nothing announced waits for a slot", 8, 4, []step{
			{"plan", "n=4"}, {"leased 4 4", ""},
			{"acquire row a", "slot"}, {"acquire row b", "slot"}, {"acquire row c", "slot"}, {"acquire row d", "slot"},
			{"plan", "n=0"},
			// a backlog and a fetcher waiting: a freed slot wakes it once a
			// quarter of the limit (1) is free; it leases a row for the slot
			// and one to wait for the next, as one slot was freed lately
			{"release", "wake=true"}, {"plan", "n=2 start=1"},
		}},
		{"with a backlog, rows are leased ahead no more than slots were freed lately", 16, 8, []step{
			{"plan", "n=8"}, {"leased 8 8", ""},
			{"acquire row a", "slot"}, {"acquire row b", "slot"}, {"acquire row c", "slot"}, {"acquire row d", "slot"},
			{"acquire row e", "slot"}, {"acquire row f", "slot"}, {"acquire row g", "slot"}, {"acquire row h", "slot"},
			// every slot busy and none freed yet: nothing ahead
			{"plan", "n=0"},
			{"release", "wake=false"}, {"release", "wake=true"},
			// two free, and two freed: two rows to start, two to wait
			{"plan", "n=4 start=2"}, {"leased 4 4", ""},
			{"acquire row i", "slot"}, {"acquire row j", "slot"}, {"acquire row r1", "queued"}, {"acquire row r2", "queued"},
			// as many wait as were freed: no more
			{"plan", "n=0"},
			// faster frees lease more ahead, up to half the limit
			{"release", "wake=true"}, {"granted r1", "true"}, {"release", "wake=true"}, {"granted r2", "true"},
			{"release", "wake=false"}, {"release", "wake=true"},
			{"plan", "n=6 start=2"},
		}},
		{"a backend that stops answering gets no rows ahead once its frees are a window old", 8, 4, []step{
			{"plan", "n=4"}, {"leased 4 4", ""},
			{"acquire row a", "slot"}, {"acquire row b", "slot"}, {"acquire row c", "slot"}, {"acquire row d", "slot"},
			{"release", "wake=true"},
			{"at 1000", ""}, {"plan", "n=2 start=1"}, {"leased 2 2", ""},
			{"acquire row e", "slot"}, {"acquire row r1", "queued"},
			// the last window freed one slot, and one row waits for it
			{"plan", "n=0"},
			{"release", "wake=true"}, {"granted r1", "true"},
			// the window that freed one slot still leases one ahead
			{"at 2000", ""}, {"plan", "n=1 to wait"}, {"leased 1 1", ""}, {"acquire row r2", "queued"},
			// then a window with none: nothing more ahead
			{"at 3000", ""}, {"plan", "n=0"},
			{"at 4000", ""}, {"plan", "n=0"},
			{"snapshot", "inflight=4 recording=0 claims=0 queued=0+1 limit=4"},
		}},
		{"with every slot busy, announced rows are leased to wait in turn, up to half the limit", 8, 4, []step{
			{"claim", "true"}, {"acquire claim a", "slot"}, {"claim", "true"}, {"acquire claim b", "slot"},
			{"claim", "true"}, {"acquire claim c", "slot"}, {"claim", "true"}, {"acquire claim d", "slot"},
			{"announce", ""}, {"plan", "n=2 to wait"}, {"leased 2 2", ""},
			{"acquire row r1", "queued"}, {"acquire row r2", "queued"},
			{"announce", ""}, {"plan", "n=0"},
			{"claim", "true"}, {"acquire claim e", "queued"},
			// r1 first: it came first. One row left in line, a quarter of
			// the limit, and a backlog: ask for more.
			{"release", "wake=true"}, {"granted r1", "true"}, {"granted e", "false"},
			{"release", "wake=true"}, {"granted r2", "true"},
			{"release", "wake=false"}, {"granted e", "true"},
		}},
		{"a poll probes for unannounced rows after five intervals without a lease", 8, 1, []step{
			{"plan", "n=1"}, {"leased 0 1", ""}, {"acquire row a", "slot"},
			{"poll 4", ""}, {"plan", "n=0"},
			{"poll 5", ""}, {"plan", "n=1 to wait"},
		}},
		{"a backlog leases again at a quarter of the limit free", 16, 8, []step{
			{"plan", "n=8"}, {"leased 8 8", ""},
			{"acquire row a", "slot"}, {"acquire row b", "slot"}, {"acquire row c", "slot"}, {"acquire row d", "slot"},
			{"acquire row e", "slot"}, {"acquire row f", "slot"}, {"acquire row g", "slot"}, {"acquire row h", "slot"},
			{"release", "wake=false"}, {"release", "wake=true"},
		}},
		{"a larger limit lets the line in; a smaller one as slots come back", 8, 1, []step{
			{"acquire row a", "slot"}, {"acquire row b", "queued"}, {"acquire row c", "queued"},
			{"limit 3", "wake=false"}, {"granted b", "true"}, {"granted c", "true"},
			{"acquire row d", "queued"}, {"limit 1", "wake=false"},
			{"release", "wake=false"}, {"release", "wake=false"}, {"granted d", "false"},
			{"release", "wake=false"}, {"granted d", "true"},
			{"snapshot", "inflight=1 recording=0 claims=0 queued=0+0 limit=1"},
		}},
		{"outcomes being recorded are bounded by the ceiling, holding their slots", 2, 2, []step{
			{"acquire row a", "slot"}, {"acquire row b", "slot"},
			{"record a", "recording wake=false"}, {"record b", "recording wake=false"},
			{"acquire row c", "slot"}, {"record c", "queued"},
			{"snapshot", "inflight=1 recording=2 claims=0 queued=0+0 limit=2"},
			{"recorded", "wake=false"}, {"granted c", "true"},
			{"snapshot", "inflight=0 recording=2 claims=0 queued=0+0 limit=2"},
		}},
		{"a claim that waits out its lease leaves the line; its claim stays until unclaimed", 8, 1, []step{
			{"claim", "true"}, {"acquire claim a", "slot"}, {"claim", "true"}, {"acquire claim b", "queued"},
			{"withdraw b", "granted=false"},
			{"snapshot", "inflight=1 recording=0 claims=1 queued=0+0 limit=1"},
			{"unclaim", "wake=false"},
			{"release", "wake=false"},
			{"snapshot", "inflight=0 recording=0 claims=0 queued=0+0 limit=1"},
		}},
		{"a waiter let in as it ran out keeps its slot", 8, 1, []step{
			{"acquire row a", "slot"}, {"acquire row b", "queued"}, {"release", "wake=false"}, {"withdraw b", "granted=true"},
			{"snapshot", "inflight=1 recording=0 claims=0 queued=0+0 limit=1"},
		}},
		{"governor waits in memory are bounded by half the limit", 8, 4, []step{
			{"govwait", "true"}, {"govwait", "true"}, {"govwait", "false"}, {"govdone", ""}, {"govwait", "true"},
		}},
		{"at limit 1, a row is still leased to wait", 8, 1, []step{
			{"claim", "true"}, {"acquire claim a", "slot"}, {"announce", ""}, {"plan", "n=1 to wait"},
		}},
		{"rows waiting in line that run low ask for more while rows are announced", 16, 8, []step{
			{"plan", "n=8"}, {"leased 8 8", ""},
			{"claim", "true"}, {"acquire claim a", "slot"}, {"claim", "true"}, {"acquire claim b", "slot"},
			{"claim", "true"}, {"acquire claim c", "slot"}, {"claim", "true"}, {"acquire claim d", "slot"},
			{"claim", "true"}, {"acquire claim e", "slot"}, {"claim", "true"}, {"acquire claim f", "slot"},
			{"claim", "true"}, {"acquire claim g", "slot"}, {"claim", "true"}, {"acquire claim h", "slot"},
			{"acquire row r1", "queued"}, {"acquire row r2", "queued"}, {"acquire row r3", "queued"},
			// r1 gets a slot: 2 rows left in line, at most a quarter of the
			// limit, and a backlog: ask for more.
			{"release", "wake=true"}, {"granted r1", "true"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &admissionRun{t: t, a: newAdmission(tc.ceiling, tc.limit), waiters: map[string]*waiter{}}
			for i, s := range tc.steps {
				if got := r.apply(s); got != s.want {
					t.Fatalf("step %d %q: %q, want %q", i+1, s.do, got, s.want)
				}
			}
		})
	}
}

func TestAdmissionRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		got, want int
	}{
		{"claims waiting, limit wins", claimsWaitingBound(64, 256), 64},
		{"claims waiting, a quarter of the ceiling wins", claimsWaitingBound(16, 256), 64},
		{"rows to wait for, half the limit", rowsToWaitFor(16, 0), 8},
		{"rows to wait for, less those waiting", rowsToWaitFor(16, 5), 3},
		{"rows to wait for, at least one at limit 1", rowsToWaitFor(1, 0), 1},
		{"refetch at a quarter", refetchAt(16), 4},
		{"refetch at one at least", refetchAt(2), 1},
		{"governor waits, half", governorWaitBound(16), 8},
		{"rows ahead, bounded by half the limit", rowsAhead(16, 0, 0, 100), 8},
		{"rows ahead, bounded by the slots freed beyond those waiting", rowsAhead(16, 2, 0, 5), 3},
		{"rows ahead, none with no slot freed", rowsAhead(16, 0, 0, 0), 0},
		{"rows ahead, none when more wait than were freed", rowsAhead(16, 5, 0, 3), 0},
		{"rows ahead, claims waiting before them count too", rowsAhead(16, 2, 2, 5), 1},
		{"rows ahead, none when claims take what frees", rowsAhead(16, 0, 6, 5), 0},
		{"freed per window, within one window", freedPerWindow(7, time.Second), 7},
		{"freed per window, scaled down over two", freedPerWindow(100, 2*time.Second), 50},
		{"governor waits, one at least", governorWaitBound(1), 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
