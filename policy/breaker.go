package policy

import (
	"math"
	"time"
)

// breakerSlots is how many slots a Breaker's period is counted in: a count
// ages out a twenty-fourth of the period at a time (five seconds at the
// default two minutes), in a fixed ring that never allocates.
const breakerSlots = 24

// The Breaker's defaults: K and the period from Google's SRE book,
// "Handling Overload"; the floor and the cap as DefaultBreaker explains.
const (
	breakerK      = 2.0
	breakerPeriod = 2 * time.Minute
	breakerFloor  = 10
	breakerCap    = 0.9
)

// Breaker refuses makes at the rate a failing backend deserves, rather than
// all or nothing. It is the client-side adaptive throttling of Google's SRE
// book ("Handling Overload"): over a sliding period it counts requests (every
// make attempted, including the ones it refused itself) and accepts (makes
// that worked), and refuses a fraction
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// of attempts. While the backend accepts at least one in K, nothing is
// refused; as it fails more, more is refused.
//
// Two limits keep the formula from overreacting (see Throttle and
// DefaultBreaker): nothing is refused until the period holds Floor requests,
// so one failed make does not halve the next ones, and never more than Cap
// of the attempts are refused, so a trickle keeps reaching the backend to
// notice it is back.
//
// The book draws a random number per attempt; this breaker is deterministic
// instead. Each attempt adds the reject fraction to a running debt, and an
// attempt is refused when the debt reaches one (and one is paid off), so the
// same calls at the same times always give the same answers, and a fraction
// of a quarter refuses exactly every fourth attempt.
//
// It never latches shut: counts age out of the period, so with no traffic it
// admits again, and the debt is forgiven once the period holds no count.
// (go-redis/go-redis#3062 is a breaker that stayed open because only traffic
// could close it, and none was let through.)
//
// Used alone, ask Allow before each attempt and report what an admitted one
// did with Success or Failure. In a pool's Ward the pool does all three,
// with a breaker of its own built from Ward.Breaker. The zero Breaker is
// ready to use with DefaultBreaker's settings. A Breaker is not safe for
// concurrent use.
type Breaker struct {
	k     float64
	floor int64   // requests the period must hold before anything is refused
	cap   float64 // the largest fraction refused
	slots slots[tally]

	requests, accepts int64   // the sums over slots, worked out again when one ages out
	debt              float64 // reject fractions owed; an attempt is refused when it reaches 1
}

// tally is one slot's counts.
type tally struct{ requests, accepts int64 }

// NewBreaker returns a breaker that has counted nothing, refusing at the SRE
// book's rate with multiplier k over a sliding period, with DefaultBreaker's
// floor and cap.
//
// k is how many requests per accept the backend may take before anything is
// refused; the book's 2 lets through twice what the backend has been
// accepting, and a lower k refuses sooner. A k below 1 (or NaN) would refuse
// attempts at a backend that never fails, so it is read as the book's 2; an
// infinite k never refuses. A period of zero or less is the book's two
// minutes; the period is counted in 24 slots and rounded up to a whole
// number of nanoseconds per slot.
func NewBreaker(k float64, period time.Duration) *Breaker {
	b := &Breaker{}
	b.set(Throttle{K: k, Period: period})
	return b
}

// set applies a Throttle's settings, reading what is out of range as
// Throttle's comment says. The switch (K <= 0 is no breaker) is the Ward's
// to read: here a K below 1 is the default, since a breaker was asked for.
func (b *Breaker) set(t Throttle) {
	k, period, floor, most := t.K, t.Period, t.Floor, t.Cap
	if math.IsNaN(k) || k < 1 {
		k = breakerK
	}
	if period <= 0 {
		period = breakerPeriod
	}
	if floor <= 0 {
		floor = breakerFloor
	}
	if !(most > 0) { // <= 0, NaN
		most = breakerCap
	}
	b.k, b.floor, b.cap = k, int64(floor), min(most, 1)
	b.slots.cut(period, breakerSlots)
}

// Allow says whether an attempt may go ahead now. A refused attempt counts
// as a request (the backend was asked for nothing, but the demand was
// there); an admitted one counts when its outcome is reported by Success or
// Failure.
func (b *Breaker) Allow(now int64) bool {
	b.advance(now)
	b.debt += b.fraction()
	if b.debt >= 1 {
		b.debt--
		b.count(1, 0)
		return false
	}
	return true
}

// admits says whether Allow would admit an attempt now, changing no count:
// a pool asks it before the backoff and bucket, and calls Allow only when
// it will answer Shed or Make, so an attempt they hold back costs no debt.
func (b *Breaker) admits(now int64) bool {
	b.advance(now)
	return b.debt+b.fraction() < 1
}

// Success counts an admitted attempt the backend accepted.
func (b *Breaker) Success(now int64) {
	b.advance(now)
	b.count(1, 1)
}

// Failure counts an admitted attempt the backend did not accept.
func (b *Breaker) Failure(now int64) {
	b.advance(now)
	b.count(1, 0)
}

// Reject is the fraction of attempts refused now, from 0 to at most the
// cap (and always below 1): what a caller reports as its breaker's state.
func (b *Breaker) Reject(now int64) float64 {
	b.advance(now)
	return b.fraction()
}

// fraction is the SRE book's rejection probability over the counts held,
// zero below the floor and no more than the cap.
func (b *Breaker) fraction() float64 {
	if b.requests == 0 || b.requests < b.floor {
		return 0
	}
	over := float64(b.requests)
	if b.accepts > 0 { // skip 0·K, which is NaN for an infinite K
		over -= b.k * float64(b.accepts)
	}
	if over <= 0 {
		return 0
	}
	return min(over/(float64(b.requests)+1), b.cap)
}

// count adds to the newest slot.
func (b *Breaker) count(requests, accepts int64) {
	t := b.slots.newest()
	t.requests += requests
	t.accepts += accepts
	b.requests += requests
	b.accepts += accepts
}

// advance ages out the slots that have left the period by now (see slots).
func (b *Breaker) advance(now int64) {
	if b.slots.width == 0 { // the zero Breaker
		b.set(Throttle{})
	}
	if _, turned := b.slots.advance(now); turned {
		b.sum()
	}
}

// sum works out the sums over the slots again, once some have aged out,
// and forgives the debt once nothing is left.
func (b *Breaker) sum() {
	b.requests, b.accepts = 0, 0
	for _, t := range b.slots.ring {
		b.requests += t.requests
		b.accepts += t.accepts
	}
	if b.requests == 0 {
		b.debt = 0
	}
}
