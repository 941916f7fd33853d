package moonredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/moonpool-go/moonpool/moontest"
	"github.com/redis/go-redis/v9"
)

// TestFailModes: with Redis gone, each mode answers as documented, and
// FailLocal holds each process to its share of the limit.
func TestFailModes(t *testing.T) {
	cases := []struct {
		mode    FailMode
		allowed int   // of 20 Allows of one key
		waitErr error // what Wait returns
	}{
		{FailClosed, 0, ErrUnavailable},
		{FailOpen, 20, nil},
		{FailLocal, 5, nil}, // a burst of 10 shared by 2
	}
	for _, c := range cases {
		t.Run(c.mode.String(), func(t *testing.T) {
			f := newFake(t)
			cfg := f.cfg()
			cfg.FailMode, cfg.ExpectedProcesses = c.mode, 2
			cfg.Timeout = 50 * time.Millisecond
			b, err := NewBucket(f.eng, cfg, 1, 10)
			if err != nil {
				t.Fatal(err)
			}
			f.mr.Close()
			allowed := 0
			for range 20 {
				if b.Allow("k") {
					allowed++
				}
			}
			if allowed != c.allowed {
				t.Errorf("allowed %d of 20, want %d", allowed, c.allowed)
			}
			if c.mode == FailLocal {
				return // its Wait would wait for the local bucket
			}
			if err := b.Wait(context.Background(), "k"); !errors.Is(err, c.waitErr) && err != c.waitErr {
				t.Errorf("Wait = %v, want %v", err, c.waitErr)
			}
			if st := b.Stats(); st.Fallbacks != 21 {
				t.Errorf("Stats.Fallbacks = %d, want 21", st.Fallbacks)
			}
		})
	}
}

// TestBreakerSparesRedis: once three calls in a row to a dead Redis fail,
// the breaker answers every request without calling it.
func TestBreakerSparesRedis(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.Timeout = 50 * time.Millisecond
	b, err := NewBucket(f.eng, cfg, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	f.mr.Close()
	for range 100 {
		if b.Allow("k") {
			t.Fatal("FailClosed allowed with Redis gone")
		}
	}
	st := b.Stats()
	if st.Fallbacks != 100 {
		t.Errorf("Fallbacks = %d, want 100", st.Fallbacks)
	}
	// Three failed calls in a row trip the breaker; with the clock still,
	// no probe is due.
	if st.Calls != 3 {
		t.Errorf("%d calls reached a dead Redis for 100 requests, want 3", st.Calls)
	}
}

// TestTimeoutFallsBack: a Redis slower than Config.Timeout is answered by
// the FailMode when the timeout ends, not when Redis does.
func TestTimeoutFallsBack(t *testing.T) {
	f := newFake(t)
	var hang atomic.Bool
	hang.Store(true)
	f.rdb.AddHook(hangWhile(&hang))
	cfg := f.cfg()
	cfg.Timeout, cfg.FailMode = 20*time.Millisecond, FailOpen
	b, err := NewBucket(f.eng, cfg, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !b.Allow("k") {
			t.Errorf("FailOpen refused call %d while Redis hung", i)
		}
	}
	if st := b.Stats(); st.Failures != 2 || st.Fallbacks != 2 {
		t.Errorf("Stats = %+v, want 2 failures answered by the mode", st)
	}
}

// TestDroppedReplyCountedOnce: a reply lost on the network makes go-redis
// send the script again; the second run answers from the first, so the
// request takes one token (or counts one event), not two.
func TestDroppedReplyCountedOnce(t *testing.T) {
	for _, once := range []bool{true, false} {
		for _, kind := range []string{"window", "approx"} {
			if kind == "window" && !once {
				continue // its events are named by their batch: a run again adds none
			}
			f := newFake(t)
			p := redistest.NewProxy(t, f.mr.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
			t.Cleanup(func() { rdb.Close() })
			cfg := f.cfg()
			cfg.Client = rdb
			newW := NewWindow
			if kind == "approx" {
				newW = NewApproxWindow
			}
			w, err := newW(f.eng, cfg, 5, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			w.l.once = once
			w.Allow("warm")
			p.DropNext(1)
			if !w.Allow("k") || p.Dropped() != 1 {
				t.Fatalf("%s once=%v: Allow refused, or %d replies dropped", kind, once, p.Dropped())
			}
			want := 4
			if !once {
				want = 3
			}
			if got := w.Left("k"); got != want {
				t.Errorf("%s once=%v: %d left after one Allow whose reply was dropped, want %d", kind, once, got, want)
			}
		}
		f := newFake(t)
		p := redistest.NewProxy(t, f.mr.Addr())
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { rdb.Close() })
		cfg := f.cfg()
		cfg.Client = rdb
		b, err := NewBucket(f.eng, cfg, 1, 5)
		if err != nil {
			t.Fatal(err)
		}
		b.l.once = once
		b.Allow("warm") // loads the script, so the dropped call is the run itself
		p.DropNext(1)
		if !b.Allow("k") {
			t.Fatalf("once=%v: Allow refused", once)
		}
		if p.Dropped() != 1 {
			t.Fatalf("once=%v: the proxy dropped %d replies, want 1", once, p.Dropped())
		}
		want := 4.0 // one token taken
		if !once {
			want = 3 // what the kept answer prevents: taken twice
		}
		if got := b.Tokens("k"); got != want {
			t.Errorf("once=%v: %v tokens left after one Allow whose reply was dropped, want %v", once, got, want)
		}
	}
}

// TestEachCallLateAtItsDeadline: calls sent at different times to a Redis
// that never answers are each answered by the FailMode at its own
// deadline, Config.Timeout after it was sent, plus the clock's lateness
// (the late timer is one for all the calls out, set again for the next
// call's deadline each time it fires, from when it fired).
func TestEachCallLateAtItsDeadline(t *testing.T) {
	const lateness = 7 * time.Millisecond
	clock := moontest.NewClock(t, moontest.WithLateness(lateness))
	eng := engine.New(engine.WithClock(clock))
	t.Cleanup(func() { // last, once Silent has closed the hung connections
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
	})
	rdb := silentClient(t, redistest.NewSilent(t), redis.Options{PoolSize: 3, MinIdleConns: 3}) // calls on goroutines of their own
	const timeout = 100 * time.Millisecond
	b, err := NewBucket(eng, Config{Client: rdb, Timeout: timeout, FailMode: FailOpen, MaxKeys: 1}, 1, 1) // a call a key, each at once
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	at := func(d time.Duration) { clock.AdvanceTo(start + int64(d)) }
	sent := []time.Duration{0, 30 * time.Millisecond, 60 * time.Millisecond}
	got := make([]chan bool, len(sent))
	for i, s := range sent {
		at(s)
		got[i] = make(chan bool, 1)
		go func() { got[i] <- b.Allow(fmt.Sprint("k", i)) }()
		waitFor(t, fmt.Sprint(i+1, " calls out"), func() bool { return b.l.flying.Load() == int64(i+1) })
	}
	for i, s := range sent {
		due := s + timeout + lateness
		at(due - time.Millisecond)
		if n := b.l.flying.Load(); n != int64(len(sent)-i) {
			t.Fatalf("at %v, %d calls out, want %d: call %d (sent at %v) answered before %v", due-time.Millisecond, n, len(sent)-i, i, s, due)
		}
		at(due)
		select {
		case ok := <-got[i]:
			if !ok {
				t.Errorf("call %d: FailOpen refused with Redis hung", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d (sent at %v) not answered at %v", i, s, due)
		}
		if n := b.l.flying.Load(); n != int64(len(sent)-i-1) {
			t.Errorf("at %v, %d calls out, want %d", due, n, len(sent)-i-1)
		}
		if i < len(sent)-1 {
			// The actor sets the timer again for the next call's deadline
			// after it answers this one: the clock moves on only then.
			waitFor(t, "the late timer set for the next call", func() bool { return clock.Pending() == 1 })
		}
	}
	if st := b.Stats(); st.Failures != 3 || st.Fallbacks != 3 {
		t.Errorf("Stats = %+v, want 3 calls failed and their requests answered by the mode", st)
	}
}

// flaky is a hook that fails one script call in three while on is set,
// never two in a row: by an error at once, or, with hang, by holding the
// call until its ctx ends, when it says so on held.
type flaky struct {
	on   atomic.Bool
	hang bool
	held chan struct{}
	n    atomic.Int64
}

var errFlaky = errors.New("flaky: the call failed")

func (h *flaky) hook() redis.Hook {
	return hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if !strings.HasPrefix(cmd.Name(), "eval") || !h.on.Load() || h.n.Add(1)%3 != 0 {
				return next(ctx, cmd)
			}
			if !h.hang {
				cmd.SetErr(errFlaky)
				return errFlaky
			}
			h.held <- struct{}{}
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
	}}
}

// TestFailLocalHeldWhileRedisFlickers: three processes share a bucket in
// a Redis that fails one call in three of each, by an error or a timeout.
// No breaker trips, since no three calls in a row fail. Each failed call
// is answered by the process's local share, which Redis does not count.
// So what Redis lets through must pass the local share too, as while the
// breaker is tripped: then the fleet lets through no more than the limit
// plus one burst. Once Redis has worked for the recovery span, it alone
// decides again.
func TestFailLocalHeldWhileRedisFlickers(t *testing.T) {
	const (
		procs = 3
		rate  = 10.0
		burst = 9.0
		step  = 10 * time.Millisecond
		steps = 200
		each  = 3 // Allows each process makes a step
	)
	for _, c := range []struct {
		name string
		hang bool
	}{{"error", false}, {"timeout", true}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			timeout := 10 * time.Millisecond
			bs := make([]*Bucket, procs)
			hs := make([]*flaky, procs)
			for i := range bs {
				hs[i] = &flaky{hang: c.hang, held: make(chan struct{}, 1)}
				hs[i].on.Store(true)
				rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr()})
				t.Cleanup(func() { rdb.Close() })
				rdb.AddHook(hs[i].hook())
				cfg := Config{Client: rdb, Timeout: timeout, FailMode: FailLocal, ExpectedProcesses: procs}
				b, err := NewBucket(f.eng, cfg, rate, burst)
				if err != nil {
					t.Fatal(err)
				}
				bs[i] = b
			}
			allow := func(i int) bool {
				got := make(chan bool, 1)
				go func() { got <- bs[i].Allow("k") }()
				select {
				case ok := <-got:
					return ok
				case <-hs[i].held:
					f.advance(timeout)
					return recv(t, got, "a call that timed out")
				case <-time.After(bound):
					t.Fatalf("process %d: Allow neither answered nor held after %v", i, bound)
					return false
				}
			}
			start := f.clock.Now()
			admitted := 0
			for s := range steps {
				if s > 0 {
					f.advance(step)
				}
				for i := range bs {
					for range each {
						if allow(i) {
							admitted++
						}
					}
				}
			}
			for i, b := range bs {
				st := b.Stats()
				if st.Calls+st.Remembered != steps*each || st.Fallbacks != st.Failures || st.Failures < st.Calls/4 {
					t.Fatalf("process %d: Stats = %+v: want every request sent to Redis or refused from its refusal, and one call in three failed", i, st)
				}
			}
			span := time.Duration(f.clock.Now() - start)
			limit := rate*span.Seconds() + burst // what the bucket itself lets through in span
			t.Logf("the fleet let through %d in %v against a limit of %.0f", admitted, span, limit)
			if float64(admitted) > limit+burst {
				t.Errorf("the fleet let through %d in %v, want at most the limit %.0f plus one burst of %.0f", admitted, span, limit, burst)
			}

			// Redis works again: once the recovery span has passed, a
			// process may take Redis's whole burst, more than its share.
			for _, h := range hs {
				h.on.Store(false)
			}
			f.advance(bs[0].l.cfg.recovery() + time.Second)
			n := 0
			for range 2 * int(burst) {
				if bs[0].Allow("k") {
					n++
				}
			}
			if n != burst {
				t.Errorf("Redis back for the recovery span: a process let through %d of %d, want Redis's burst of %.0f", n, 2*int(burst), burst)
			}
		})
	}
}
