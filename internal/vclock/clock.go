// Package vclock is the one clock of a moonpool engine, in two builds: Real
// for production and Virtual for tests, where time moves only when the test
// says so.
//
// Everything above policy reads time through a Clock and waits through its
// timers, never through package time directly. That single seam is what lets
// an hour of pool traffic run as a test in microseconds, with every eviction
// firing at exactly its deadline, or, with WithLateness or
// WithRandomLateness, as late as a busy machine's timers fire, so the same
// test shows what lateness does.
package vclock

import (
	"context"
	"fmt"
	"time"
)

// Clock is the one clock of an engine: the time to stamp on a message and the
// timers that wake an actor up. Both implementations are safe for concurrent
// use.
type Clock interface {
	// Now is the time in nanoseconds. Only differences between two readings
	// of the same clock mean anything; they never go negative.
	Now() int64
	// AfterFunc runs f once, d from now. A d of zero or less means as soon
	// as possible. A nil f is allowed and does nothing when it fires.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call made by Clock.AfterFunc.
type Timer interface {
	// Stop cancels the call. It reports true if this Stop kept f from
	// running, false if f has already started (or finished) or the timer was
	// already stopped. It does not wait for a running f to return.
	Stop() bool
}

// realClock reads the machine's monotonic clock, anchored to the wall clock
// once, when the package loads.
type realClock struct{}

// realBase carries a monotonic reading, so time.Since(realBase) is immune to
// wall-clock jumps (NTP steps, a hand-set date): Now never goes back.
// realBaseNano puts readings on the Unix scale so logs stay readable.
var (
	realBase     = time.Now()
	realBaseNano = realBase.UnixNano()
)

// Real returns the production clock: Now is the Unix time at which the
// program started plus the monotonic time elapsed since, so it never goes
// back even if the wall clock is stepped; AfterFunc is time.AfterFunc, which
// runs f on a goroutine of its own. Every Real clock reads the same time.
func Real() Clock { return realClock{} }

// Now is nanoseconds on the Unix scale, counted on the monotonic clock.
func (realClock) Now() int64 { return realBaseNano + int64(time.Since(realBase)) }

// AfterFunc is time.AfterFunc, except that a nil f is a no-op instead of a
// panic on the timer's goroutine.
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	if f == nil {
		f = func() {}
	}
	return time.AfterFunc(d, f)
}

// Sleep blocks for d on c, or until ctx is done. It returns nil once the full
// d has passed on c, and otherwise an error that errors.Is matches against
// ctx.Err() (and against context.Cause(ctx) when the cause differs). A ctx
// that is already done returns at once, even when d <= 0; a live ctx with
// d <= 0 returns nil at once without touching c.
//
// Sleep leaves nothing behind: when ctx wins, the timer is stopped before
// Sleep returns, so a Virtual clock's Pending count drops back and a Real
// clock keeps no timer. If the timer fires just as ctx is done, Sleep waits
// for the firing to finish and returns nil, since the time did pass.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if ctx.Err() != nil {
		return cutShort(ctx, d)
	}
	if d <= 0 {
		return nil
	}
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		if t.Stop() {
			return cutShort(ctx, d)
		}
		// The timer got there first; f is running or has run. Wait for it,
		// so no goroutine of ours outlives the call.
		<-done
		return nil
	}
}

// cutShort is the error for a Sleep that ctx ended.
func cutShort(ctx context.Context, d time.Duration) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("vclock: sleep of %v cut short: %w (%w)", d, err, cause)
	}
	return fmt.Errorf("vclock: sleep of %v cut short: %w", d, err)
}
