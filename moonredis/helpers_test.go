package moonredis

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
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

// waitABit lets other goroutines run while a test waits for them to reach
// a point it can see.
func waitABit() { runtime.Gosched() }

// within fails t unless done is closed within a generous real-time bound:
// a guard that turns a hang into a failure, not a measure of speed.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10s", what)
	}
}

// waitFor polls cond, letting other goroutines run, and fails t if it is
// still false after a generous real-time bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
		waitABit()
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
