package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// limitRig is an engine on a virtual clock, shut down with the test.
type limitRig struct {
	t     *testing.T
	ctx   context.Context // the safety net
	clock *vclock.Virtual
	eng   *engine.Engine
	t0    int64
}

func newLimitRig(t *testing.T) *limitRig {
	t.Helper()
	clock := vclock.NewVirtual()
	eng := engine.New(engine.WithClock(clock))
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(func() {
		cancel()
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &limitRig{t: t, ctx: ctx, clock: clock, eng: eng, t0: clock.Now()}
}

// to moves the clock to t0+d.
func (r *limitRig) to(d time.Duration) { r.clock.AdvanceTo(r.t0 + int64(d)) }

// parked asks l's actor, taking nothing, how many callers are parked in
// key's line. It is how a test knows a Wait has parked.
func (r *limitRig) parked(l *limiter, key string) int {
	reply := make(chan actors.Permit, 1)
	l.to(key).Send(&actors.Left{Now: r.eng.Now(), Key: key, Reply: reply})
	return (<-reply).Parked
}

// awaitParked yields until key's line holds want callers.
func (r *limitRig) awaitParked(l *limiter, key string, want int) {
	r.t.Helper()
	for {
		got := r.parked(l, key)
		if got == want {
			return
		}
		if r.ctx.Err() != nil {
			r.t.Fatalf("line of %q holds %d, want %d", key, got, want)
		}
		runtime.Gosched()
	}
}

// waitAsync runs wait on its own goroutine and hands back its error.
func waitAsync(ctx context.Context, wait func(context.Context) error) <-chan error {
	out := make(chan error, 1)
	go func() { out <- wait(ctx) }()
	return out
}

func (r *limitRig) result(ch <-chan error, what string) error {
	r.t.Helper()
	select {
	case err := <-ch:
		return err
	case <-r.ctx.Done():
		r.t.Fatalf("%s never returned", what)
		return nil
	}
}

// TestBucketSteps walks a bucket of 2 a second, burst 3, through fixed
// instants.
func TestBucketSteps(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at   time.Duration
		op   string // allow, tokens, delay
		n    float64
		want any
	}{
		{0, "tokens", 0, 3.0},
		{0, "allow", 1, true},
		{0, "allow", 2, true},
		{0, "allow", 1, false},
		{0, "delay", 0, 500 * time.Millisecond},
		{250 * time.Millisecond, "tokens", 0, 0.5},
		{250 * time.Millisecond, "allow", 1, false},
		{250 * time.Millisecond, "delay", 0, 250 * time.Millisecond},
		{500 * time.Millisecond, "allow", 1, true},
		{10 * time.Second, "tokens", 0, 3.0},  // full, not more
		{10 * time.Second, "allow", 4, false}, // more than the burst, ever
		{10 * time.Second, "allow", 0, true},  // nothing asked, nothing taken
		{10 * time.Second, "tokens", 0, 3.0},
		{10 * time.Second, "delay", 0, time.Duration(0)},
	}
	for i, s := range steps {
		r.to(s.at)
		var got any
		switch s.op {
		case "allow":
			got = b.AllowN(s.n)
		case "tokens":
			got = b.Tokens()
		case "delay":
			got = b.Delay()
		}
		if got != s.want {
			t.Fatalf("step %d: %s(%v) at +%v = %v, want %v", i, s.op, s.n, s.at, got, s.want)
		}
	}
}

// TestBucketWaitFIFO: callers parked in Wait are granted one by one in the
// order they came, each at the instant its token is earned.
func TestBucketWaitFIFO(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Allow() {
		t.Fatal("step 0: a full bucket refused")
	}
	const n = 5
	type grant struct {
		who int
		at  int64
		err error
	}
	grants := make(chan grant, n)
	for i := range n {
		go func() {
			err := b.Wait(r.ctx)
			grants <- grant{i, r.clock.Now(), err}
		}()
		r.awaitParked(&b.l, "", i+1) // parked, in this order
	}
	if b.Allow() {
		t.Fatal("step 1: Allow overtook the callers in line")
	}
	for i := range n {
		if err := r.clock.WaitPending(r.ctx, 1); err != nil {
			t.Fatalf("step %d: %v", i+2, err)
		}
		r.clock.AdvanceNext()
		g := <-grants
		want := r.t0 + int64(i+1)*int64(time.Second)
		if g.err != nil || g.who != i || g.at != want {
			t.Fatalf("step %d: granted caller %d at +%v (err %v), want caller %d at +%v",
				i+2, g.who, time.Duration(g.at-r.t0), g.err, i, time.Duration(want-r.t0))
		}
	}
}

// TestBucketWaitDeadline: a Wait whose wait would end after ctx's deadline
// fails at once with a *WaitError saying the wait, without parking and
// without the clock moving; one that fits parks.
func TestBucketWaitDeadline(t *testing.T) {
	r := newLimitRig(t)
	const rate = 1.0 / 3600 // one an hour
	b, err := NewBucket(r.eng, rate, 1)
	if err != nil {
		t.Fatal(err)
	}
	model := policy.NewBucket(rate, 1, r.t0)
	if !b.Allow() || !model.Take(r.t0, 1) {
		t.Fatal("step 0: a full bucket refused")
	}
	want := model.Next(r.t0, 1)

	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	err = b.Wait(ctx)
	var we *WaitError
	if !errors.As(err, &we) || !errors.Is(err, ErrExceedsDeadline) || we.Wait != want {
		t.Fatalf("step 1: Wait with a minute left = %v, want a *WaitError of %v", err, want)
	}
	if now := r.clock.Now(); now != r.t0 {
		t.Fatalf("step 1: the clock moved %v", time.Duration(now-r.t0))
	}
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("step 1: %d timers pending, want none: nothing parked", n)
	}
	if got := r.parked(&b.l, ""); got != 0 {
		t.Fatalf("step 1: %d in line", got)
	}

	// Behind a caller in line, the wait counts it too.
	// Not from r.ctx, whose own deadline is sooner.
	long, cancelLong := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancelLong()
	first := waitAsync(long, b.Wait)
	r.awaitParked(&b.l, "", 1)
	err = b.Wait(long) // a two-hour wait, with less than two hours left
	if !errors.As(err, &we) || we.Wait < 2*time.Hour-time.Microsecond || we.Wait > 2*time.Hour+time.Microsecond {
		t.Fatalf("step 2: Wait behind one = %v, want a *WaitError of 2h", err)
	}
	r.to(want)
	if err := r.result(first, "the first Wait"); err != nil {
		t.Fatalf("step 3: the first Wait = %v, want it granted", err)
	}

	// More than the burst is refused whatever the deadline.
	if err := b.WaitN(r.ctx, 2); !errors.Is(err, ErrExceedsBurst) {
		t.Fatalf("step 4: WaitN(2) with burst 1 = %v, want ErrExceedsBurst", err)
	}
}

// TestBucketWaitNever: a bucket that earns nothing answers a Wait it cannot
// grant at once, rather than parking it for ever.
func TestBucketWaitNever(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := b.Wait(r.ctx); err != nil {
			t.Fatalf("step %d: Wait from the first burst = %v", i, err)
		}
	}
	var we *WaitError
	if err := b.Wait(r.ctx); !errors.As(err, &we) || we.Wait != policy.Never {
		t.Fatalf("step 2: Wait on an empty bucket that earns nothing = %v, want a *WaitError of Never", err)
	}
	if d := b.Delay(); d != policy.Never {
		t.Fatalf("step 3: Delay = %v, want Never", d)
	}
}

// TestBucketWaitCancel: a caller that gives up while parked gets ctx's
// error, leaves the line, and its token goes to the next in line, or stays
// in the bucket.
func TestBucketWaitCancel(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Allow()
	ctxA, cancelA := context.WithCancel(r.ctx)
	a := waitAsync(ctxA, b.Wait)
	r.awaitParked(&b.l, "", 1)
	bw := waitAsync(r.ctx, b.Wait)
	r.awaitParked(&b.l, "", 2)

	cancelA()
	if err := r.result(a, "the cancelled Wait"); !errors.Is(err, context.Canceled) {
		t.Fatalf("step 1: cancelled Wait = %v, want context.Canceled", err)
	}
	r.awaitParked(&b.l, "", 1) // the second is first now
	r.to(time.Second)
	if err := r.result(bw, "the second Wait"); err != nil {
		t.Fatalf("step 2: second Wait = %v, want the token that came at +1s", err)
	}

	// Alone in line, cancelled: its token stays in the bucket.
	ctxC, cancelC := context.WithCancel(r.ctx)
	c := waitAsync(ctxC, b.Wait)
	r.awaitParked(&b.l, "", 1)
	cancelC()
	if err := r.result(c, "the lone cancelled Wait"); !errors.Is(err, context.Canceled) {
		t.Fatalf("step 3: cancelled Wait = %v, want context.Canceled", err)
	}
	if got := r.parked(&b.l, ""); got != 0 {
		t.Fatalf("step 4: %d still in line", got)
	}
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("step 4: %d timers left behind", n)
	}
	r.to(2 * time.Second)
	if !b.Allow() {
		t.Fatal("step 5: the token a withdrawn caller did not take is gone")
	}

	// A ctx done before the call never reaches the bucket.
	done, cancel := context.WithCancel(r.ctx)
	cancel()
	if err := b.Wait(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("step 6: Wait on a done ctx = %v", err)
	}
}

// TestBucketClose: Close answers parked callers ErrClosed; afterwards every
// call has its documented answer; a second Close, or one after the engine
// shut down, is nil.
func TestBucketClose(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Allow()
	parked := waitAsync(r.ctx, b.Wait)
	r.awaitParked(&b.l, "", 1)
	if err := b.Close(r.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.result(parked, "the parked Wait"); !errors.Is(err, ErrClosed) {
		t.Fatalf("parked Wait at Close = %v, want ErrClosed", err)
	}
	if b.Allow() || b.Tokens() != 0 || b.Delay() != policy.Never {
		t.Fatalf("after Close: Allow %v, Tokens %v, Delay %v; want false, 0, Never", b.Allow(), b.Tokens(), b.Delay())
	}
	if err := b.Wait(r.ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close = %v, want ErrClosed", err)
	}
	if err := b.Close(r.ctx); err != nil {
		t.Fatalf("second Close = %v", err)
	}

	w, err := NewWindow(r.eng, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.eng.Shutdown(r.ctx); err != nil {
		t.Fatal(err)
	}
	if w.Allow() {
		t.Fatal("a window on a shut engine allowed")
	}
	if err := w.Wait(r.ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait on a shut engine = %v, want ErrClosed", err)
	}
	if err := w.Close(r.ctx); err != nil {
		t.Fatalf("Close after Shutdown = %v", err)
	}
	if _, err := NewBucket(r.eng, 1, 1); err == nil {
		t.Fatal("NewBucket on a shut engine succeeded")
	}
}

// TestLimiterBadInput: every odd argument has its documented answer.
func TestLimiterBadInput(t *testing.T) {
	r := newLimitRig(t)
	if _, err := NewBucket(nil, 1, 1); err == nil {
		t.Error("NewBucket(nil) succeeded")
	}
	if _, err := NewWindow(nil, 1, time.Second); err == nil {
		t.Error("NewWindow(nil) succeeded")
	}
	if _, err := NewKeyedBucket(nil, 1, 1); err == nil {
		t.Error("NewKeyedBucket(nil) succeeded")
	}
	if _, err := NewKeyedWindow(nil, 1, time.Second); err == nil {
		t.Error("NewKeyedWindow(nil) succeeded")
	}
	if _, err := NewGate(nil, 1); err == nil {
		t.Error("NewGate(nil) succeeded")
	}
	// A burst of zero is a second's worth.
	b, _ := NewBucket(r.eng, 4, 0)
	if got := b.Tokens(); got != 4 {
		t.Errorf("burst 0 at rate 4 holds %v, want 4", got)
	}
	if b.AllowN(nan()) {
		t.Error("AllowN(NaN) allowed")
	}
	if err := b.WaitN(r.ctx, nan()); !errors.Is(err, ErrExceedsBurst) {
		t.Errorf("WaitN(NaN) = %v, want ErrExceedsBurst", err)
	}
	// A quota of nothing refuses, and says it always will.
	w, _ := NewWindow(r.eng, 0, time.Hour)
	var we *WaitError
	if w.Allow() || w.Left() != 0 || w.Delay() != policy.Never {
		t.Errorf("allow 0: Allow %v Left %v Delay %v", w.Allow(), w.Left(), w.Delay())
	}
	if err := w.Wait(r.ctx); !errors.As(err, &we) || we.Wait != policy.Never {
		t.Errorf("allow 0: Wait = %v, want a *WaitError of Never", err)
	}
	// A window of nothing forgets at once.
	w, _ = NewWindow(r.eng, 2, 0)
	for i := range 5 {
		if !w.Allow() {
			t.Errorf("window 0: Allow %d refused", i)
		}
	}
	// A ctx deadline already passed fails without asking.
	past, cancel := context.WithDeadline(r.ctx, time.Now().Add(-time.Second))
	defer cancel()
	if err := b.Wait(past); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait past the deadline = %v", err)
	}
}

func nan() float64 { z := 0.0; return z / z }

// TestWindowSteps walks a quota of 2 a minute through fixed instants.
func TestWindowSteps(t *testing.T) {
	r := newLimitRig(t)
	w, err := NewWindow(r.eng, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at    time.Duration
		allow bool // try Allow first
		ok    bool
		left  int
		delay time.Duration
	}{
		{0, false, false, 2, 0},
		{0, true, true, 1, 0},
		{10 * time.Second, true, true, 0, 50 * time.Second},
		{20 * time.Second, true, false, 0, 40 * time.Second},
		{time.Minute - 1, true, false, 0, 1},
		{time.Minute, false, false, 1, 0}, // the first left
		{time.Minute, true, true, 0, 10 * time.Second},
		{70 * time.Second, true, true, 0, 50 * time.Second},
	}
	for i, s := range steps {
		r.to(s.at)
		if s.allow {
			if got := w.Allow(); got != s.ok {
				t.Fatalf("step %d: Allow at +%v = %v, want %v", i, s.at, got, s.ok)
			}
		}
		if got := w.Left(); got != s.left {
			t.Fatalf("step %d: Left at +%v = %d, want %d", i, s.at, got, s.left)
		}
		// With nobody waiting, Delay is exact: when the oldest event leaves.
		if got := w.Delay(); got != s.delay {
			t.Fatalf("step %d: Delay at +%v = %v, want %v", i, s.at, got, s.delay)
		}
	}
}

// TestWindowQuotaModel: a quota of N an hour admits exactly what a
// brute-force model of "at most N in any hour" admits, under a seeded
// random arrival pattern with quiet spells and bursts, and no hour-long
// stretch ever holds more than N.
func TestWindowQuotaModel(t *testing.T) {
	const n = 40
	const hour = int64(time.Hour)
	for seed := range uint64(4) {
		r := newLimitRig(t)
		w, err := NewWindow(r.eng, n, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		now := r.t0
		var admitted []int64
		for step := range 3000 {
			switch rng.IntN(10) {
			case 0: // a quiet spell
				now += rng.Int64N(2 * hour)
			case 1, 2, 3: // a burst
			default:
				now += rng.Int64N(int64(3 * time.Minute))
			}
			r.clock.AdvanceTo(now)
			inHour := 0
			for _, a := range admitted {
				if now-a < hour {
					inHour++
				}
			}
			want := inHour < n
			if left := w.Left(); left != n-inHour {
				t.Fatalf("seed %d step %d: Left = %d, model says %d", seed, step, left, n-inHour)
			}
			if got := w.Allow(); got != want {
				t.Fatalf("seed %d step %d: Allow at +%v = %v, model says %v (%d in the last hour)",
					seed, step, time.Duration(now-r.t0), got, want, inHour)
			}
			if want {
				admitted = append(admitted, now)
			}
		}
		// No hour-long stretch holds more than n: check every stretch
		// starting at an admitted event.
		full := 0
		for i, a := range admitted {
			k := 0
			for _, b := range admitted[i:] {
				if b-a < hour {
					k++
				}
			}
			if k > n {
				t.Fatalf("seed %d: %d admitted in the hour from +%v", seed, k, time.Duration(a-r.t0))
			}
			if k == n {
				full++
			}
		}
		if full == 0 {
			t.Fatalf("seed %d: the quota never filled; the arrivals test nothing", seed)
		}
	}
}

// TestWindowWait: a parked Wait is granted when the oldest event leaves
// the window, and one whose deadline certainly cannot be met fails at once.
func TestWindowWait(t *testing.T) {
	r := newLimitRig(t)
	w, err := NewWindow(r.eng, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w.Allow()
	r.to(20 * time.Second)
	w.Allow()

	short, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	var we *WaitError
	if err := w.Wait(short); !errors.As(err, &we) || we.Wait != 40*time.Second {
		t.Fatalf("step 0: Wait with 30s left for a 40s wait = %v", err)
	}
	if r.clock.Now() != r.t0+int64(20*time.Second) || r.clock.Pending() != 0 {
		t.Fatal("step 0: the refused Wait moved the clock or left a timer")
	}

	got := waitAsync(r.ctx, w.Wait)
	if err := r.clock.WaitPending(r.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if d, _ := r.clock.Next(); d != 40*time.Second {
		t.Fatalf("step 1: the window wakes its waiter in %v, want 40s", d)
	}
	r.clock.AdvanceNext()
	if err := r.result(got, "the parked Wait"); err != nil {
		t.Fatalf("step 2: parked Wait = %v", err)
	}
	if now := r.clock.Now(); now != r.t0+int64(time.Minute) {
		t.Fatalf("step 2: granted at +%v, want +1m", time.Duration(now-r.t0))
	}
	if w.Left() != 0 {
		t.Fatalf("step 3: Left = %d after the waiter's event was counted", w.Left())
	}
}

// TestLimiterAllocs: Allow on a bucket, a window or a known key allocates
// nothing.
func TestLimiterAllocs(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 1e9, 1e9)
	w, _ := NewWindow(r.eng, 1<<30, time.Nanosecond)
	if a := testing.AllocsPerRun(1000, func() { b.Allow() }); a != 0 {
		t.Errorf("Bucket.Allow: %v allocs, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() { w.Allow() }); a != 0 {
		t.Errorf("Window.Allow: %v allocs, want 0", a)
	}
	kb, _ := NewKeyedBucket(r.eng, 1e9, 1e9)
	kb.Allow("k") // the key is made once
	if a := testing.AllocsPerRun(1000, func() { kb.Allow("k") }); a != 0 {
		t.Errorf("KeyedBucket.Allow of a known key: %v allocs, want 0", a)
	}
	// Requests that ask the actor every time reuse the limiter's own.
	small, _ := NewBucket(r.eng, 1e9, 8)
	if a := testing.AllocsPerRun(1000, func() { small.Allow() }); a != 0 {
		t.Errorf("Bucket.Allow asking the actor: %v allocs, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() { _ = b.Wait(r.ctx) }); a != 0 {
		t.Errorf("Bucket.Wait: %v allocs, want 0", a)
	}
	g, _ := NewGate(r.eng, 8)
	if a := testing.AllocsPerRun(1000, func() { g.Enter(); g.Leave() }); a != 0 {
		t.Errorf("Gate.Enter and Leave asking the actor: %v allocs, want 0", a)
	}
}

// TestBucketDelayBehindWaiters: Delay counts the callers already parked in
// Wait, so a Retry-After built from it does not promise a token that a
// waiter ahead will take.
func TestBucketDelayBehindWaiters(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 1, 1) // one a second, burst one
	if err != nil {
		t.Fatal(err)
	}
	if !b.Allow() {
		t.Fatal("step 1: the first token was refused")
	}
	if d := b.Delay(); d != time.Second {
		t.Fatalf("step 2: Delay with nobody waiting = %v, want 1s", d)
	}
	done := waitAsync(r.ctx, b.Wait)
	r.awaitParked(&b.l, "", 1)
	if d := b.Delay(); d != 2*time.Second {
		t.Fatalf("step 3: Delay behind one waiter = %v, want 2s", d)
	}
	r.to(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("step 4: the waiter: %v", err)
	}
	if d := b.Delay(); d != time.Second {
		t.Fatalf("step 5: Delay once the waiter is served = %v, want 1s", d)
	}
}

// TestBucketCreditStepsAside: a bucket that lends tokens to its callers
// (a burst of 64 lends four at a time) takes them back before it parks a
// Wait, lends nothing while anyone is parked, so Allow does not overtake
// the caller in line, and reports Tokens exactly throughout.
func TestBucketCreditStepsAside(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 1, 64)
	if err != nil {
		t.Fatal(err)
	}
	if b.credit == nil {
		t.Fatal("a burst of 64 lends nothing")
	}
	for i := range 59 { // some from the lent batch, some from the actor
		if !b.Allow() {
			t.Fatalf("step %d: a bucket with tokens refused", i)
		}
	}
	if got := b.Tokens(); got != 5 {
		t.Fatalf("after 59 of 64: Tokens %v, want 5", got)
	}
	done := make(chan error, 1)
	go func() { done <- b.WaitN(r.ctx, 10) }()
	r.awaitParked(&b.l, "", 1) // parked: 5 more tokens to earn
	for i := range 8 {
		if b.Allow() {
			t.Fatalf("step %d: Allow overtook the caller in line", i)
		}
	}
	if got := b.Tokens(); got != 5 {
		t.Fatalf("with a caller in line: Tokens %v, want 5", got)
	}
	r.clock.WaitPending(r.ctx, 1)
	r.clock.AdvanceNext() // five seconds on: its ten are there
	if err := <-done; err != nil {
		t.Fatalf("WaitN: %v", err)
	}
	if got := b.Tokens(); got != 0 {
		t.Fatalf("after the wait: Tokens %v, want 0", got)
	}
}

// TestWindowAllowAcrossSpansAsksNoActor: a window that lends keeps its
// lease ahead of the clock, so Allows spread over two hundred of its spans
// are all drawn from credit. None is answered by the actor, and Stats
// counts every one.
func TestWindowAllowAcrossSpansAsksNoActor(t *testing.T) {
	r := newLimitRig(t)
	const window = time.Second
	w, err := NewWindow(r.eng, 1<<20, window)
	if err != nil {
		t.Fatal(err)
	}
	span := window / 256          // the window's lease span (see actors.SpawnWindowCredit)
	const spans, each = 200, 1000 // more than the lease and the spare hold: the spans must be renewed
	for k := range time.Duration(spans) {
		r.to(k*span + span/2)
		for i := range each {
			if !w.Allow() {
				t.Fatalf("span %d, call %d: refused, with the window far from full", k, i)
			}
		}
	}
	if asked := w.l.counts.allowed.Load() + w.l.counts.refused.Load(); asked != 0 {
		t.Fatalf("%d Allows were answered by the actor, want none: the lease lapsed at a span boundary", asked)
	}
	if got := w.Stats().Allowed; got != spans*each {
		t.Fatalf("Stats().Allowed = %d, want %d", got, spans*each)
	}
}

// TestBucketAllowRenewsAsksNoActor: a bucket's lease is topped up before
// it runs dry, so a hundred leases' worth of Allows are all drawn from
// credit, none answered by the actor.
func TestBucketAllowRenewsAsksNoActor(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 1, 1e6) // a lease of 1,024 tokens
	if err != nil {
		t.Fatal(err)
	}
	const n = 100 * 1024
	for i := range n {
		if !b.Allow() {
			t.Fatalf("call %d: refused, with the bucket far from empty", i)
		}
	}
	if asked := b.l.counts.allowed.Load() + b.l.counts.refused.Load(); asked != 0 {
		t.Fatalf("%d Allows were answered by the actor, want none: the lease ran dry", asked)
	}
	if got := b.Stats().Allowed; got != n {
		t.Fatalf("Stats().Allowed = %d, want %d", got, n)
	}
}
