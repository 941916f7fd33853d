package moonredis

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func nanf() float64 { return math.NaN() }
func inff() float64 { return math.Inf(1) }

// spent is a bucket of cfg on f earning rate tokens a second, with a
// burst of one, whose key "k" has just taken its token.
func spent(t *testing.T, f *fake, cfg Config, rate float64) *Bucket {
	t.Helper()
	b, err := NewBucket(f.eng, cfg, rate, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Allow("k") {
		t.Fatal("first Allow refused")
	}
	return b
}

// bound is how long a test waits for anything before it fails: a guard
// that turns a hang into a failure, not a measure of speed.
const bound = 10 * time.Second

// within fails t unless done is closed within bound.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("%s: still blocked after %v", what, bound)
	}
}

// recv is the next value on ch; it fails t if none comes within bound.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(bound):
		t.Fatalf("%s: nothing came within %v", what, bound)
		panic("unreachable")
	}
}

// waitGroup waits for wg; it fails t if wg is still waiting after bound.
func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, what)
}

// wakeAll moves f's clock on an hour at a time until the goroutines of wg
// are done, and fails t if they are not within bound: a waiter whose
// answer lands after one move sleeps until the next.
func wakeAll(t *testing.T, f *fake, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	end := time.Now().Add(bound)
	for {
		f.advance(time.Hour)
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("waiters still asleep after %v of hours on the clock", bound)
		}
	}
}

// waitFor polls cond and fails t if it is still false after bound. It
// yields the processor at first, then sleeps a little between polls, so
// a long wait does not hold a core others need.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(bound)
	for i := 0; !cond(); i++ {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s after %v", what, bound)
		}
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// asleep waits until l has no call in flight and n timers besides its
// late timer are pending on f's clock: n waiters asleep until their slots.
func asleep(t *testing.T, f *fake, l *limiter, n int) {
	t.Helper()
	waitFor(t, fmt.Sprint(n, " waiters asleep"), func() bool {
		return l.flying.Load() == 0 && f.clock.Pending() == n+lateTimers(l)
	})
}

// lateTimers is how many of ls have their late timer set: timers pending
// on the clock that are not waiters'.
func lateTimers(ls ...*limiter) int {
	n := 0
	for _, l := range ls {
		if l.armed.Load() {
			n++
		}
	}
	return n
}

// holdFirst is a hook that holds the first script call until release is
// closed, so a test can line callers up behind it; entered is closed once
// the call is held.
func holdFirst(release chan struct{}) (h redis.Hook, entered chan struct{}) {
	entered = make(chan struct{})
	var first atomic.Bool
	return hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if strings.HasPrefix(cmd.Name(), "eval") && first.CompareAndSwap(false, true) {
				close(entered)
				select {
				case <-release:
				case <-ctx.Done(): // the call cut short: Close, or its timeout
					return ctx.Err()
				}
			}
			return next(ctx, cmd)
		}
	}}, entered
}

// hook is a redis.Hook from a process function and a pipeline one.
type hook struct {
	process  func(redis.ProcessHook) redis.ProcessHook
	pipeline func(redis.ProcessPipelineHook) redis.ProcessPipelineHook
}

func (h hook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	if h.process == nil {
		return next
	}
	return h.process(next)
}
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	if h.pipeline == nil {
		return next
	}
	return h.pipeline(next)
}
