package policy

import (
	"math"
	"time"
)

// Bucket is a token bucket: rate tokens accrue per second up to burst, and
// each request takes what it costs, usually one.
//
// It is the rate limit that lets a burst through after a quiet period,
// which is what a human-facing API wants: nobody should be refused for two
// requests in the same second after an hour of none. Time is the caller's
// clock in nanoseconds; only differences matter.
//
// A clock that goes backwards adds no tokens and does not move the bucket's
// reference time back, so it can never be used to mint tokens (the mistake
// of golang/go#56287).
//
// The zero Bucket holds nothing and earns nothing: it refuses every Take of
// n > 0, and its Next is Never. Build one with NewBucket.
type Bucket struct {
	perNs  float64 // tokens earned per nanosecond; 0 earns nothing
	burst  float64 // most it ever holds
	tokens float64 // held at time at
	at     int64   // when tokens was last brought up to date
}

// NewBucket is a bucket that starts full at time at, which is what lets the
// first burst through.
//
// rate is tokens per second and burst the most the bucket ever holds.
//   - A burst <= 0 (or NaN) is the rate when the rate is more than one,
//     else 1: a second's worth, the smallest burst that does not throttle
//     a steady caller below its rate.
//   - A burst between 0 and 1 is raised to 1, since a bucket that can never
//     hold one token passes nothing. +Inf is held as the largest float64.
//   - A rate <= 0 (or NaN) earns nothing: the bucket passes its first burst
//     and then nothing, ever. A rate of +Inf refills it completely whenever
//     the clock moves at all, so NewBucket(math.Inf(1), 0, at) passes
//     everything.
func NewBucket(rate, burst float64, at int64) *Bucket {
	if !(rate > 0) { // <= 0, NaN
		rate = 0
	}
	if !(burst > 0) {
		burst = 1
		if rate > 1 {
			burst = rate
		}
	}
	burst = min(max(burst, 1), math.MaxFloat64)
	return &Bucket{perNs: rate / 1e9, burst: burst, tokens: burst, at: at}
}

// fill is how many tokens the bucket holds at now, and whether now is after
// the reference time (and so would become the new one). It changes nothing.
func (b *Bucket) fill(now int64) (float64, bool) {
	if now <= b.at {
		return b.tokens, false
	}
	// now > at, so the wrapped difference read unsigned is exact.
	earned := float64(uint64(now-b.at)) * b.perNs
	return min(b.tokens+earned, b.burst), true
}

// Take is whether n tokens are there at now, taking them if they are.
//
// A refused Take changes nothing. An n <= 0 asks for nothing and gets it:
// true, and nothing changes. An n that is NaN, or more than the burst, can
// never be had: false, always.
func (b *Bucket) Take(now int64, n float64) bool {
	if n <= 0 {
		return true
	}
	if !(n <= b.burst) { // more than the burst, or NaN
		return false
	}
	t, later := b.fill(now)
	if t < n {
		return false
	}
	b.tokens = t - n
	if later {
		b.at = now
	}
	return true
}

// Next is how long from now until n tokens would be there, without taking
// them: 0 when they are there now.
//
// It is what a caller sleeps rather than spinning, and what a Retry-After
// header is computed from; a Take of n at now plus Next succeeds, if
// nothing else takes first. It is Never when n can never be had: n more
// than the burst, n NaN, or a bucket that earns nothing and holds too few.
// A rate so small that the wait would not fit in a Duration is Never too,
// rather than an overflowed conversion (golang/go#71154).
func (b *Bucket) Next(now int64, n float64) time.Duration {
	if n <= 0 {
		return 0
	}
	if !(n <= b.burst) {
		return Never
	}
	if t, _ := b.fill(now); t >= n {
		return 0
	}
	if !(b.perNs > 0) {
		return Never
	}
	// The wait is counted from the reference time, with exactly the
	// arithmetic fill uses, so a Take at the answer cannot fall short by
	// a rounding.
	need := n - b.tokens
	e := math.Ceil(need / b.perNs)
	if !(e < float64(Never)) {
		return Never
	}
	wait := max(int64(e), 1)
	// A rounding can leave the sum an ulp short; step up, doubling, so a
	// wait too large for single nanoseconds to change still ends.
	for step := int64(1); b.tokens+float64(wait)*b.perNs < n; step *= 2 {
		if wait > int64(Never)-step {
			return Never
		}
		wait += step
	}
	// The quotient can also round a nanosecond or two past the first
	// moment that works; step back to it.
	for range 2 {
		if wait > 1 && b.tokens+float64(wait-1)*b.perNs >= n {
			wait--
		}
	}
	if b.at > int64(Never)-wait {
		return Never // the moment is past the end of the clock
	}
	// at+wait is after now (fill(now) fell short), so the wrapped
	// difference read unsigned is exact, if perhaps too long to hold.
	d := uint64(b.at + wait - now)
	if d > uint64(Never) {
		return Never
	}
	return time.Duration(d)
}

// Tokens is how many tokens the bucket holds at now, for a caller that
// reports its own headroom. It changes nothing.
func (b *Bucket) Tokens(now int64) float64 {
	t, _ := b.fill(now)
	return t
}

// Retune changes the bucket's rate and burst at now without dropping what
// it holds: the tokens earned up to now are counted at the old rate, the
// new rate applies from now on (as x/time/rate's SetLimitAt), and a burst
// lowered below the tokens held cuts them to it. rate and burst are read as
// NewBucket reads them. A now before the reference time counts nothing
// more, as Take does.
func (b *Bucket) Retune(now int64, rate, burst float64) {
	t, later := b.fill(now)
	nb := NewBucket(rate, burst, now)
	b.perNs, b.burst = nb.perNs, nb.burst
	b.tokens = min(t, b.burst)
	if later {
		b.at = now
	}
}

// Put gives n tokens back at now, up to the burst: what a cancelled
// reservation returns. An n <= 0 or NaN gives nothing.
func (b *Bucket) Put(now int64, n float64) {
	if !(n > 0) {
		return
	}
	t, later := b.fill(now)
	b.tokens = min(t+n, b.burst)
	if later {
		b.at = now
	}
}
