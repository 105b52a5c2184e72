package alert

import (
	"fmt"
	"strings"
)

// What catch-up (internal/catchup) tells operators. Only the replica
// that ran a pass says it, so each is said once.

// Recovered reports that a pass brought in n events the sender had not
// delivered.
func (n *Notifier) Recovered(provider string, count int) {
	what := "1 event"
	if count != 1 {
		what = fmt.Sprintf("%d events", count)
	}
	n.notify(Message{Type: TypeCatchupRecovered, Severity: SeverityInfo, Provider: provider,
		Summary: fmt.Sprintf("%s of %s were missed and recovered by catch-up: the sender could not deliver them, and whguard brought them in from its API.", what, provider)})
}

// Failing says whether provider's passes have failed for longer than
// three intervals (reason: the last pass's), reported as a condition:
// once when it starts, every Repeat while it lasts, once when it clears.
func (n *Notifier) Failing(provider string, failing bool, reason string) {
	n.Set("catchup:"+provider, failing,
		Message{Type: TypeCatchupFailing, Severity: SeverityWarning, Provider: provider,
			Summary: fmt.Sprintf("Catch-up of %s is failing: %s. Events its sender gave up on are not being brought in.", provider, reasonOr(reason))},
		Message{Type: TypeCatchupOK, Provider: provider, Summary: fmt.Sprintf("Catch-up of %s works again", provider)})
}

// GaveUp reports GitHub deliveries asked for three times that never
// arrived.
func (n *Notifier) GaveUp(provider string, guids []string) {
	if len(guids) == 0 {
		return
	}
	shown := guids
	if len(shown) > maxDeadIDs {
		shown = shown[:maxDeadIDs]
	}
	ids := strings.Join(shown, ", ")
	if len(guids) > len(shown) {
		ids += ", …"
	}
	n.notify(Message{Type: TypeCatchupGaveUp, Severity: SeverityCritical, Provider: provider, EventID: guids[0],
		Summary: fmt.Sprintf("%d deliveries of %s were asked for again three times and never arrived: %s. See GET /api/catchup.", len(guids), provider, ids)})
}

// notify reports m once, now.
func (n *Notifier) notify(m Message) {
	now := n.cfg.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.enqueue(m, now)
}
