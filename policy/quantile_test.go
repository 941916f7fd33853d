package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestQuantileBuckets: every bucket's value is counted in that bucket
// again, buckets grow with the duration, and the value At reports for any
// duration is within 1/32 of it (exact below 16 ns).
func TestQuantileBuckets(t *testing.T) {
	for i := range QuantileBuckets {
		if got := QuantileBucket(QuantileValue(i)); got != i {
			t.Fatalf("QuantileBucket(QuantileValue(%d) = %v) = %d", i, QuantileValue(i), got)
		}
		if i > 0 && QuantileValue(i) <= QuantileValue(i-1) {
			t.Fatalf("QuantileValue(%d) = %v, not above bucket %d's %v", i, QuantileValue(i), i-1, QuantileValue(i-1))
		}
	}
	check := func(d time.Duration) {
		t.Helper()
		got := QuantileValue(QuantileBucket(d))
		if d < 16 && got != d {
			t.Fatalf("%v is reported as %v, want it exact", d, got)
		}
		if err := math.Abs(float64(got-d)) / float64(d); err > 1.0/32 {
			t.Fatalf("%v is reported as %v: %.4f off, want at most 1/32", d, got, err)
		}
	}
	for d := time.Duration(1); d < 1<<16; d++ {
		check(d)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		check(time.Duration(r.Int64N(1 << 41)))
	}
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 0},
		{0, 0},
		{15, 15},
		{16, 16},
		{math.MaxInt64, QuantileBuckets - 1},
		{1 << 41, QuantileBuckets - 1},
		{1<<41 - 1, QuantileBuckets - 1},
	} {
		if got := QuantileBucket(c.d); got != c.want {
			t.Errorf("QuantileBucket(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	if QuantileValue(-1) != 0 || QuantileValue(QuantileBuckets) != QuantileValue(QuantileBuckets-1) {
		t.Errorf("QuantileValue out of range: %v, %v", QuantileValue(-1), QuantileValue(QuantileBuckets))
	}
}

// quantileStep is one call on a Quantile: add (n samples of d) or at (p,
// want d and ok within 1/32).
type quantileStep struct {
	call string
	at   int64
	d    time.Duration
	n    int
	p    float64
	ok   bool
}

func TestQuantile(t *testing.T) {
	ms := func(d int64) int64 { return t0 + d*int64(time.Millisecond) }
	tests := []struct {
		name  string
		q     *Quantile
		steps []quantileStep
	}{
		{"too few samples", NewQuantile(time.Second), []quantileStep{
			{call: "at", at: ms(0), p: 0.5, ok: false},
			{call: "add", at: ms(0), d: time.Millisecond, n: 19},
			{call: "at", at: ms(0), p: 0.5, ok: false},
			{call: "add", at: ms(0), d: time.Millisecond, n: 1},
			{call: "at", at: ms(0), p: 0.5, d: time.Millisecond, ok: true},
			// p 0.95 of 20 has one sample at or above it: too few.
			{call: "at", at: ms(0), p: 0.95, ok: false},
			{call: "add", at: ms(0), d: 100 * time.Millisecond, n: 80},
			{call: "at", at: ms(0), p: 0.95, d: 100 * time.Millisecond, ok: true},
			{call: "at", at: ms(0), p: 0.2, d: time.Millisecond, ok: true},
			{call: "at", at: ms(0), p: 0.21, d: 100 * time.Millisecond, ok: true},
		}},
		{"the ends of p", NewQuantile(time.Second), []quantileStep{
			{call: "add", at: ms(0), d: time.Millisecond, n: 10},
			{call: "add", at: ms(0), d: time.Second, n: 10},
			{call: "at", at: ms(0), p: -1, d: time.Millisecond, ok: true},
			{call: "at", at: ms(0), p: 0, d: time.Millisecond, ok: true},
			{call: "at", at: ms(0), p: 1, d: time.Second, ok: true},
			{call: "at", at: ms(0), p: 2, d: time.Second, ok: true},
			{call: "at", at: ms(0), p: math.Inf(1), d: time.Second, ok: true},
			{call: "at", at: ms(0), p: math.NaN(), ok: false},
		}},
		{"samples leave with the window", NewQuantile(800 * time.Millisecond), []quantileStep{
			{call: "add", at: ms(0), d: time.Second, n: 50},
			{call: "add", at: ms(400), d: time.Millisecond, n: 50},
			{call: "at", at: ms(700), p: 0.9, d: time.Second, ok: true},
			{call: "at", at: ms(799), p: 0.9, d: time.Second, ok: true},
			// ms(0)'s samples have left: the slow ones are forgotten.
			{call: "at", at: ms(800), p: 0.9, d: time.Millisecond, ok: true},
			{call: "at", at: ms(1199), p: 0.9, d: time.Millisecond, ok: true},
			{call: "at", at: ms(1200), p: 0.9, ok: false},
		}},
		{"a clock that goes back counts at the latest instant", NewQuantile(800 * time.Millisecond), []quantileStep{
			{call: "add", at: ms(700), d: time.Millisecond, n: 50},
			{call: "add", at: ms(0), d: time.Millisecond, n: 50},
			{call: "at", at: ms(1499), p: 0.5, d: time.Millisecond, ok: true},
			{call: "at", at: ms(1500), p: 0.5, ok: false},
		}},
		{"bad samples", NewQuantile(-1), []quantileStep{
			{call: "add", at: ms(0), d: -time.Second, n: 20},
			{call: "add", at: ms(0), d: time.Second, n: 0},
			{call: "add", at: ms(0), d: time.Second, n: -3},
			{call: "at", at: ms(0), p: 1, d: 0, ok: true},
			{call: "add", at: ms(0), d: math.MaxInt64, n: 20},
			{call: "at", at: ms(0), p: 1, d: QuantileValue(QuantileBuckets - 1), ok: true},
		}},
		{"the zero Quantile counts ten seconds", &Quantile{}, []quantileStep{
			// Its slots are 1.25s long; ms(250) begins one.
			{call: "add", at: ms(250), d: time.Millisecond, n: 20},
			{call: "at", at: ms(10249), p: 0.5, d: time.Millisecond, ok: true},
			{call: "at", at: ms(10250), p: 0.5, ok: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, s := range tt.steps {
				switch s.call {
				case "add":
					tt.q.AddN(s.d, s.n, s.at)
				case "at":
					d, ok := tt.q.At(s.p, s.at)
					if ok != s.ok || math.Abs(float64(d-s.d)) > float64(s.d)/32 {
						t.Fatalf("step %d: At(%v) = %v, %v; want %v, %v", i, s.p, d, ok, s.d, s.ok)
					}
				default:
					t.Fatalf("step %d: unknown call %q", i, s.call)
				}
			}
		})
	}
}

// TestQuantileCount: a bucket full for its slot counts no more there,
// rather than wrap to a few.
func TestQuantileCount(t *testing.T) {
	q := NewQuantile(time.Second)
	q.AddN(time.Millisecond, math.MaxInt, t0)
	q.AddN(time.Millisecond, math.MaxInt, t0)
	if got := q.Samples(t0); got != math.MaxUint32 {
		t.Fatalf("Samples = %d, want %d", got, uint64(math.MaxUint32))
	}
	if d, ok := q.At(0.5, t0); !ok || d != QuantileValue(QuantileBucket(time.Millisecond)) {
		t.Fatalf("At(0.5) = %v, %v", d, ok)
	}
}

// FuzzQuantile holds At to the nearest-rank quantile of the samples the
// window holds, worked out from the samples themselves: within 1/32 of the
// sample at that rank, and false exactly when too few are held.
func FuzzQuantile(f *testing.F) {
	f.Add(int64(time.Second), 0.95, []byte{1, 0, 0, 10, 20, 0, 0, 200, 0xf0, 0x10, 0, 3})
	f.Add(int64(0), 0.5, []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add(int64(17), 1.0, []byte{5, 0xff, 0x7f, 1, 5, 0x01, 0x80, 2, 5, 0, 0, 3})
	f.Add(int64(time.Hour), -0.1, []byte{9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, window int64, p float64, ops []byte) {
		q := NewQuantile(time.Duration(window))
		type sample struct {
			at int64
			d  time.Duration
		}
		var held []sample
		now := t0
		for i := 0; i+3 < len(ops); i += 4 {
			op := ops[i : i+4]
			now += int64(op[0]) * q.slots.width / 4 // forward only: the window's edge is then exact below
			d := time.Duration(uint64(op[1]) | uint64(op[2])<<8 | uint64(op[3])<<16)
			d <<= op[0] % 24
			q.Add(d, now)
			held = append(held, sample{now, d})
		}
		// The window holds the samples of the newest eight slots.
		head := floorDiv(now, q.slots.width)
		var ds []time.Duration
		for _, s := range held {
			if floorDiv(s.at, q.slots.width) > head-quantileSlots {
				ds = append(ds, s.d)
			}
		}
		slices.Sort(ds)
		got, ok := q.At(p, now)
		if math.IsNaN(p) {
			if ok {
				t.Fatalf("At(NaN) = %v, true", got)
			}
			return
		}
		pp := min(max(p, 0), 1)
		n := len(ds)
		enough := n >= QuantileMinSamples && (pp == 1 || float64(n)*(1-pp) >= QuantileTailSamples-1e-9)
		if ok != enough {
			t.Fatalf("At(%v) with %d samples: ok = %v, want %v", p, n, ok, enough)
		}
		if !ok {
			return
		}
		rank := max(int(math.Ceil(pp*float64(n))), 1)
		want := ds[rank-1]
		if want >= 1<<41 {
			return // the last bucket holds everything from here up
		}
		if math.Abs(float64(got-want)) > float64(want)/32 {
			t.Fatalf("At(%v) of %d samples = %v, want %v within 1/32", p, n, got, want)
		}
	})
}

// TestQuantileKeepsRank: where samples crowd, the quantile lands on the
// sample at its rank, not on the middle of its bucket. A thousand
// latencies spread evenly from 1.6 ms to 2.4 ms are 8 µs to a percent:
// the middle of a bucket, 33 µs or 65 µs wide here, could be off by two
// or four percent of them, and a hedge delay taken from it would hedge
// that many more requests or fewer. The ranks asked for fall in buckets
// the samples fill.
func TestQuantileKeepsRank(t *testing.T) {
	q := NewQuantile(time.Second)
	const n = 1000
	for i := range n {
		q.Add(1600*time.Microsecond+time.Duration(i)*800*time.Nanosecond, 0)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration // the sample at the nearest rank
	}{
		{0.5, 1600*time.Microsecond + 499*800*time.Nanosecond},
		{0.9, 1600*time.Microsecond + 899*800*time.Nanosecond},
		{0.75, 1600*time.Microsecond + 749*800*time.Nanosecond},
	} {
		d, ok := q.At(c.p, 0)
		if !ok || math.Abs(float64(d-c.want)) > float64(c.want)/1000 {
			t.Errorf("At(%v) = %v, %v; want %v within 0.1%%", c.p, d, ok, c.want)
		}
	}
}

// TestQuantileHedgeShare: a hedge sent past At(p) goes to the share 1−p
// of requests slower than it, within a fifth of a percent. Each
// distribution is drawn from a fixed seed, and the share is counted over
// the same samples. In the first, a percent of requests is 11 µs wide at
// p 0.97: a quote on the edge or the middle of its bucket, 65 µs wide
// there, would be off by several percent.
//
// Where samples stop inside a bucket, At reads them as spread over all
// of it and quotes up to a bucket's width late: fewer requests are
// hedged, never more. The last case shows it.
func TestQuantileHedgeShare(t *testing.T) {
	const n = 20_000
	slow := func(r *rand.Rand, d time.Duration) time.Duration {
		if r.IntN(200) < 3 {
			return 20 * d
		}
		return d
	}
	dists := []struct {
		name string
		draw func(r *rand.Rand) time.Duration
		// sharp is a distribution that ends inside a bucket: only fewer
		// hedges than 1−p are allowed.
		sharp bool
	}{
		{"2ms ±20%, a network's 300µs on average, 3 in 200 twenty times slower", func(r *rand.Rand) time.Duration {
			d := float64(2*time.Millisecond)*(0.8+0.4*r.Float64()) + r.ExpFloat64()*float64(300*time.Microsecond)
			return slow(r, time.Duration(d))
		}, false},
		{"exponential, mean 1ms", func(r *rand.Rand) time.Duration {
			return time.Duration(r.ExpFloat64() * float64(time.Millisecond))
		}, false},
		{"log-normal, median 5ms", func(r *rand.Rand) time.Duration {
			return time.Duration(math.Exp(r.NormFloat64()*0.5) * float64(5*time.Millisecond))
		}, false},
		{"two modes, 1ms and 30ms, each with a normal spread", func(r *rand.Rand) time.Duration {
			if r.IntN(10) == 0 {
				return time.Duration((30 + 2*r.NormFloat64()) * float64(time.Millisecond))
			}
			return time.Duration((1 + 0.1*r.NormFloat64()) * float64(time.Millisecond))
		}, false},
		{"2ms ±20% and nothing else, 3 in 200 twenty times slower", func(r *rand.Rand) time.Duration {
			return slow(r, time.Duration(float64(2*time.Millisecond)*(0.8+0.4*r.Float64())))
		}, true},
	}
	for _, dist := range dists {
		t.Run(dist.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			q := NewQuantile(time.Second)
			samples := make([]time.Duration, n)
			for i := range samples {
				samples[i] = dist.draw(r)
				q.Add(samples[i], t0)
			}
			for _, p := range []float64{0.5, 0.9, 0.95, 0.97, 0.99} {
				d, ok := q.At(p, t0)
				if !ok {
					t.Fatalf("At(%v) of %d samples is false", p, n)
				}
				above := 0
				for _, s := range samples {
					if s > d {
						above++
					}
				}
				share := float64(above) / n
				low := 1 - p - 0.002
				if dist.sharp {
					low = 0
				}
				if share < low || share > 1-p+0.002 {
					t.Errorf("At(%v) = %v: %.2f%% of samples above it, want %.2f%% ± 0.2", p, d, 100*share, 100*(1-p))
				}
			}
		})
	}
}
