package policy

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// The calls a bucket table makes; see step.
type (
	bucketStep = step[*Bucket]

	// bucketTake is Take(at, n), which must answer want; a refused Take
	// must leave the bucket as it was.
	bucketTake struct {
		at   int64
		n    float64
		want bool
	}
	// bucketNext is Next(at, n), which must answer want.
	bucketNext struct {
		at   int64
		n    float64
		want time.Duration
	}
	// bucketTokens is Tokens(at), which must answer want and change nothing.
	bucketTokens struct {
		at   int64
		want float64
	}
)

func (s bucketTake) run(t *testing.T, b *Bucket, where string) {
	t.Helper()
	before := *b
	got := b.Take(s.at, s.n)
	if !got && *b != before {
		t.Errorf("%s: refused Take(%d, %v) changed the bucket from %+v to %+v", where, s.at, s.n, before, *b)
	}
	if got != s.want {
		t.Errorf("%s: Take(%d, %v) = %v, want %v", where, s.at, s.n, got, s.want)
	}
}

func (s bucketNext) run(t *testing.T, b *Bucket, where string) {
	t.Helper()
	if got := b.Next(s.at, s.n); got != s.want {
		t.Errorf("%s: Next(%d, %v) = %v, want %v", where, s.at, s.n, got, s.want)
	}
}

func (s bucketTokens) run(t *testing.T, b *Bucket, where string) {
	t.Helper()
	before := *b
	got := b.Tokens(s.at)
	if *b != before {
		t.Errorf("%s: Tokens(%d) changed the bucket", where, s.at)
	}
	if got != s.want {
		t.Errorf("%s: Tokens(%d) = %v, want %v", where, s.at, got, s.want)
	}
}

func TestBucket(t *testing.T) {
	const ms = time.Millisecond
	const t0 = int64(1_000_000_000)
	t1 := t0 + int64(99*ms)
	t2 := t0 + int64(100*ms)
	t3 := t0 + int64(10*time.Second)
	// Ten a second, two at once.
	play(t, "10/s burst 2", NewBucket(10, 2, t0), []bucketStep{
		bucketTokens{t0, 2.0}, // starts full
		bucketTake{t0, 1, true},
		bucketTake{t0, 1, true},
		bucketTake{t0, 1, false}, // the burst is spent
		bucketTokens{t0, 0.0},
		bucketNext{t0, 1, 100 * ms}, // a token every 100ms
		bucketNext{t0, 2, 200 * ms},
		bucketTake{t1, 1, false}, // a nanosecond early is still early
		bucketNext{t1, 1, 1 * ms},
		bucketTake{t2, 1, true},
		bucketTokens{t2, 0.0},
		bucketTokens{t3, 2.0}, // a quiet ten seconds fills it, no more
		bucketNext{t3, 2, 0},
		bucketTake{t3, 2, true},
		bucketTake{t3, 3, false}, // more than the burst, ever
		bucketNext{t3, 3, Never},
	})
	// Fractions of a token, taken and earned.
	play(t, "2/s burst 1, halves", NewBucket(2, 1, t0), []bucketStep{
		bucketTake{t0, 0.5, true},
		bucketTake{t0, 0.5, true},
		bucketTake{t0, 0.5, false},
		bucketNext{t0, 0.5, 250 * ms},
		bucketTake{t0 + int64(250*ms), 0.5, true},
		bucketTokens{t0 + int64(500*ms), 0.5},
	})
}

// A clock that goes backwards adds nothing, and does not move the bucket's
// reference time back either (golang/go#56287: in x/time/rate, alternating
// before and after the last call minted tokens).
func TestBucketClockBackwards(t *testing.T) {
	s := int64(time.Second)
	play(t, "1/s burst 1", NewBucket(1, 1, 10*s), []bucketStep{
		bucketTake{10 * s, 1, true},
		bucketTake{5 * s, 1, false}, // earlier: nothing earned
		bucketTokens{5 * s, 0.0},
		bucketNext{5 * s, 1, 6 * time.Second}, // until 11s, counted from 5s
		bucketTake{10*s + s/2, 1, false},      // only half a token since 10s
		bucketTokens{10*s + s/2, 0.5},
		bucketTake{11 * s, 1, true},
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
		play(t, "rate "+strconv.FormatFloat(rate, 'g', -1, 64), NewBucket(rate, 2, 0), []bucketStep{
			bucketTake{0, 1, true},
			bucketTokens{hour, 1.0},
			bucketTake{hour, 1, true},
			bucketTake{1000 * hour, 1, false},
			bucketNext{1000 * hour, 1, Never},
			bucketTokens{1000 * hour, 0.0},
		})
	}
}

// A rate of +Inf refills completely whenever the clock moves.
func TestBucketInfiniteRate(t *testing.T) {
	play(t, "+Inf rate burst 2", NewBucket(math.Inf(1), 2, 0), []bucketStep{
		bucketTake{0, 1, true},
		bucketTake{0, 1, true},
		bucketTake{0, 1, false}, // within one instant it holds the burst
		bucketNext{0, 1, time.Nanosecond},
		bucketTake{1, 2, true},
		bucketTokens{1, 0.0},
		bucketTokens{2, 2.0},
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
	play(t, "bad n", NewBucket(1, 2, 0), []bucketStep{
		bucketTake{0, 0, true},
		bucketTake{0, -1, true},
		bucketTake{0, math.Inf(-1), true},
		bucketTokens{0, 2.0}, // nothing taken
		bucketTake{0, nan, false},
		bucketTake{0, inf, false},
		bucketTake{0, 2.5, false},
		bucketTokens{0, 2.0},
		bucketNext{0, 0, 0},
		bucketNext{0, -1, 0},
		bucketNext{0, nan, Never},
		bucketNext{0, inf, Never},
		bucketNext{0, 2.5, Never},
		bucketTake{0, 2, true}, // exactly the burst is fine
	})
}

// The zero Bucket holds nothing and earns nothing, and does not panic.
func TestBucketZero(t *testing.T) {
	var b Bucket
	play(t, "zero Bucket", &b, []bucketStep{
		bucketTake{0, 1, false},
		bucketTake{1 << 60, 1, false},
		bucketTake{0, 0, true},
		bucketNext{0, 1, Never},
		bucketNext{0, 0, 0},
		bucketTokens{1 << 60, 0.0},
	})
}

// A rate too small for its wait to fit in a Duration answers Never rather
// than an overflowed conversion (golang/go#71154); one that just fits
// answers a wait that Take agrees with.
func TestBucketTinyRate(t *testing.T) {
	play(t, "1e-300/s", NewBucket(1e-300, 1, 0), []bucketStep{
		bucketTake{0, 1, true},
		bucketNext{0, 1, Never},
		bucketNext{0, 0.5, Never},
		bucketTake{math.MaxInt64, 1, false},
	})
	play(t, "1e-10/s", NewBucket(1e-10, 1, 0), []bucketStep{
		bucketTake{0, 1, true},
		bucketNext{0, 1, Never}, // 1e19 ns is past MaxInt64
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
	play(t, "at the end", NewBucket(1, 1, end-10), []bucketStep{
		bucketTake{end - 10, 1, true},
		bucketNext{end - 10, 1, Never}, // the token comes after the clock ends
		bucketTake{end, 1, false},
	})
	play(t, "across the whole clock", NewBucket(1, 1, math.MinInt64), []bucketStep{
		bucketTake{math.MinInt64, 1, true},
		bucketNext{math.MinInt64, 1, time.Second},
		bucketTokens{end, 1.0},
		bucketTake{end, 1, true},
		bucketNext{math.MinInt64, 1, Never}, // from the far past: too long to say
		bucketNext{end, 1, Never},
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
