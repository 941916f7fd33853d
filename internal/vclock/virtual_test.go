package vclock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/internal/vclock"
)

// firing is one timer going off: which one, and the clock (as an offset from
// Epoch) while its f ran.
type firing struct {
	name string
	at   time.Duration
}

func (f firing) String() string { return fmt.Sprintf("%s@%v", f.name, f.at) }

// recorder collects firings. Callbacks of a Virtual run on the advancing
// goroutine, but the mutex keeps tests that advance from several goroutines
// honest under -race.
type recorder struct {
	v   *vclock.Virtual
	mu  sync.Mutex
	got []firing
}

// fn returns an f that records name and the clock when it runs.
func (r *recorder) fn(name string) func() {
	return func() {
		at := time.Duration(r.v.Now() - vclock.Epoch)
		r.mu.Lock()
		r.got = append(r.got, firing{name, at})
		r.mu.Unlock()
	}
}

// take returns and forgets what has fired so far.
func (r *recorder) take() []firing {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

func TestNewVirtualStartsAtEpoch(t *testing.T) {
	v := vclock.NewVirtual()
	want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	if got := v.Now(); got != want || vclock.Epoch != want {
		t.Fatalf("Now() = %d, Epoch = %d, want both %d (2026-01-01T00:00:00Z)", got, vclock.Epoch, want)
	}
	if v.Pending() != 0 || v.Registered() != 0 {
		t.Fatalf("new clock has Pending %d, Registered %d; want 0, 0", v.Pending(), v.Registered())
	}
	if d, ok := v.Next(); ok {
		t.Fatalf("Next() = %v, true on a clock with no timers; want false", d)
	}
}

func TestZeroVirtualIsUsable(t *testing.T) {
	var v vclock.Virtual
	r := &recorder{v: &v}
	v.AfterFunc(time.Second, func() { r.got = append(r.got, firing{"a", time.Duration(v.Now())}) })
	v.Advance(2 * time.Second)
	if got := r.take(); !slices.Equal(got, []firing{{"a", time.Second}}) {
		t.Fatalf("fired %v, want [a@1s] (zero Virtual starts at 0)", got)
	}
	if v.Now() != int64(2*time.Second) {
		t.Fatalf("Now() = %d, want %d", v.Now(), int64(2*time.Second))
	}
}

// TestAdvanceStory walks one clock through a sequence of advances over
// timers registered up front: each step says what fires, in what order, and
// with what clock reading.
func TestAdvanceStory(t *testing.T) {
	v := vclock.NewVirtual()
	r := &recorder{v: v}
	v.AfterFunc(5*time.Second, r.fn("e5"))
	v.AfterFunc(1*time.Second, r.fn("a1"))
	v.AfterFunc(3*time.Second, r.fn("c3"))
	v.AfterFunc(3*time.Second, r.fn("d3")) // tie with c3, registered later
	v.AfterFunc(0, r.fn("zero"))
	v.AfterFunc(-time.Second, r.fn("neg")) // due now, like zero, registered after it
	v.AfterFunc(10*time.Second, r.fn("j10"))

	if got := r.take(); len(got) != 0 {
		t.Fatalf("AfterFunc fired %v on registration; nothing may fire before an advance", got)
	}

	steps := []struct {
		advance time.Duration
		fired   []firing
		now     time.Duration // offset from Epoch after the step
		pending int
		next    time.Duration // Next() after the step, if pending > 0
	}{
		// step 0: Advance(0) fires only what is due now.
		{0, []firing{{"zero", 0}, {"neg", 0}}, 0, 5, time.Second},
		// step 1: a negative advance does nothing.
		{-time.Second, nil, 0, 5, time.Second},
		// step 2: stops short of a1.
		{999 * time.Millisecond, nil, 999 * time.Millisecond, 5, time.Millisecond},
		// step 3: lands exactly on a1's deadline: due means <=.
		{time.Millisecond, []firing{{"a1", time.Second}}, time.Second, 4, 2 * time.Second},
		// step 4: crosses c3, d3 (registration order) and e5, each at its own instant.
		{5 * time.Second, []firing{{"c3", 3 * time.Second}, {"d3", 3 * time.Second}, {"e5", 5 * time.Second}}, 6 * time.Second, 1, 4 * time.Second},
		// step 5: the last one.
		{time.Hour, []firing{{"j10", 10 * time.Second}}, time.Hour + 6*time.Second, 0, 0},
		// step 6: nothing left; time still moves.
		{time.Minute, nil, time.Hour + time.Minute + 6*time.Second, 0, 0},
	}
	for i, s := range steps {
		v.Advance(s.advance)
		if got := r.take(); !slices.Equal(got, s.fired) {
			t.Errorf("step %d: Advance(%v) fired %v, want %v", i, s.advance, got, s.fired)
		}
		if got := time.Duration(v.Now() - vclock.Epoch); got != s.now {
			t.Errorf("step %d: Now() = Epoch+%v, want Epoch+%v", i, got, s.now)
		}
		if got := v.Pending(); got != s.pending {
			t.Errorf("step %d: Pending() = %d, want %d", i, got, s.pending)
		}
		next, ok := v.Next()
		if ok != (s.pending > 0) || (ok && next != s.next) {
			t.Errorf("step %d: Next() = %v, %v; want %v, %v", i, next, ok, s.next, s.pending > 0)
		}
	}
	if got := v.Registered(); got != 7 {
		t.Errorf("Registered() = %d, want 7", got)
	}
}

func TestTiesFireInRegistrationOrder(t *testing.T) {
	v := vclock.NewVirtual()
	r := &recorder{v: v}
	var want []firing
	// Registered from two different instants onto one deadline: the one
	// registered first fires first, whatever d it was given.
	v.AfterFunc(2*time.Second, r.fn("first"))
	want = append(want, firing{"first", 2 * time.Second})
	v.Advance(time.Second)
	for i := range 20 {
		name := fmt.Sprint(i)
		v.AfterFunc(time.Second, r.fn(name))
		want = append(want, firing{name, 2 * time.Second})
	}
	v.Advance(time.Second)
	if got := r.take(); !slices.Equal(got, want) {
		t.Fatalf("fired %v\nwant  %v", got, want)
	}
}

// TestCallbackRegistersTimers covers the engine's own pattern: a tick that
// schedules the next tick from inside its callback.
func TestCallbackRegistersTimers(t *testing.T) {
	v := vclock.NewVirtual()
	r := &recorder{v: v}

	var tick func()
	tick = func() {
		r.fn("tick")()
		v.AfterFunc(time.Second, tick)
	}
	v.AfterFunc(time.Second, tick)
	v.AfterFunc(2*time.Second, r.fn("other"))
	v.AfterFunc(2*time.Second, func() {
		r.fn("spawner")()
		v.AfterFunc(0, r.fn("spawned-now"))             // due at 2s, after everything already due at 2s
		v.AfterFunc(500*time.Millisecond, r.fn("half")) // due at 2.5s
		v.AfterFunc(time.Hour, r.fn("far"))             // beyond this advance
	})

	v.Advance(3 * time.Second)
	want := []firing{
		{"tick", 1 * time.Second},
		{"other", 2 * time.Second},
		{"spawner", 2 * time.Second},
		{"tick", 2 * time.Second}, // registered at 1s, so after other and spawner, registered at 0
		{"spawned-now", 2 * time.Second},
		{"half", 2500 * time.Millisecond},
		{"tick", 3 * time.Second},
	}
	if got := r.take(); !slices.Equal(got, want) {
		t.Fatalf("fired %v\nwant  %v", got, want)
	}
	// Left: the tick for 4s and "far".
	if got := v.Pending(); got != 2 {
		t.Fatalf("Pending() = %d, want 2 (next tick, far)", got)
	}
	if d, ok := v.Next(); !ok || d != time.Second {
		t.Fatalf("Next() = %v, %v; want 1s, true", d, ok)
	}
}

func TestStop(t *testing.T) {
	t.Run("before it fires", func(t *testing.T) {
		v := vclock.NewVirtual()
		r := &recorder{v: v}
		a := v.AfterFunc(time.Second, r.fn("a"))
		v.AfterFunc(2*time.Second, r.fn("b"))
		if !a.Stop() {
			t.Fatal("Stop() on a pending timer = false, want true")
		}
		if v.Pending() != 1 {
			t.Fatalf("Pending() = %d after Stop, want 1", v.Pending())
		}
		if a.Stop() {
			t.Fatal("second Stop() = true, want false")
		}
		v.Advance(time.Hour)
		if got := r.take(); !slices.Equal(got, []firing{{"b", 2 * time.Second}}) {
			t.Fatalf("fired %v, want [b@2s]: a stopped timer must not fire", got)
		}
	})
	t.Run("after it fired", func(t *testing.T) {
		v := vclock.NewVirtual()
		a := v.AfterFunc(time.Second, func() {})
		v.Advance(time.Second)
		if a.Stop() {
			t.Fatal("Stop() after the timer fired = true, want false")
		}
		if v.Pending() != 0 {
			t.Fatalf("Pending() = %d, want 0", v.Pending())
		}
	})
	t.Run("from its own callback", func(t *testing.T) {
		v := vclock.NewVirtual()
		var self vclock.Timer
		var stopped, ran bool
		self = v.AfterFunc(time.Second, func() { ran = true; stopped = self.Stop() })
		v.Advance(time.Second)
		if !ran || stopped {
			t.Fatalf("ran %v, Stop() inside f = %v; want true, false (f has started)", ran, stopped)
		}
	})
	t.Run("a later timer at the same instant from a callback", func(t *testing.T) {
		v := vclock.NewVirtual()
		r := &recorder{v: v}
		var b vclock.Timer
		var stopped bool
		v.AfterFunc(time.Second, func() { stopped = b.Stop() })
		b = v.AfterFunc(time.Second, r.fn("b"))
		v.Advance(time.Second)
		if !stopped {
			t.Fatal("Stop() on a due but not yet fired timer = false, want true")
		}
		if got := r.take(); len(got) != 0 {
			t.Fatalf("fired %v, want nothing: b was stopped before its turn", got)
		}
	})
	t.Run("middle of the heap", func(t *testing.T) {
		// Stopping out of the middle must keep the rest in order.
		v := vclock.NewVirtual()
		r := &recorder{v: v}
		var timers []vclock.Timer
		for i := range 50 {
			d := time.Duration((i*37)%50+1) * time.Second
			timers = append(timers, v.AfterFunc(d, r.fn(fmt.Sprint((i*37)%50+1))))
		}
		for i := 0; i < 50; i += 3 {
			if !timers[i].Stop() {
				t.Fatalf("Stop() of timer %d = false, want true", i)
			}
		}
		v.Advance(time.Hour)
		got := r.take()
		if len(got) != 50-17 {
			t.Fatalf("fired %d timers, want %d", len(got), 50-17)
		}
		for i := 1; i < len(got); i++ {
			if got[i].at <= got[i-1].at {
				t.Fatalf("fired out of order: %v", got)
			}
		}
		for _, f := range got {
			if f.name != fmt.Sprint(int(f.at/time.Second)) {
				t.Fatalf("timer %s fired at %v, not its deadline", f.name, f.at)
			}
		}
	})
}

func TestAdvanceTo(t *testing.T) {
	v := vclock.NewVirtual()
	r := &recorder{v: v}
	v.AfterFunc(time.Second, r.fn("a"))
	v.AfterFunc(0, r.fn("now"))

	steps := []struct {
		to    time.Duration // offset from Epoch
		fired []firing
		now   time.Duration
	}{
		{-time.Second, nil, 0},       // step 0: the past does nothing, not even what is due now
		{0, []firing{{"now", 0}}, 0}, // step 1: the present fires what is due now
		{time.Minute, []firing{{"a", time.Second}}, time.Minute},
		{time.Second, nil, time.Minute}, // step 3: back in time: ignored
	}
	for i, s := range steps {
		v.AdvanceTo(vclock.Epoch + int64(s.to))
		if got := r.take(); !slices.Equal(got, s.fired) {
			t.Errorf("step %d: AdvanceTo(Epoch+%v) fired %v, want %v", i, s.to, got, s.fired)
		}
		if got := time.Duration(v.Now() - vclock.Epoch); got != s.now {
			t.Errorf("step %d: Now() = Epoch+%v, want Epoch+%v", i, got, s.now)
		}
	}
}

func TestAdvanceNext(t *testing.T) {
	v := vclock.NewVirtual()
	r := &recorder{v: v}
	if d, ok := v.AdvanceNext(); ok || d != 0 || v.Now() != vclock.Epoch {
		t.Fatalf("AdvanceNext() with no timers = %v, %v, Now moved to %d; want 0, false, unmoved", d, ok, v.Now())
	}
	v.AfterFunc(5*time.Second, r.fn("c"))
	v.AfterFunc(2*time.Second, r.fn("a"))
	v.AfterFunc(2*time.Second, r.fn("b"))
	v.AfterFunc(2*time.Second, func() { v.AfterFunc(0, r.fn("a-child")) })

	steps := []struct {
		moved time.Duration
		ok    bool
		fired []firing
	}{
		{2 * time.Second, true, []firing{{"a", 2 * time.Second}, {"b", 2 * time.Second}, {"a-child", 2 * time.Second}}},
		{3 * time.Second, true, []firing{{"c", 5 * time.Second}}},
		{0, false, nil},
	}
	for i, s := range steps {
		d, ok := v.AdvanceNext()
		if d != s.moved || ok != s.ok {
			t.Errorf("step %d: AdvanceNext() = %v, %v; want %v, %v", i, d, ok, s.moved, s.ok)
		}
		if got := r.take(); !slices.Equal(got, s.fired) {
			t.Errorf("step %d: fired %v, want %v", i, got, s.fired)
		}
	}
	if got := time.Duration(v.Now() - vclock.Epoch); got != 5*time.Second {
		t.Fatalf("Now() = Epoch+%v, want Epoch+5s", got)
	}
}

// TestOverflowClamps: durations near the int64 limit must not wrap a
// deadline into the past, where it would fire at once.
func TestOverflowClamps(t *testing.T) {
	v := vclock.NewVirtual()
	fired := false
	v.AfterFunc(math.MaxInt64, func() { fired = true })
	if d, ok := v.Next(); !ok || d != time.Duration(math.MaxInt64-vclock.Epoch) {
		t.Fatalf("Next() = %v, %v; want %v (clamped at the int64 limit), true", d, ok, time.Duration(math.MaxInt64-vclock.Epoch))
	}
	v.Advance(time.Hour)
	if fired {
		t.Fatal("a timer for math.MaxInt64 fired after an hour")
	}
	v.Advance(math.MaxInt64)
	if !fired {
		t.Fatal("Advance(math.MaxInt64) did not reach a timer clamped at the int64 limit")
	}
	if v.Now() != math.MaxInt64 {
		t.Fatalf("Now() = %d, want %d (clamped)", v.Now(), int64(math.MaxInt64))
	}
	v.Advance(time.Second) // already at the end of time: stays there
	if v.Now() != math.MaxInt64 {
		t.Fatalf("Now() = %d after advancing past the limit, want %d", v.Now(), int64(math.MaxInt64))
	}
}

func TestNilFuncIsANoOp(t *testing.T) {
	v := vclock.NewVirtual()
	v.AfterFunc(time.Second, nil)
	stopped := v.AfterFunc(time.Second, nil)
	if !stopped.Stop() {
		t.Fatal("Stop() on a pending nil-f timer = false, want true")
	}
	v.Advance(time.Second) // must not panic
	if v.Pending() != 0 {
		t.Fatalf("Pending() = %d, want 0", v.Pending())
	}
}

// TestWaitPendingClosesTheRace is the race every virtual clock must close: the
// code under test registers its timer on its own goroutine, and the test must
// not advance before it has. Run under -race.
func TestWaitPendingClosesTheRace(t *testing.T) {
	ctx := context.Background()
	for round := range 200 {
		v := vclock.NewVirtual()
		fired := make(chan int64, 1)
		go func() {
			v.AfterFunc(time.Second, func() { fired <- v.Now() })
		}()
		if err := v.WaitPending(ctx, 1); err != nil {
			t.Fatalf("round %d: WaitPending: %v", round, err)
		}
		v.Advance(time.Second)
		select {
		case at := <-fired:
			if at != vclock.Epoch+int64(time.Second) {
				t.Fatalf("round %d: fired at Epoch+%v, want Epoch+1s", round, time.Duration(at-vclock.Epoch))
			}
		default:
			t.Fatalf("round %d: the timer did not fire within Advance", round)
		}
	}
}

func TestWaitPendingManyRegistrars(t *testing.T) {
	const goroutines, each = 8, 100
	v := vclock.NewVirtual()
	var fired atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				v.AfterFunc(time.Duration(g*each+i)*time.Millisecond, func() { fired.Add(1) })
			}
		})
	}
	if err := v.WaitPending(context.Background(), goroutines*each); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	v.Advance(time.Hour)
	if got := fired.Load(); got != goroutines*each {
		t.Fatalf("fired %d, want %d", got, goroutines*each)
	}
}

func TestWaitPendingBadInput(t *testing.T) {
	v := vclock.NewVirtual()
	ctx := context.Background()
	for _, n := range []int{0, -1, math.MinInt} {
		if err := v.WaitPending(ctx, n); err != nil {
			t.Errorf("WaitPending(ctx, %d) = %v, want nil at once", n, err)
		}
		if err := v.WaitRegistered(ctx, n); err != nil {
			t.Errorf("WaitRegistered(ctx, %d) = %v, want nil at once", n, err)
		}
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := v.WaitPending(cancelled, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitPending on a cancelled ctx = %v, want an error matching context.Canceled", err)
	}
	if err := v.WaitRegistered(cancelled, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitRegistered on a cancelled ctx = %v, want an error matching context.Canceled", err)
	}
	// A satisfied wait succeeds even on a dead ctx: the condition is what
	// was asked about.
	v.AfterFunc(time.Second, nil)
	if err := v.WaitPending(cancelled, 1); err != nil {
		t.Errorf("WaitPending with 1 pending on a cancelled ctx = %v, want nil", err)
	}

	// Cancelled while blocked: returns, and leaves no goroutine (goleak).
	blocked, cancel2 := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- v.WaitPending(blocked, 5) }()
	cancel2()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("WaitPending cancelled while waiting = %v, want context.Canceled", err)
	}
}

// TestWaitRegisteredSeesAReplacement: code that moves its wake-up (Stop,
// then AfterFunc) leaves Pending unchanged, so only the registration count
// shows that it has happened.
func TestWaitRegisteredSeesAReplacement(t *testing.T) {
	v := vclock.NewVirtual()
	ctx := context.Background()
	var mu sync.Mutex
	wake := v.AfterFunc(10*time.Second, nil)

	moves := []time.Duration{3 * time.Second, 7 * time.Second, time.Second}
	for i, d := range moves {
		r := v.Registered()
		go func() {
			mu.Lock()
			defer mu.Unlock()
			wake.Stop()
			wake = v.AfterFunc(d, nil)
		}()
		if err := v.WaitRegistered(ctx, r+1); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if p := v.Pending(); p != 1 {
			t.Fatalf("step %d: Pending() = %d, want 1", i, p)
		}
		if next, ok := v.Next(); !ok || next != d {
			t.Fatalf("step %d: Next() = %v, %v; want %v, true", i, next, ok, d)
		}
	}
}

// TestStopRacesAdvance: Stop on one goroutine, Advance on another. Each
// timer must either fire or be stopped (Stop true), never both, never
// neither. Run under -race.
func TestStopRacesAdvance(t *testing.T) {
	const n = 1000
	v := vclock.NewVirtual()
	fired := make([]atomic.Bool, n)
	timers := make([]vclock.Timer, n)
	for i := range n {
		timers[i] = v.AfterFunc(time.Duration(i)*time.Millisecond, func() { fired[i].Store(true) })
	}
	stopped := make([]bool, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := n - 1; i >= 0; i-- { // from the far end, to meet the advance halfway
			stopped[i] = timers[i].Stop()
		}
	})
	for range n {
		v.Advance(time.Millisecond)
	}
	wg.Wait()
	for i := range n {
		if fired[i].Load() == stopped[i] {
			t.Fatalf("timer %d: fired %v, Stop() = %v; want exactly one", i, fired[i].Load(), stopped[i])
		}
		if timers[i].Stop() {
			t.Fatalf("timer %d: Stop() after the race = true, want false", i)
		}
	}
	if v.Pending() != 0 {
		t.Fatalf("Pending() = %d, want 0", v.Pending())
	}
}

func TestAllocs(t *testing.T) {
	v := vclock.NewVirtual()
	f := func() {}
	// Warm the heap's backing array.
	for range 8 {
		v.AfterFunc(time.Second, f)
	}
	v.Advance(time.Second)
	if a := testing.AllocsPerRun(100, func() { v.AfterFunc(time.Second, f).Stop() }); a > 1 {
		t.Errorf("Virtual AfterFunc+Stop: %v allocs, want at most 1 (the timer)", a)
	}
	if a := testing.AllocsPerRun(100, func() { _ = v.Now() }); a != 0 {
		t.Errorf("Virtual Now: %v allocs, want 0", a)
	}
	c := vclock.Real()
	if a := testing.AllocsPerRun(100, func() { _ = c.Now() }); a != 0 {
		t.Errorf("Real Now: %v allocs, want 0", a)
	}
}

// FuzzVirtual drives a clock with a random mix of registrations (some from
// callbacks), stops and advances, and checks it against a plain model: each
// timer fires once, at its deadline, in (deadline, registration) order,
// exactly when time reaches it, unless stopped first.
func FuzzVirtual(f *testing.F) {
	f.Add([]byte{0, 5, 0, 5, 0, 1, 2, 3, 1, 0, 2, 9})
	f.Add([]byte{4, 2, 4, 0, 3, 3, 3, 3})
	f.Add([]byte{0, 0, 0, 0, 1, 1, 1, 1, 2, 0, 5, 7, 2, 255})
	f.Add([]byte{0, 200, 4, 100, 0, 50, 1, 2, 3, 2, 10, 3, 1, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 512 { // the model is quadratic; long inputs add time, not cases
			ops = ops[:512]
		}
		type model struct {
			at      int64
			seq     int
			timer   vclock.Timer
			fired   bool
			stopped bool
		}
		v := vclock.NewVirtual()
		var timers []*model
		var order []*model // firing order
		var register func(d time.Duration, child time.Duration)
		register = func(d, child time.Duration) {
			m := &model{at: v.Now() + int64(d), seq: len(timers)}
			timers = append(timers, m)
			m.timer = v.AfterFunc(d, func() {
				if m.fired || m.stopped {
					t.Fatalf("timer %d fired twice or after Stop", m.seq)
				}
				if now := v.Now(); now != m.at {
					t.Fatalf("timer %d fired with Now = %d, deadline %d", m.seq, now, m.at)
				}
				m.fired = true
				order = append(order, m)
				if child >= 0 {
					register(child, -1)
				}
			})
		}
		live := func() int {
			n := 0
			for _, m := range timers {
				if !m.fired && !m.stopped {
					n++
				}
			}
			return n
		}
		for i := 0; i+1 < len(ops); i += 2 {
			arg := time.Duration(ops[i+1]) * time.Millisecond
			switch ops[i] % 5 {
			case 0:
				register(arg, -1)
			case 1:
				if len(timers) > 0 {
					m := timers[int(ops[i+1])%len(timers)]
					want := !m.fired && !m.stopped
					if got := m.timer.Stop(); got != want {
						t.Fatalf("op %d: Stop() of timer %d = %v, want %v", i, m.seq, got, want)
					}
					m.stopped = m.stopped || want
				}
			case 2:
				end := v.Now() + int64(arg)
				v.Advance(arg)
				if v.Now() != end {
					t.Fatalf("op %d: Now() = %d after Advance, want %d", i, v.Now(), end)
				}
				for _, m := range timers {
					if !m.stopped && m.fired != (m.at <= end) {
						t.Fatalf("op %d: timer %d (deadline %d) fired = %v at Now %d", i, m.seq, m.at, m.fired, end)
					}
				}
			case 3:
				before := v.Now()
				earliest, want := int64(0), false
				for _, m := range timers {
					if !m.fired && !m.stopped && (!want || m.at < earliest) {
						earliest, want = m.at, true
					}
				}
				d, ok := v.AdvanceNext()
				if ok != want || (ok && before+int64(d) != earliest) {
					t.Fatalf("op %d: AdvanceNext() = %v, %v; model says %v, %v", i, d, ok, time.Duration(earliest-before), want)
				}
				if v.Now() != before+int64(d) {
					t.Fatalf("op %d: AdvanceNext moved %v but Now went %d -> %d", i, d, before, v.Now())
				}
				for _, m := range timers {
					if !m.stopped && m.fired != (m.at <= v.Now()) {
						t.Fatalf("op %d: timer %d (deadline %d) fired = %v at Now %d", i, m.seq, m.at, m.fired, v.Now())
					}
				}
			case 4:
				register(arg, arg/2) // its callback registers a child
			}
			if got, want := v.Pending(), live(); got != want {
				t.Fatalf("op %d: Pending() = %d, model has %d", i, got, want)
			}
		}
		for i := 1; i < len(order); i++ {
			a, b := order[i-1], order[i]
			if b.at < a.at || (b.at == a.at && b.seq < a.seq) {
				t.Fatalf("timer %d (at %d) fired after timer %d (at %d)", b.seq, b.at, a.seq, a.at)
			}
		}
	})
}

func BenchmarkVirtualAfterFuncStop(b *testing.B) {
	v := vclock.NewVirtual()
	f := func() {}
	for i := range 1024 { // a realistic backlog to insert into
		v.AfterFunc(time.Duration(i)*time.Second, f)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		v.AfterFunc(time.Duration(i%2048)*time.Millisecond, f).Stop()
	}
}

func BenchmarkVirtualAfterFuncFire(b *testing.B) {
	v := vclock.NewVirtual()
	f := func() {}
	b.ReportAllocs()
	for b.Loop() {
		v.AfterFunc(time.Millisecond, f)
		v.Advance(time.Millisecond)
	}
}

func BenchmarkRealNow(b *testing.B) {
	c := vclock.Real()
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Now()
	}
}

// TestLateness: with a lateness, a timer due at t fires when the clock
// reaches t plus it, Now reads that instant inside f, and Next, Pending and
// AdvanceNext see the late instant; on time is the default.
func TestLateness(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		opts []vclock.Option
		late time.Duration
	}{
		{"on time", nil, 0},
		{"fixed 2ms", []vclock.Option{vclock.WithLateness(2 * ms)}, 2 * ms},
		{"negative is on time", []vclock.Option{vclock.WithLateness(-ms)}, 0},
		{"random of at most 0", []vclock.Option{vclock.WithRandomLateness(0, 1)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := vclock.NewVirtual(tc.opts...)
			r := &recorder{v: v}
			v.AfterFunc(10*ms, r.fn("a"))
			v.AfterFunc(0, r.fn("now"))
			if d, _ := v.Next(); d != tc.late {
				t.Fatalf("step 0: Next = %v, want %v", d, tc.late)
			}
			v.Advance(10*ms + tc.late - 1)
			if got := r.take(); len(got) != 1 || got[0] != (firing{"now", tc.late}) {
				t.Fatalf("step 1: fired %v, want only now@%v", got, tc.late)
			}
			v.Advance(1)
			if got := r.take(); len(got) != 1 || got[0] != (firing{"a", 10*ms + tc.late}) {
				t.Fatalf("step 2: fired %v, want a@%v", got, 10*ms+tc.late)
			}
		})
	}
}

// TestRandomLatenessIsSeeded: each timer gets its own lateness within
// [0, most], the same sequence for the same seed, another for another.
func TestRandomLatenessIsSeeded(t *testing.T) {
	const most = 5 * time.Millisecond
	run := func(seed uint64) []time.Duration {
		v := vclock.NewVirtual(vclock.WithRandomLateness(most, seed))
		var out []time.Duration
		for range 200 {
			start := v.Now()
			fired := int64(0)
			v.AfterFunc(time.Second, func() { fired = v.Now() })
			v.AdvanceNext()
			late := time.Duration(fired-start) - time.Second
			if late < 0 || late > most {
				t.Fatalf("seed %d: a timer %v late, want within [0, %v]", seed, late, most)
			}
			out = append(out, late)
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew different lateness")
	}
	if slices.Equal(a, c) {
		t.Fatal("two seeds drew the same lateness")
	}
	distinct := map[time.Duration]bool{}
	for _, d := range a {
		distinct[d] = true
	}
	if len(distinct) < 100 {
		t.Fatalf("only %d distinct lateness values in 200 timers", len(distinct))
	}
}

// TestStopAll: StopAll drops every pending timer; none fires afterwards and
// each Stop reports it no longer pending.
func TestStopAll(t *testing.T) {
	v := vclock.NewVirtual()
	fired := 0
	timers := []vclock.Timer{v.AfterFunc(time.Second, func() { fired++ }), v.AfterFunc(time.Minute, func() { fired++ })}
	if n := v.StopAll(); n != 2 || v.Pending() != 0 {
		t.Fatalf("StopAll stopped %d, %d still pending; want 2, 0", n, v.Pending())
	}
	v.Advance(time.Hour)
	if fired != 0 {
		t.Errorf("%d timers fired after StopAll", fired)
	}
	for i, tm := range timers {
		if tm.Stop() {
			t.Errorf("timer %d: Stop after StopAll says it was pending", i)
		}
	}
	v.AfterFunc(0, func() { fired++ }) // the clock goes on working
	v.Advance(0)
	if fired != 1 {
		t.Errorf("a timer registered after StopAll fired %d times", fired)
	}
}

// TestAfterEach: a hook runs after each fired timer's function, before the
// next fires, until it is removed; Of finds the Virtual a clock is or
// wraps with an Inside, and nothing in other clocks.
func TestAfterEach(t *testing.T) {
	v := vclock.NewVirtual()
	var log []string
	v.AfterFunc(time.Second, func() { log = append(log, "a") })
	v.AfterFunc(2*time.Second, func() { log = append(log, "b") })
	remove := v.AfterEach(func() { log = append(log, "after") })
	v.Advance(2 * time.Second)
	remove()
	v.AfterFunc(0, func() { log = append(log, "c") })
	v.Advance(0)
	if want := []string{"a", "after", "b", "after", "c"}; !slices.Equal(log, want) {
		t.Fatalf("fired %v, want %v", log, want)
	}

	type plain struct{ vclock.Clock }
	type wrapper struct {
		vclock.Clock
		vclock.Inside
	}
	if vclock.Of(v) != v || vclock.Of(plain{v}) != nil || vclock.Of(vclock.Real()) != nil {
		t.Fatal("Of: a Virtual is itself; a wrapper without an Inside and the real clock are none")
	}
	if vclock.Of(wrapper{v, vclock.Within(v)}) != v {
		t.Fatal("Of does not see through an Inside")
	}
}
