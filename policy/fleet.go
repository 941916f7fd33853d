package policy

import (
	"math"
	"strconv"
	"time"
)

// FleetState is what the fleet says of the backend, as one replica last
// heard it. A fleet is the same pool in many processes, sharing one view
// of the backend through a store such as Redis. The zero FleetState is
// FleetOpen.
type FleetState uint8

// The four fleet states.
const (
	// FleetOpen is no fleet hold: the local ward alone decides.
	FleetOpen FleetState = iota
	// FleetHeld holds the fleet's makes: only the probe lease's holder may
	// make one.
	FleetHeld
	// FleetRamp follows a probe that worked: makes are spaced by the ramp
	// until it is full.
	FleetRamp
	// FleetAlone says the fleet cannot be reached: the local ward alone
	// decides.
	FleetAlone
)

var fleetNames = [...]string{"open", "held", "ramp", "alone"}

// String gives the state's name in lower case, "open" to "alone", or
// "FleetState(n)" for a number that is none of them.
func (s FleetState) String() string {
	if int(s) < len(fleetNames) {
		return fleetNames[s]
	}
	return "FleetState(" + strconv.Itoa(int(s)) + ")"
}

// Ramp is slow start after a fleet's recovery. The fleet's makes per
// second start at Start and double every Double, up to Full. Each replica
// takes its share of that rate. Zero fields take the defaults below, and
// so do negative and NaN ones.
//
// Each replica may make one at once when the ramp starts, so that every
// replica has a connection soon after the backend returns. The rest follow
// the curve. With the defaults the ramp lasts about 664 ms.
type Ramp struct {
	Start  float64       // the fleet's makes per second at the recovery; <= 0 is 10
	Double time.Duration // how long the rate takes to double; <= 0 is 100 ms
	Full   float64       // the rate at which the ramp ends; <= 0 is 1000
}

// The Ramp's defaults.
const (
	rampStart  = 10
	rampDouble = 100 * time.Millisecond
	rampFull   = 1000
	// rampMost is the most doublings a ramp lasts. A Full of +Inf would
	// otherwise never end.
	rampMost = 64
)

// norm is r with every field read as its documented default where it has
// no meaning of its own.
func (r Ramp) norm() Ramp {
	if !(r.Start > 0) {
		r.Start = rampStart
	}
	if r.Double <= 0 {
		r.Double = rampDouble
	}
	if !(r.Full > 0) {
		r.Full = rampFull
	}
	return r
}

// doublings is how many times the rate doubles before it reaches Full.
// It is 0 when Full is not above Start, and at most 64.
func (r Ramp) doublings() float64 {
	r = r.norm()
	if !(r.Full > r.Start) { // also an infinite Start
		return 0
	}
	return min(math.Log2(r.Full/r.Start), rampMost)
}

// Span is how long the ramp lasts: from the recovery until the rate is
// Full. After it, the fleet's view acts as FleetOpen. It is 0 when Full is
// not above Start, and saturates at the largest Duration.
func (r Ramp) Span() time.Duration {
	n := r.doublings()
	d := float64(r.norm().Double) * n
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(d))
}

// Rate is the fleet's makes per second d after the recovery: Start before
// it, Full from Span on, and Start·2^(d/Double) between. It is never NaN.
func (r Ramp) Rate(d time.Duration) float64 {
	n := r.doublings()
	r = r.norm()
	if d <= 0 || n == 0 {
		if n == 0 {
			return r.Full
		}
		return r.Start
	}
	x := float64(d) / float64(r.Double)
	if x >= n {
		return r.Full
	}
	return r.Start * math.Exp2(x)
}

// Allows is how many makes the curve lets the whole fleet start in the
// first d after the recovery: the integral of Rate from 0 to d. It does not
// count the one make each replica may start at once. A fleet of n replicas
// starts at most n + Allows(d) in its first d, while d is within Span.
func (r Ramp) Allows(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	n := r.doublings()
	r = r.norm()
	x := min(float64(d)/float64(r.Double), n)
	secs := r.Double.Seconds()
	// The integral of Start·2^(t/Double) from 0 to x doublings.
	c := r.Start * secs / math.Ln2 * (math.Exp2(x) - 1)
	if rest := float64(d)/float64(r.Double) - n; rest > 0 {
		c += r.Full * secs * rest
	}
	return c
}

// until is how far into the ramp the curve has allowed c makes: the
// inverse of Allows within Span. ok is false when c is not reached before
// Span.
func (r Ramp) until(c float64) (d float64, ok bool) {
	n := r.doublings()
	r = r.norm()
	if c <= 0 {
		return 0, true
	}
	secs := r.Double.Seconds()
	x := math.Log2(1 + c*math.Ln2/(r.Start*secs))
	if !(x < n) { // past the end, or NaN
		return 0, false
	}
	return x * float64(r.Double), true
}

// FleetView is one replica's view of the fleet, handed to its pool with
// Pool.SetFleet. The zero FleetView is FleetOpen: no fleet at all.
type FleetView struct {
	State FleetState
	// Probe, with FleetHeld, says this replica holds the fleet's probe
	// lease. Each SetFleet with Probe set lets one make go ahead as the
	// fleet's probe: set it once for each lease taken.
	Probe bool
	// Since is when State began, on the pool's clock: the recovery instant
	// for FleetRamp.
	Since int64
	// Share is how many replicas share the ramp, with FleetRamp; <= 0 is 1.
	Share int
	// Ramp is the slow start that FleetRamp follows.
	Ramp Ramp
	// ProbeEvery, with FleetHeld, is how often the fleet probes: the
	// soonest the hold may end. A make held by the fleet is answered Later
	// with this After. <= 0 is one second.
	ProbeEvery time.Duration
}

// StateAt is the view's state at now: State, except that a ramp that has
// run its Span by now is FleetOpen.
func (v FleetView) StateAt(now int64) FleetState {
	if v.State == FleetRamp && elapsed(now, v.Since) >= v.Ramp.Span() {
		return FleetOpen
	}
	return v.State
}

// share is Share read as at least one.
func (v FleetView) share() float64 { return float64(max(v.Share, 1)) }

// fleetRecheck is After for a make the fleet holds when the view names no
// ProbeEvery.
const fleetRecheck = time.Second

// recheck is After for a make the fleet holds.
func (v FleetView) recheck() time.Duration {
	if v.ProbeEvery > 0 {
		return v.ProbeEvery
	}
	return fleetRecheck
}
