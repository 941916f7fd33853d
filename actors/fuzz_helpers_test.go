package actors

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
)

// fuzzRig is one engine shared by every execution of a fuzz target, with a
// fresh virtual clock behind it for each execution. Building a protoactor
// system costs milliseconds and spawning an actor microseconds, so a fuzzer
// that built an engine per input would spend its time allocating; a fresh
// clock per input keeps each run the same whatever ran before it in the
// process. Executions in one process run one at a time.
type fuzzRig struct {
	clock swapClock
	e     *engine.Engine
}

// newFuzzRig starts the shared engine; f's cleanup shuts it down, so goleak
// finds nothing left behind.
func newFuzzRig(f *testing.F) *fuzzRig {
	r := &fuzzRig{}
	r.clock.v.Store(moontest.NewClock(nil))
	r.e = newEngine(f, &r.clock)
	return r
}

// begin starts an execution on a fresh clock reading moontest.Epoch.
func (r *fuzzRig) begin() *moontest.Clock {
	v := moontest.NewClock(nil)
	r.clock.v.Store(v)
	return v
}

// spawned stops the execution's actor when the execution ends, failed or
// not, so its timer goes and it leaves no goroutine.
func (r *fuzzRig) spawned(t *testing.T, ref *engine.Ref, err error) *engine.Ref {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.e.Stop(context.Background(), ref.Name()); err != nil {
			t.Error(err)
		}
	})
	return ref
}

// stepClock moves v to end one instant at a time, calling fired after each
// instant's timers have run. fired settles the actor, so the timer it asks
// for in answer to a Tick is registered before time moves on and cannot be
// skipped; then nothing runs but this goroutine, and the clock can go on.
func stepClock(t *testing.T, v *moontest.Clock, end int64, fired func()) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 10_000 {
			t.Fatalf("the actor keeps asking for timers, at +%v", time.Duration(v.Now()-moontest.Epoch))
		}
		d, ok := v.Next()
		if !ok || v.Now()+int64(d) > end {
			v.AdvanceTo(end)
			return
		}
		v.AdvanceNext()
		fired()
	}
}

// swapClock is the engine's clock: whichever virtual clock the current
// execution runs on.
type swapClock struct {
	v atomic.Pointer[moontest.Clock]
}

func (c *swapClock) Now() int64 { return c.v.Load().Now() }

func (c *swapClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	return c.v.Load().AfterFunc(d, f)
}

// recv waits for an answer that must come at once: the actor has it ready
// the moment it handles the request. The generous real-time bound only turns
// a lost answer into a failure instead of a hung fuzzer; nothing is timed.
func recv[A any](t *testing.T, ch chan A, what string) A {
	t.Helper()
	select {
	case a := <-ch:
		return a
	default:
	}
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer", what)
		panic("unreachable")
	}
}

// once fails if ch holds a second answer to request seq, already answered
// (seq < 0: the request needs no number).
func once[A any](t *testing.T, ch chan A, what string, seq int) {
	t.Helper()
	select {
	case a := <-ch:
		if seq >= 0 {
			what = fmt.Sprintf("%s %d", what, seq)
		}
		t.Fatalf("%s: answered twice, the second time %+v", what, a)
	default:
	}
}

// poll is the answer to request seq, which may still be waiting: got, if
// not nil, is the answer read before, and then ch must hold no second one;
// otherwise it is what ch holds now, or nil.
func poll[A any](t *testing.T, ch chan A, got *A, what string, seq int) *A {
	t.Helper()
	if got != nil {
		once(t, ch, what, seq)
		return got
	}
	select {
	case a := <-ch:
		return &a
	default:
		return nil
	}
}
