package moonredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// hangWhile is a hook under which every script call hangs until its ctx
// ends while hang is set: a Redis that accepts and never answers.
func hangWhile(hang *atomic.Bool) redis.Hook {
	return hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if strings.HasPrefix(cmd.Name(), "eval") && hang.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return next(ctx, cmd)
		}
	}}
}

// TestCloseInFlightAnswersAll: a Close whose ctx has ended while calls are
// in flight leaves no caller without an answer (review 1: a caller handed
// its batch's call to make could be left waiting forever when the actor
// stopped before it read that; two callers showed it within twenty
// rounds). Every other round the callers make their own calls, through a
// client with ContextTimeoutEnabled.
func TestCloseInFlightAnswersAll(t *testing.T) {
	for round := range 150 {
		f := newFake(t)
		cfg := f.cfg()
		if round%2 == 1 {
			rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			cfg.Client = rdb
		}
		b, err := NewBucket(f.eng, cfg, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		const callers = 2 // few, so most calls start with none in flight
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
		waitFor(t, "callers to reach the actor", func() bool { return b.l.asked.Load() >= callers })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		b.Close(ctx)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		within(t, done, fmt.Sprintf("round %d: Allow after Close", round))
	}
}

// TestTimeoutWithoutClientHelp: against a server that accepts and never
// answers, through a client with go-redis's default options (which ignore
// a ctx's deadline on the wire), an Allow is answered by the FailMode once
// Config.Timeout has passed on the engine's clock (review 2: it took 5s
// of go-redis's own timeouts).
func TestTimeoutWithoutClientHelp(t *testing.T) {
	f := newFake(t)
	rdb := silentClient(t, redistest.NewSilent(t), redis.Options{PoolSize: 1}) // the call waits in its read
	b, err := NewBucket(f.eng, Config{Client: rdb, Timeout: 50 * time.Millisecond, FailMode: FailOpen}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan bool, 1)
	go func() { got <- b.Allow("k") }()
	waitFor(t, "the call out and on the wire", func() bool {
		return b.l.flying.Load() == 1 && rdb.PoolStats().IdleConns == 0
	})
	f.advance(50 * time.Millisecond)
	select {
	case ok := <-got:
		if !ok {
			t.Error("FailOpen refused when Redis hung")
		}
	case <-time.After(2 * time.Second): // go-redis's own read timeout is 3s
		t.Fatal("Allow still waiting for a hung Redis after its Timeout")
	}
	if st := b.Stats(); st.Failures != 1 || st.Fallbacks != 1 {
		t.Errorf("Stats = %+v, want the call counted failed once and its request answered by the mode", st)
	}
}

// tripped is a bucket on f whose Redis hangs on every script call while
// hang is set, with calls timing out after an hour of f's clock, and the
// breaker counting over a thousand hours so nothing ages out.
func tripped(t *testing.T, f *fake, hang *atomic.Bool, cfg Config) *Bucket {
	t.Helper()
	f.rdb.AddHook(hangWhile(hang))
	cfg.Client, cfg.Timeout, cfg.BreakerPeriod = f.rdb, time.Hour, 1000*time.Hour
	b, err := NewBucket(f.eng, cfg, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// failOnce makes one Allow of key time out against the hung Redis.
func failOnce(t *testing.T, f *fake, b *Bucket, key string) {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- b.Allow(key) }()
	waitFor(t, "the call out", func() bool { return b.l.flying.Load() == 1 })
	f.clock.Advance(time.Hour)
	refused(t, got, 1, "a call to a hung Redis")
}

// refused fails t unless n answers come on got, all refusals, within
// within's bound.
func refused(t *testing.T, got <-chan bool, n int, what string) {
	t.Helper()
	answered := make(chan struct{})
	allowed := 0
	go func() {
		for range n {
			if <-got {
				allowed++
			}
		}
		close(answered)
	}()
	within(t, answered, what)
	if allowed > 0 {
		t.Errorf("%s: FailClosed allowed %d with Redis hung", what, allowed)
	}
}

// TestBreakerAnswersAtOnce: once the breaker refuses and its one call goes
// to a hung Redis, the callers that come meanwhile are answered by the
// FailMode at once, not after that call's timeout (review 3).
func TestBreakerAnswersAtOnce(t *testing.T) {
	f := newFake(t)
	var hang atomic.Bool
	hang.Store(true)
	b := tripped(t, f, &hang, Config{})
	for range 10 { // the breaker's floor, all failed
		failOnce(t, f, b, "k")
	}
	probe := make(chan bool, 1)
	go func() { probe <- b.Allow("k") }()
	waitFor(t, "the probe out", func() bool { return b.l.flying.Load() == 1 })
	const callers = 8
	got := make(chan bool, callers)
	for i := range callers {
		go func() { got <- b.Allow([]string{"k", "other"}[i%2]) }()
	}
	refused(t, got, callers, "callers behind a probe to a hung Redis, with the clock still")
	if st := b.Stats(); st.Calls != 11 || st.Fallbacks != 10+callers {
		t.Errorf("Stats = %+v: want 11 calls (10 failed, the probe) and %d answered by the mode", st, 10+callers)
	}
	f.clock.Advance(time.Hour)
	if <-probe {
		t.Error("the probe was allowed by a hung Redis")
	}
}

// TestOneCallWhileBreakerRefuses: while the breaker refuses, the batches
// waiting for a call go to Redis one call at a time, not Config.MaxCalls.
func TestOneCallWhileBreakerRefuses(t *testing.T) {
	f := newFake(t)
	var hang atomic.Bool
	b := tripped(t, f, &hang, Config{MaxCalls: 4, MaxKeys: 1})
	// Four calls answered, then five failed: below the breaker's floor of
	// ten, it refuses nothing yet, and once it does, it refuses few, so
	// only the limit on calls can keep a second one from going.
	for i := range 4 {
		if !b.Allow(fmt.Sprint("ok", i)) {
			t.Fatal("Allow refused by a fresh bucket")
		}
	}
	hang.Store(true)
	for range 5 {
		failOnce(t, f, b, "k")
	}
	const keys = 8 // four in flight, four waiting for a call
	got := make(chan bool, keys)
	asked := b.l.asked.Load()
	for i := range keys {
		go func() { got <- b.Allow(fmt.Sprint("key", i)) }()
	}
	waitFor(t, "four calls in flight and four waiting", func() bool {
		return b.l.asked.Load() == asked+keys && b.l.flying.Load() == 4
	})
	f.clock.Advance(time.Hour) // the four fail: the breaker refuses
	refused(t, got, 4, "the four calls in flight")
	synced := make(chan struct{})
	go func() { b.Tokens("sync"); close(synced) }() // answered after every landing before it
	within(t, synced, "a look while the breaker refuses")
	if st := b.Stats(); st.Calls != 4+5+4+1 {
		t.Errorf("%d calls in all, want %d: while the breaker refuses, one call at a time", st.Calls, 4+5+4+1)
	}
	if n := b.l.flying.Load(); n != 1 {
		t.Errorf("%d calls in flight while the breaker refuses, want 1", n)
	}
	b.Close(context.Background())
	for range keys - 4 {
		<-got
	}
}

// TestWaitWakesAfterItsSlot: a waiter wakes at its slot measured from when
// its answer came back, never before the slot (review 5: it woke up to the
// call's way there early).
func TestWaitWakesAfterItsSlot(t *testing.T) {
	f := newFake(t)
	b := spent(t, f, f.cfg(), 10) // a token every 100 ms
	release := make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(context.Background(), "k") }()
	<-entered
	f.advance(50 * time.Millisecond) // the script runs 50 ms after the sending
	close(release)
	asleep(t, f, &b.l, 1)
	if d, _ := f.clock.Next(); d != 50*time.Millisecond {
		t.Errorf("the waiter sleeps %v more, want the 50ms to its slot", d)
	}
	f.advance(50 * time.Millisecond)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
}

// TestWaitSlotBackTooLate: a slot the script kept within the deadline, as
// seen from the sending, that falls past it as seen from when the answer
// came back is the deadline's error at once, not a wake before the slot.
func TestWaitSlotBackTooLate(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.Timeout = 2 * time.Hour
	b := spent(t, f, cfg, 1.0/600) // a token every 10 minutes
	release := make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(ctx, "k") }()
	<-entered
	f.clock.Advance(55 * time.Minute) // Redis answers at once; the answer takes 55 minutes back
	close(release)
	done := make(chan struct{})
	var got error
	go func() { got = <-waited; close(done) }()
	within(t, done, "Wait whose slot came back too late")
	if !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("Wait = %v, want an error matching context.DeadlineExceeded", got)
	}
}

// TestBucketTatRoundsUp: a bucket whose token interval is not a whole
// number of microseconds keeps its state rounded up, never down, so a
// request a fraction of a microsecond early is refused (review 6).
func TestBucketTatRoundsUp(t *testing.T) {
	f := newFake(t)
	b := spent(t, f, f.cfg(), 3) // a token every 333,333.33 µs
	f.advance(333333 * time.Microsecond)
	if d := b.Try("k"); d.OK || d.Wait != time.Microsecond {
		t.Errorf("Try a third of a microsecond early = %+v, want a refusal of 1µs", d)
	}
	f.advance(time.Microsecond)
	if !b.Allow("k") {
		t.Error("Allow refused once the token is whole")
	}
}

// TestBigNumbers: waits of years and counts of hundreds of billions come
// back from the scripts readable (review 8: Redis's Lua writes numbers
// from 1e14 on with an exponent, so every answer with one was a failed
// call; miniredis's Lua does not, so the real server is what shows it),
// and numbers too big to come back are refused when the limiter is made.
func TestBigNumbers(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		f := newFake(t)
		bigNumbers(t, f.eng, f.cfg())
	})
	t.Run("redis-server", func(t *testing.T) {
		srv := redistest.New(t)
		cfg := Config{Client: realClient(t, srv.Addr()), Prefix: fmt.Sprintf("test:%d:", time.Now().UnixNano())}
		bigNumbers(t, realEngine(t), cfg)
	})
}

func bigNumbers(t *testing.T, eng *engine.Engine, cfg Config) {
	const year = 365 * 24 * time.Hour
	// about is whether got is want, or less by what a real clock moved.
	about := func(got, want time.Duration) bool { return got <= want && got > want-time.Minute }
	slow, err := NewBucket(eng, cfg, 1/(10*year).Seconds(), 1)
	if err != nil {
		t.Fatal(err)
	}
	slow.Allow("slow")
	if d := slow.Try("slow"); d.OK || !about(d.Wait, 10*year) {
		t.Errorf("Try of a bucket of one token in ten years, spent = %+v, want a refusal of 10 years", d)
	}
	big, err := NewBucket(eng, cfg, 1e11, 2e11)
	if err != nil {
		t.Fatal(err)
	}
	if got := big.Tokens("big"); got < 2e11-1 {
		t.Errorf("Tokens of a bucket of 2e11 = %v, want 2e11", got)
	}
	long, err := NewWindow(eng, cfg, 1, 5*year)
	if err != nil {
		t.Fatal(err)
	}
	long.Allow("long")
	if got := long.Delay("long"); !about(got, 5*year) {
		t.Errorf("Delay of a window of one in five years, spent = %v, want 5 years", got)
	}
	for _, st := range []Stats{slow.Stats(), big.Stats(), long.Stats()} {
		if st.Failures != 0 {
			t.Errorf("Stats = %+v: want no failed call", st)
		}
	}
	if _, err := NewBucket(eng, cfg, 1, 1e16); err == nil {
		t.Error("NewBucket with a burst of 1e16: no error")
	}
	if _, err := NewBucket(eng, cfg, 1e-20, 1); err == nil {
		t.Error("NewBucket with a token every 1e20 seconds: no error")
	}
	if _, err := NewWindow(eng, cfg, 1e16, time.Second); err == nil {
		t.Error("NewWindow with an allow of 1e16: no error")
	}
}

// TestPipelineFailsOnce: a failed call that carried many keys counts as
// one failure, in Stats and in the breaker, not one per key (review 8: a
// pipeline of nine keys filled the breaker's floor of ten at once).
func TestPipelineFailsOnce(t *testing.T) {
	f := newFake(t)
	down := errors.New("down")
	release := make(chan struct{})
	var first atomic.Bool
	entered := make(chan struct{})
	f.rdb.AddHook(hook{
		process: func(next redis.ProcessHook) redis.ProcessHook {
			return func(ctx context.Context, cmd redis.Cmder) error {
				if !strings.HasPrefix(cmd.Name(), "eval") {
					return next(ctx, cmd)
				}
				if first.CompareAndSwap(false, true) {
					close(entered)
					<-release
				}
				cmd.SetErr(down)
				return down
			}
		},
		pipeline: func(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
			return func(ctx context.Context, cmds []redis.Cmder) error {
				for _, c := range cmds {
					c.SetErr(down)
				}
				return down
			}
		},
	})
	cfg := f.cfg()
	cfg.MaxCalls = 1
	b, err := NewBucket(f.eng, cfg, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	const keys = 10
	got := make(chan bool, keys)
	go func() { got <- b.Allow("k0") }()
	<-entered
	for i := 1; i < keys; i++ {
		go func() { got <- b.Allow(fmt.Sprint("k", i)) }()
	}
	waitFor(t, "callers to reach the actor", func() bool { return b.l.asked.Load() == keys })
	close(release)
	refused(t, got, keys, "callers of a failing Redis")
	if st := b.Stats(); st.Calls != 2 || st.Failures != 2 {
		t.Errorf("Stats = %+v: want 2 calls, the held one and a pipeline of 9 keys, both failed", st)
	}
	// Two failures are below the breaker's floor: the next calls still go.
	b.Allow("a")
	b.Allow("b")
	if st := b.Stats(); st.Calls != 4 {
		t.Errorf("%d calls in all, want 4: the breaker refused after two failed calls", st.Calls)
	}
}

// TestKeptAnswerOutlivesRetries: a key whose state would expire within a
// millisecond (a bucket full again that soon) is kept at least twice
// Config.Timeout, so a batch go-redis sends again within the call's
// Timeout still finds its answer rather than being counted again (review
// 7); and, idle, it is gone within two of its expiry grid's cells (twice
// the Timeout, here 3 s) past that.
func TestKeptAnswerOutlivesRetries(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.Timeout = 1500 * time.Millisecond
	b, err := NewBucket(f.eng, cfg, 1000, 5) // a token a millisecond
	if err != nil {
		t.Fatal(err)
	}
	b.Allow("k")
	f.advance(2900 * time.Millisecond) // past the Timeout, within twice it
	if !f.mr.Exists("moonredis:bucket:k") {
		t.Error("the key and its kept answer expired within twice the call's Timeout")
	}
	f.advance(6200 * time.Millisecond) // twice the Timeout and two cells on
	if f.mr.Exists("moonredis:bucket:k") {
		t.Error("an idle, full key is still in Redis two of its grid's cells after its kept answer stopped mattering")
	}
}
