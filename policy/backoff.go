package policy

import "time"

// Jitter is how much randomness goes into a delay.
type Jitter uint8

// The four jitters.
const (
	Rigid Jitter = iota
	Full
	Equal
	Decorrelated
)

// Backoff is when to try again.
type Backoff struct {
	Base     time.Duration
	Factor   float64
	Cap      time.Duration
	Attempts int
	Jitter   Jitter
}

// DefaultBackoff is the preset.
var DefaultBackoff = Backoff{Base: 100 * time.Millisecond, Factor: 2, Cap: time.Second, Attempts: 3, Jitter: Full}

// Ceiling is the undelayed ceiling.
func (b Backoff) Ceiling(retry int) time.Duration { return 0 }

// Delay is how long to wait.
func (b Backoff) Delay(retry int, random float64, previous time.Duration) time.Duration { return 0 }

// More says whether to try again.
func (b Backoff) More(made int) bool { return false }

// Schedule lists the delays.
func (b Backoff) Schedule(randoms []float64) []time.Duration { return nil }
