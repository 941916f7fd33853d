package policy

import (
	"math"
	"time"
)

// AdaptiveConfig sets an Adaptive limit's numbers. The zero AdaptiveConfig
// is the defaults: room from 1 to 1,000, starting at 20, updated every
// 100 ms, with no latency that is always healthy.
type AdaptiveConfig struct {
	// Min is the least room. Zero or less is 1.
	Min int
	// Max is the most room. Zero or less is 1,000. A Max under Min is Min,
	// and neither goes past 1<<30.
	Max int
	// Start is the room before any call has finished. Zero or less is 20
	// (failsafe-go's and Netflix's starting limit), held within Min and Max.
	Start int
	// Healthy is a latency that never counts as congestion: while calls
	// finish within it on average, the limit never falls. Zero or less is
	// none.
	Healthy time.Duration
	// Window is how often the limit may change. Zero or less is 100 ms.
	// A window holding fewer than 16 finished calls is extended, up to ten
	// times its length, so a quiet gate decides on enough of them.
	Window time.Duration
}

// The defaults of an AdaptiveConfig.
const (
	DefaultAdaptiveMin    = 1
	DefaultAdaptiveMax    = 1000
	DefaultAdaptiveStart  = 20
	DefaultAdaptiveWindow = 100 * time.Millisecond
)

// The controller's constants. They are ratios of latencies, so they hold
// for a dependency answering in microseconds or in seconds.
const (
	// adaptiveSamples is the fewest finished calls a window decides on.
	adaptiveSamples = 16
	// adaptiveStretch is how many times its length a window may grow to
	// hold adaptiveSamples calls.
	adaptiveStretch = 10
	// adaptiveQueued is the latency over the baseline that counts as a
	// queue: a quarter. Below adaptiveClear of it the limit may grow.
	adaptiveQueued = 1.25
	adaptiveClear  = 1.1
	// adaptiveGrow is the share the limit grows by in a window, at least
	// one call.
	adaptiveGrow = 0.1
	// adaptiveKnee is the share the limit falls by when in-flight rose and
	// throughput did not follow.
	adaptiveKnee = 0.9
	// adaptiveFall is the most the limit falls in one window: by half.
	adaptiveFall = 0.5
	// adaptiveProbe is how far in-flight must fall after the limit fell,
	// and adaptiveStays how much of the latency must remain, for the
	// latency to count as the dependency's own rather than a queue.
	adaptiveProbe = 0.85
	adaptiveStays = 0.9
	// adaptiveTrack is how fast the baseline follows a latency inside the
	// band that is no queue, so noise does not pin it to a lucky minimum.
	adaptiveTrack = 0.05
	// adaptiveMost is the most room: room is counted in 32 bits.
	adaptiveMost = 1 << 30
	// adaptiveEpisode is how many windows a fall is remembered, waiting
	// for evidence of what caused it.
	adaptiveEpisode = 20
)

// Adaptive is a concurrency limit that follows the latency and throughput
// of the calls it lets through: Vegas's rule with a baseline that is
// learnt again on evidence, so a long slowdown of the dependency does not
// wear the limit down.
//
// Each window, the calls that finished give a latency r (their mean) and
// an in-flight I (their total time over the window's length: Little's
// law), hence a throughput I/r. The baseline B is the lowest latency
// seen. Then:
//
//   - The limit falls when r passes B by a quarter: to limit × 1.25·B/r,
//     at most by half. A queue at the dependency shows as latency growing
//     with in-flight, and this is the share of the limit that was queue.
//   - The limit falls by a tenth when in-flight rose by more than 5 %
//     since the last window and throughput rose by less than a third of
//     that. More calls at once that bring no more throughput are a queue.
//   - The limit grows by a tenth (at least one) when r is within a tenth
//     of B, throughput kept up with in-flight, and a caller found no room
//     in the window. An unused limit does not grow.
//   - A latency within Healthy never makes the limit fall.
//
// Drift: after a fall, the limit remembers the in-flight, latency and
// limit before it. If in-flight then falls by 15 % or more and latency
// stays within 90 % of what it was, the latency did not come from a queue:
// fewer calls did not make it shorter. The baseline becomes that latency,
// and the next window that is no queue by it puts the limit back to where
// it was before the fall. A queue shortens as in-flight falls, so it never
// passes this test. So a dependency that slows down for ten minutes costs
// the limit a dip of a window or two each time its latency rises by a
// quarter, not a ratchet down to Min. A baseline learnt again takes the
// latency's lowest value from then on, so it falls at once when the
// dependency recovers.
//
// The decision of one window is monotone: the same window with a higher
// latency and the same number of calls never leaves a higher limit. A
// baseline learnt again applies from the next window.
//
// Adaptive reads no clock: time is an argument. Sample, Full and Update
// allocate nothing. The zero Adaptive is not usable; build one with
// NewAdaptive. It is not safe for concurrent use: one actor owns it.
type Adaptive struct {
	lo, hi  float64 // the limit's bounds
	limit   float64
	healthy float64 // ns; 0 is none
	window  int64   // ns

	// The window being filled.
	from int64 // when it began
	n    int64 // calls finished in it
	sum  int64 // their latencies, ns
	full bool  // a caller found no room in it

	// What the windows so far have shown.
	base     float64 // the baseline latency, ns; 0 until a window is seen
	rtt      float64 // the last window's latency, ns
	inflight float64 // the last window's in-flight
	put      float64 // the last window's throughput, calls a ns

	// A fall waiting for evidence of its cause; windows is 0 when none.
	ref struct {
		windows  int
		inflight float64
		rtt      float64
		limit    float64
	}
	restore float64 // the limit to go back to once no queue shows; 0 none
}

// NewAdaptive is a limit read from c as AdaptiveConfig says, whose first
// window begins at now.
func NewAdaptive(c AdaptiveConfig, now int64) *Adaptive {
	a := &Adaptive{from: now}
	lo, hi, start := c.Min, c.Max, c.Start
	if lo <= 0 {
		lo = DefaultAdaptiveMin
	}
	if hi <= 0 {
		hi = DefaultAdaptiveMax
	}
	lo, hi = min(lo, adaptiveMost), min(max(hi, lo), adaptiveMost)
	if start <= 0 {
		start = DefaultAdaptiveStart
	}
	a.lo, a.hi = float64(lo), float64(hi)
	a.limit = min(max(float64(start), a.lo), a.hi)
	if c.Healthy > 0 {
		a.healthy = float64(c.Healthy)
	}
	a.window = int64(c.Window)
	if a.window <= 0 {
		a.window = int64(DefaultAdaptiveWindow)
	}
	return a
}

// Limit is how many may be inside at once now.
func (a *Adaptive) Limit() int { return int(a.limit) }

// Baseline is the latency the limit takes as no queue: 0 until a window
// has been seen.
func (a *Adaptive) Baseline() time.Duration { return time.Duration(a.base) }

// Latency is the last window's mean latency: 0 until a window has been
// seen.
func (a *Adaptive) Latency() time.Duration { return time.Duration(a.rtt) }

// Sample counts n calls that finished, whose latencies add up to sum.
// Counts of zero or less, and negative sums, are ignored.
func (a *Adaptive) Sample(n int64, sum time.Duration) {
	if n <= 0 || sum < 0 {
		return
	}
	a.n = satAdd(a.n, n)
	a.sum = satAdd(a.sum, int64(sum))
}

// Full notes that a caller found no room: the limit is in use, and may
// grow.
func (a *Adaptive) Full() { a.full = true }

// Due is the earliest instant at which Update may decide.
func (a *Adaptive) Due() int64 { return satAdd(a.from, a.window) }

// Update decides on the window if it is over at now, and reports whether
// the limit changed. A window is over after Window, or after up to ten
// times that if it holds fewer than 16 calls. One that ends with no call
// finished leaves everything as it was and begins again. A now before the
// window's start (a clock gone back) decides nothing.
func (a *Adaptive) Update(now int64) bool {
	if now < a.Due() {
		return false
	}
	if a.n < adaptiveSamples && now < satAdd(a.from, a.window*adaptiveStretch) {
		return false
	}
	n, sum, full, dt := a.n, a.sum, a.full, now-a.from
	a.from, a.n, a.sum, a.full = now, 0, 0, false
	if n == 0 || sum == 0 {
		return false
	}
	old := a.limit
	a.decide(float64(sum)/float64(n), float64(sum)/float64(dt), full)
	return a.Limit() != int(old)
}

// decide moves the limit for a window with latency r (ns) and in-flight i.
func (a *Adaptive) decide(r, i float64, full bool) {
	put := i / r
	if a.base == 0 {
		a.base = r
	}
	base := math.Min(a.base, r)
	healthy := a.healthy > 0 && r <= a.healthy

	// Throughput did not follow in-flight up: a queue.
	knee := a.inflight > 0 && i > a.inflight*1.05 &&
		put-a.put < a.put*(i/a.inflight-1)/3

	// A limit far above what is in use is not what lets a queue build.
	used := full || i >= a.limit/2
	target := a.limit
	switch {
	case healthy || !used:
		// Never falls.
	case r > base*adaptiveQueued || knee:
		if r > base*adaptiveQueued {
			target = a.limit * base * adaptiveQueued / r
		}
		if knee {
			target = math.Min(target, a.limit*adaptiveKnee)
		}
		target = math.Max(target, a.limit*adaptiveFall)
	}
	if target < a.limit {
		if a.ref.windows == 0 {
			a.ref.windows = adaptiveEpisode
			a.ref.inflight, a.ref.rtt, a.ref.limit = i, r, a.limit
		}
		a.restore = 0
	} else if !knee && (r <= base*adaptiveClear || healthy) {
		switch {
		case a.restore > a.limit:
			target = a.restore
		case full:
			target = a.limit + math.Max(1, a.limit*adaptiveGrow)
		}
		a.restore = 0
	}
	a.limit = math.Min(math.Max(target, a.lo), a.hi)
	if a.limit < a.lo || math.IsNaN(a.limit) { // a NaN never stays
		a.limit = a.lo
	}

	// What this window teaches, for the next.
	switch {
	case r < a.base:
		a.base = r
	case r <= a.base*adaptiveClear:
		a.base += (r - a.base) * adaptiveTrack
	}
	if a.ref.windows > 0 {
		a.ref.windows--
		switch {
		case i <= a.ref.inflight*adaptiveProbe && r >= a.ref.rtt*adaptiveStays:
			// Fewer calls, the same latency: it is the dependency's.
			a.base = r
			a.restore = a.ref.limit
			a.ref.windows = 0
		case r <= a.base*adaptiveClear:
			a.ref.windows = 0 // the queue drained: it was one
		}
	}
	a.rtt, a.inflight, a.put = r, i, put
}

// satAdd is a+b, held at the largest int64 rather than wrapping.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
