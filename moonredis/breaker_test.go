package moonredis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
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

// TestTimeoutWithoutClientHelp: against a server that accepts and never
// answers, through a client with go-redis's default options (which ignore
// a ctx's deadline on the wire), an Allow is answered by the FailMode once
// Config.Timeout has passed on the engine's clock, not after go-redis's
// own timeouts.
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

// TestBreakerSteps walks the breaker through fixed instants: it trips on
// the third failure in a row whatever worked before, a success in between
// starts the count again, it probes one at a time a spacing apart, and
// the first call that works closes it.
func TestBreakerSteps(t *testing.T) {
	const ms = int64(time.Millisecond)
	b := newBreaker(3, 100*ms)
	type step struct {
		at   int64
		op   string // fail, ok, probe, probed-ok, probed-fail
		want bool   // tripped it, closed it, or a probe may go
		open bool   // tripped after the step
	}
	steps := []step{
		{0, "ok", false, false},
		{1 * ms, "fail", false, false},
		{2 * ms, "fail", false, false},
		{3 * ms, "ok", false, false}, // the run starts again
		{4 * ms, "fail", false, false},
		{5 * ms, "fail", false, false},
		{6 * ms, "probe", false, false}, // closed: no probe
		{7 * ms, "fail", true, true},    // three in a row
		{8 * ms, "fail", false, true},   // tripped already
		{50 * ms, "probe", false, true}, // a spacing after the trip, not yet
		{107 * ms, "probe", true, true},
		{300 * ms, "probe", false, true}, // one out already
		{310 * ms, "probed-fail", false, true},
		{350 * ms, "probe", true, true}, // past the spacing since the last
		{360 * ms, "probed-ok", true, false},
		{361 * ms, "fail", false, false}, // the run starts from zero
		{362 * ms, "fail", false, false},
		{363 * ms, "fail", true, true},
		{364 * ms, "ok", true, false}, // a call sent before the trip came back
		{365 * ms, "fail", false, false},
	}
	for i, s := range steps {
		var got bool
		switch s.op {
		case "ok":
			got = b.success()
		case "fail":
			got = b.failure(s.at)
		case "probe":
			got = b.probe(s.at)
		case "probed-ok":
			got = b.probed(true)
		case "probed-fail":
			got = b.probed(false)
		}
		if got != s.want || b.tripped != s.open {
			t.Fatalf("step %d: %s at %dms = %v, tripped %v; want %v, tripped %v", i, s.op, s.at/ms, got, b.tripped, s.want, s.open)
		}
	}
}

// TestBreakerClockBack: a clock that reads earlier than the last probe
// lets the next probe go rather than holding it for ever.
func TestBreakerClockBack(t *testing.T) {
	b := newBreaker(1, int64(time.Second))
	b.failure(int64(time.Hour))
	if b.probe(int64(time.Hour) + 1) {
		t.Fatal("a probe went within the spacing")
	}
	if !b.probe(0) {
		t.Error("a clock gone back held the probe")
	}
}

// hung is a bucket on f whose Redis hangs on every script call while hang
// is set, with calls timing out after a second of f's clock.
func hung(t *testing.T, f *fake, hang *atomic.Bool, cfg Config) *Bucket {
	t.Helper()
	f.rdb.AddHook(hangWhile(hang))
	cfg.Client, cfg.Timeout = f.rdb, time.Second
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
	f.advance(b.l.cfg.Timeout)
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

// TestBreakerTripsOnABusyKey: a key that Redis has let through a thousand
// times trips the breaker all the same after three calls fail in a row;
// from then on every request is answered by the FailMode at once, with
// the clock standing still, and no call goes to Redis but one probe a
// Timeout.
func TestBreakerTripsOnABusyKey(t *testing.T) {
	f := newFake(t)
	var hang atomic.Bool
	b := hung(t, f, &hang, Config{})
	for range 1000 {
		if !b.Allow("k") {
			t.Fatal("a bucket of 1,000 refused")
		}
	}
	hang.Store(true)
	for range 3 {
		failOnce(t, f, b, "k")
	}
	const callers = 50
	got := make(chan bool, callers)
	for i := range callers {
		go func() { got <- b.Allow([]string{"k", "other"}[i%2]) }()
	}
	refused(t, got, callers, "callers once three calls in a row failed, with the clock still")
	st := b.Stats()
	if st.Calls != 1003 || st.Fallbacks != 3+callers {
		t.Errorf("Stats = %+v: want 1,003 calls (3 failed) and %d answered by the mode", st, 3+callers)
	}
	f.advance(time.Second) // a probe may go now
	go func() { got <- b.Allow("k") }()
	refused(t, got, 1, "the caller that sends the probe")
	waitFor(t, "the probe out", func() bool { return b.l.flying.Load() == 1 })
	for range callers {
		go func() { got <- b.Allow("k") }()
	}
	refused(t, got, callers, "callers while the probe is out to a hung Redis")
	if n := b.Stats().Calls; n != st.Calls+1 {
		t.Errorf("%d calls while the breaker is tripped, want the one probe", n-st.Calls)
	}
}

// TestBreakerClosesOnProbe: once Redis answers a probe, the breaker
// closes and the next request is Redis's to answer. The probe takes
// nothing from the key it looks at.
func TestBreakerClosesOnProbe(t *testing.T) {
	f := newFake(t)
	var hang atomic.Bool
	b := hung(t, f, &hang, Config{})
	hang.Store(true)
	for range 3 {
		failOnce(t, f, b, "k")
	}
	hang.Store(false)
	f.advance(time.Second)
	if b.Allow("k") {
		t.Fatal("FailClosed allowed the request that sent the probe")
	}
	waitFor(t, "the probe back", func() bool { return b.l.flying.Load() == 0 })
	before := b.Stats()
	if !b.Allow("k") {
		t.Fatal("Redis back and its probe answered, but Allow refused")
	}
	if st := b.Stats(); st.Calls != before.Calls+1 || st.Admitted != before.Admitted+1 {
		t.Errorf("Stats = %+v after %+v: want the Allow sent and let through by Redis", st, before)
	}
	if got := b.Tokens("k"); got != 999 {
		t.Errorf("Tokens = %v after one Allow, want 999: the probe took some", got)
	}
}

// TestTripAnswersTheQueue: requests waiting for a call slot when the
// breaker trips are answered by the FailMode then, not sent.
func TestTripAnswersTheQueue(t *testing.T) {
	f := newFake(t)
	var hang atomic.Bool
	b := hung(t, f, &hang, Config{MaxCalls: 3, MaxKeys: 1})
	hang.Store(true)
	const keys = 8 // three in flight, five waiting for a call
	got := make(chan bool, keys)
	for i := range keys {
		go func() { got <- b.Allow(fmt.Sprint("key", i)) }()
	}
	waitFor(t, "three calls in flight and five waiting", func() bool {
		return b.l.asked.Load() == keys && b.l.flying.Load() == 3
	})
	f.advance(time.Second) // the three fail: the breaker trips
	refused(t, got, keys, "requests in flight and waiting when the breaker tripped")
	if st := b.Stats(); st.Calls != 3 || st.Fallbacks != keys {
		t.Errorf("Stats = %+v: want the 3 calls in flight and every request answered by the mode", st)
	}
}

// TestFailLocalHeldWhileRecovering: under FailLocal, once Redis is back,
// what it lets through must pass the local share too for the recovery
// span, while other processes still answer from theirs; so across the
// outage and that span a process lets through no more than its share.
// Then Redis alone decides.
func TestFailLocalHeldWhileRecovering(t *testing.T) {
	f := newFake(t)
	start := f.clock.Now()
	var hang atomic.Bool
	b := hung(t, f, &hang, Config{FailMode: FailLocal, ExpectedProcesses: 4}) // a share of 250 in 1,000 at 0.25 a second
	hang.Store(true)
	admitted := 0
	for range 3 {
		got := make(chan bool, 1)
		go func() { got <- b.Allow("k") }()
		waitFor(t, "the call out", func() bool { return b.l.flying.Load() == 1 })
		f.advance(time.Second)
		if recv(t, got, "a call to a hung Redis") {
			admitted++
		}
	}
	if until := b.l.held.Load(); until != math.MaxInt64 {
		t.Fatalf("held until %d once tripped, want for as long as it is", until)
	}
	for range 100 {
		if b.Allow("k") {
			admitted++
		}
	}
	hang.Store(false)
	f.advance(time.Second)
	b.Allow("k") // sends the probe
	waitFor(t, "the probe back", func() bool { return b.l.flying.Load() == 0 })
	calls := b.Stats().Calls
	for range 400 {
		if b.Allow("k") {
			admitted++
		}
	}
	if st := b.Stats(); st.Calls == calls {
		t.Fatal("no request went to Redis once it was back")
	}
	// A Wait that Redis gives a slot at once waits for the local share
	// too, whose next token is past the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var we *client.WaitError
	if err := b.Wait(ctx, "k"); !errors.As(err, &we) {
		t.Errorf("Wait with 500ms to go, the local share's next token 4s away = %v, want its *WaitError", err)
	}
	share := 250 + 0.25*time.Duration(f.clock.Now()-start).Seconds() // full at the start, and what it earned since
	if float64(admitted) > share+1 {
		t.Errorf("let through %d across the outage and Redis's return, want at most the local share's %.0f", admitted, share)
	}
	f.advance(b.l.cfg.recovery())
	before := b.Stats().Admitted
	for range 100 {
		b.Allow("k")
	}
	if n := b.Stats().Admitted - before; n != 100 {
		t.Errorf("Redis let %d of 100 through after the recovery span, want all: the local share still holds", n)
	}
}

// TestPipelineFailsOnce: a failed call that carried many keys counts as
// one failure, in Stats and in the breaker, not one per key: a pipeline of
// nine keys is one failed call in a row, not nine.
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
					select {
					case <-release:
					case <-ctx.Done():
					}
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
	recv(t, entered, "the first call held")
	for i := 1; i < keys; i++ {
		go func() { got <- b.Allow(fmt.Sprint("k", i)) }()
	}
	waitFor(t, "callers to reach the actor", func() bool { return b.l.asked.Load() == keys })
	close(release)
	refused(t, got, keys, "callers of a failing Redis")
	if st := b.Stats(); st.Calls != 2 || st.Failures != 2 {
		t.Errorf("Stats = %+v: want 2 calls, the held one and a pipeline of 9 keys, both failed", st)
	}
	// Two failed calls in a row do not trip the breaker: the next goes.
	b.Allow("a")
	if st := b.Stats(); st.Calls != 3 {
		t.Errorf("%d calls in all, want 3: the breaker tripped after two failed calls", st.Calls)
	}
}
