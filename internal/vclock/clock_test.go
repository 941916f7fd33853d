package vclock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/internal/vclock"
)

// The real clock is checked only for ordering facts (this before that),
// never for how long anything took: a loaded machine may be slow, but it
// never runs a timer before it is registered or a clock backwards.

func TestRealNowNeverGoesBack(t *testing.T) {
	c := vclock.Real()
	prev := c.Now()
	for i := range 100_000 {
		now := vclock.Real().Now() // every Real reads the same clock
		if now < prev {
			t.Fatalf("read %d: Now() = %d after %d: went back", i, now, prev)
		}
		prev = now
	}
	// On the Unix scale, so it reads as a date in logs.
	if wall := time.Now().UnixNano(); prev > wall+int64(time.Hour) || prev < wall-int64(time.Hour) {
		t.Errorf("Real Now() = %d is nowhere near the Unix time %d", prev, wall)
	}
}

func TestRealAfterFunc(t *testing.T) {
	c := vclock.Real()
	t.Run("fires once, after it was registered", func(t *testing.T) {
		for _, d := range []time.Duration{-time.Second, 0, time.Microsecond} {
			before := c.Now()
			ran := make(chan int64, 2)
			timer := c.AfterFunc(d, func() { ran <- c.Now() })
			at := <-ran
			if at < before {
				t.Errorf("AfterFunc(%v): f saw Now %d, before registration at %d", d, at, before)
			}
			if timer.Stop() {
				t.Errorf("AfterFunc(%v): Stop() after f ran = true, want false", d)
			}
			select {
			case <-ran:
				t.Errorf("AfterFunc(%v): f ran twice", d)
			default:
			}
		}
	})
	t.Run("Stop before it fires", func(t *testing.T) {
		timer := c.AfterFunc(time.Hour, func() { t.Error("a stopped timer fired") })
		if !timer.Stop() {
			t.Fatal("Stop() on a timer an hour out = false, want true")
		}
		if timer.Stop() {
			t.Fatal("second Stop() = true, want false")
		}
	})
	t.Run("nil f", func(t *testing.T) {
		// time.AfterFunc(d, nil) would panic on the timer's goroutine and
		// take the whole test binary down. Sleeping on a later timer gives
		// the nil one every chance to have run before the test ends.
		c.AfterFunc(0, nil)
		if err := vclock.Sleep(context.Background(), c, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if !c.AfterFunc(time.Hour, nil).Stop() {
			t.Fatal("Stop() on a pending nil-f timer = false, want true")
		}
	})
}

func TestRealSleep(t *testing.T) {
	c := vclock.Real()
	ctx := context.Background()

	before := c.Now()
	if err := vclock.Sleep(ctx, c, time.Microsecond); err != nil {
		t.Fatalf("Sleep(1µs) = %v, want nil", err)
	}
	if after := c.Now(); after <= before {
		t.Fatalf("Now() = %d after a sleep, not after %d", after, before)
	}

	for _, d := range []time.Duration{0, -time.Hour} {
		if err := vclock.Sleep(ctx, c, d); err != nil {
			t.Errorf("Sleep(%v) = %v, want nil at once", d, err)
		}
	}

	// Cancelled while asleep: returns long before the hour, with the cause.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- vclock.Sleep(cctx, c, time.Hour) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(1h) cancelled = %v, want an error matching context.Canceled", err)
	}

	// A deadline is a ctx too.
	dctx, cancel2 := context.WithTimeout(ctx, time.Microsecond)
	defer cancel2()
	if err := vclock.Sleep(dctx, c, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Sleep(1h) past a deadline = %v, want an error matching context.DeadlineExceeded", err)
	}
}

// TestSleepCutShortErrors: the error must match ctx.Err() and, when it
// differs, context.Cause(ctx), whatever the clock.
func TestSleepCutShortErrors(t *testing.T) {
	why := errors.New("shutting down")
	tests := []struct {
		name   string
		ctx    func() context.Context
		d      time.Duration
		wantIs []error
	}{
		{"cancelled, d > 0", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, time.Second, []error{context.Canceled}},
		{"cancelled, d = 0", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, 0, []error{context.Canceled}},
		{"cancelled with a cause", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(why)
			return ctx
		}, time.Second, []error{context.Canceled, why}},
		{"deadline passed", func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
			_ = cancel // the deadline has passed: nothing to release
			return ctx
		}, time.Second, []error{context.DeadlineExceeded}},
	}
	for i, tc := range tests {
		v := vclock.NewVirtual()
		err := vclock.Sleep(tc.ctx(), v, tc.d)
		for _, want := range tc.wantIs {
			if !errors.Is(err, want) {
				t.Errorf("step %d (%s): Sleep = %v, want an error matching %v", i, tc.name, err, want)
			}
		}
		if v.Registered() != 0 {
			t.Errorf("step %d (%s): a dead ctx registered a timer", i, tc.name)
		}
	}
}

func TestSleepVirtual(t *testing.T) {
	ctx := context.Background()
	t.Run("returns when the clock reaches the end", func(t *testing.T) {
		v := vclock.NewVirtual()
		errc := make(chan error, 1)
		go func() { errc <- vclock.Sleep(ctx, v, 5*time.Second) }()
		if err := v.WaitPending(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if d, _ := v.Next(); d != 5*time.Second {
			t.Fatalf("Sleep(5s) registered a timer %v out, want 5s", d)
		}
		v.Advance(4 * time.Second)
		if v.Pending() != 1 {
			t.Fatalf("after 4s of a 5s sleep, Pending() = %d, want 1 (still asleep)", v.Pending())
		}
		v.Advance(time.Second)
		if err := <-errc; err != nil {
			t.Fatalf("Sleep = %v, want nil", err)
		}
		if v.Pending() != 0 {
			t.Fatalf("Pending() = %d after Sleep returned, want 0", v.Pending())
		}
	})
	t.Run("cancelled while asleep", func(t *testing.T) {
		v := vclock.NewVirtual()
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- vclock.Sleep(cctx, v, 5*time.Second) }()
		if err := v.WaitPending(ctx, 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep = %v, want an error matching context.Canceled", err)
		}
		if v.Pending() != 0 {
			t.Fatalf("Pending() = %d after a cancelled Sleep, want 0: the timer must be stopped", v.Pending())
		}
		if v.Now() != vclock.Epoch {
			t.Fatalf("a cancelled Sleep moved the clock to %d", v.Now())
		}
	})
}

// firesOnStop is a Clock built to hit Sleep's one narrow race on purpose:
// ctx ends after the timer is set, and the timer fires at the very moment
// Sleep tries to stop it.
type firesOnStop struct {
	cancel context.CancelFunc
}

func (c firesOnStop) Now() int64 { return 0 }

func (c firesOnStop) AfterFunc(_ time.Duration, f func()) vclock.Timer {
	c.cancel()
	return lateTimer{f}
}

type lateTimer struct{ f func() }

// Stop loses the race: f runs (on another goroutine, as a real timer's
// would) and Stop reports it could not stop it.
func (t lateTimer) Stop() bool {
	go t.f()
	return false
}

func TestSleepTimerWinsTheRace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := vclock.Sleep(ctx, firesOnStop{cancel}, time.Second); err != nil {
		t.Fatalf("Sleep = %v, want nil: the time did pass", err)
	}
}
