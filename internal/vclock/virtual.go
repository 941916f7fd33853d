package vclock

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Epoch is where NewVirtual starts: 2026-01-01T00:00:00Z in Unix
// nanoseconds. A fixed start keeps logs and failure messages the same from
// run to run, and a date near the present reads naturally in them.
const Epoch int64 = 1767225600 * int64(time.Second)

// Virtual is a Clock whose time moves only when Advance, AdvanceTo or
// AdvanceNext is called. Timers live in a heap ordered by the instant they
// fire (the deadline, plus any lateness), then by registration, and fire on
// the goroutine that advances time, with Now set to that instant and no lock
// held, so a callback may read the clock, register or stop timers, and send
// to the code under test.
//
// The race every virtual clock has to close: a test advances time while the
// code under test, on another goroutine, has not yet registered the timer the
// test means to fire, and the timer is silently skipped. WaitPending and
// WaitRegistered let the test wait for the registration first.
//
// By default a timer fires exactly at its deadline, which no real timer
// does. Code that stamps a wake-up with the instant it was due, rather than
// the clock's reading when it woke, passes every on-time test and loses the
// lateness for good on a real clock. WithLateness and WithRandomLateness
// make every timer fire late, so a test can run both ways.
//
// A Virtual is safe for concurrent use. Time never goes back, even with two
// goroutines advancing at once, but the ordering promises of Advance hold
// only for one advancing goroutine at a time, which is how tests use it. The
// zero Virtual is usable, starts at 0 and fires timers on time; NewVirtual
// starts at Epoch.
type Virtual struct {
	mu      sync.Mutex
	now     int64
	seq     uint64        // registrations so far; also the tie-break order
	timers  []*timer      // min-heap by (at, seq): the pending timers
	changed chan struct{} // closed on the next registration; nil while nobody waits
	late    time.Duration // every timer's lateness, or the most of a random one
	draw    *rand.Rand    // draws random lateness; nil for a fixed one
	after   []*func()     // run after each fired timer's f; replaced, never changed in place
}

var _ Clock = (*Virtual)(nil)

// Option configures a Virtual made by NewVirtual.
type Option func(*Virtual)

// WithLateness makes every timer fire d after its deadline: a timer due at
// t fires when the clock reaches t+d, and Now reads t+d while its f runs.
// A d of zero or less is on time, the default. Pending, Next and AdvanceNext
// see the firing instant, so a test that steps with WaitPending and
// AdvanceNext runs unchanged; one that advances by exact spans must add d.
//
// To run code on an engine whose timers are late:
//
//	clock := vclock.NewVirtual(vclock.WithLateness(2 * time.Millisecond))
//	eng := engine.New(engine.WithClock(clock))
func WithLateness(d time.Duration) Option {
	return func(v *Virtual) { v.late, v.draw = max(d, 0), nil }
}

// WithRandomLateness makes each timer fire late by its own draw, uniform
// in [0, most], from a generator seeded with seed: the same registrations
// in the same order get the same lateness in every run. A most of zero or
// less is on time. Otherwise it behaves as WithLateness.
func WithRandomLateness(most time.Duration, seed uint64) Option {
	return func(v *Virtual) {
		v.late, v.draw = max(most, 0), nil
		if most > 0 {
			v.draw = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		}
	}
}

// NewVirtual returns a Virtual clock reading Epoch, with no timers, firing
// them on time unless an option says otherwise.
func NewVirtual(opts ...Option) *Virtual {
	v := &Virtual{now: Epoch}
	for _, o := range opts {
		o(v)
	}
	return v
}

// lateness is how late the next timer fires; v.mu is held.
func (v *Virtual) lateness() time.Duration {
	if v.draw != nil {
		return time.Duration(v.draw.Int64N(int64(v.late) + 1))
	}
	return v.late
}

// Now is the clock's current time. While a timer's f runs, it is the
// instant that timer fired: its deadline, plus its lateness if the clock
// has one.
func (v *Virtual) Now() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// AfterFunc registers f to run once the clock reaches Now()+d (plus the
// clock's lateness, if it has one). A d of zero or less is due at Now() and
// fires on the next Advance, AdvanceTo or AdvanceNext, even Advance(0), if
// the clock fires on time: nothing fires from inside AfterFunc itself, so a
// caller holding its own lock cannot deadlock on its callback. A deadline
// past the largest int64 is clamped to it. A nil f is allowed and does
// nothing when it fires.
//
// The cost is one small allocation and a heap insert; no goroutine is started.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	if d < 0 {
		d = 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	t := &timer{v: v, at: later(later(v.now, d), v.lateness()), seq: v.seq, f: f}
	v.push(t)
	if v.changed != nil {
		close(v.changed)
		v.changed = nil
	}
	return t
}

// Advance moves the clock forward by d, firing every timer due by then in
// deadline order (ties in registration order), each with Now set to its
// deadline (plus lateness) while its f runs. A timer registered by a
// callback fires in the same Advance if it falls due within it. The hooks
// of AfterEach run after each callback. Afterwards Now is the start plus
// d (clamped at the largest int64). A negative d does nothing: time never
// goes back, and no timer fires.
func (v *Virtual) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	v.mu.Lock()
	end := later(v.now, d)
	v.mu.Unlock()
	v.advanceTo(end)
}

// AdvanceTo moves the clock forward to t, as Advance(t - Now()). A t before
// Now does nothing; t equal to Now fires what is due now.
func (v *Virtual) AdvanceTo(t int64) {
	v.mu.Lock()
	past := t < v.now
	v.mu.Unlock()
	if !past {
		v.advanceTo(t)
	}
}

// AdvanceNext moves the clock to the earliest pending deadline and fires
// every timer due then, in registration order. It reports how far the clock
// moved, and false (moving nothing) if no timer was pending.
func (v *Virtual) AdvanceNext() (time.Duration, bool) {
	v.mu.Lock()
	if len(v.timers) == 0 {
		v.mu.Unlock()
		return 0, false
	}
	at := v.timers[0].at
	d := time.Duration(at - v.now)
	v.mu.Unlock()
	v.advanceTo(at)
	return d, true
}

// Next reports how long until the earliest pending timer fires (its
// deadline plus its lateness), and false if none is pending. A test reads it to check that the code under test
// scheduled its wake-up at the right deadline.
func (v *Virtual) Next() (time.Duration, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.timers) == 0 {
		return 0, false
	}
	return time.Duration(v.timers[0].at - v.now), true
}

// Pending counts the timers registered and not yet fired or stopped. A timer
// stops being pending just before its f runs.
func (v *Virtual) Pending() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.timers)
}

// Registered counts every AfterFunc call so far, whether its timer is still
// pending, fired or stopped. Unlike Pending it only grows, so it still
// shows a registration when the code under test replaces one timer by
// another.
func (v *Virtual) Registered() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return int(v.seq)
}

// WaitPending blocks until at least n timers are pending, or ctx is done. It
// is how a test waits for code on another goroutine to register the timer it
// is about to fire; without it, an Advance could run first and skip it. It
// wakes on each registration, not by polling. An n of zero or less returns
// nil at once. When ctx ends first the error matches ctx.Err() under
// errors.Is.
func (v *Virtual) WaitPending(ctx context.Context, n int) error {
	return v.wait(ctx, "pending timers", n, func() int { return len(v.timers) })
}

// WaitRegistered blocks until AfterFunc has been called at least n times in
// all, or ctx is done. Take r := Registered() before poking the code under
// test, then WaitRegistered(ctx, r+1): this catches a timer that replaces
// another (Stop, then AfterFunc), which leaves Pending unchanged. Errors as
// for WaitPending.
func (v *Virtual) WaitRegistered(ctx context.Context, n int) error {
	return v.wait(ctx, "registrations", n, func() int { return int(v.seq) })
}

// wait blocks until count() >= n, woken by each registration. count runs
// with v.mu held.
func (v *Virtual) wait(ctx context.Context, what string, n int, count func() int) error {
	for {
		v.mu.Lock()
		have := count()
		if have >= n {
			v.mu.Unlock()
			return nil
		}
		if v.changed == nil {
			v.changed = make(chan struct{})
		}
		changed := v.changed
		v.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("vclock: waiting for %d %s, have %d: %w", n, what, have, ctx.Err())
		}
	}
}

// advanceTo fires every timer due by end, one at a time and without the
// lock, then leaves the clock at end. Time only moves forward.
func (v *Virtual) advanceTo(end int64) {
	v.mu.Lock()
	for len(v.timers) > 0 && v.timers[0].at <= end {
		t := v.remove(0)
		if t.at > v.now {
			v.now = t.at
		}
		f := t.f
		t.f = nil
		after := v.after
		v.mu.Unlock()
		if f != nil {
			f()
		}
		for _, a := range after {
			(*a)()
		}
		v.mu.Lock()
	}
	if end > v.now {
		v.now = end
	}
	v.mu.Unlock()
}

// AfterEach has f run after each timer's function, on the goroutine that
// moves the clock, with no lock held, until remove is called. An engine
// uses it to let its actors run what a timer sent them before the clock
// moves on, so the timers they set in answer fire in the same move.
func (v *Virtual) AfterEach(f func()) (remove func()) {
	h := &f
	v.mu.Lock()
	v.after = append(slices.Clip(v.after), h)
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if i := slices.Index(v.after, h); i >= 0 {
			v.after = slices.Delete(slices.Clone(v.after), i, i+1)
		}
	}
}

// Inside is embedded in a clock that wraps a Virtual, for Of to find it
// (moontest.Clock embeds it under an unexported alias, so its users see
// nothing of it). Make one with Within.
type Inside struct{ v *Virtual }

// Within is an Inside for v.
func Within(v *Virtual) Inside { return Inside{v} }

func (i Inside) virtual() *Virtual { return i.v }

// Of is the Virtual that c is or wraps (by embedding an Inside), or nil.
func Of(c Clock) *Virtual {
	switch c := c.(type) {
	case *Virtual:
		return c
	case interface{ virtual() *Virtual }:
		return c.virtual()
	}
	return nil
}

// later is now+d, clamped at the largest int64 instead of wrapping into the
// past.
func later(now int64, d time.Duration) int64 {
	if int64(d) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(d)
}

// StopAll stops every pending timer, as Stop on each would, and reports how
// many it stopped: for a test's cleanup, so nothing it left pending can fire
// later.
func (v *Virtual) StopAll() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := len(v.timers)
	for _, t := range v.timers {
		t.index, t.f = -1, nil
	}
	clear(v.timers)
	v.timers = v.timers[:0]
	return n
}

// timer is one AfterFunc registration.
type timer struct {
	v     *Virtual
	at    int64  // when it fires: the deadline plus the lateness
	seq   uint64 // registration order, for ties
	f     func()
	index int // position in v.timers; -1 once fired or stopped
}

// Stop removes the timer if it is still pending. It is safe to call from any
// goroutine, at any time, including from f itself (which reports false).
func (t *timer) Stop() bool {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if t.index < 0 {
		return false
	}
	v.remove(t.index)
	t.f = nil
	return true
}

// before orders the heap: earlier deadline first, then earlier registration.
func (t *timer) before(u *timer) bool {
	return t.at < u.at || (t.at == u.at && t.seq < u.seq)
}

// The heap is written out rather than taken from container/heap so that the
// hot path makes no interface calls; v.mu is held for all of these.

func (v *Virtual) push(t *timer) {
	t.index = len(v.timers)
	v.timers = append(v.timers, t)
	v.up(t.index)
}

// remove takes the timer at i out of the heap and marks it not pending.
func (v *Virtual) remove(i int) *timer {
	h := v.timers
	last := len(h) - 1
	t := h[i]
	if i != last {
		h[i] = h[last]
		h[i].index = i
	}
	h[last] = nil // let the fired timer and its closure be collected
	v.timers = h[:last]
	if i != last && !v.down(i) {
		v.up(i)
	}
	t.index = -1
	return t
}

func (v *Virtual) up(i int) {
	h := v.timers
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			return
		}
		v.swap(i, p)
		i = p
	}
}

// down sifts the timer at i toward the leaves and reports whether it moved.
func (v *Virtual) down(i int) bool {
	h := v.timers
	start := i
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].before(h[c]) {
			c = r
		}
		if !h[c].before(h[i]) {
			break
		}
		v.swap(i, c)
		i = c
	}
	return i > start
}

func (v *Virtual) swap(i, j int) {
	h := v.timers
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
