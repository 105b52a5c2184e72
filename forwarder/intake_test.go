package forwarder_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

// fakeJournal answers every append with one outcome (or an error).
type fakeJournal struct {
	res journal.Result
	err error
	got []journal.Event
}

func (j *fakeJournal) Append(_ context.Context, evs []journal.Event) ([]journal.Result, error) {
	j.got = append(j.got, evs...)
	return []journal.Result{j.res}, j.err
}

// fakeDeliverer claims when told to and records what it is handed.
type fakeDeliverer struct {
	accept                   bool
	claims, unclaims, synced int
	dispatched               []journal.Delivery
}

func (d *fakeDeliverer) Claim() (time.Duration, bool) {
	if !d.accept {
		return 0, false
	}
	d.claims++
	return time.Minute, true
}
func (d *fakeDeliverer) Unclaim()                    { d.unclaims++ }
func (d *fakeDeliverer) Dispatch(x journal.Delivery) { d.dispatched = append(d.dispatched, x) }
func (d *fakeDeliverer) DispatchSync(x journal.Delivery) <-chan *journal.Reply {
	d.synced++
	d.dispatched = append(d.dispatched, x)
	return make(chan *journal.Reply, 1)
}

// TestIntakeClaimProtocol: every claim ends in exactly one dispatch or
// unclaim, whatever the journal said; an event left in the journal wakes
// the forwarder; an ignored one does neither.
func TestIntakeClaimProtocol(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		accept   bool
		res      journal.Result
		err      error
		ignored  bool
		sync     bool
		want     string // claims/unclaims/dispatched/synced/wakes/leased
		wantErr  bool
		hasReply bool
	}{
		{"new event claimed: delivered from memory", true, journal.Result{ID: 7, Outcome: journal.Inserted}, nil, false, false, "1/0/1/0/0/leased", false, false},
		{"new event, sync: its reply awaited", true, journal.Result{ID: 7, Outcome: journal.Inserted}, nil, false, true, "1/0/1/1/0/leased", false, true},
		{"claim declined: leased from the journal, woken", false, journal.Result{ID: 7, Outcome: journal.Inserted}, nil, false, false, "0/0/0/0/1/plain", false, false},
		{"ordered behind its key: unclaimed, woken", true, journal.Result{ID: 7, Outcome: journal.Inserted, Behind: true}, nil, false, false, "1/1/0/0/1/leased", false, false},
		{"duplicate: unclaimed", true, journal.Result{ID: 3, Outcome: journal.Duplicate}, nil, false, false, "1/1/0/0/0/leased", false, false},
		{"conflict: unclaimed", true, journal.Result{ID: 3, Outcome: journal.Conflict}, nil, false, false, "1/1/0/0/0/leased", false, false},
		{"refused: unclaimed", true, journal.Result{Outcome: journal.Refused}, nil, false, false, "1/1/0/0/0/leased", false, false},
		{"failed commit: unclaimed, an error", true, journal.Result{}, errors.New("down"), false, false, "1/1/0/0/0/leased", true, false},
		{"unrecorded copy: unclaimed, an error", true, journal.Result{ID: 3, Outcome: journal.Unrecorded}, nil, false, false, "1/1/0/0/0/leased", true, false},
		{"ignored: never claimed, nothing woken", true, journal.Result{ID: 7, Outcome: journal.Inserted}, nil, true, false, "0/0/0/0/0/plain", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := &fakeJournal{res: tc.res, err: tc.err}
			d := &fakeDeliverer{accept: tc.accept}
			wakes := 0
			in, err := forwarder.NewIntake(forwarder.IntakeConfig{Journal: j, Deliverer: d, OnCommit: func() { wakes++ }})
			if err != nil {
				t.Fatal(err)
			}
			acc, err := in.Accept(context.Background(), journal.Event{Provider: "p", EventID: "e", Ignored: tc.ignored, ReceivedAt: time.Now()}, tc.sync)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v", err)
			}
			leased := "plain"
			if len(j.got) == 1 && j.got[0].LeaseFor > 0 {
				leased = "leased"
			}
			got := fmt.Sprintf("%d/%d/%d/%d/%d/%s", d.claims, d.unclaims, len(d.dispatched), d.synced, wakes, leased)
			if got != tc.want {
				t.Errorf("claims/unclaims/dispatched/synced/wakes/leased = %s, want %s", got, tc.want)
			}
			if (acc.Reply != nil) != tc.hasReply {
				t.Errorf("reply channel %v, want one: %v", acc.Reply, tc.hasReply)
			}
			if len(d.dispatched) == 1 && (d.dispatched[0].ID != 7 || d.dispatched[0].LeaseToken != j.got[0].LeaseToken) {
				t.Errorf("dispatched %+v", d.dispatched[0])
			}
		})
	}
}
