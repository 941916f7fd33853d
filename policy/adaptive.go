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
	// It is also a floor while latency fits the callers' deadlines (see
	// Adaptive).
	Start int
	// Healthy is a latency that never counts as congestion: while calls
	// finish within it on average, the limit never falls. Zero or less is
	// none.
	Healthy time.Duration
	// Window is how often the limit may change. Zero or less is 100 ms;
	// below MinAdaptiveWindow is MinAdaptiveWindow.
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

// MinAdaptiveWindow is the shortest AdaptiveConfig.Window: a shorter one
// is this. A gate reads its calls a few times a window, so a window of
// nanoseconds would keep it reading all the time.
const MinAdaptiveWindow = time.Millisecond

// The controller's constants. They are ratios of latencies, so they hold
// for a dependency answering in microseconds or in seconds.
const (
	// adaptiveSamples is the fewest finished calls a window decides on.
	adaptiveSamples = 16
	// adaptiveStretch is how many times its length a window may grow to
	// hold adaptiveSamples calls.
	adaptiveStretch = 10
	// adaptiveQueued is the latency over the baseline that counts as a
	// queue: a half. Within adaptiveClear of it the limit may grow.
	adaptiveQueued = 1.5
	adaptiveClear  = 1.1
	// adaptiveGrow is the share the limit grows by in a window, at least
	// one call.
	adaptiveGrow = 0.1
	// adaptiveKnee is what is left of the limit after the least fall.
	adaptiveKnee = 0.9
	// adaptiveFall is the most the limit falls in one window: by half.
	adaptiveFall = 0.5
	// adaptiveApart is how far apart in-flight must be in two windows
	// for their latencies to say whether latency grows with in-flight.
	adaptiveApart = 1.2
	// adaptiveStep is the least change of in-flight, as a share, against
	// which to judge how throughput follows it.
	adaptiveStep = 0.05
	// adaptiveMost is the most room: room is counted in 32 bits.
	adaptiveMost = 1 << 30
	// adaptiveProbe is how many windows in a row the limit holds, in use
	// with latency over the baseline and no queue, before it falls a
	// tenth to see whether the latency is the dependency's own.
	adaptiveProbe = 10
	// adaptiveFlat is the most latency may grow between two windows that
	// show it does not follow in-flight: a queue still draining after a
	// fall shows more.
	adaptiveFlat = 0.1
	// adaptiveSettle is how many windows the limit holds after it moved,
	// once its baseline is sure, and how many must pass after a move for
	// a window to be evidence.
	adaptiveSettle = 1
	// adaptiveRoom is how much longer than the window's latency the
	// shortest deadline must be for the latency to fit it: a latency may
	// grow by a quarter before the limit falls.
	adaptiveRoom = 1.25
	// adaptiveHistory is how many windows are remembered.
	adaptiveHistory = 8
)

// Adaptive is a concurrency limit that follows the latency and throughput
// of the calls it lets through. It is Vegas's idea (latency over a
// baseline is a queue) with a second signal, whether throughput follows
// in-flight, and a baseline learnt again on evidence, so a long slowdown
// of the dependency does not wear the limit down.
//
// Each window gives a latency r (the mean of the calls that finished), an
// in-flight I (the mean of what InFlight was told, or else Little's law)
// and a throughput X = I/r. The baseline B follows the lowest latencies
// seen (a window under it moves it halfway down) until evidence moves it
// up. The limit is in use when a caller found no
// room in the window, or I was half the limit or more. In each window:
//
//   - The limit falls when it is in use and r passes B by a half: to
//     limit × 1.5·B/r, the share that was not queue, or by a tenth if
//     that is less. A fall is at most a half.
//   - The limit grows by a tenth (at least one) when a caller found no
//     room, r is within a tenth of B, throughput followed in-flight, and
//     throughput rose at least as much as latency. So an unused limit does
//     not grow, nor does one past the knee, where more calls at once bring
//     no more throughput.
//   - A latency within Healthy never makes the limit fall.
//   - A fall weighs the queue against the time callers have. With D the
//     shortest deadline told to Deadline in the window, the limit falls
//     no lower than limit × D/(1.25·r), the share at which r and a
//     quarter would fit within D, and no lower than Start while they
//     fit. A queue that fits the callers' deadlines costs none of them,
//     and keeps the dependency busy. So a burst from zero does not cut
//     the limit to the knee and past it, and a queue that outgrows the
//     deadlines cuts only as far as they need. A window told no deadline
//     has no floor.
//
// The baseline is sure once a window shows in-flight moving by more than
// 5 % with throughput following, at that latency: the dependency is below
// its knee there. Until then the limit, in use, also falls by a tenth
// when r passes B by a tenth or throughput did not follow in-flight: it
// looks for the knee from above, and once below it takes back the higher
// limit of the two windows before. Once the baseline is sure, the window
// after a move holds, since its calls were let in before the move; and a
// limit in use that holds for ten windows with r over B by a tenth falls
// a tenth at a time, to learn where that latency comes from.
//
// Drift. The last eight windows are remembered. Two windows that each
// followed a window without a move, with in-flight a fifth or more apart,
// both with latency over B by a tenth, between which latency grew by less
// than a tenth and less than a third as much as in-flight, show that the
// latency does not come from a queue: a queue grows with the calls in it,
// and one still draining after a fall shows more. The baseline then
// becomes the lower of their latencies, and the next window that shows no
// queue by it puts the limit back to what it was in the window with more
// in flight. So a dependency that slows down for ten minutes moves the
// baseline with it, at the price of a dip of a fifth of the limit each
// time its latency rises by a tenth or more, not a ratchet down to Min.
// The baseline falls at once when the dependency recovers.
//
// A pure latency rise never raises the limit: a window with the same
// throughput as the last and a higher latency leaves it no higher.
//
// Adaptive reads no clock: time is an argument. Sample, InFlight,
// Deadline, Full and Update allocate nothing. The zero Adaptive is not
// usable; build one with NewAdaptive. It is not safe for concurrent use: one actor owns it.
type Adaptive struct {
	lo, hi  float64 // the limit's bounds
	limit   float64
	start   float64 // the limit before any call; a floor while deadlines allow
	healthy float64 // ns; 0 is none
	window  int64   // ns

	// The window being filled.
	from  int64 // when it began
	n     int64 // calls finished in it
	sum   int64 // their latencies, ns
	full  bool  // a caller found no room in it
	seen  int64 // in-flight counts given by InFlight
	held  int64 // their sum
	least int64 // the shortest time to a deadline a caller had, ns; 0 none

	// What the windows so far have shown.
	base     float64 // the baseline latency, ns; 0 until a window is seen
	rtt      float64 // the last window's latency, ns
	inflight float64 // the last window's in-flight
	put      float64 // the last window's throughput, calls a ns

	// The last windows, the latest at last, for telling a queue from
	// the dependency's own latency.
	history [adaptiveHistory]adaptiveWindow
	last    int
	restore float64 // the limit to go back to once no queue shows; 0 none
	steady  int     // windows in a row held in use between growing and falling
	since   int     // windows decided since the limit last moved
	probing bool    // falling a tenth a time to learn whether latency follows
	// sure is whether the baseline has been seen to be no queue: a window
	// whose throughput followed in-flight at that latency.
	sure bool
}

// NewAdaptive is a limit read from c as AdaptiveConfig says, whose first
// window begins at now.
func NewAdaptive(c AdaptiveConfig, now int64) *Adaptive {
	a := &Adaptive{from: now, since: adaptiveSettle}
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
	a.start = a.limit
	if c.Healthy > 0 {
		a.healthy = float64(c.Healthy)
	}
	a.window = int64(c.Window)
	if a.window <= 0 {
		a.window = int64(DefaultAdaptiveWindow)
	}
	a.window = max(a.window, int64(MinAdaptiveWindow))
	return a
}

// Limit is how many may be inside at once now.
func (a *Adaptive) Limit() int { return int(a.limit) }

// Baseline is the latency the limit takes as no queue: 0 until a window
// has been seen.
func (a *Adaptive) Baseline() time.Duration { return time.Duration(a.base) }

// Latency is the last window's mean latency. Before the first window is
// decided it is the mean of the calls finished so far, and 0 before any.
func (a *Adaptive) Latency() time.Duration {
	if a.rtt == 0 && a.n > 0 {
		return time.Duration(a.sum / a.n)
	}
	return time.Duration(a.rtt)
}

// Sample counts n calls that finished, whose latencies add up to sum.
// Counts of zero or less, and negative sums, are ignored.
func (a *Adaptive) Sample(n int64, sum time.Duration) {
	if n <= 0 || sum < 0 {
		return
	}
	a.n = satAdd(a.n, n)
	a.sum = satAdd(a.sum, int64(sum))
}

// InFlight notes that k calls are inside now. The window's in-flight is
// the mean of what it is told; a window told nothing takes the calls'
// total time over its length instead (Little's law). Counts below zero are
// ignored.
func (a *Adaptive) InFlight(k int) {
	if k < 0 {
		return
	}
	a.seen++
	a.held = satAdd(a.held, int64(k))
}

// Deadline notes that a caller asked for room with left to go before its
// deadline. The window keeps the shortest, and the limit falls no further
// than that deadline needs (see Adaptive). Spans of zero or less are
// ignored. A gate tells it of the callers who ask its
// owner for room, not of those who find room lent ahead.
func (a *Adaptive) Deadline(left time.Duration) {
	if left > 0 && (a.least == 0 || int64(left) < a.least) {
		a.least = int64(left)
	}
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
	n, sum, full, dt, least := a.n, a.sum, a.full, now-a.from, a.least
	inflight := float64(sum) / float64(dt)
	if a.seen > 0 {
		inflight = float64(a.held) / float64(a.seen)
	}
	a.from, a.n, a.sum, a.full, a.seen, a.held, a.least = now, 0, 0, false, 0, 0, 0
	if n == 0 || sum == 0 || inflight <= 0 {
		return false
	}
	old, settled := a.limit, a.since >= adaptiveSettle
	a.decide(float64(sum)/float64(n), inflight, full, float64(least))
	if a.limit != old {
		a.since = 0
	} else if a.since < adaptiveSettle {
		a.since++
	}
	a.learn(float64(sum)/float64(n), inflight, old, settled)
	return a.Limit() != int(old)
}

// adaptiveWindow is what one window showed.
type adaptiveWindow struct {
	inflight, rtt, limit float64
	settled              bool // the limit had not moved for adaptiveSettle windows at its start
}

// decide moves the limit for a window with latency r (ns), in-flight i
// and a shortest deadline least (ns, 0 none).
func (a *Adaptive) decide(r, i float64, full bool, least float64) {
	put := i / r
	if a.base == 0 {
		a.base = r
	}
	base := math.Min(a.base, r)
	healthy := a.healthy > 0 && r <= a.healthy
	// A limit far above what is in use is not what lets a queue build.
	used := full || i >= a.limit/2

	// How throughput followed in-flight since the last window. Below the
	// knee it moves with in-flight; past it, it stands still.
	saturated, keptUp := false, true
	if a.inflight > 0 {
		di, dx := i/a.inflight-1, put/a.put-1
		saturated = (di > adaptiveStep && dx < di/3) ||
			(di < -adaptiveStep && dx > di*2/3)
		keptUp = put/a.put >= r/a.rtt
	}
	queued := r > base*adaptiveQueued
	// The windows after the limit moved still hold calls let in before,
	// and a queue at the dependency takes a while to drain: once the
	// baseline is sure, the limit waits for windows that show what the
	// move did.
	settling := a.since < adaptiveSettle && a.sure

	target := a.limit
	switch {
	case settling:
		// Hold.
	case used && !healthy && (queued || r > base*adaptiveClear && (!a.sure || a.probing || a.steady >= adaptiveProbe) || !a.sure && saturated):
		a.probing = a.sure && !queued
		// At least a tenth: a fall too small to move in-flight would
		// teach nothing about where the latency comes from.
		target = a.limit * adaptiveKnee
		if queued {
			target = math.Min(target, a.limit*base*adaptiveQueued/r)
		}
		target = math.Max(target, a.limit*adaptiveFall)
		a.restore = 0
	case !saturated && keptUp && (r <= base*adaptiveClear || healthy):
		switch {
		case a.restore > a.limit:
			target = a.restore
		case full:
			target = a.limit + math.Max(1, a.limit*adaptiveGrow)
		}
		a.restore = 0
	}
	if least > 0 {
		// A queue that fits the callers' deadlines costs none of them
		// and keeps the dependency busy: no fall below Start while the
		// latency fits, nor below the share of the limit at which it
		// would.
		floor := math.Min(a.start, a.limit*least/(r*adaptiveRoom))
		target = math.Max(target, math.Min(floor, a.limit))
	}
	switch {
	case target != a.limit:
		a.steady = 0
	case used && r > base*adaptiveClear:
		a.steady++
	default:
		a.steady = 0
	}
	if r <= base*adaptiveClear {
		a.probing = false
	}
	a.limit = math.Min(math.Max(target, a.lo), a.hi)
	if math.IsNaN(a.limit) { // a NaN never stays
		a.limit = a.lo
	}
}

// learn updates the baseline from a window with latency r and in-flight i
// under limit, for the windows after it.
func (a *Adaptive) learn(r, i, limit float64, settled bool) {
	if a.inflight > 0 && r <= a.base*adaptiveClear {
		// Throughput followed in-flight at the baseline's latency: below
		// the knee, so the baseline is no queue.
		di, dx := i/a.inflight-1, (i/r)/a.put-1
		if math.Abs(di) > adaptiveStep && dx/di >= 2.0/3 {
			if !a.sure && di < 0 {
				// Looking for the knee from above, the limit fell below
				// it, a window or two ago, as throughput lags in-flight:
				// the limit of the two windows before was no queue.
				before := a.history[(a.last+adaptiveHistory-1)%adaptiveHistory]
				a.restore = math.Max(a.restore, math.Max(a.history[a.last].limit, before.limit))
			}
			a.sure = true
		}
	}
	if r < a.base {
		// Halfway down: one lucky window of a noisy dependency does not
		// make the baseline, a few do.
		a.base = (a.base + r) / 2
	}
	// Two settled windows with in-flight a fifth or more apart, whose
	// latency moved by less than a tenth and less than a third as much,
	// show the latency does not come from a queue: the dependency's own
	// latency is the lower one. The limit of the window with more in
	// flight did no harm, and comes back.
	if a.sure && r > a.base*adaptiveClear {
		now := adaptiveWindow{i, r, limit, settled}
		for _, h := range a.history {
			lo, hi := h, now
			if lo.inflight > hi.inflight {
				lo, hi = hi, lo
			}
			if !lo.settled || !hi.settled || lo.inflight <= 0 || hi.inflight < lo.inflight*adaptiveApart ||
				lo.rtt <= a.base*adaptiveClear || hi.rtt <= a.base*adaptiveClear {
				continue
			}
			grew := hi.rtt/lo.rtt - 1
			if grew > -adaptiveStep && grew < adaptiveFlat && grew < (hi.inflight/lo.inflight-1)/3 {
				a.base, a.sure, a.probing = math.Min(h.rtt, r), true, false
				a.restore = math.Max(a.restore, hi.limit)
			}
		}
	}
	a.last = (a.last + 1) % adaptiveHistory
	a.history[a.last] = adaptiveWindow{i, r, limit, settled}
	a.rtt, a.inflight, a.put = r, i, i/r
}

// satAdd is a+b, held at the largest int64 rather than wrapping.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
