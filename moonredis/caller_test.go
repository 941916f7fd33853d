package moonredis

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// onCallers is a hook that counts the script calls made on a goroutine
// that is inside limiter.now: the caller's own.
type onCallers struct{ calls, own *atomic.Int64 }

func (h onCallers) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h onCallers) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		buf := make([]byte, 64<<10)
		if strings.Contains(string(buf[:runtime.Stack(buf, false)]), "moonredis.(*limiter).now(") {
			h.own.Add(1)
		}
		h.calls.Add(1)
		return next(ctx, cmd)
	}
}
func (h onCallers) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCallerMakesItsCall: through a client that ends a call at its ctx's
// deadline (ContextTimeoutEnabled), an Allow, Try, Delay or Tokens that
// goes to Redis alone is sent from the caller's own goroutine; through
// one that does not, every call runs on a goroutine of its own, so the
// limiter's timer can answer the caller at Config.Timeout. A Wait's call
// is never the caller's: its ctx may end first.
func TestCallerMakesItsCall(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		t.Run(fmt.Sprint("ContextTimeoutEnabled=", bounded), func(t *testing.T) {
			f := newFake(t)
			rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr(), ContextTimeoutEnabled: bounded})
			t.Cleanup(func() { rdb.Close() })
			var calls, own atomic.Int64
			rdb.AddHook(onCallers{&calls, &own})
			b, err := NewBucket(f.eng, Config{Client: rdb, Timeout: 5 * time.Second}, 1, 10)
			if err != nil {
				t.Fatal(err)
			}
			if !b.Allow("k") || !b.Try("k").OK || b.Delay("k") != 0 || b.Tokens("k") != 8 {
				t.Fatal("a fresh bucket of 10 did not let two through and leave 8")
			}
			want := int64(0)
			if bounded {
				want = calls.Load()
			}
			if calls.Load() < 4 || own.Load() != want {
				t.Errorf("%d of %d script calls made on the caller's goroutine, want %d", own.Load(), calls.Load(), want)
			}
			before := own.Load()
			if err := b.Wait(context.Background(), "k"); err != nil {
				t.Fatal(err)
			}
			if own.Load() != before {
				t.Errorf("a Wait's call was made on the caller's goroutine")
			}
		})
	}
}

// TestCallerCallEndsAtTimeout: a caller that makes its own call against a
// Redis that never answers gets the FailMode's answer once Config.Timeout
// has passed, not after go-redis's own read timeout (3 s); the call is
// counted failed once. (On the real clock: the deadline the client keeps
// is on it.)
func TestCallerCallEndsAtTimeout(t *testing.T) {
	s := redistest.NewSilent(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	b, err := NewBucket(realEngine(t), Config{Client: rdb, Timeout: 50 * time.Millisecond, FailMode: FailOpen}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !b.l.self {
		t.Fatal("a client with ContextTimeoutEnabled: callers do not make their calls")
	}
	got := make(chan bool, 1)
	go func() { got <- b.Allow("k") }()
	select {
	case ok := <-got:
		if !ok {
			t.Error("FailOpen refused when Redis hung")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Allow still waiting for a hung Redis 2s after its 50ms Timeout")
	}
	if st := b.Stats(); st.Failures != 1 || st.Fallbacks != 1 {
		t.Errorf("Stats = %+v, want the call counted failed once and its request answered by the mode", st)
	}
}

// TestCloseWhileCallerCalls: Close while callers make their own calls to a
// Redis that never answers returns once those calls end (at Timeout), and
// every caller is answered, as closed.
func TestCloseWhileCallerCalls(t *testing.T) {
	s := redistest.NewSilent(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	b, err := NewBucket(realEngine(t), Config{Client: rdb, Timeout: 300 * time.Millisecond, FailMode: FailOpen}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	const callers = 3
	var wg sync.WaitGroup
	var opened atomic.Int64
	for i := range callers {
		wg.Go(func() {
			if b.Allow(fmt.Sprint("k", i)) {
				opened.Add(1)
			}
		})
	}
	waitFor(t, "a call in flight", func() bool { return b.l.flying.Load() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := b.Close(ctx); err != nil {
		t.Errorf("Close = %v, want nil once the calls end at their Timeout", err)
	}
	t.Logf("close took %v", time.Since(start))
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, "Allow after Close")
	if n := opened.Load(); n != 0 {
		t.Errorf("%d callers let through by a limiter closed under them", n)
	}
}
