package policy

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// bucketStep is one call on a bucket at a fixed instant, and its answer.
type bucketStep struct {
	op   string // "take", "next" or "tokens"
	at   int64
	n    float64
	want any // bool for take, time.Duration for next, float64 for tokens
}

// runBucket plays steps against b, naming the failing step.
func runBucket(t *testing.T, name string, b *Bucket, steps []bucketStep) {
	t.Helper()
	for i, s := range steps {
		var got any
		switch s.op {
		case "take":
			before := *b
			ok := b.Take(s.at, s.n)
			if !ok && *b != before {
				t.Errorf("%s: step %d: refused Take(%d, %v) changed the bucket from %+v to %+v", name, i, s.at, s.n, before, *b)
			}
			got = ok
		case "next":
			got = b.Next(s.at, s.n)
		case "tokens":
			before := *b
			got = b.Tokens(s.at)
			if *b != before {
				t.Errorf("%s: step %d: Tokens(%d) changed the bucket", name, i, s.at)
			}
		}
		if got != s.want {
			t.Errorf("%s: step %d: %s(%d, %v) = %v, want %v", name, i, s.op, s.at, s.n, got, s.want)
		}
	}
}

func TestBucket(t *testing.T) {
	const ms = time.Millisecond
	const t0 = int64(1_000_000_000)
	t1 := t0 + int64(99*ms)
	t2 := t0 + int64(100*ms)
	t3 := t0 + int64(10*time.Second)
	// Ten a second, two at once.
	runBucket(t, "10/s burst 2", NewBucket(10, 2, t0), []bucketStep{
		{"tokens", t0, 0, 2.0}, // starts full
		{"take", t0, 1, true},
		{"take", t0, 1, true},
		{"take", t0, 1, false}, // the burst is spent
		{"tokens", t0, 0, 0.0},
		{"next", t0, 1, 100 * ms}, // a token every 100ms
		{"next", t0, 2, 200 * ms},
		{"take", t1, 1, false}, // a nanosecond early is still early
		{"next", t1, 1, 1 * ms},
		{"take", t2, 1, true},
		{"tokens", t2, 0, 0.0},
		{"tokens", t3, 0, 2.0}, // a quiet ten seconds fills it, no more
		{"next", t3, 2, time.Duration(0)},
		{"take", t3, 2, true},
		{"take", t3, 3, false}, // more than the burst, ever
		{"next", t3, 3, Never},
	})
	// Fractions of a token, taken and earned.
	runBucket(t, "2/s burst 1, halves", NewBucket(2, 1, t0), []bucketStep{
		{"take", t0, 0.5, true},
		{"take", t0, 0.5, true},
		{"take", t0, 0.5, false},
		{"next", t0, 0.5, 250 * ms},
		{"take", t0 + int64(250*ms), 0.5, true},
		{"tokens", t0 + int64(500*ms), 0, 0.5},
	})
}

// A clock that goes backwards adds nothing, and does not move the bucket's
// reference time back either (golang/go#56287: in x/time/rate, alternating
// before and after the last call minted tokens).
func TestBucketClockBackwards(t *testing.T) {
	s := int64(time.Second)
	runBucket(t, "1/s burst 1", NewBucket(1, 1, 10*s), []bucketStep{
		{"take", 10 * s, 1, true},
		{"take", 5 * s, 1, false}, // earlier: nothing earned
		{"tokens", 5 * s, 0, 0.0},
		{"next", 5 * s, 1, 6 * time.Second}, // until 11s, counted from 5s
		{"take", 10*s + s/2, 1, false},      // only half a token since 10s
		{"tokens", 10*s + s/2, 0, 0.5},
		{"take", 11 * s, 1, true},
	})

	// Alternating a second apart: the burst and the one second's worth that
	// really passed, and not a token more.
	b := NewBucket(1, 5, 0)
	taken := 0
	for i := range 100 {
		now := int64(0)
		if i%2 == 0 {
			now = s
		}
		if b.Take(now, 1) {
			taken++
		}
	}
	if taken != 5 {
		t.Errorf("alternating 0s and 1s took %d tokens, want 5 (a full bucket earns nothing more)", taken)
	}
	if got := b.Tokens(2 * s); got != 1 {
		t.Errorf("Tokens(2s) = %v, want 1 (one second earned since 1s, none for the trips back)", got)
	}
}

func TestBucketBurstDefaults(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name        string
		rate, burst float64
		want        float64
	}{
		{"burst as given", 10, 3, 3},
		{"burst 0 is the rate", 100, 0, 100},
		{"negative burst is the rate", 100, -3, 100},
		{"NaN burst is the rate", 100, nan, 100},
		{"burst 0 at rate 1 is 1", 1, 0, 1},
		{"burst 0 at rate below 1 is 1", 0.5, 0, 1},
		{"burst 0 at rate 0 is 1", 0, 0, 1},
		{"burst below 1 is raised to 1", 10, 0.3, 1},
		{"+Inf burst is the largest float", 10, inf, math.MaxFloat64},
		{"burst 0 at +Inf rate is the largest float", inf, 0, math.MaxFloat64},
	}
	for _, c := range cases {
		if got := NewBucket(c.rate, c.burst, 0).Tokens(0); got != c.want {
			t.Errorf("%s: NewBucket(%v, %v).Tokens = %v, want %v (it starts full)", c.name, c.rate, c.burst, got, c.want)
		}
	}
}

// A bucket that earns nothing passes its first burst and then nothing,
// ever; it never drains either.
func TestBucketNoRate(t *testing.T) {
	hour := int64(time.Hour)
	for _, rate := range []float64{0, -5, math.NaN(), math.Inf(-1)} {
		runBucket(t, "rate "+strconv.FormatFloat(rate, 'g', -1, 64), NewBucket(rate, 2, 0), []bucketStep{
			{"take", 0, 1, true},
			{"tokens", hour, 0, 1.0},
			{"take", hour, 1, true},
			{"take", 1000 * hour, 1, false},
			{"next", 1000 * hour, 1, Never},
			{"tokens", 1000 * hour, 0, 0.0},
		})
	}
}

// A rate of +Inf refills completely whenever the clock moves.
func TestBucketInfiniteRate(t *testing.T) {
	runBucket(t, "+Inf rate burst 2", NewBucket(math.Inf(1), 2, 0), []bucketStep{
		{"take", 0, 1, true},
		{"take", 0, 1, true},
		{"take", 0, 1, false}, // within one instant it holds the burst
		{"next", 0, 1, time.Duration(1)},
		{"take", 1, 2, true},
		{"tokens", 1, 0, 0.0},
		{"tokens", 2, 0, 2.0},
	})
	b := NewBucket(math.Inf(1), 0, 0)
	for i := range 1000 {
		if !b.Take(0, 1e300) {
			t.Fatalf("step %d: NewBucket(+Inf, 0).Take refused", i)
		}
	}
}

// Asking for nothing gets it, and asking for what can never be had is
// refused, both without touching the bucket.
func TestBucketBadN(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	runBucket(t, "bad n", NewBucket(1, 2, 0), []bucketStep{
		{"take", 0, 0, true},
		{"take", 0, -1, true},
		{"take", 0, math.Inf(-1), true},
		{"tokens", 0, 0, 2.0}, // nothing taken
		{"take", 0, nan, false},
		{"take", 0, inf, false},
		{"take", 0, 2.5, false},
		{"tokens", 0, 0, 2.0},
		{"next", 0, 0, time.Duration(0)},
		{"next", 0, -1, time.Duration(0)},
		{"next", 0, nan, Never},
		{"next", 0, inf, Never},
		{"next", 0, 2.5, Never},
		{"take", 0, 2, true}, // exactly the burst is fine
	})
}

// The zero Bucket holds nothing and earns nothing, and does not panic.
func TestBucketZero(t *testing.T) {
	var b Bucket
	runBucket(t, "zero Bucket", &b, []bucketStep{
		{"take", 0, 1, false},
		{"take", 1 << 60, 1, false},
		{"take", 0, 0, true},
		{"next", 0, 1, Never},
		{"next", 0, 0, time.Duration(0)},
		{"tokens", 1 << 60, 0, 0.0},
	})
}

// A rate too small for its wait to fit in a Duration answers Never rather
// than an overflowed conversion (golang/go#71154); one that just fits
// answers a wait that Take agrees with.
func TestBucketTinyRate(t *testing.T) {
	runBucket(t, "1e-300/s", NewBucket(1e-300, 1, 0), []bucketStep{
		{"take", 0, 1, true},
		{"next", 0, 1, Never},
		{"next", 0, 0.5, Never},
		{"take", math.MaxInt64, 1, false},
	})
	runBucket(t, "1e-10/s", NewBucket(1e-10, 1, 0), []bucketStep{
		{"take", 0, 1, true},
		{"next", 0, 1, Never}, // 1e19 ns is past MaxInt64
	})
	// One token in 1e9 seconds: 1e18 ns, where a float64 no longer tells
	// single nanoseconds apart. Next is still what Take agrees with.
	b := NewBucket(1e-9, 1, 0)
	b.Take(0, 1)
	d := b.Next(0, 1)
	if d < 1e18-256 || d > 1e18 {
		t.Fatalf("1e-9/s: Next = %d ns, want 1e18 within a float64's resolution", d)
	}
	if early := *b; early.Take(1e18-1e9, 1) {
		t.Errorf("1e-9/s: Take a second early allowed")
	}
	if !b.Take(int64(d), 1) {
		t.Errorf("1e-9/s: Take at Next (%d ns) refused", d)
	}
}

// Instants at the ends of the clock neither overflow nor wrap.
func TestBucketClockEnds(t *testing.T) {
	const end = math.MaxInt64
	runBucket(t, "at the end", NewBucket(1, 1, end-10), []bucketStep{
		{"take", end - 10, 1, true},
		{"next", end - 10, 1, Never}, // the token comes after the clock ends
		{"take", end, 1, false},
	})
	runBucket(t, "across the whole clock", NewBucket(1, 1, math.MinInt64), []bucketStep{
		{"take", math.MinInt64, 1, true},
		{"next", math.MinInt64, 1, time.Second},
		{"tokens", end, 0, 1.0},
		{"take", end, 1, true},
		{"next", math.MinInt64, 1, Never}, // from the far past: too long to say
		{"next", end, 1, Never},
	})
}

// Next's answer is exact: a Take then succeeds, and a nanosecond before it
// does not, across rates that do not divide a second evenly.
func TestBucketNextIsExact(t *testing.T) {
	for _, rate := range []float64{3, 7, 1e-3, 1e6, 333.3, 1e9 / 7} {
		for _, n := range []float64{0.1, 1, 1.7} {
			b := NewBucket(rate, 2, 12345)
			b.Take(12345, 2)
			d := b.Next(12345, n)
			late, early := *b, *b
			if !late.Take(12345+int64(d), n) {
				t.Errorf("rate %v n %v: Take at Next (%v) refused", rate, n, d)
			}
			if d > 0 && early.Take(12345+int64(d)-1, n) {
				t.Errorf("rate %v n %v: Take a nanosecond before Next (%v) allowed", rate, n, d)
			}
		}
	}
	// States where the rounded quotient lands a nanosecond past the first
	// moment that works.
	for _, c := range []struct{ rate, tokens, n float64 }{
		{62.5, 0.92, 2.75}, {704, 0.42, 0.97}, {17.6, 0.42, 0.53}, {5.5, 0.42, 0.53},
	} {
		b := &Bucket{perNs: c.rate / 1e9, burst: 3, tokens: c.tokens}
		d := b.Next(0, c.n)
		late, early := *b, *b
		if !late.Take(int64(d), c.n) || early.Take(int64(d)-1, c.n) {
			t.Errorf("rate %v holding %v: Next(%v) = %d ns is not the first nanosecond that works", c.rate, c.tokens, c.n, d)
		}
	}
}
