// Package moontest is what a user's tests need to drive a moonpool engine's
// time: a virtual clock, built per test and cleaned up with it, that moves
// only when the test says so.
//
// Hand it to the engine with client.WithClock (or engine.WithClock) and an
// hour of pool traffic, or a thirty-second outage with five hundred callers,
// runs in milliseconds and the same way every time:
//
//	clock := moontest.NewClock(t)
//	eng := client.NewEngine(client.WithClock(clock))
//	...
//	clock.Advance(30 * time.Minute) // every idle connection past Keep is retired now
//
// A timer fires exactly at its deadline unless the clock is built with
// WithLateness or WithRandomLateness, which make every timer fire late as a
// busy machine's do; code that is right only when timers are on time fails
// then, so a test worth its salt runs both ways.
package moontest

import (
	"context"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// Epoch is where a Clock starts: 2026-01-01T00:00:00Z in Unix nanoseconds,
// so readings in logs and failure messages are the same from run to run.
const Epoch = vclock.Epoch

// Clock is a virtual clock for one test: Now reads Epoch until the test
// moves it, and timers fire on the goroutine that moves it, in deadline
// order, with Now set to their instant. It satisfies engine.Clock. A Clock
// is safe for concurrent use; the zero Clock is not usable: build one with
// NewClock.
type Clock struct {
	v *vclock.Virtual
	inside
}

// inside lets an engine find the virtual clock behind a Clock, to run an
// actor's Tick before the clock moves on (see Advance).
type inside = vclock.Inside

var _ engine.Clock = (*Clock)(nil)

// Option configures a Clock made by NewClock.
type Option func(*[]vclock.Option)

// WithLateness makes every timer fire d after its deadline, as timers on a
// busy machine do; Now reads the late instant while the timer's function
// runs. Zero or less is on time, the default.
func WithLateness(d time.Duration) Option {
	return func(o *[]vclock.Option) { *o = append(*o, vclock.WithLateness(d)) }
}

// WithRandomLateness makes each timer fire late by its own draw, uniform in
// [0, most], from a source seeded by seed, so a failing run can be replayed.
func WithRandomLateness(most time.Duration, seed uint64) Option {
	return func(o *[]vclock.Option) { *o = append(*o, vclock.WithRandomLateness(most, seed)) }
}

// NewClock returns a clock for t, reading Epoch. When t ends, the clock
// stops firing: any timer still pending is dropped, so a test that forgot
// one leaves no goroutine or callback behind. A nil t, for an Example, has
// no end to clean up after. It does not block.
func NewClock(t testing.TB, opts ...Option) *Clock {
	var vo []vclock.Option
	for _, o := range opts {
		if o != nil {
			o(&vo)
		}
	}
	v := vclock.NewVirtual(vo...)
	c := &Clock{v: v, inside: vclock.Within(v)}
	if t != nil {
		t.Cleanup(c.stop)
	}
	return c
}

// stop drops every pending timer.
func (c *Clock) stop() { c.v.StopAll() }

// Now is the clock's reading in nanoseconds. It never goes back.
func (c *Clock) Now() int64 { return c.v.Now() }

// AfterFunc runs f once the clock has moved d on (d <= 0: at the next move
// of the clock, even by nothing), on the goroutine that moves it. It does
// not block; Stop on the returned timer cancels it.
func (c *Clock) AfterFunc(d time.Duration, f func()) engine.Timer { return c.v.AfterFunc(d, f) }

// Advance moves the clock on by d, firing every timer due by then in
// deadline order; it blocks while those timers' functions run, and while
// an engine's actors run the Ticks those timers sent them. So a timer an
// actor sets in answer to one that fired, and that falls due within d,
// fires in the same Advance, even while other goroutines keep the actor
// busy. It waits at most a second of real time for each Tick (see
// engine.Ref.Fire). A d of zero or less fires what is due now.
func (c *Clock) Advance(d time.Duration) { c.v.Advance(max(d, 0)) }

// AdvanceTo moves the clock to instant t (as read by Now), as Advance does.
// A t in the past fires what is due now and moves nothing.
func (c *Clock) AdvanceTo(t int64) { c.v.AdvanceTo(max(t, c.v.Now())) }

// AdvanceNext moves the clock to the next pending timer and fires it (and
// any due with it), answering how far the clock moved; ok is false, and
// nothing moves, when no timer is pending.
func (c *Clock) AdvanceNext() (d time.Duration, ok bool) { return c.v.AdvanceNext() }

// Next says how long until the next pending timer fires; ok is false when
// none is pending. It moves nothing.
func (c *Clock) Next() (d time.Duration, ok bool) { return c.v.Next() }

// Pending counts the timers registered and not yet fired or stopped.
func (c *Clock) Pending() int { return c.v.Pending() }

// WaitPending blocks until at least n timers are pending, or ctx is done,
// when it returns an error matching ctx's. It closes the race every virtual
// clock has: code on another goroutine that has not yet asked for the timer
// the test is about to fire by advancing.
func (c *Clock) WaitPending(ctx context.Context, n int) error { return c.v.WaitPending(ctx, n) }

// FastForward fires every timer as soon as it is set, moving the clock to
// it, on a goroutine of its own, until stop is called; stop returns once
// that goroutine has. For code that sleeps on the clock (Retry, a Wait) in
// an Example or a test that cares about the order of events and the
// instants they happen at, not about stepping through them by hand.
func (c *Clock) FastForward() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.v.WaitPending(ctx, 1) == nil {
			c.v.AdvanceNext()
		}
	}()
	return func() { cancel(); <-done }
}
