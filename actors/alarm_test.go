package actors

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
	"go.uber.org/goleak"
)

// firingClock is a test clock whose timers fire just as they are stopped:
// Stop runs the timer's function, as a real timer's goroutine may at that
// instant, and reports that it had fired. It is the race between an alarm
// and its actor stopping, made to happen every time.
type firingClock struct{ *moontest.Clock }

func (c firingClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	return &firingTimer{t: c.Clock.AfterFunc(d, f), f: f}
}

type firingTimer struct {
	t engine.Timer
	f func()
}

func (t *firingTimer) Stop() bool {
	if t.t.Stop() {
		t.f()
	}
	return false
}

// syncBuffer is a log destination safe for the engine's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAlarmFiringAsItsActorStops: a limiter with callers parked whose
// alarm fires just as Shutdown stops it leaves nothing behind. Its Tick
// does not reach protoactor's dead letters, which log it and start a
// goroutine that outlives Shutdown by a second. Every kind of limiter with
// an alarm is tried.
func TestAlarmFiringAsItsActorStops(t *testing.T) {
	spawns := []struct {
		name  string
		spawn func(e *engine.Engine) (*engine.Ref, error)
	}{
		{"bucket", func(e *engine.Engine) (*engine.Ref, error) { return SpawnBucket(e, "", 10, 1) }},
		{"window", func(e *engine.Engine) (*engine.Ref, error) { return SpawnWindow(e, "", 1, time.Second) }},
		{"keyed bucket", func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedBucket(e, "", 10, 1) }},
		{"keyed window", func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedWindow(e, "", 1, time.Second) }},
		{"bucket lending credit", func(e *engine.Engine) (*engine.Ref, error) {
			ref, _, err := SpawnBucketCredit(e, "", 1000, 100)
			return ref, err
		}},
	}
	for _, s := range spawns {
		t.Run(s.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			var logs syncBuffer
			clock := firingClock{moontest.NewClock(t)}
			e := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0),
				engine.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			ref, err := s.spawn(e)
			if err != nil {
				t.Fatal(err)
			}
			now := clock.Now()
			parked := make([]*Allow, 200) // more than any of them grants at once
			for i := range parked {
				parked[i] = park(ref, "k", now, 1, 0)
			}
			left(ref, "k", now) // a barrier: every caller has parked or been granted
			if clock.Pending() == 0 {
				t.Fatal("no alarm asked for with callers parked")
			}
			if err := e.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i, a := range parked {
				select {
				case <-a.Reply:
				default:
					t.Fatalf("caller %d of %d has no answer after Shutdown", i, len(parked))
				}
			}
			if strings.Contains(logs.String(), "DeadLetter") {
				t.Errorf("a message went to dead letters:\n%s", logs.String())
			}
		})
	}
}

// TestShutdownWithWaitersLeavesNoGoroutine: on the real clock, a bucket
// with callers parked is shut down while its alarm fires every few
// microseconds. When Shutdown returns, and the callers have their answers,
// no goroutine of the engine's is left. Many rounds give the alarm many
// chances to fire as its actor stops.
func TestShutdownWithWaitersLeavesNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for round := range 100 {
		e := engine.New(engine.WithHeatEvery(0))
		ref, err := SpawnBucket(e, "", 1e5, 1)
		if err != nil {
			t.Fatal(err)
		}
		parked := make([]*Allow, 64)
		for i := range parked {
			parked[i] = park(ref, "", e.Now(), 1, 0)
		}
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, a := range parked {
			recv(t, a.Reply, fmt.Sprintf("round %d: parked caller %d", round, i)) // granted or refused: every caller is answered
		}
		if err := goleak.Find(ignore); err != nil {
			t.Fatalf("round %d: a goroutine outlived Shutdown: %v", round, err)
		}
	}
}

// TestTimersCountFromTheClock: a limiter's alarm and a pool's timer,
// asked for an instant by an actor whose now is behind the clock (it reads
// a message sent a while ago), are due at that instant, not late by how
// far behind it was.
func TestTimersCountFromTheClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(e *engine.Engine, clock *moontest.Clock, ref *engine.Ref, now, at int64) (stop func())
	}{
		{"limiter's alarm", func(_ *engine.Engine, clock *moontest.Clock, ref *engine.Ref, now, at int64) func() {
			a := &alarm{clock: clock, self: ref}
			a.set(now, at, false)
			return a.stop
		}},
		{"pool's timer", func(e *engine.Engine, _ *moontest.Clock, ref *engine.Ref, now, at int64) func() {
			b := &books[int]{engine: e, self: ref}
			b.arm(now, at)
			return func() { b.timer.Stop() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := moontest.NewClock(t)
			e := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
			defer e.Shutdown(context.Background())
			ref, err := SpawnBucket(e, "", 10, 1) // any actor, for the Tick to reach
			if err != nil {
				t.Fatal(err)
			}
			now := clock.Now()
			clock.Advance(time.Second) // the clock moved on before the actor set its timer
			stop := tc.set(e, clock, ref, now, now+int64(1500*time.Millisecond))
			defer stop()
			if d, ok := clock.Next(); !ok || d != 500*time.Millisecond {
				t.Fatalf("due in %v (%v), want 500ms: at the instant asked for", d, ok)
			}
		})
	}
}
