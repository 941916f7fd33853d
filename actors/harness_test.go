package actors

import (
	"context"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
)

// harness is what every test here starts from: an engine on a test clock
// of its own, moontest's, as a user's tests would build it. t0 is the
// clock's start; requests are stamped with fixed instants after it.
type harness struct {
	t     testing.TB
	clock *moontest.Clock
	e     *engine.Engine
	t0    int64
}

// newHarness builds a harness on a clock built with opts, torn down when t
// ends.
func newHarness(t testing.TB, opts ...moontest.Option) *harness {
	t.Helper()
	clock := moontest.NewClock(t, opts...)
	return &harness{t: t, clock: clock, e: newEngine(t, clock), t0: clock.Now()}
}

// newEngine is an engine on clock with no heat sampling, so that no timer
// fires but the actors' own, shut down when t ends; the shutdown must
// find nothing left running.
func newEngine(t testing.TB, clock engine.Clock) *engine.Engine {
	t.Helper()
	e := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

// lateClocks are the ways a timer fires in these tests: on time, as the
// test clock does by default, late by a fixed span, and late by a seeded
// random one, up to most. Real timers are always late; an actor that
// stamps a wake-up with the instant it was due instead of the instant it
// woke loses each timer's lateness for good, and only the late rows show
// it.
var lateClocks = []struct {
	name string
	opts []moontest.Option
	most time.Duration // the latest any timer fires
}{
	{"on time", nil, 0},
	{"2ms late", []moontest.Option{moontest.WithLateness(2 * time.Millisecond)}, 2 * time.Millisecond},
	{"8ms late", []moontest.Option{moontest.WithLateness(8 * time.Millisecond)}, 8 * time.Millisecond},
	{"up to 5ms late", []moontest.Option{moontest.WithRandomLateness(5*time.Millisecond, 9)}, 5 * time.Millisecond},
}

// at is the instant d after t0.
func (r *harness) at(d time.Duration) int64 { return r.t0 + int64(d) }

// ask sends an Allow without Wait and returns its answer.
func ask(ref *engine.Ref, key string, now int64, n float64) Permit {
	a := &Allow{Now: now, Key: key, N: n, Reply: make(chan Permit, 1)}
	ref.Send(a)
	return <-a.Reply
}

// park sends an Allow with Wait and does not wait for its answer.
func park(ref *engine.Ref, key string, now int64, n float64, deadline int64) *Allow {
	a := &Allow{Now: now, Key: key, N: n, Wait: true, Deadline: deadline, Reply: make(chan Permit, 1)}
	ref.Send(a)
	return a
}

// left asks what is left for key. Its answer also means that every message
// sent before it has been handled: the tests use it as a barrier.
func left(ref *engine.Ref, key string, now int64) float64 {
	m := &Left{Now: now, Key: key, Reply: make(chan Permit, 1)}
	ref.Send(m)
	return (<-m.Reply).Left
}

// unanswered fails unless a has had no answer yet; call it after a barrier.
func unanswered(t testing.TB, step string, a *Allow) {
	t.Helper()
	select {
	case p := <-a.Reply:
		t.Fatalf("%s: answered %+v, want still parked", step, p)
	default:
	}
}

// answer waits for a's answer.
func answer(a *Allow) Permit { return <-a.Reply }

// advance moves the virtual clock by d, one timer at a time, with a
// barrier before each step: every Tick sent so far has then been handled
// and the timer it asked for in turn is registered, so no Advance can race
// past a timer the actor is about to ask for, and each Tick carries exactly
// its instant.
func (r *harness) advance(ref *engine.Ref, d time.Duration) {
	r.t.Helper()
	end := r.clock.Now() + int64(d)
	for range 100_000 {
		left(ref, "", r.clock.Now())
		now := r.clock.Now()
		if next, ok := r.clock.Next(); ok && now+int64(next) <= end {
			r.clock.AdvanceNext()
			continue
		}
		if now < end {
			r.clock.AdvanceTo(end)
			continue
		}
		return
	}
	r.t.Fatal("the actor keeps asking for timers")
}
