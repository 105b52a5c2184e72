package testport

import (
	"net"
	"strconv"
	"testing"
)

// Ports come from below the ephemeral range, bind, and are never repeated.
func TestFreeBelowEphemeralRangeAndUnique(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 300 {
		p := Number(t)
		if low-1-floor >= 1000 && (p < floor || p >= low) {
			t.Fatalf("port %d outside [%d, %d)", p, floor, low)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	addr := Free(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s does not bind: %v", addr, err)
	}
	l.Close()
}

// A port something already listens on is never handed out.
func TestFreeSkipsABoundPort(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	busy := map[int]bool{}
	for range 50 {
		p := Number(t)
		mu.Lock()
		delete(given, p) // forget it, so only the bind check can refuse it
		mu.Unlock()
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		busy[p] = true
	}
	for range 2000 {
		if p := Number(t); busy[p] {
			t.Fatalf("port %d is bound, yet handed out", p)
		}
	}
}
