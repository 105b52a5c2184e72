package verify

import (
	"net/http"
	"strings"
	"testing"
)

// TestChallengeShapeFailsClosed: a proofShape challenge declared without an
// alphabet answers nothing, not every printable value: its answer is a
// signature under the secret, so "any printable ASCII" would sign any JSON
// body.
func TestChallengeShapeFailsClosed(t *testing.T) {
	p := twitterProvider(t, ringASecret)
	p.challenges = []challenge{{method: http.MethodGet, param: "crc_token", maxLen: 1024, proof: proofShape, answer: answerCRC}}
	for _, token := range []string{"crc-1", ringABody} {
		ev, err := crc(p, token)
		if Reason(err) != ReasonChallengeRefused || ev.Handshake != nil {
			t.Errorf("token %q: %+v, %v; want refused", token, ev, err)
		}
	}
	// Every declared challenge has a bound, and every proofShape one an
	// alphabet without the characters JSON needs.
	for _, s := range registry {
		for _, ch := range s.challenges {
			if ch.maxLen <= 0 || ch.doc == "" {
				t.Errorf("%s: challenge %q has no bound or no doc", s.name, ch.param+ch.header)
			}
			if ch.proof == proofShape && (ch.alphabet == "" || strings.ContainsAny(ch.alphabet, "{}[]\":, ")) {
				t.Errorf("%s: proofShape challenge alphabet %q admits JSON", s.name, ch.alphabet)
			}
		}
	}
	// The registry's own CRC is still answered.
	if ev, err := crc(twitterProvider(t, ringASecret), "crc-1"); err != nil || string(ev.Handshake) != twitterCRCVector {
		t.Errorf("registry CRC: %s, %v", ev.Handshake, err)
	}
}
