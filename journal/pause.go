package journal

import (
	"fmt"
	"time"
)

// Kinds of pause.
const (
	PauseBackend  = "backend"
	PauseProvider = "provider"
)

// HoldPaused is the hold reason of a delivery waiting for a pause to end;
// Resume makes such deliveries due at once.
const HoldPaused = "paused"

// Pause stops deliveries to one backend (Kind PauseBackend, Name its
// origin scheme://host:port) or of one provider, until resumed.
type Pause struct {
	Kind   string    `json:"kind"`
	Name   string    `json:"name"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// maxPauseText bounds a pause's name and reason.
const maxPauseText = 1000

func checkPause(kind, name string) error {
	if kind != PauseBackend && kind != PauseProvider {
		return fmt.Errorf("pause: kind %q is not backend or provider", kind)
	}
	if name == "" || len(name) > maxPauseText {
		return fmt.Errorf("pause: a %s name of 1 to %d bytes is needed", kind, maxPauseText)
	}
	return nil
}
