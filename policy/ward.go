package policy

import (
	"math"
	"strconv"
	"time"
)

// Ward stands in front of a pool's backend and holds back or refuses what
// would hurt it. It is configuration only: plain values that NewPool turns
// into state of the pool's own, so one Ward may be given to any number of
// pools, which share nothing through it, and no field needs a clock.
//
// Every part is optional and is turned on by one field, named in its
// comment; the part's other zero fields mean its documented defaults. The
// zero Ward is no ward at all: nothing is held back and nothing refused.
// The presets make a typical ward one line:
//
//	policy.Ward{Bucket: policy.Rate{PerSecond: 20, Burst: 5}, Backoff: policy.DefaultBackoff, Breaker: policy.DefaultBreaker}
//
// In Take, in order: a closed pool answers Shed; the shedder may refuse even
// an idle resource (Shed); an idle resource is lent; a full pool answers
// Wait; then, for a make, the breaker may refuse (Shed), the backoff hold it
// back after a failure or while its probe is out (Later), and the bucket
// space it out (Later). The
// bucket, backoff and breaker hold back makes only, never the lending of an
// idle resource; the shedder refuses lending as well, because it protects
// the process rather than the backend. Each Shed and Later says why in
// Taken.Why. A pool in a fleet adds the fleet's hold and ramp to these
// (see Pool.SetFleet).
//
// The backoff reads Base, Factor, Cap and Jitter, and not Attempts: a pool
// never gives up on its backend, since its callers keep asking, and the
// breaker and the one-probe rule below bound what a dead backend costs.
// After a failed make it holds makes back for a delay that grows with each
// failure in a row. When the hold ends, one make goes ahead as a probe (the
// half-open state of a circuit breaker); the rest are answered Later until
// that make's outcome is known. A make that works ends the run; one that
// fails starts a longer hold; one released untried (Release, or a Drop of
// the resource asked for) frees the way for the next probe. The probe is
// whichever make is in flight, not a resource set apart, so a caller that
// abandons it can never wedge the pool. The price is at the other end of an
// outage: the first make after the backend comes back waits for the hold in
// force then, up to the backoff's Cap (a second with DefaultBackoff). A
// smaller Cap notices a recovery sooner and tries a dead backend more often.
type Ward struct {
	Breaker Throttle // refuses makes (Shed) at the rate a failing backend deserves; on when K > 0
	Bucket  Rate     // spaces makes out (Later); its token is spent when Take answers Make; on when PerSecond > 0
	Backoff Backoff  // after a failed make, holds makes back (Later), then lets one probe through; on when Base > 0
	Shedder Overload // stops lending (Shed) while the process is hot with more in flight than it can finish; on when Hot > 0

	// Draw supplies the backoff's draws in [0, 1), one per failed make. The
	// owner hands it in (a seeded source makes a run reproducible); policy
	// never draws a random number itself. nil means no spread: every hold is
	// exactly the backoff's Ceiling. Spreading matters because a fleet of
	// pools that failed together must not retry together. Draw is the one
	// part a Ward shares by reference: a pool calls it from its owner, so a
	// Draw given to pools with different owners must be safe for concurrent
	// use (or stateless).
	Draw func() float64
}

// Rate is a token bucket's configuration: PerSecond tokens accrue each
// second, up to Burst. In a Ward it spaces makes out, and the bucket starts
// full at the first instant the pool is given, so a cold pool makes its
// first Burst at once.
//
// PerSecond is the switch: zero, negative or NaN is no bucket at all (in a
// Ward), and +Inf refills at once. Burst is read as NewBucket reads it: zero
// or less is a second's worth of PerSecond (at least 1), and one below 1 is
// raised to 1.
//
// A pool replaces every connection that breaks or is retired with a make,
// so a ward's PerSecond must be well above the steady rate at which that
// happens, or the pool starves: live connections dwindle while callers
// wait, held back by the bucket (ReasonBucket). The bucket is there to turn
// a reconnection storm into a queue, not to ration everyday makes.
type Rate struct {
	PerSecond float64 // tokens earned per second; the Ward's bucket is on when this is above zero
	Burst     float64 // the most the bucket holds; <= 0 is a second's worth, at least 1
}

// On says whether a Ward with this Rate has a bucket.
func (r Rate) On() bool { return r.PerSecond > 0 }

// Throttle is a Breaker's configuration: the SRE book's client-side adaptive
// throttling (see Breaker), with a floor and a cap.
//
// K is the switch: zero, negative or NaN is no breaker at all (in a Ward).
// Zero in any other field is its default:
//   - K is how many requests per accept the backend may take before anything
//     is refused. A K between 0 and 1 would refuse attempts at a backend that
//     never fails, so it is read as the book's 2; +Inf never refuses.
//   - Period is how far back requests and accepts are counted; zero or less
//     is the book's two minutes. It is counted in 24 slots, each rounded up
//     to a whole nanosecond.
//   - Floor is how many requests the period must hold before anything is
//     refused; zero or less is 10. One is the book's rule with no floor.
//   - Cap is the largest fraction of attempts ever refused; zero, negative or
//     NaN is 0.9. One or more is no cap beyond the formula's own, which stays
//     below 1.
type Throttle struct {
	K      float64       // requests per accept before refusing; the Ward's breaker is on when this is above zero
	Period time.Duration // the sliding period counted; <= 0 is two minutes
	Floor  int           // requests in the period before anything is refused; <= 0 is 10
	Cap    float64       // most of the attempts ever refused; <= 0 is 0.9, >= 1 is no cap
}

// On says whether a Ward with this Throttle has a breaker.
func (t Throttle) On() bool { return t.K > 0 }

// DefaultBreaker is the preset: K = 2 over two minutes, the SRE book's
// numbers, refusing nothing until the period holds ten requests and never
// more than nine attempts in ten.
//
// The floor and the cap are what the book's formula lacks: alone, it refuses
// half of the attempts after a single failure with nothing else counted, and
// admits barely one attempt a period once a dead backend has piled up
// refusals, so a backend that came back is noticed only as that period ages
// out. Both peers that fixed this wait for a minimum of requests: Kratos'
// SRE breaker (go-kratos/aegis) for 100 in its 3 s window, failsafe-go's
// adaptive throttler for an execution threshold its docs set at 5 or 10, and
// failsafe-go caps refusals at 0.9 by default. A pool makes far fewer
// requests than an RPC client sends, so the floor is ten, the size of
// DefaultLimits: a cold pool filling up is let through whatever its first
// make did. The cap is failsafe-go's: one attempt in ten still reaches the
// backend, which is how the breaker learns it is back.
var DefaultBreaker = Throttle{K: 2, Period: 2 * time.Minute, Floor: 10, Cap: 0.9}

// Overload is a Shedder's configuration: the heat at or above which the
// process counts as hot, and the window its completions are measured over
// (see Shedder).
//
// Hot is the switch: zero, negative or NaN is no shedder at all (in a Ward).
// A Window of zero or less is ten seconds.
type Overload struct {
	Hot    float64       // the heat that is hot, such as 0.8 of the CPU; the Ward's shedder is on when this is above zero
	Window time.Duration // the sliding window measured; <= 0 is ten seconds
}

// On says whether a Ward with this Overload has a shedder.
func (o Overload) On() bool { return o.Hot > 0 }

// DefaultShedder is the preset: Kratos BBR's CPU threshold of 80% over its
// ten-second window.
var DefaultShedder = Overload{Hot: shedHot, Window: shedWindow}

// Reason is why Take answered Shed or Later: which part of the pool or its
// ward said no. An owner counts refusals and holds by it and tells its
// caller which one it met. The zero Reason, NoReason, is what every other
// verdict carries.
type Reason uint8

// The reasons. The ward's come in the order Take asks. The fleet's come
// last, so that the others keep their numbers.
const (
	NoReason      Reason = iota // not a Shed or a Later
	ReasonClosed                // Shed: the pool is closed
	ReasonShedder               // Shed: the shedder says the process is too hot to lend
	ReasonBreaker               // Shed: the breaker refuses the make
	ReasonBackoff               // Later: the backoff holds makes back after a failure
	ReasonProbe                 // Later: the hold is over and a make is in flight as a probe; its outcome decides
	ReasonBucket                // Later: the bucket has no token for a make yet
	ReasonFleet                 // Later: the fleet holds makes back (FleetHeld); asked before the breaker
	ReasonRamp                  // Later: the fleet's ramp has no room for a make yet (FleetRamp); asked before the bucket
)

var reasonNames = [...]string{"none", "closed", "shedder", "breaker", "backoff", "probe", "bucket", "fleet", "ramp"}

// String gives the reason's name in lower case, "none" to "ramp", or
// "Reason(n)" for a number that is none of them.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// warden is a Ward turned into one pool's state: the keeper of the ward. A
// nil part is a part not configured.
type warden struct {
	bucket  *Bucket
	breaker *Breaker
	shedder *Shedder
	backoff Backoff // holds only when backoff.Base > 0
	draw    func() float64
}

// build makes the state of the parts w turns on, each new, so nothing is
// shared with another pool given the same w.
func (w Ward) build() warden {
	s := warden{draw: w.Draw}
	if w.Bucket.On() {
		// Full from the start of time: the first Take finds it full
		// whenever that is, and moves its reference time there.
		s.bucket = NewBucket(w.Bucket.PerSecond, w.Bucket.Burst, math.MinInt64)
	}
	if w.Breaker.On() {
		s.breaker = &Breaker{}
		s.breaker.set(w.Breaker)
	}
	if w.Shedder.On() {
		s.shedder = &Shedder{}
		s.shedder.set(w.Shedder.Hot, w.Shedder.Window)
	}
	if w.Backoff.Base > 0 {
		s.backoff = w.Backoff
	}
	return s
}

// holds says whether the ward has a backoff.
func (s *warden) holds() bool { return s.backoff.Base > 0 }
