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

// SetFleet hands the pool its fleet's view at now. The view changes what
// Take and Fill answer for a make, and nothing else: lending an idle
// resource is never held back.
//
//   - FleetOpen and FleetAlone: the local ward alone decides, as without a
//     fleet.
//   - FleetHeld: every make is answered Later with ReasonFleet and After
//     the view's ProbeEvery, before the breaker is asked. With Probe, one
//     make goes ahead as the fleet's probe once nothing else is in flight.
//     It skips the breaker's refusal, the backoff's hold and the bucket:
//     the fleet has chosen this replica to ask the backend, once.
//     Its outcome feeds the local ward as any make's does. Each SetFleet
//     with Probe lets one probe go; a probe released untried (Release, or
//     a Drop of the resource asked for) lets the next make go in its place.
//   - FleetRamp: entering it ends the local backoff's run, since the
//     fleet knows the backend is back. Makes then pass the local ward and
//     the ramp: this replica's share of the fleet's curve (see Ramp), one
//     make at once and the rest as the curve allows. A make the ramp has
//     no room for is answered Later with ReasonRamp. Once the ramp has run
//     its Span, the view acts as FleetOpen. Setting the same ramp again
//     (same Since) does not restart it.
//
// A State that is none of the four is read as FleetAlone. Leaving
// FleetHeld while the probe is in flight makes it an ordinary make: see
// FleetProbe.
//
// The ramp reads the time, so an owner with a fleet gives Take and Fill a
// fresh time whatever Stamps says.
func (p *Pool[T]) SetFleet(v FleetView, now int64) {
	p.clock(now) // the pool's time moves on; the view carries its own
	if v.State > FleetAlone {
		v.State = FleetAlone
	}
	was := p.fleet
	p.fleet = v
	p.fleetGrant = v.State == FleetHeld && v.Probe
	if v.State != FleetHeld {
		p.fleetProbe = false
	}
	if v.State == FleetRamp && (was.State != FleetRamp || was.Since != v.Since) {
		p.rampEnd = after(v.Since, v.Ramp.Span())
		p.rampNext = 0
		p.failures, p.last, p.hold = 0, 0, 0
	}
}

// Fleet is the view SetFleet last gave: the zero view, FleetOpen, if it
// was never called.
func (p *Pool[T]) Fleet() FleetView { return p.fleet }

// FleetProbe says whether the fleet's probe is in flight: a make that
// FleetHeld with Probe let go, not yet answered by Made, Unmade, Release,
// or a Give or Drop of an unknown resource. An owner asks it before it
// hands the pool a make's outcome, to tell the fleet how its probe went.
// It is false once the view has left FleetHeld: the make is then an
// ordinary one.
func (p *Pool[T]) FleetProbe() bool { return p.fleetProbe }

// heldMake answers a make while the fleet holds makes: the fleet's probe,
// if the view grants one and nothing else is in flight, and Later
// otherwise.
func (p *Pool[T]) heldMake(now int64) Taken[T] {
	if !p.fleetGrant || p.reserved > 0 {
		return Taken[T]{Verdict: Later, After: p.fleet.recheck(), Why: ReasonFleet}
	}
	if b := p.ward.bucket; b != nil {
		b.Take(now, 1) // spends a token if one is there; the probe goes either way
	}
	p.fleetGrant, p.fleetProbe = false, true
	p.reserved++
	return Taken[T]{Verdict: Make}
}

// untried notes that a make was given up without an outcome. A fleet probe
// given up this way leaves the grant in place for the next make.
func (p *Pool[T]) untried() {
	if p.fleetProbe {
		p.fleetProbe = false
		p.fleetGrant = p.fleet.State == FleetHeld && p.fleet.Probe
	}
}

// rampSlack absorbs rounding in the curve's arithmetic, so a make asked
// for at the instant rampWait named is let through.
const rampSlack = 1e-9

// rampWait is how long until the ramp has room for a make at now, while
// the ramp runs: 0 when it has room now.
//
// The ramp spaces makes along the curve's integral, as GCRA's virtual
// scheduling spaces them along the time. rampNext is the point, in the
// curve's makes per replica, that the curve must reach before the next
// make. One make is there at once; a make the curve allowed and nobody
// asked for is kept, one at most, so a late caller does not drop the
// replica behind the curve.
func (p *Pool[T]) rampWait(now int64) time.Duration {
	v := &p.fleet
	u := elapsed(now, v.Since)
	if v.Ramp.Allows(u)/v.share() >= p.rampNext-rampSlack {
		return 0
	}
	at := time.Duration(math.MaxInt64) // the ramp ends before the curve gets there
	if d, ok := v.Ramp.until(p.rampNext * v.share()); ok && d < math.MaxInt64 {
		at = time.Duration(math.Ceil(d))
	}
	end := elapsed(p.rampEnd, v.Since)
	return max(min(at, end)-u, 1)
}

// rampTake spends the ramp's room for one make at now.
func (p *Pool[T]) rampTake(now int64) {
	v := &p.fleet
	c := v.Ramp.Allows(elapsed(now, v.Since)) / v.share()
	p.rampNext = max(p.rampNext, c-1) + 1
}
