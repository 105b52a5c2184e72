package verify

import (
	"net/http"
	"testing"
	"time"
)

// ringBResignCase is one scheme of the second ring that signs a timestamp
// in a header: sign makes the sender's headers at the given time with the
// given secret; sigHeader is the header resign must replace.
type ringBResignCase struct {
	name      string
	cfg       ProviderConfig
	body      string
	sigHeader string
	sign      func(secret string, at time.Time) http.Header
}

// ringBResignCases is filled by each scheme's test file.
var ringBResignCases []ringBResignCase

// An old request signed with the previous secret, re-signed now, verifies
// with the current secret alone at a tight tolerance, and no longer ten
// minutes later; its signature header is replaced, the other headers kept,
// and the event keeps its id and type.
func TestRingBResignRoundTrip(t *testing.T) {
	const current, previous = "secret-current-0123456789", "secret-previous-0123456789"
	for _, tc := range ringBResignCases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			cfg := tc.cfg
			cfg.Name, cfg.Secrets, cfg.Tolerance = tc.name, []string{current, previous}, wideTolerance
			p := mustProvider(t, cfg)
			h := tc.sign(previous, now.Add(-resignAge))
			h.Set("X-Other", "kept")
			first, err := p.Check(Input{Header: h, Body: []byte(tc.body)}, now)
			if err != nil {
				t.Fatalf("original refused: %v", err)
			}
			if !p.CanResign() || ResignSupport(cfg.Scheme) != ResignYes {
				t.Fatalf("CanResign = %v, ResignSupport = %q", p.CanResign(), ResignSupport(cfg.Scheme))
			}
			old := h.Get(tc.sigHeader)
			names := len(h)
			p.Resign(h, []byte(tc.body), now)
			if h.Get(tc.sigHeader) == old || len(h.Values(tc.sigHeader)) != 1 {
				t.Fatalf("signature header not replaced: %q", h.Values(tc.sigHeader))
			}
			if h.Get("X-Other") != "kept" || len(h) != names {
				t.Fatalf("other headers changed: %v", h)
			}

			cfg.Secrets, cfg.Tolerance = []string{current}, time.Second
			tight := mustProvider(t, cfg)
			again, err := tight.Check(Input{Header: h, Body: []byte(tc.body)}, now)
			if err != nil {
				t.Fatalf("re-signed request refused with the current secret at 1s tolerance: %v\n%v", err, h)
			}
			if again.ID != first.ID || again.Type != first.Type || again.ContentHash != first.ContentHash {
				t.Errorf("re-signed event %+v, first %+v", again, first)
			}
			if _, err := tight.Check(Input{Header: h, Body: []byte(tc.body)}, now.Add(resignAge)); err == nil {
				t.Fatal("re-signed request accepted 10 minutes later at 1s tolerance")
			}

			// Unsign removes what Resign writes; SignUnsigned signs only then.
			tight.Unsign(h)
			if h.Get(tc.sigHeader) != "" {
				t.Fatalf("Unsign left %s", tc.sigHeader)
			}
			tight.SignUnsigned(h, []byte(tc.body), now)
			if _, err := tight.Check(Input{Header: h, Body: []byte(tc.body)}, now); err != nil {
				t.Fatalf("SignUnsigned: %v", err)
			}
			signed := h.Get(tc.sigHeader)
			tight.SignUnsigned(h, []byte(tc.body), now.Add(time.Minute))
			if h.Get(tc.sigHeader) != signed {
				t.Error("SignUnsigned replaced an existing signature")
			}
		})
	}
}
