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

// silentClient is a client of a Silent server with o.MinIdleConns (at
// least one) connections dialled and idle before it returns, and no handshake (RESP2, no CLIENT SETINFO),
// so a call goes straight to the wire and waits in its read: cancelling
// its ctx cannot cut a dial short.
func silentClient(t *testing.T, s *redistest.Silent, o redis.Options) *redis.Client {
	t.Helper()
	o.Addr, o.Protocol, o.DisableIdentity = s.Addr(), 2, true
	o.MinIdleConns = max(o.MinIdleConns, 1)
	rdb := redis.NewClient(&o)
	t.Cleanup(func() { rdb.Close() })
	waitFor(t, "idle connections", func() bool { return rdb.PoolStats().IdleConns >= uint32(o.MinIdleConns) })
	return rdb
}

// TestCallerCallEndsAtTimeout: a caller against a Redis that never
// answers gets the FailMode's answer once Config.Timeout has passed, not
// after go-redis's own read timeout (5 s) or never, whether it makes its
// own call (ContextTimeoutEnabled) or, with deadlines off on the wire (a
// ReadTimeout of -2, which ContextTimeoutEnabled cannot override), the
// call is made on a goroutine of its own; the call is counted failed once.
// (On the real clock: the deadline the client keeps is on it.)
func TestCallerCallEndsAtTimeout(t *testing.T) {
	for _, c := range []struct {
		name string
		opts redis.Options
		self bool
	}{
		{"deadlines", redis.Options{ContextTimeoutEnabled: true}, true},
		{"no deadlines on the wire", redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			eng := realEngine(t) // shut down last, once Silent has closed the hung connection
			rdb := silentClient(t, redistest.NewSilent(t), c.opts)
			b, err := NewBucket(eng, Config{Client: rdb, Timeout: 50 * time.Millisecond, FailMode: FailOpen}, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if b.l.self != c.self {
				t.Fatalf("callers make their own calls: %v, want %v", b.l.self, c.self)
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
		})
	}
}

// TestClusterCallsOffCaller: a ClusterClient looks up a command's routing
// under a ctx of its own, so its callers never make their own calls.
func TestClusterCallsOffCaller(t *testing.T) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	defer c.Close()
	if boundsCalls(c) {
		t.Error("a ClusterClient is trusted to end its calls at their ctx's deadline")
	}
}

// TestCloseWhileCallerCalls: Close while callers make their own calls to a
// Redis that never answers, each waiting in its read, returns once those
// calls end (at Timeout), and every caller is answered, as closed.
func TestCloseWhileCallerCalls(t *testing.T) {
	eng := realEngine(t)
	rdb := silentClient(t, redistest.NewSilent(t), redis.Options{ContextTimeoutEnabled: true, PoolSize: 3, MinIdleConns: 3})
	b, err := NewBucket(eng, Config{Client: rdb, Timeout: 300 * time.Millisecond, FailMode: FailOpen, MaxKeys: 1}, 1, 1) // a call a key, each at once
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
	waitFor(t, "three calls on the wire", func() bool { return rdb.PoolStats().IdleConns == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := b.Close(ctx); err != nil {
		t.Errorf("Close = %v, want nil once the calls end at their Timeout", err)
	}
	// A call waiting in its read is not cut short by a cancel, only by its
	// deadline: Close waited for it (a lower bound, which a slow machine
	// cannot break).
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("Close returned after %v: the calls it should have waited for were not on the wire", took)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, "Allow after Close")
	if n := opened.Load(); n != 0 {
		t.Errorf("%d callers let through by a limiter closed under them", n)
	}
}

// TestCloseInFlightAnswersAll: a Close whose ctx has ended while calls are
// in flight leaves no caller without an answer, not even one handed its
// batch's call to make just as the actor stopped. In two rounds of three
// the callers make their own calls, through a client with
// ContextTimeoutEnabled: alone in one, handed them by the actor in the
// other.
func TestCloseInFlightAnswersAll(t *testing.T) {
	for round := range 180 {
		f := newFake(t)
		cfg := f.cfg()
		if round%3 != 0 {
			rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			cfg.Client = rdb
		}
		b, err := NewBucket(f.eng, cfg, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		b.l.lone = round%3 == 1 // in the other rounds, the actor hands its calls to the callers
		const callers = 2       // few, so most calls start with none in flight
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; !b.l.closed.Load(); j++ {
					b.Allow(fmt.Sprint("k", i, ".", j))
				}
			}()
		}
		waitFor(t, "callers to call", func() bool { return b.l.asked.Load()+b.l.alone.Load() >= callers })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		b.Close(ctx)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		within(t, done, fmt.Sprintf("round %d: Allow after Close", round))
	}
}

// TestCallerTakesItsAnswerOnce: a caller the actor hands its call to
// reads its answer from the reply, and the actor puts its ask back for
// the next caller. When the call outlives Config.Timeout, the FailMode's
// answer, given first, stands and the reply is dropped. Either way each
// caller gets one answer.
func TestCallerTakesItsAnswerOnce(t *testing.T) {
	f := newFake(t)
	rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	release := make(chan struct{})
	h, entered := holdFirst(release)
	rdb.AddHook(h)
	cfg := f.cfg()
	cfg.Client, cfg.FailMode = rdb, FailClosed
	b, err := NewBucket(f.eng, cfg, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	b.l.lone = false      // every request through the actor, which hands its call to its caller
	var made atomic.Int64 // asks the pool had to make
	b.l.asks.New = func() any { made.Add(1); return &ask{reply: make(chan verdict, 2)} }

	first := make(chan bool, 1)
	go func() { first <- b.Allow("k0") }()
	recv(t, entered, "the first call held")
	waitFor(t, "the late timer set", func() bool { return f.clock.Pending() > 0 })
	f.advance(cfg.Timeout) // the call is late: the FailMode answers
	waitFor(t, "the late call answered", func() bool { return b.Stats().Fallbacks == 1 })
	close(release) // the reply comes, after the answer
	if recv(t, first, "the first Allow") {
		t.Fatal("a call past its Timeout let the request through under FailClosed")
	}
	const more = 40
	for i := range more {
		if !b.Allow(fmt.Sprint("k", i+1)) {
			t.Fatalf("Allow %d on a full bucket refused", i+1)
		}
	}
	if st := b.Stats(); st.Admitted != more || st.Fallbacks != 1 || st.Calls != more+1 {
		t.Errorf("Stats = %+v: want %d calls, %d let through and the late one answered by the FailMode", st, more+1, more)
	}
	// Each ask goes back to the pool, which keeps it (but for one in four
	// under the race detector, which drops them at random).
	if n := made.Load(); n > more*5/8 {
		t.Errorf("%d calls made %d asks: the ones whose callers took their answers did not go back", more+1, n)
	}
}
