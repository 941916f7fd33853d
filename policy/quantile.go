package policy

import (
	"math"
	"math/bits"
	"time"
)

// The Quantile's histogram. A duration of n nanoseconds is counted exactly
// below 32 ns. Above, each power of two is cut into 32 buckets of equal
// width, so a bucket is at most a 32nd of the values it holds. The last
// bucket holds everything from 2⁴¹ ns up, about 37 minutes.
const (
	quantileSub   = 5 // bits of a value below its leading one that pick its bucket
	quantileTop   = 40
	quantileSlots = 8

	// QuantileBuckets is how many buckets a Quantile counts in (see
	// QuantileBucket).
	QuantileBuckets = (quantileTop-quantileSub+1)<<quantileSub + 1<<quantileSub
)

// The Quantile's need for samples: At answers only from at least
// QuantileMinSamples, and at least QuantileTailSamples at or above the
// quantile asked for.
const (
	QuantileMinSamples  = 20
	QuantileTailSamples = 5
)

// DefaultQuantileWindow is the window a Quantile of zero or less counts.
const DefaultQuantileWindow = 10 * time.Second

// Quantile tracks the recent distribution of a latency, to answer "how
// slow is the slowest 5%?": the delay after which a request is worth
// hedging. It counts the durations of the last window in a histogram of
// logarithmic buckets, in eight slots that age out one at a time.
//
// At reports a duration within 3.2% of the sample at the rank asked for,
// in the bucket holding it, each bucket being at most a 32nd as wide as
// its values. Within the bucket it reads the samples as spread evenly, so
// the rank is kept too. A quantile where latencies crowd, such as the
// edge of the usual ones, then lands where it should, not up to half a
// bucket off: there half a bucket can hold a few percent of the samples.
// Samples of 37 minutes or more all report the same. Memory is fixed,
// about 48 KB, and nothing allocates after NewQuantile.
//
// Time is the caller's clock in nanoseconds; a clock that goes backwards
// is read as standing still. The zero Quantile is ready to use with
// DefaultQuantileWindow. A Quantile is not safe for concurrent use.
type Quantile struct {
	slots slots[[QuantileBuckets]uint32]
	total [QuantileBuckets]uint64 // the sums over slots
	n     uint64                  // samples over slots
}

// NewQuantile returns a Quantile that has seen nothing, counting over the
// last window: DefaultQuantileWindow for zero or less. The window is cut
// in eight slots, each rounded up to a whole nanosecond and at least two.
func NewQuantile(window time.Duration) *Quantile {
	q := &Quantile{}
	q.set(window)
	return q
}

func (q *Quantile) set(window time.Duration) {
	if window <= 0 {
		window = DefaultQuantileWindow
	}
	// Slots of one nanosecond could not count the last instant of the
	// clock, so the shortest window is 16 ns.
	q.slots.cut(max(window, 2*quantileSlots), quantileSlots)
}

// Add counts one sample of d at now. A d below zero counts as zero.
func (q *Quantile) Add(d time.Duration, now int64) { q.AddN(d, 1, now) }

// AddN counts n samples of d at now, as n Adds would. An n of zero or less
// counts nothing. A bucket that has counted 2³²−1 samples in one slot
// counts no more there.
func (q *Quantile) AddN(d time.Duration, n int, now int64) {
	q.advance(now)
	if n <= 0 {
		return
	}
	i := QuantileBucket(d)
	c := &q.slots.newest()[i]
	add := uint32(min(uint64(n), uint64(math.MaxUint32-*c)))
	*c += add
	q.total[i] += uint64(add)
	q.n += uint64(add)
}

// At is the p-quantile of the samples counted over the last window at now:
// the duration that a share p of them do not exceed. A p of 0 or less is
// the smallest sample, 1 or more the largest.
//
// It reports false, and 0, until it holds QuantileMinSamples samples, and
// QuantileTailSamples at or above the quantile: p of 0.95 wants 100 samples,
// 0.99 wants 500. A p that is NaN is always false.
func (q *Quantile) At(p float64, now int64) (time.Duration, bool) {
	q.advance(now)
	if math.IsNaN(p) || q.n < QuantileMinSamples {
		return 0, false
	}
	p = min(max(p, 0), 1)
	// The tolerance keeps 50 samples enough for p 0.9, whose 1−p is a
	// hair under a tenth.
	if p < 1 && float64(q.n)*(1-p) < QuantileTailSamples-1e-9 {
		return 0, false
	}
	// The nearest rank: the smallest sample with at least p·n samples at
	// or below it.
	rank := max(uint64(math.Ceil(p*float64(q.n))), 1)
	var seen uint64
	for i, c := range q.total {
		if seen+c >= rank {
			return quantileWithin(i, rank-seen, c), true
		}
		seen += c
	}
	return QuantileValue(QuantileBuckets - 1), true // not reached: seen ends at n
}

// quantileWithin is the k-th of the c samples in bucket i, read as spread
// evenly over it: each in the middle of its own c-th of the bucket. One
// sample is the bucket's middle, QuantileValue. Buckets below 32 ns and
// the last are reported as QuantileValue.
func quantileWithin(i int, k, c uint64) time.Duration {
	if i < 1<<quantileSub || i == QuantileBuckets-1 || c <= 1 {
		return QuantileValue(i)
	}
	e := i>>quantileSub + quantileSub - 1
	m := uint64(i&(1<<quantileSub-1)) + 1<<quantileSub
	lo := m << (e - quantileSub)
	width := uint64(1) << (e - quantileSub)
	off := uint64(float64(width) * (float64(2*k-1) / float64(2*c)))
	return time.Duration(lo + min(off, width-1))
}

// Samples is how many samples the last window holds at now.
func (q *Quantile) Samples(now int64) int {
	q.advance(now)
	return int(min(q.n, math.MaxInt))
}

// QuantileBucket is the bucket a duration d is counted in, from 0 to
// QuantileBuckets−1. A d below zero is counted as zero.
func QuantileBucket(d time.Duration) int {
	v := uint64(max(d, 0))
	e := bits.Len64(v) - 1 // v's leading one; -1 for 0
	if e < quantileSub {
		return int(v)
	}
	if e > quantileTop {
		return QuantileBuckets - 1
	}
	m := v >> (e - quantileSub) // from 16 to 31
	return (e-quantileSub+1)<<quantileSub + int(m) - 1<<quantileSub
}

// QuantileValue is the duration At reports for bucket i: the middle of
// the durations it holds, and i itself below 16. It is counted in bucket
// i again. An i out of range is read as the nearest bucket.
func QuantileValue(i int) time.Duration {
	i = min(max(i, 0), QuantileBuckets-1)
	if i < 1<<quantileSub {
		return time.Duration(i)
	}
	e := i>>quantileSub + quantileSub - 1
	m := uint64(i&(1<<quantileSub-1)) + 1<<quantileSub
	lo := m << (e - quantileSub)
	return time.Duration(lo + uint64(1)<<(e-quantileSub)/2)
}

// advance ages out the slots that have left the window by now.
func (q *Quantile) advance(now int64) {
	if q.slots.width == 0 {
		q.set(0)
	}
	if _, turned := q.slots.advance(now); turned {
		q.sum()
	}
}

// sum works out the sums over the slots.
func (q *Quantile) sum() {
	q.total = [QuantileBuckets]uint64{}
	q.n = 0
	for s := range q.slots.ring {
		for i, c := range q.slots.ring[s] {
			q.total[i] += uint64(c)
			q.n += uint64(c)
		}
	}
}
