package proxy

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/verify"
)

// Explaining refusals: once a refused request has its answer, it is
// diagnosed (verify.Diagnose), counted with its diagnosis and kept
// (Refusals). The answer is written and flushed first, so diagnosing
// never delays or changes it; and diagnoses are rationed, so that a flood
// of bad requests cannot make whguard spend more than a bounded share of
// its CPU on them: beyond the ration a refusal is still kept and counted,
// with diagnosis none, "not diagnosed".

// The ration of diagnoses, per replica (docs/security.md).
const (
	// diagnosesPerSecond is the rate diagnoses are allowed at, with a
	// burst of as many.
	diagnosesPerSecond = 10
	// diagnosesAtOnce is how many run at the same time.
	diagnosesAtOnce = 2
)

// notDiagnosed is the detail of a refusal beyond the ration.
var notDiagnosed = fmt.Sprintf("not diagnosed: this replica diagnoses at most %d refusals a second, %d at a time, and more arrived",
	diagnosesPerSecond, diagnosesAtOnce)

// diagnosisGate rations diagnoses: a token bucket on the ingress clock,
// and a bound on those running. The zero value is ready (full).
type diagnosisGate struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	running int
}

// enter reports whether a diagnosis may run now; the caller calls leave
// when it ran.
func (g *diagnosisGate) enter(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.last.IsZero():
		g.tokens, g.last = diagnosesPerSecond, now
	case now.After(g.last):
		g.tokens = min(diagnosesPerSecond, g.tokens+now.Sub(g.last).Seconds()*diagnosesPerSecond)
		g.last = now
	}
	if g.running >= diagnosesAtOnce || g.tokens < 1 {
		return false
	}
	g.tokens--
	g.running++
	return true
}

func (g *diagnosisGate) leave() {
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
}

// refused is one refused request, as explain records it.
type refused struct {
	r        *http.Request
	provider string
	status   int
	reason   string
	detail   string // when not diagnosed: what the record says
	// check is the verify refusal (nil for the others); route its
	// provider's route.
	check error
	route *Route
	body  []byte
	read  bool // body holds the whole body
	start time.Time
}

// explain diagnoses (when it may), counts and keeps a refused request
// whose answer was written: flushed first, so that the sender has it
// while the diagnosis runs.
func (in *Ingress) explain(w http.ResponseWriter, f refused) {
	_ = http.NewResponseController(w).Flush()
	dg := verify.Diagnosis{Code: verify.DiagnosisNone, Detail: f.detail}
	if f.check != nil || f.route == nil && f.reason == RefusalNotFound {
		dg = in.diagnose(f)
	}
	if f.check != nil {
		in.metrics.observeRefusal(f.provider, f.reason, dg.Code)
	}
	if dg.Code != verify.DiagnosisNone {
		in.log.Info("refusal diagnosed", zap.String("provider", f.provider), zap.String("reason", f.reason),
			zap.String("diagnosis", dg.Code), zap.String("detail", dg.Detail))
	}
	bodyBytes := max(f.r.ContentLength, 0)
	switch {
	case f.read:
		bodyBytes = int64(len(f.body))
	case f.reason == RefusalTooLarge && f.r.ContentLength < 0 && f.route != nil:
		bodyBytes = f.route.MaxBodyBytes + 1
	}
	in.refusals.add(Refusal{At: f.start, Method: boundedMethod(f.r.Method), Path: recordedPath(f.r.URL.Path), Provider: f.provider,
		Status: f.status, Reason: f.reason, Diagnosis: dg.Code, Detail: dg.Detail, BodyBytes: bodyBytes, Headers: headerNames(f.r.Header)})
}

// diagnose runs verify.Diagnose within the ration.
func (in *Ingress) diagnose(f refused) verify.Diagnosis {
	var p *verify.Provider
	if f.route != nil {
		var ok bool
		if p, ok = f.route.Provider.(*verify.Provider); !ok {
			return verify.Diagnosis{Code: verify.DiagnosisNone, Detail: "refused: " + f.reason}
		}
	}
	if !in.gate.enter(in.now()) {
		return verify.Diagnosis{Code: verify.DiagnosisNone, Detail: notDiagnosed}
	}
	defer in.gate.leave()
	var body []byte
	if f.read {
		body = f.body
	}
	return verify.Diagnose(p, in.peers, verify.Refused{
		Input:    verify.Input{Header: f.r.Header, Body: body, RawQuery: f.r.URL.RawQuery, Method: f.r.Method},
		BodyRead: f.read,
		Host:     f.r.Host,
		Err:      f.check,
	}, in.now())
}
