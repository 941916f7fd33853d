package policy

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestAdaptiveSteps walks a limit through windows at fixed instants: each
// step feeds one window's calls and reads the limit after.
func TestAdaptiveSteps(t *testing.T) {
	const ms = int64(time.Millisecond)
	type step struct {
		at    int64         // ms since the start
		n     int64         // calls finished
		rtt   time.Duration // each one's latency
		full  bool          // a caller found no room
		limit int           // the limit after Update
		moved bool          // Update's answer
		base  time.Duration // the baseline after, if not 0
		left  time.Duration // a caller's time to its deadline, if not 0
	}
	for _, tc := range []struct {
		name  string
		cfg   AdaptiveConfig
		steps []step
	}{
		{"grows only when full", AdaptiveConfig{}, []step{
			{at: 100, n: 20, rtt: 10 * time.Millisecond, limit: 20},
			{at: 200, n: 20, rtt: 10 * time.Millisecond, full: true, limit: 22, moved: true},
			{at: 300, n: 20, rtt: 10 * time.Millisecond, full: true, limit: 24, moved: true},
		}},
		{"not before the window ends", AdaptiveConfig{}, []step{
			{at: 99, n: 20, rtt: 10 * time.Millisecond, full: true, limit: 20},
			{at: 100, limit: 22, full: true, moved: true},
		}},
		{"a thin window stretches", AdaptiveConfig{}, []step{
			{at: 100, n: 15, rtt: 10 * time.Millisecond, full: true, limit: 20},
			{at: 999, limit: 20},
			{at: 1000, limit: 22, moved: true},
		}},
		{"an empty window decides nothing", AdaptiveConfig{}, []step{
			{at: 1000, full: true, limit: 20},
			{at: 1100, n: 20, rtt: 10 * time.Millisecond, full: true, limit: 22, moved: true},
		}},
		{"a queue: falls by the share that was queue", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			// Twice the latency, with the limit in use: 20 × 1.5/2.
			{at: 200, n: 200, rtt: 20 * time.Millisecond, full: true, limit: 15, moved: true},
		}},
		{"a queue within callers' deadlines holds at Start", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			// Twice the latency, and a quarter more fits in 25 ms.
			{at: 200, n: 200, rtt: 20 * time.Millisecond, full: true, left: 25 * time.Millisecond, limit: 20},
			// A caller with less time: the limit falls to where the
			// latency would fit, 20 × 24/25, not to 15 for the queue.
			{at: 300, n: 200, rtt: 20 * time.Millisecond, full: true, left: 24 * time.Millisecond, limit: 19, moved: true},
			// Told no deadline, it falls for the queue: 19 × 15/20.
			{at: 400, n: 200, rtt: 20 * time.Millisecond, full: true, limit: 14, moved: true},
		}},
		{"below Start, a latency that fits holds the limit", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			// Thrice the latency does not fit in 25 ms: 20 × 25/37.5,
			// not 10 for the queue.
			{at: 200, n: 200, rtt: 30 * time.Millisecond, full: true, left: 25 * time.Millisecond, limit: 13, moved: true},
			// It fits in a second: no fall.
			{at: 300, n: 200, rtt: 30 * time.Millisecond, full: true, left: time.Second, limit: 13},
			// It fits 30 ms no more: 13.3 × 30/37.5.
			{at: 400, n: 200, rtt: 30 * time.Millisecond, full: true, left: 30 * time.Millisecond, limit: 10, moved: true},
		}},
		{"falls at most by half", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			{at: 200, n: 200, rtt: 100 * time.Millisecond, full: true, limit: 10, moved: true},
		}},
		{"an unused limit does not fall", AdaptiveConfig{}, []step{
			{at: 100, n: 20, rtt: 10 * time.Millisecond, limit: 20},
			// In flight 20 × 20 ms / 100 ms = 4, under half the limit.
			{at: 200, n: 20, rtt: 20 * time.Millisecond, limit: 20},
		}},
		{"healthy latency never falls", AdaptiveConfig{Healthy: 25 * time.Millisecond}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			// Twice the latency, twice the throughput: it grows.
			{at: 200, n: 400, rtt: 20 * time.Millisecond, full: true, limit: 22, moved: true},
			// Twice the latency, the same throughput: a queue, but healthy.
			{at: 300, n: 200, rtt: 20 * time.Millisecond, full: true, limit: 22},
			// Past Healthy, a queue makes it fall: 22 × 15/30.
			{at: 400, n: 200, rtt: 30 * time.Millisecond, full: true, limit: 11, moved: true, base: 10 * time.Millisecond},
		}},
		{"throughput that does not follow in-flight is a queue", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			// In flight 20 → 22, throughput the same: a tenth off.
			{at: 200, n: 200, rtt: 11 * time.Millisecond, full: true, limit: 18, moved: true},
		}},
		{"a baseline seen to be no queue holds at the knee", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			{at: 200, n: 240, rtt: 10 * time.Millisecond, full: true, limit: 22, moved: true},
			// A tenth more in flight, no more throughput: the knee. Below
			// a queue's latency the limit neither falls nor grows.
			{at: 300, n: 240, rtt: 11 * time.Millisecond, full: true, limit: 22},
		}},
		{"below the knee, from above, the last limits come back", AdaptiveConfig{}, []step{
			{at: 100, n: 100, rtt: 20 * time.Millisecond, limit: 20},
			// A tenth fewer in flight, the same throughput, twice: past
			// the knee.
			{at: 200, n: 100, rtt: 18 * time.Millisecond, full: true, limit: 18, moved: true},
			{at: 300, n: 100, rtt: 16200 * time.Microsecond, full: true, limit: 16, moved: true},
			// A tenth fewer again, and a tenth less throughput: below the
			// knee, so the baseline is sure. Throughput lags in-flight by
			// a window, and the limit of 20 two windows ago did no harm.
			{at: 400, n: 90, rtt: 16200 * time.Microsecond, limit: 16},
			{at: 500, n: 90, rtt: 16200 * time.Microsecond, limit: 20, moved: true},
		}},
		{"the dependency's own latency is learnt", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			// A fifth more in flight, a fifth more throughput: the
			// baseline is no queue.
			{at: 200, n: 240, rtt: 10 * time.Millisecond, full: true, limit: 22, moved: true},
			// The window after a move only shows what the move did.
			{at: 300, n: 240, rtt: 10 * time.Millisecond, full: true, limit: 22},
			// Twice the latency at the same throughput: in flight 48.
			{at: 400, n: 240, rtt: 20 * time.Millisecond, full: true, limit: 16, moved: true, base: 10 * time.Millisecond},
			{at: 500, n: 144, rtt: 20 * time.Millisecond, full: true, limit: 16},
			// In flight fell to 28.8, and latency stayed: it is not a
			// queue. The limit falls once more while the baseline is
			// learnt, waits a window, then goes back to 22.
			{at: 600, n: 144, rtt: 20 * time.Millisecond, full: true, limit: 12, moved: true, base: 20 * time.Millisecond},
			{at: 700, n: 144, rtt: 20 * time.Millisecond, full: true, limit: 12},
			{at: 800, n: 144, rtt: 20 * time.Millisecond, full: true, limit: 22, moved: true},
		}},
		{"a queue still draining is no evidence", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			{at: 200, n: 240, rtt: 10 * time.Millisecond, full: true, limit: 22, moved: true},
			{at: 300, n: 240, rtt: 10 * time.Millisecond, full: true, limit: 22},
			{at: 400, n: 240, rtt: 20 * time.Millisecond, full: true, limit: 16, moved: true},
			{at: 500, n: 144, rtt: 20 * time.Millisecond, full: true, limit: 16},
			// In flight fell by two fifths and latency by a fifth only, as
			// it does while the queue of the windows before drains. Not
			// the dependency's own: the baseline stays.
			{at: 600, n: 144, rtt: 16 * time.Millisecond, full: true, limit: 14, moved: true, base: 10 * time.Millisecond},
		}},
		{"a queue that drains is no evidence", AdaptiveConfig{}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, limit: 20},
			{at: 200, n: 200, rtt: 20 * time.Millisecond, full: true, limit: 15, moved: true},
			// Fewer in flight at the same throughput, and latency falls
			// with them: a queue, still past the knee. The baseline stays.
			{at: 300, n: 200, rtt: 12 * time.Millisecond, full: true, limit: 13, moved: true, base: 10 * time.Millisecond},
		}},
		{"bounds hold", AdaptiveConfig{Min: 5, Max: 21, Start: 100}, []step{
			{at: 100, n: 200, rtt: 10 * time.Millisecond, full: true, limit: 21},
			{at: 200, n: 200, rtt: 100 * time.Millisecond, full: true, limit: 10, moved: true},
			{at: 300, n: 200, rtt: 1000 * time.Millisecond, full: true, limit: 5, moved: true},
		}},
		{"a clock gone back decides nothing", AdaptiveConfig{}, []step{
			{at: -5000, n: 200, rtt: 10 * time.Millisecond, full: true, limit: 20},
			{at: 100, limit: 22, moved: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdaptive(tc.cfg, 0)
			for i, s := range tc.steps {
				a.Sample(s.n, time.Duration(s.n)*s.rtt)
				if s.full {
					a.Full()
				}
				if s.left != 0 {
					a.Deadline(s.left)
					a.Deadline(0) // ignored
				}
				moved := a.Update(s.at * ms)
				if a.Limit() != s.limit || moved != s.moved {
					t.Fatalf("step %d (at %d ms): limit %d, moved %v; want %d, %v",
						i, s.at, a.Limit(), moved, s.limit, s.moved)
				}
				if s.base != 0 && a.Baseline() != s.base {
					t.Fatalf("step %d (at %d ms): baseline %v, want %v", i, s.at, a.Baseline(), s.base)
				}
			}
		})
	}
}

// TestAdaptiveConfigDefaults: zero and bad numbers read as the documented
// defaults and bounds.
func TestAdaptiveConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		cfg           AdaptiveConfig
		start, lo, hi int
	}{
		{AdaptiveConfig{}, 20, 1, 1000},
		{AdaptiveConfig{Min: -3, Max: -3, Start: -3}, 20, 1, 1000},
		{AdaptiveConfig{Min: 50, Max: 10}, 50, 50, 50},
		{AdaptiveConfig{Start: 5000}, 1000, 1, 1000},
		{AdaptiveConfig{Min: math.MaxInt, Max: math.MaxInt}, 1 << 30, 1 << 30, 1 << 30},
	} {
		a := NewAdaptive(tc.cfg, 0)
		if a.Limit() != tc.start || int(a.lo) != tc.lo || int(a.hi) != tc.hi {
			t.Errorf("%+v: start %d within [%v, %v], want %d within [%d, %d]",
				tc.cfg, a.Limit(), a.lo, a.hi, tc.start, tc.lo, tc.hi)
		}
		if a.window != int64(DefaultAdaptiveWindow) {
			t.Errorf("%+v: window %v, want %v", tc.cfg, time.Duration(a.window), DefaultAdaptiveWindow)
		}
	}
	for _, w := range []time.Duration{time.Nanosecond, time.Microsecond, MinAdaptiveWindow - 1} {
		if a := NewAdaptive(AdaptiveConfig{Window: w}, 0); a.window != int64(MinAdaptiveWindow) {
			t.Errorf("Window %v: window %v, want %v", w, time.Duration(a.window), MinAdaptiveWindow)
		}
	}
	if a := NewAdaptive(AdaptiveConfig{Window: MinAdaptiveWindow + 1}, 0); a.window != int64(MinAdaptiveWindow+1) {
		t.Errorf("Window %v: window %v", MinAdaptiveWindow+1, time.Duration(a.window))
	}
}

// TestAdaptiveBadSamples: samples that cannot be are ignored, and sums
// that would overflow stop at the largest.
func TestAdaptiveBadSamples(t *testing.T) {
	a := NewAdaptive(AdaptiveConfig{}, 0)
	a.Sample(-1, time.Second)
	a.Sample(5, -time.Second)
	a.Sample(0, time.Second)
	if a.n != 0 || a.sum != 0 {
		t.Fatalf("bad samples counted: n %d, sum %d", a.n, a.sum)
	}
	a.Sample(math.MaxInt64, math.MaxInt64)
	a.Sample(math.MaxInt64, math.MaxInt64)
	if a.n != math.MaxInt64 || a.sum != math.MaxInt64 {
		t.Fatalf("sums wrapped: n %d, sum %d", a.n, a.sum)
	}
	a.Full()
	a.Update(int64(time.Second))
	if l := a.Limit(); l < 1 || l > 1000 {
		t.Fatalf("limit %d out of bounds", l)
	}
}

// meanLimit runs s for d and returns the mean limit over it.
func meanLimit(s *kneeSim, d time.Duration) float64 {
	var sum float64
	var n int
	s.run(d, func() {
		sum += float64(s.a.Limit())
		n++
	})
	return sum / float64(n)
}

// goodput runs s for d and returns the calls a second finished within
// their deadlines.
func goodput(s *kneeSim, d time.Duration) float64 {
	before := s.good
	s.run(d, nil)
	return float64(s.good-before) / d.Seconds()
}

// TestAdaptiveFindsTheKnee: at twice the dependency's capacity the limit
// settles near its knee, and the gate gets almost all of the capacity
// through in time, with calls all alike or half as long or half as long
// again at random.
func TestAdaptiveFindsTheKnee(t *testing.T) {
	for _, tc := range []struct {
		knee   float64
		fifo   bool
		jitter float64
	}{{4, false, 0}, {12, false, 0}, {50, false, 0}, {4, true, 0}, {12, true, 0}, {50, true, 0}, {12, true, 0.5}, {50, false, 0.5}} {
		knee := tc.knee
		const base = 10 * time.Millisecond
		s := newKneeSim(AdaptiveConfig{}, knee, base, 2*capacity(knee, base))
		s.fifo, s.jitter = tc.fifo, tc.jitter
		s.run(5*time.Second, nil)
		mean := meanLimit(s, 5*time.Second)
		put := goodput(s, 5*time.Second)
		t.Logf("knee %v, fifo %v, jitter %v: mean limit %.1f, goodput %.0f/s of %.0f", knee, tc.fifo, tc.jitter, mean, put, capacity(knee, base))
		if mean < knee*0.9 || mean > knee*1.5+1 {
			t.Errorf("knee %v: mean limit %.1f, want within [%.1f, %.1f]", knee, mean, knee*0.9, knee*1.5+1)
		}
		if put < 0.9*capacity(knee, base) {
			t.Errorf("knee %v: goodput %.0f/s, want at least 90%% of %.0f", knee, put, capacity(knee, base))
		}
	}
}

// TestAdaptiveLoadSteps: load steps from half the capacity to three times
// it; the gate gets through what the dependency can finish in time.
func TestAdaptiveLoadSteps(t *testing.T) {
	const knee, base = 12, 10 * time.Millisecond
	c := capacity(knee, base)
	s := newKneeSim(AdaptiveConfig{}, knee, base, 0)
	for _, load := range []float64{0.5, 1, 2, 3, 0.5} {
		s.rate = func(time.Duration) float64 { return load * c }
		s.run(2*time.Second, nil) // to converge
		put := goodput(s, 5*time.Second)
		want := 0.9 * min(load, 1) * c
		t.Logf("load %v×: goodput %.0f/s, limit %d", load, put, s.a.Limit())
		if put < want {
			t.Errorf("load %v×: goodput %.0f/s, want at least %.0f", load, put, want)
		}
	}
}

// TestAdaptiveCapacityFalls: the knee falls from 12 to 4 under twice the
// first capacity; the limit follows within a second, and goodput stays
// near the new capacity.
func TestAdaptiveCapacityFalls(t *testing.T) {
	const base = 10 * time.Millisecond
	knee := 12.0
	s := newKneeSim(AdaptiveConfig{}, knee, base, 2*capacity(12, base))
	s.knee = func(time.Duration) float64 { return knee }
	s.run(5*time.Second, nil)
	knee = 4
	s.run(time.Second, nil)
	// Within half again the knee: the latency that counts as a queue.
	if mean := meanLimit(s, time.Second); mean > 7.5 {
		t.Errorf("mean limit %.1f in the second second after the knee fell to 4", mean)
	}
	mean := meanLimit(s, 5*time.Second)
	put := goodput(s, 5*time.Second)
	t.Logf("after the fall: mean limit %.1f, goodput %.0f/s", mean, put)
	if mean > 7 {
		t.Errorf("mean limit %.1f after the knee fell to 4", mean)
	}
	if put < 0.9*capacity(4, base) {
		t.Errorf("goodput %.0f/s, want at least 90%% of %.0f", put, capacity(4, base))
	}
}

// TestAdaptiveLongSlowdown: over ten minutes the dependency's latency
// doubles or triples, its knee unchanged, under steady overload. The limit
// ends within a tenth of where it began, and never wears down.
func TestAdaptiveLongSlowdown(t *testing.T) {
	for _, tc := range []struct {
		fifo     bool
		base     time.Duration
		times    float64 // the latency at the end, over the start
		load     float64 // of the first capacity
		deadline time.Duration
	}{
		{false, 10 * time.Millisecond, 3, 3, time.Second},
		{true, 10 * time.Millisecond, 3, 3, time.Second},
		{true, 20 * time.Millisecond, 2, 1.5, 100 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("fifo %v ×%v", tc.fifo, tc.times), func(t *testing.T) {
			const knee = 12
			s := newKneeSim(AdaptiveConfig{}, knee, tc.base, tc.load*capacity(knee, tc.base))
			s.fifo = tc.fifo
			s.deadline = int64(tc.deadline)
			s.run(10*time.Second, nil)
			before := meanLimit(s, 30*time.Second)
			start := s.elapsed()
			s.base = func(t time.Duration) float64 {
				f := min(float64(t-start)/float64(10*time.Minute), 1)
				return float64(tc.base) * (1 + (tc.times-1)*f)
			}
			lowest := math.Inf(1)
			s.run(10*time.Minute, func() { lowest = min(lowest, float64(s.a.Limit())) })
			after := meanLimit(s, 30*time.Second)
			t.Logf("mean limit %.1f before, %.1f after; lowest %v; baseline %v", before, after, lowest, s.a.Baseline())
			if drift := math.Abs(after-before) / before; drift > 0.1 {
				t.Errorf("limit drifted %.0f%%: %.1f before, %.1f after", drift*100, before, after)
			}
			if lowest < knee/2 {
				t.Errorf("limit fell to %v on the way", lowest)
			}
		})
	}
}

// TestAdaptiveSlowdownStep: the dependency's latency triples at once, its
// knee unchanged. The limit dips while it learns that, and is back within
// a tenth in two seconds.
func TestAdaptiveSlowdownStep(t *testing.T) {
	const knee = 12
	s := newKneeSim(AdaptiveConfig{}, knee, 10*time.Millisecond, 3*capacity(knee, 10*time.Millisecond))
	s.deadline = int64(time.Second)
	s.run(10*time.Second, nil)
	before := meanLimit(s, 10*time.Second)
	s.base = func(time.Duration) float64 { return float64(30 * time.Millisecond) }
	s.run(2*time.Second, nil)
	after := meanLimit(s, 10*time.Second)
	t.Logf("mean limit %.1f before, %.1f after", before, after)
	if drift := math.Abs(after-before) / before; drift > 0.1 {
		t.Errorf("limit moved %.0f%%: %.1f before, %.1f after", drift*100, before, after)
	}
}

// TestAdaptiveBurstFromZero: three times the capacity from a standing
// start, above the knee from the first call. The limit finds the knee
// within two seconds.
func TestAdaptiveBurstFromZero(t *testing.T) {
	const knee, base = 8, 10 * time.Millisecond
	s := newKneeSim(AdaptiveConfig{Start: 40}, knee, base, 3*capacity(knee, base))
	s.run(2*time.Second, nil)
	mean := meanLimit(s, 3*time.Second)
	t.Logf("mean limit %.1f", mean)
	if mean > knee*1.5+1 {
		t.Errorf("mean limit %.1f two seconds into a burst, knee %d", mean, knee)
	}
}

// TestAdaptiveHealthy: while calls finish within Healthy the limit never
// falls, even with a queue at the dependency.
func TestAdaptiveHealthy(t *testing.T) {
	const knee, base = 12, 10 * time.Millisecond
	s := newKneeSim(AdaptiveConfig{Healthy: 100 * time.Millisecond, Max: 30}, knee, base, 2*capacity(knee, base))
	s.healthy = true
	last := s.a.Limit()
	s.run(20*time.Second, func() {
		if l := s.a.Limit(); l < last {
			t.Fatalf("limit fell from %d to %d at %v with latency %v", last, l, s.elapsed(), s.a.Latency())
		}
		last = s.a.Limit()
	})
	if last != 30 {
		t.Errorf("limit %d, want Max 30: nothing stopped it growing", last)
	}
}

// TestAdaptiveQuietHolds: at a third of the capacity the limit is never
// full, so noise never wears it down, nor does it grow.
func TestAdaptiveQuietHolds(t *testing.T) {
	const knee, base = 12, 10 * time.Millisecond
	s := newKneeSim(AdaptiveConfig{}, knee, base, capacity(knee, base)/3)
	s.run(60*time.Second, func() {
		if l := s.a.Limit(); l != 20 {
			t.Fatalf("limit moved to %d at %v", l, s.elapsed())
		}
	})
}

// TestAdaptiveAllocatesNothing: feeding and deciding windows allocates
// nothing, as the actor calls them on every read of its stripes.
func TestAdaptiveAllocatesNothing(t *testing.T) {
	a := NewAdaptive(AdaptiveConfig{}, 0)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		a.Sample(20, 20*10*time.Millisecond)
		a.InFlight(20)
		a.Full()
		now += int64(100 * time.Millisecond)
		a.Update(now)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a window", allocs)
	}
}

// TestAdaptiveLatencyBeforeAWindow: before the first window is decided,
// Latency is the mean of the calls finished so far, so a gate can judge
// deadlines from the first calls of a burst.
func TestAdaptiveLatencyBeforeAWindow(t *testing.T) {
	a := NewAdaptive(AdaptiveConfig{}, 0)
	if l := a.Latency(); l != 0 {
		t.Fatalf("latency %v before any call", l)
	}
	a.Sample(2, 30*time.Millisecond)
	if l := a.Latency(); l != 15*time.Millisecond {
		t.Fatalf("latency %v after two calls of 30ms in all, want 15ms", l)
	}
	a.Sample(18, 18*10*time.Millisecond)
	a.Update(int64(100 * time.Millisecond))
	a.Sample(20, 20*50*time.Millisecond)
	if l := a.Latency(); l != 10500*time.Microsecond {
		t.Fatalf("latency %v after a window of 20 calls, 210ms in all, want 10.5ms", l)
	}
}

// TestAdaptiveBurstWithinDeadlines: three times the capacity from a
// standing start, with callers who wait five latencies. A queue of a few
// calls at the dependency fits their deadlines, so the limit never cuts
// below Start, and the dependency never idles. Told no deadlines, the
// limit looks for the knee and dips below it.
func TestAdaptiveBurstWithinDeadlines(t *testing.T) {
	const knee, base = 12, 20 * time.Millisecond
	for _, tell := range []bool{true, false} {
		s := newKneeSim(AdaptiveConfig{}, knee, base, 0)
		s.fifo, s.jitter, s.tell = true, 0.2, tell
		s.deadline = int64(5 * base)
		s.due = math.Inf(1) // nobody for a second
		s.run(time.Second, nil)
		s.rate = func(time.Duration) float64 { return 3 * capacity(knee, base) }
		s.due = 0
		lowest := s.a.Limit()
		before := s.good
		s.run(3*time.Second, func() { lowest = min(lowest, s.a.Limit()) })
		put := float64(s.good-before) / 3
		t.Logf("deadlines told %v: lowest limit %d, goodput %.0f/s of %.0f", tell, lowest, put, capacity(knee, base))
		if !tell {
			if lowest >= knee {
				t.Errorf("told no deadlines, the limit never went below the knee: the test shows nothing")
			}
			continue
		}
		if lowest < DefaultAdaptiveStart {
			t.Errorf("limit fell to %d, below Start %d, with latency %v within deadlines of %v", lowest, DefaultAdaptiveStart, s.a.Latency(), 5*base)
		}
		if put < 0.98*capacity(knee, base) {
			t.Errorf("goodput %.0f/s, want at least 98%% of %.0f", put, capacity(knee, base))
		}
	}
}
