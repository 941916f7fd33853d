package policy

import (
	"math"
	"strconv"
	"time"
)

// Jitter is how much randomness goes into a delay.
//
// A retry with no jitter makes every client that failed together try again
// together, which is how one outage becomes a second one. Full, Equal and
// Decorrelated are the strategies AWS's "Exponential Backoff and Jitter"
// names and measures; Rigid is the delay with none. The zero Jitter is Rigid.
type Jitter uint8

// The four jitters. A Jitter outside these four is read as Full.
const (
	// Rigid is the ceiling unchanged: reproducible, and it keeps clients
	// that failed together in step.
	Rigid Jitter = iota
	// Full is uniform over [0, ceiling]. It spreads clients furthest, and it
	// is what gRPC sleeps.
	Full
	// Equal is half the ceiling plus uniform over [0, ceiling/2]: a floor
	// under the wait, with the other half spread.
	Equal
	// Decorrelated is uniform over [Base, min(Cap, 3 × previous)]. It grows
	// from where the last delay landed rather than from the retry number.
	Decorrelated
)

// String gives the jitter's name, "Rigid", "Full", "Equal" or
// "Decorrelated", and "Jitter(n)" for any other value.
func (j Jitter) String() string {
	switch j {
	case Rigid:
		return "Rigid"
	case Full:
		return "Full"
	case Equal:
		return "Equal"
	case Decorrelated:
		return "Decorrelated"
	}
	return "Jitter(" + strconv.Itoa(int(j)) + ")"
}

// Backoff is when to try again, and how long to wait first.
//
// It draws no random number itself: Delay takes the draw as an argument, so
// the same draws give the same delays, which is what makes a retry sequence
// testable. Start from DefaultBackoff and change the fields you need.
//
// Every field has an answer for every value, so no Backoff panics:
//   - Base <= 0 is read as 0: nothing to grow, so every ceiling is 0.
//   - Factor below 1, and NaN, are read as 1: the ceiling stays at Base. A
//     backoff that shortened after each failure would retry hardest when
//     the backend is worst off. A Factor of +Inf jumps to Cap at retry 2.
//   - Cap <= 0 is no cap: the ceiling saturates at Never rather than
//     overflowing. A Cap below Base wins over Base.
//   - Attempts <= 0 allows no attempt at all, not even the first.
//
// The zero Backoff is therefore a policy that never tries: a field left out
// reads as "none", not as the preset.
type Backoff struct {
	Base     time.Duration // ceiling before the first retry
	Factor   float64       // growth of the ceiling per retry
	Cap      time.Duration // most any ceiling or delay may be; <= 0 is no cap
	Attempts int           // attempts in all, the first included; a pool's Ward ignores it (see Ward)
	Jitter   Jitter        // how the delay is drawn under the ceiling
}

// DefaultBackoff is the preset: three attempts, a hundred milliseconds
// doubling to a one-second ceiling, spread by full jitter.
//
// gRPC has no default retry policy: it retries only under a service config
// that asks for it. 100 ms doubling to 1 s are the numbers of the example
// retryPolicy in gRPC's retry design, gRFC A6 (initialBackoff 0.1s,
// backoffMultiplier 2, maxBackoff 1s; the example allows maxAttempts 4, and
// gRPC clients cap any policy at 5). Three attempts is our own, smaller
// choice: two retries sleep at most 300 ms in all, short enough to spend
// inside one request. Full jitter is the strategy AWS's "Exponential
// Backoff and Jitter" found to finish the work with the fewest calls; A6
// drew the same way, uniformly under the ceiling, until grpc/proposal#452
// (2024) changed it to the ceiling times a draw in [0.8, 1.2].
//
// For reconnecting, gRPC's connection backoff is slower: 1 s growing by 1.6
// to 120 s, ±20% jitter. A Ward with this preset tries a dead backend about
// once a second and notices its return within a second; raise Cap to try
// less often and notice later.
var DefaultBackoff = Backoff{Base: 100 * time.Millisecond, Factor: 2, Cap: time.Second, Attempts: 3, Jitter: Full}

// maxSchedule is the most delays Schedule lists. A schedule is for reading —
// a test, a log line — and a policy of MaxInt attempts would otherwise ask
// for more memory than exists.
const maxSchedule = 1024

// Ceiling is the undelayed ceiling before the retry-th retry, the first
// retry being 1: min(Base × Factor^(retry−1), Cap).
//
// It is what a jitter-free client sleeps and what every jitter draws within,
// so a caller comparing this policy with one written elsewhere compares
// this. It is 0 for retry < 1 (there is no retry before the first), never
// negative, and saturates at Cap, or at Never when there is no cap, for
// any retry up to MaxInt.
func (b Backoff) Ceiling(retry int) time.Duration {
	if retry < 1 || b.Base <= 0 {
		return 0
	}
	limit := Never
	if b.Cap > 0 {
		limit = b.Cap
	}
	if b.Base >= limit {
		return limit
	}
	f := b.Factor
	if !(f > 1) { // below 1, or NaN
		return b.Base
	}
	// Base × f^e by squaring: at most 63 steps, no allocation, and every
	// product is at least 1 (f > 1), so it only grows, to +Inf at worst.
	// Stop as soon as the ceiling is reached.
	most := float64(limit) / float64(b.Base)
	g := 1.0
	for e := uint(retry - 1); e > 0; e >>= 1 {
		if e&1 == 1 {
			g *= f
			if g >= most {
				return limit
			}
		}
		f *= f
	}
	d := math.Round(float64(b.Base) * g)
	if d >= float64(limit) { // also keeps d below 2^63
		return limit
	}
	return time.Duration(d)
}

// Delay is how long to wait before the retry-th retry, the first being 1.
//
// random is a draw in [0, 1) that the caller makes; the same draw gives the
// same delay. A draw below 0, NaN or -Inf is read as 0, and one of 1 or
// more, or +Inf, as the largest float64 below 1. previous is what the last
// delay turned out to be; only Decorrelated reads it, and one <= 0 is read
// as Base (there was none yet).
//
//   - Rigid: Ceiling(retry).
//   - Full: random × Ceiling(retry).
//   - Equal: Ceiling(retry)/2 + random × Ceiling(retry)/2.
//   - Decorrelated: Base + random × (min(Cap, 3 × previous) − Base). When
//     3 × previous is below Base the range is just Base; when Cap is below
//     Base it is just Cap, since Cap is the most anyone waits.
//
// Retry < 1 gives 0 for every jitter. The answer is never negative and never
// more than Ceiling (or Cap, for Decorrelated).
func (b Backoff) Delay(retry int, random float64, previous time.Duration) time.Duration {
	if retry < 1 {
		return 0
	}
	r := draw(random)
	switch b.Jitter {
	case Rigid:
		return b.Ceiling(retry)
	case Equal:
		c := b.Ceiling(retry)
		half := c / 2
		return half + spread(r, c-half)
	case Decorrelated:
		return b.decorrelated(r, previous)
	default: // Full, and any value outside the four
		return spread(r, b.Ceiling(retry))
	}
}

// decorrelated is Delay for the Decorrelated jitter, draw already clamped.
func (b Backoff) decorrelated(r float64, previous time.Duration) time.Duration {
	base := max(b.Base, 0)
	if previous <= 0 {
		previous = base
	}
	hi := Never
	if previous <= Never/3 {
		hi = 3 * previous
	}
	hi = max(hi, base)
	if b.Cap > 0 {
		hi = min(hi, b.Cap)
	}
	lo := min(base, hi)
	return lo + spread(r, hi-lo)
}

// spread is r × span for r in [0, 1) and span >= 0. It never passes span:
// float64(span) may round up by half a unit in the last place, but a
// product with any r below 1 rounds down by a whole one.
func spread(r float64, span time.Duration) time.Duration {
	return time.Duration(r * float64(span))
}

// below1 is the largest float64 less than 1.
const below1 = 1 - 1.0/(1<<53)

// draw clamps a caller's random value into [0, 1).
func draw(r float64) float64 {
	if r >= 1 { // includes +Inf
		return below1
	}
	if r > 0 {
		return r
	}
	return 0 // below 0, -Inf, NaN
}

// More is whether a call that has made made attempts may make another:
// 0 <= made < Attempts.
//
// The first attempt is 1, so a policy of three attempts allows two retries.
// A negative made is a count gone wrong, and gets no more attempts.
func (b Backoff) More(made int) bool {
	return made >= 0 && made < b.Attempts
}

// Schedule is every delay a run of retries would wait: the Attempts−1
// delays before retries 1 to Attempts−1, each fed the one before it as
// previous (the first is fed 0, which Decorrelated reads as Base).
//
// randoms supplies the draws in order; when it runs short the remaining
// steps draw 0, the low end of whatever jitter is in force. It is for a
// caller that wants the whole plan rather than one step — a test, or a log
// line — so it allocates, and lists at most 1024 delays however many
// Attempts there are. It is nil when Attempts <= 1.
func (b Backoff) Schedule(randoms []float64) []time.Duration {
	n := min(b.Attempts-1, maxSchedule)
	if n <= 0 {
		return nil
	}
	out := make([]time.Duration, n)
	var previous time.Duration
	for i := range out {
		r := 0.0
		if i < len(randoms) {
			r = randoms[i]
		}
		previous = b.Delay(i+1, r, previous)
		out[i] = previous
	}
	return out
}
