package policy

import (
	"math"
	"time"
)

// budgetSlots is how many slots a Budget's window is counted in: a count
// ages out a twentieth of the window at a time (half a second at the
// default ten seconds), in a fixed ring that never allocates.
const budgetSlots = 20

// The Budget's defaults. The ratio is gRFC A6's tokenRatio of 0.1. The
// window is Finagle's ten-second TTL. Finagle lets 20% retry plus 10 a
// second; a tenth keeps a total outage at 1.1 attempts per request, and a
// floor of one a second still lets a quiet client retry now and then.
const (
	DefaultBudgetRatio  = 0.1
	DefaultBudgetMin    = 1.0
	DefaultBudgetWindow = 10 * time.Second
)

// Budget is a retry budget: it lets retries and hedges through while they
// stay a small share of the first attempts. A backend that fails then sees
// at most that share more traffic, whatever each caller's Attempts says.
// Without it, every request becomes Attempts requests in an outage.
//
// First counts first attempts. Spend asks for one retry or hedge and
// counts it if allowed. A Spend at now is allowed only if, counting it,
//
//	spent ≤ max(ratio × firsts, minPerSecond × window)
//
// where spent is the retries and hedges of the last window and firsts are
// the first attempts of the last window. The floor lets a quiet client
// retry a little. Above minPerSecond/ratio first attempts a second, the
// ratio alone applies, so in a long outage attempts per request tend to
// 1 + ratio at most.
//
// The window is counted in twenty slots. Firsts are counted over the
// newest twenty, which lie inside the window ending now. Spends are
// counted over those and the slot before, which cover it. So the bound
// holds for the true window ending at each Spend, and a slot's width only
// ever refuses more.
//
// Time is the caller's clock in nanoseconds; only differences matter. A
// clock that goes backwards is read as standing still. The zero Budget is
// ready to use with the defaults. A Budget is not safe for concurrent use.
type Budget struct {
	ratio  float64 // share of firsts that may be spent; +Inf: all
	floor  float64 // spends the window allows whatever the firsts
	slots  slots[purse]
	firsts float64 // over the newest budgetSlots slots
	spent  float64 // over the whole ring
}

// purse is one slot's counts. Counts are floats so that no number of
// calls can wrap one below zero.
type purse struct{ firsts, spent float64 }

// NewBudget returns a budget that has counted nothing.
//   - ratio is the share of first attempts that may be spent on retries
//     and hedges. Below zero or NaN is 0: only the floor. +Inf allows
//     everything once one first attempt is counted.
//   - minPerSecond is the floor's rate. Below zero or NaN is 0. The floor
//     is minPerSecond × window spends per window.
//   - window of zero or less is DefaultBudgetWindow. It is counted in
//     twenty slots, each rounded up to a whole nanosecond and at least
//     two: Window says what it came to.
func NewBudget(ratio, minPerSecond float64, window time.Duration) *Budget {
	b := &Budget{}
	b.set(ratio, minPerSecond, window)
	return b
}

// set applies the settings as NewBudget reads them.
func (b *Budget) set(ratio, minPerSecond float64, window time.Duration) {
	if !(ratio >= 0) { // < 0, NaN
		ratio = 0
	}
	if !(minPerSecond >= 0) {
		minPerSecond = 0
	}
	if window <= 0 {
		window = DefaultBudgetWindow
	}
	// Slots of one nanosecond could not count the last instant of the
	// clock, so the shortest window is 40 ns.
	window = max(window, 2*budgetSlots)
	b.ratio = ratio
	b.floor = minPerSecond * window.Seconds() // +Inf for an infinite rate
	// One slot more than the window: see Budget on why spends are counted
	// over it.
	b.slots.cut(window, budgetSlots)
	b.slots.ring = append(b.slots.ring, purse{})
}

// Window is the span the budget counts over.
func (b *Budget) Window() time.Duration {
	b.init()
	return time.Duration(b.slots.width * budgetSlots)
}

// First counts n first attempts at now. An n of zero or less counts
// nothing.
func (b *Budget) First(now int64, n int) {
	b.advance(now)
	if n <= 0 {
		return
	}
	b.slots.newest().firsts += float64(n)
	b.firsts += float64(n)
}

// Spend asks for one retry or hedge at now. It reports whether the budget
// allows it, and counts it if so. A refused Spend changes nothing.
func (b *Budget) Spend(now int64) bool {
	b.advance(now)
	if b.spent+1 > b.allowed() {
		return false
	}
	b.slots.newest().spent++
	b.spent++
	return true
}

// Spent counts n spends at now without asking: spends a Lease allowed,
// made since. An n of zero or less counts nothing.
func (b *Budget) Spent(now int64, n int) {
	b.advance(now)
	if n <= 0 {
		return
	}
	b.slots.newest().spent += float64(n)
	b.spent += float64(n)
}

// Lease is how many Spends the budget allows from now until until, the
// instant its next slot begins: Left at now. Until then no count leaves
// the window, and first attempts only raise the share. So up to n spends
// made before until keep the bound, if each is counted with Spent by the
// next time the budget is asked. It changes nothing.
func (b *Budget) Lease(now int64) (n float64, until int64) {
	n = b.Left(now)
	w := b.slots.width
	if b.slots.head >= math.MaxInt64/w-1 { // the end of the clock
		return n, math.MaxInt64
	}
	return n, (b.slots.head + 1) * w
}

// Left is how many more Spends the budget would allow at now: a whole
// number, never below zero, +Inf when nothing bounds them. It changes
// nothing.
func (b *Budget) Left(now int64) float64 {
	b.advance(now)
	return math.Floor(max(b.allowed()-b.spent, 0))
}

// Counts are the first attempts and the spends the budget holds at now:
// firsts over the window, spends over the window and the slot before it.
func (b *Budget) Counts(now int64) (firsts, spent float64) {
	b.advance(now)
	return b.firsts, b.spent
}

// allowed is how many spends the counts held allow.
func (b *Budget) allowed() float64 {
	share := 0.0
	if b.firsts > 0 { // skip 0 × Inf, which is NaN
		share = b.ratio * b.firsts
	}
	return max(share, b.floor)
}

// init gives the zero Budget its defaults.
func (b *Budget) init() {
	if b.slots.width == 0 {
		b.set(DefaultBudgetRatio, DefaultBudgetMin, DefaultBudgetWindow)
	}
}

// advance ages out the slots that have left the ring by now (see slots).
func (b *Budget) advance(now int64) {
	b.init()
	if _, turned := b.slots.advance(now); turned {
		b.sum()
	}
}

// sum works out the sums again once a slot has aged out: spends over the
// whole ring, firsts over all but its oldest slot.
func (b *Budget) sum() {
	b.firsts, b.spent = 0, 0
	oldest := b.slots.place(b.slots.head - budgetSlots)
	for i, p := range b.slots.ring {
		b.spent += p.spent
		if i != oldest {
			b.firsts += p.firsts
		}
	}
}
