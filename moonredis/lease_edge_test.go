package moonredis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/redis/go-redis/v9"
)

// TestLeaseRefusalSteps walks a hot key of a bucket of 1,000 a second,
// bursts of 10, through fixed instants. Its fifth request takes a lease of
// what is left; once that is spent, Redis's wait is remembered: Trys are
// refused with the rest of it and no call goes until it has passed.
func TestLeaseRefusalSteps(t *testing.T) {
	f := newFake(t)
	b := leased(t, f, f.cfg(), 1000, 10)
	calls := func() int64 { return b.Stats().Calls }
	steps := []struct {
		at    time.Duration // since the start
		n     int           // Trys at that instant
		ok    int           // of them let through
		wait  time.Duration // the last one's Wait, when refused
		calls int64         // calls to Redis so far
	}{
		{0, 4, 4, 0, 4},                    // one by one: a quiet key so far
		{0, 1, 1, 0, 5},                    // the fifth takes a lease: the 6 left
		{0, 6, 5, 6 * time.Millisecond, 5}, // 5 drawn, then the wait Redis gave
		{5 * time.Millisecond, 3, 0, time.Millisecond, 5},
		{6 * time.Millisecond, 1, 1, 0, 6}, // the wait has passed: a lease of the 6 earned
		{6 * time.Millisecond, 5, 5, 0, 6}, // drawn
		{6 * time.Millisecond, 1, 0, 6 * time.Millisecond, 6},
	}
	start := f.clock.Now()
	for i, s := range steps {
		f.advance(time.Duration(start + int64(s.at) - f.clock.Now()))
		ok := 0
		var last client.Decision
		for range s.n {
			last = b.Try("k")
			if last.OK {
				ok++
			}
			settled(t, b)
		}
		if ok != s.ok || (!last.OK && last.Wait != s.wait) || calls() != s.calls {
			t.Fatalf("step %d at %v: %d of %d let through, last %+v, %d calls; want %d, a wait of %v, %d calls (%+v)",
				i, s.at, ok, s.n, last, calls(), s.ok, s.wait, s.calls, b.LeaseStats())
		}
	}
}

// TestLeaseFractionalAsksRedis: a request for a fraction of a token is not
// drawn from a lease; it goes to Redis.
func TestLeaseFractionalAsksRedis(t *testing.T) {
	f := newFake(t)
	b := leased(t, f, f.cfg(), 1000, 1000)
	for range 10 {
		b.Allow("k")
		settled(t, b)
	}
	if b.LeaseStats().Held == 0 {
		t.Fatalf("no lease after 10 requests: %+v", b.LeaseStats())
	}
	before := b.Stats().Calls
	if !b.AllowN("k", 1.5) {
		t.Fatal("AllowN(1.5) refused")
	}
	if got := b.Stats().Calls - before; got != 1 {
		t.Errorf("AllowN(1.5) made %d calls, want 1: a fraction goes to Redis", got)
	}
}

// TestLeaseCallFails: when lease calls fail, a hot key's requests go to
// Redis one by one and are let through by it; the key tries a lease again
// only a Timeout later.
func TestLeaseCallFails(t *testing.T) {
	f := newFake(t)
	f.rdb.AddHook(hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if isLease(cmd) {
				err := errors.New("lease call lost")
				cmd.SetErr(err)
				return err
			}
			return next(ctx, cmd)
		}
	}})
	cfg := f.cfg()
	cfg.Timeout = 100 * time.Millisecond
	b := leased(t, f, cfg, 1000, 1000)
	for range 50 { // 250 requests over 50 ms
		for range 5 {
			if !b.Allow("k") {
				t.Fatal("Allow refused with Redis answering requests")
			}
			settled(t, b)
		}
		f.advance(time.Millisecond)
	}
	ls := b.LeaseStats()
	if ls.Failures != 1 || ls.Calls != 1 || ls.Leases != 0 {
		t.Errorf("%+v: want one lease call, failed, within the Timeout", ls)
	}
	if got := b.Stats(); got.Admitted != 250 || got.Fallbacks != 0 {
		t.Errorf("Stats %+v: want 250 let through by Redis", got)
	}
	f.advance(cfg.Timeout)
	for range 5 { // past LeaseAbove again
		b.Allow("k")
		settled(t, b)
	}
	if got := b.LeaseStats().Calls; got != 2 {
		t.Errorf("%d lease calls a Timeout after the failure, want a second", got)
	}
}

// TestLeaseSweep: a bucket asked once each for many keys keeps few of
// them once they have been quiet for two lease periods.
func TestLeaseSweep(t *testing.T) {
	f := newFake(t)
	b := leased(t, f, f.cfg(), 1000, 10)
	b.ls.floor = 16 // rather than 1,024, so the test is short
	b.ls.sweepAt.Store(b.ls.floor)
	for round := range 5 {
		for i := range 20 {
			b.Allow(fmt.Sprint(round, ":", i))
		}
		f.advance(3 * leasePeriod)
	}
	if got, n := b.ls.count.Load(), 0; got > 40 {
		b.ls.keys.Range(func(any, any) bool { n++; return true })
		t.Errorf("%d keys kept (%d in the map) after 100 quiet ones, want those of the last round or two", got, n)
	}
}

// TestLeaseInBubble: a leased bucket works inside a synctest bubble: its
// lease ends on the bubble's clock and goes back, and Close ends its
// calls. The miniredis runs outside the bubble.
func TestLeaseInBubble(t *testing.T) {
	mr := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		eng := engine.New()
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 1})
		defer rdb.Close()
		b, err := NewBucket(eng, Config{Client: rdb, Timeout: time.Minute, Lease: leasePeriod}, 1.0/3600, 100)
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			if !b.Allow("k") {
				t.Fatal("Allow refused")
			}
		}
		if b.LeaseStats().Held == 0 {
			t.Fatalf("no lease after 10 requests: %+v", b.LeaseStats())
		}
		time.Sleep(2 * leasePeriod) // the lease ends and goes back
		for i := 0; b.ls.flying.Load() != 0; i++ {
			if i == 1000 {
				t.Fatal("the give-back call still in flight after a second of the bubble's time")
			}
			time.Sleep(time.Millisecond)
		}
		ls := b.LeaseStats()
		if ls.Held != 0 || ls.Returned == 0 || ls.Given != ls.Returned {
			t.Errorf("after the lease's end: %+v, want all it held given back", ls)
		}
		if got := b.Tokens("k"); got != 90 {
			t.Errorf("Redis holds %v, want the burst less the 10 let through", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := eng.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
	})
}

// TestLeaseLateCall: a caller waiting for a lease call that hangs (in a
// client that does not end calls at their ctx's deadline) stops waiting
// once Config.Timeout has passed on the engine's clock, and goes to Redis
// alone.
func TestLeaseLateCall(t *testing.T) {
	f := newFake(t)
	release, entered := holdLeaseCalls(f)
	cfg := f.cfg()
	cfg.Timeout = 100 * time.Millisecond
	b := leased(t, f, cfg, 1000, 1000)
	defer settled(t, b)
	defer close(release)
	for range 4 {
		b.Allow("k") // quiet so far
	}
	got := make(chan bool, 1)
	go func() { got <- b.Allow("k") }() // takes a lease, and waits for it
	within(t, entered, "the lease call")
	select {
	case <-got:
		t.Fatal("the caller did not wait for the lease call")
	default:
	}
	f.advance(cfg.Timeout)
	if !recv(t, got, "the caller waiting for a lease call past its Timeout") {
		t.Error("Allow refused: Redis alone should let it through")
	}
	if n := b.Stats().Calls - b.LeaseStats().Calls; n != 5 {
		t.Errorf("%d calls one by one, want 5: the four quiet ones and the one that waited", n)
	}
}

// TestLeaseEngineShutdown: the engine's Shutdown gives back what a
// leased bucket holds, as its Close would.
func TestLeaseEngineShutdown(t *testing.T) {
	f := newFake(t)
	eng := engine.New(engine.WithClock(f.clock))
	cfg := f.cfg()
	cfg.Lease = leasePeriod
	const rate, burst = 1e-6, 100
	b, err := NewBucket(eng, cfg, rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	let := 0
	for range 10 {
		if b.Allow("k") {
			let++
		}
		settled(t, b)
	}
	held := b.LeaseStats().Held
	if held == 0 {
		t.Fatalf("no lease after 10 requests: %+v", b.LeaseStats())
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if ls := b.LeaseStats(); ls.Given != held {
		t.Errorf("gave back %d at the engine's Shutdown, want the %d held", ls.Given, held)
	}
	if got := redisTokens(t, f, "moonredis:bucket:", "k", rate, burst); got != float64(burst-let) {
		t.Errorf("Redis holds %v, want the burst less the %d let through", got, let)
	}
	if b.Allow("k") {
		t.Error("Allow after the engine's Shutdown said yes")
	}
}

// TestLeaseConservation: callers on eight goroutines take one key of a
// bucket that never refills, one by one and from leases, in rounds
// between which the clock moves past a lease's end (leases end, and go
// back); the last round drains the key, and Close comes last. Nothing is
// lost or made: Redis holds the burst less exactly what was let through.
func TestLeaseConservation(t *testing.T) {
	f := newFake(t)
	const rate, burst = 1e-6, 2000
	b := leased(t, f, f.cfg(), rate, burst)
	var let atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for round := range 6 {
				n := 30
				if round == 5 {
					n = 300 // more than is left
				}
				for range n {
					if b.Allow("k") {
						let.Add(1)
					}
				}
				next := f.clock.Now() + int64(leasePeriod) + int64(10*time.Millisecond)
				for end := time.Now().Add(bound); f.clock.Now() < next; {
					if time.Now().After(end) {
						t.Errorf("the clock did not move past %v", time.Duration(next))
						return
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for moving := true; moving; {
		select {
		case <-done:
			moving = false
		case <-time.After(time.Millisecond):
			f.advance(10 * time.Millisecond)
		}
	}
	settled(t, b)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ls := b.LeaseStats()
	t.Logf("let through %d; %+v", let.Load(), ls)
	if got := b.Stats().Admitted; got != let.Load() {
		t.Errorf("Stats.Admitted = %d, want the %d let through", got, let.Load())
	}
	if ls.Held != 0 || ls.Returned == 0 || ls.Given != ls.Returned {
		t.Errorf("after Close: %+v, want leases returned, and all given back", ls)
	}
	if got := redisTokens(t, f, "moonredis:bucket:", "k", rate, burst); got != float64(burst-let.Load()) {
		t.Errorf("Redis holds %v, want the burst less the %d let through", got, let.Load())
	}
}

// TestLeaseConfig: Lease and LeaseAbove out of range get their documented
// answers: no leases for a Lease below zero, a millisecond for one below
// it, the default threshold for LeaseAbove <= 0, NaN or infinite, and a
// huge one that never leases rather than one that wraps around.
func TestLeaseConfig(t *testing.T) {
	f := newFake(t)
	for _, c := range []struct {
		lease  time.Duration
		above  float64
		period time.Duration // 0: no leases
		most   int64         // requests a period sent one by one before a lease
	}{
		{-time.Second, 0, 0, 0},
		{0, 100, 0, 0},
		{time.Nanosecond, 0, time.Millisecond, 4},
		{leasePeriod, 0, leasePeriod, 4},
		{leasePeriod, nanf(), leasePeriod, 4},
		{leasePeriod, inff(), leasePeriod, 4},
		{leasePeriod, -5, leasePeriod, 4},
		{leasePeriod, 1000, leasePeriod, 50},
		{leasePeriod, 1e300, leasePeriod, 1e18},
	} {
		cfg := f.cfg()
		cfg.Lease, cfg.LeaseAbove = c.lease, c.above
		b, err := NewBucket(f.eng, cfg, 10, 10)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.period == 0 && b.ls != nil:
			t.Errorf("Lease %v: leases on", c.lease)
		case c.period != 0 && (b.ls == nil || b.ls.period != int64(c.period) || b.ls.above != c.most):
			t.Errorf("Lease %v, LeaseAbove %v: leases %+v, want a period of %v and %d requests", c.lease, c.above, b.ls, c.period, c.most)
		}
		b.Close(context.Background())
	}
}

// TestLeaseRefusedKeyStaysHot: a hot key refused by the lease for longer
// than a Lease is still hot when the wait ends. Its next request takes a
// lease; it does not go to Redis one request at a time as a quiet key's
// would, which would cost a round trip per request just as the key's
// tokens come back.
func TestLeaseRefusedKeyStaysHot(t *testing.T) {
	f := newFake(t)
	b := leased(t, f, f.cfg(), 10, 10) // a token every 100 ms: waits past a Lease
	var last client.Decision
	for range 40 {
		if last = b.Try("k"); !last.OK && last.Wait > 0 {
			break
		}
		settled(t, b)
	}
	if last.OK || last.Wait <= leasePeriod {
		t.Fatalf("the lease never refused with a wait past a Lease of %v: last %+v (%+v)", leasePeriod, last, b.LeaseStats())
	}
	for i := 0; i < 3; i++ { // refused meanwhile: demand all the same
		b.Try("k")
	}
	one, leases := oneByOne(b), b.LeaseStats().Calls
	f.advance(last.Wait + time.Millisecond)
	d := b.Try("k")
	settled(t, b)
	if !d.OK {
		t.Fatalf("after the wait %v: refused %+v (%+v)", last.Wait, d, b.LeaseStats())
	}
	if got := oneByOne(b); got != one {
		t.Errorf("after the wait the key went to Redis one request at a time (%d calls, want %d): it is not quiet", got, one)
	}
	if got := b.LeaseStats().Calls; got <= leases {
		t.Errorf("after the wait no lease call went (%d, had %d)", got, leases)
	}
}

// TestLeaseNoDrawOnceClosing: once Close has begun, a request is not let
// through from the lease the bucket still holds, by Allow or by Wait.
func TestLeaseNoDrawOnceClosing(t *testing.T) {
	f := newFake(t)
	b := leased(t, f, f.cfg(), 1e-6, 100)
	for range 10 {
		b.Allow("k")
		settled(t, b)
	}
	before := b.LeaseStats()
	if before.Held == 0 {
		t.Fatalf("no lease after 10 requests: %+v", before)
	}
	b.ls.shut.Store(true) // what Close does first
	b.Allow("k")
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	b.Wait(ctx, "k")
	if after := b.LeaseStats(); after.Draws != before.Draws || after.Held != before.Held {
		t.Errorf("drawn from the lease once Close had begun: %+v, then %+v", before, after)
	}
}

// TestLeaseGrantAfterClose: a lease call still in flight when the
// leases' close gives up on its ctx lands a grant that is never drawn,
// and goes back to Redis once it has landed.
func TestLeaseGrantAfterClose(t *testing.T) {
	f := newFake(t)
	release, entered := holdLeaseCalls(f)
	const rate, burst = 1e-6, 100
	b := leased(t, f, f.cfg(), rate, burst)
	let := 0
	for range 4 {
		if b.Allow("k") { // quiet so far
			let++
		}
	}
	got := make(chan bool, 1)
	go func() { got <- b.Allow("k") }() // takes a lease, and waits for it
	within(t, entered, "the lease call")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.ls.close(ctx); err == nil {
		t.Fatal("close with its ctx done and a call in flight returned nil")
	}
	close(release)
	if recv(t, got, "the caller waiting for the lease call") {
		t.Error("let through from a lease that landed after close")
	}
	settled(t, b)
	waitFor(t, "the late grant to go back", func() bool {
		ls := b.LeaseStats()
		return ls.Leased > 0 && ls.Given == ls.Leased
	})
	if ls := b.LeaseStats(); ls.Held != 0 || ls.Draws != 0 {
		t.Errorf("a grant landed after close is held or drawn: %+v", ls)
	}
	if got := redisTokens(t, f, "moonredis:bucket:", "k", rate, burst); got != float64(burst-let) {
		t.Errorf("Redis holds %v, want the burst less the %d let through", got, let)
	}
}

// holdLeaseCalls makes f's client hold every lease call until release is
// closed, deaf to the call's ctx, as a client that does not end calls at
// their deadline would; entered is closed as the first one comes.
func holdLeaseCalls(f *fake) (release, entered chan struct{}) {
	release, entered = make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.rdb.AddHook(hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if isLease(cmd) {
				once.Do(func() { close(entered) })
				<-release
			}
			return next(ctx, cmd)
		}
	}})
	return release, entered
}

// TestLeaseAwaitDrawsALandedGrant: a caller that starts a key's lease
// call and comes to wait for it after it has landed draws from its
// grant. It makes no call: alone, Redis would refuse it for the tokens
// this process just took, and another lease call would take more while
// those are held.
func TestLeaseAwaitDrawsALandedGrant(t *testing.T) {
	f := newFake(t)
	b := leased(t, f, f.cfg(), 10, 10)
	e := b.ls.entry("k")
	// A grant of 6 that landed just now, before the caller waits.
	now := f.clock.Now()
	e.w.Store(6)
	e.end.Store(now + int64(leasePeriod))
	e.landed.Store(now)
	e.base = 6
	done := make(chan struct{})
	close(done)
	e.sig.Store(&callSig{done: done, late: make(chan struct{})})
	d, ok := b.ls.await(e, 1)
	if !ok || !d.OK || d.Left != 5 {
		t.Fatalf("await = %+v, %v; want a draw from the grant, 5 left", d, ok)
	}
	if calls := b.Stats().Calls; calls != 0 {
		t.Errorf("%d calls to Redis, want none", calls)
	}
}
