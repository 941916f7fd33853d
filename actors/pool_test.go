package actors

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

// rig is a pool actor on a harness, with resources that are plain numbers
// and a ledger of every one made and closed.
type rig struct {
	*harness
	ref     *engine.Ref
	retired chan struct{}

	next   atomic.Int64 // the last resource made
	closed sync.Map     // resource → true once closed; closing twice fails the test
	closes atomic.Int64
}

func newRig(t testing.TB, cfg PoolConfig, opts ...moontest.Option) *rig {
	t.Helper()
	r := &rig{harness: newHarness(t, opts...), retired: make(chan struct{}, 1)}
	cfg.Retired = r.retired
	ref, err := SpawnPool[int64](r.e, "pool", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.ref = ref
	return r
}

func (r *rig) now() int64 { return r.clock.Now() }

// take sends one Take and waits for its answer.
func (r *rig) take(wait bool) Answer[int64] {
	m := &Take[int64]{Now: r.now(), Wait: wait, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	return <-m.Reply
}

// get is what a client does: take, making on Make, parking on Wait; ctx
// withdraws a parked take and hands back whatever was granted meanwhile.
func (r *rig) get(ctx context.Context) (int64, error) {
	m := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	var a Answer[int64]
	select {
	case a = <-m.Reply:
	case <-ctx.Done():
		r.ref.Send(&Cancel[int64]{Take: m})
		a = <-m.Reply
		switch {
		case a.Err != nil:
		case a.Verdict == policy.Ready:
			r.give(a.Item)
		case a.Verdict == policy.Make:
			r.ref.Send(&Release{Now: r.now()})
		}
		return 0, ctx.Err()
	}
	if a.Err != nil {
		return 0, a.Err
	}
	switch a.Verdict {
	case policy.Ready:
		return a.Item, nil
	case policy.Make:
		item := r.next.Add(1)
		made := &Made[int64]{Now: r.now(), Item: item, Reply: make(chan Answer[int64], 1)}
		r.ref.Send(made)
		if !(<-made.Reply).Kept {
			r.close(item)
			return 0, ErrClosed
		}
		return item, nil
	}
	return 0, errors.New("unexpected verdict " + a.Verdict.String())
}

// give hands a resource back, closing it if the pool does not keep it.
func (r *rig) give(item int64) {
	m := &Give[int64]{Now: r.now(), Item: item, Strict: true, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	a := <-m.Reply
	if a.Err != nil && !errors.Is(a.Err, ErrStopped) {
		r.t.Errorf("give %d: %v", item, a.Err)
		return
	}
	if !a.Kept {
		r.close(item)
	}
}

func (r *rig) close(item int64) {
	if _, twice := r.closed.LoadOrStore(item, true); twice {
		r.t.Errorf("resource %d closed twice", item)
	}
	r.closes.Add(1)
}

// collect closes what the pool retired.
func (r *rig) collect() []int64 {
	m := &Collect[int64]{Reply: make(chan []int64, 1)}
	r.ref.Send(m)
	out := <-m.Reply
	for _, it := range out {
		r.close(it)
	}
	return out
}

func (r *rig) stats() Stats {
	m := &Inspect{Now: r.now(), Reply: make(chan Stats, 1)}
	r.ref.Send(m)
	return <-m.Reply
}

// balance checks that every resource made is closed or still live.
func (r *rig) balance() {
	r.t.Helper()
	s := r.stats()
	if made, closed := r.next.Load(), r.closes.Load(); made != closed+int64(s.Live) {
		r.t.Errorf("made %d, closed %d, live %d: a resource is lost or counted twice", made, closed, s.Live)
	}
	if s.Live != s.Idle+s.Busy {
		r.t.Errorf("live %d != idle %d + busy %d", s.Live, s.Idle, s.Busy)
	}
}

// TestHourOfTraffic drives an hour through a pool in virtual time: a burst
// grows it, quiet lets it shrink, and every idle resource is evicted at
// exactly the instant its Keep runs out: on time, or as late as its timer
// fires, never earlier and never lost.
func TestHourOfTraffic(t *testing.T) {
	for _, c := range lateClocks {
		t.Run(c.name, func(t *testing.T) { hourOfTraffic(t, c.opts, c.most) })
	}
}

func hourOfTraffic(t *testing.T, opts []moontest.Option, most time.Duration) {
	keep := 10 * time.Minute
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 8, Idle: 8, Keep: keep}}, opts...)
	start := r.now()
	returned := map[int64]int64{} // resource → when it was last given back

	// Every minute for an hour: a burst of eight at the top of each quarter
	// hour, one caller otherwise.
	for minute := range 60 {
		n := 1
		if minute%15 == 0 {
			n = 8
		}
		var held []int64
		for range n {
			it, err := r.get(context.Background())
			if err != nil {
				t.Fatalf("minute %d: %v", minute, err)
			}
			held = append(held, it)
		}
		for _, it := range held {
			r.give(it)
			returned[it] = r.now()
		}
		// Let the minute pass timer by timer, checking each eviction.
		end := r.now() + int64(time.Minute)
		for {
			d, ok := r.clock.Next()
			if !ok || r.now()+int64(d) > end {
				break
			}
			r.clock.AdvanceNext()
			for _, it := range r.collect() {
				if due := returned[it] + int64(keep); r.now() < due || r.now() > due+int64(most) {
					t.Errorf("resource %d evicted at +%v, want +%v (late by at most %v)", it, time.Duration(r.now()-start), time.Duration(due-start), most)
				}
				delete(returned, it)
			}
		}
		r.clock.AdvanceTo(end)
	}
	s := r.stats()
	if s.Evicted == 0 {
		t.Fatal("nothing was evicted in an hour with a ten-minute keep")
	}
	// One caller a minute keeps only the newest warm; the burst's surplus
	// must have aged out.
	if s.Idle > 2 {
		t.Errorf("after a quiet spell the pool holds %d idle; newest-first should have let the rest age out", s.Idle)
	}
	r.balance()
}

// TestHammer has 512 goroutines take and give on one pool of ten, some
// dropping what they hold as broken, and checks every resource is accounted
// for and nobody is left parked.
func TestHammer(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 10, Idle: 5}})
	var wg sync.WaitGroup
	var inUse sync.Map
	for g := range 512 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				it, err := r.get(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if _, dup := inUse.LoadOrStore(it, g); dup {
					t.Errorf("resource %d lent to two holders", it)
				}
				runtime.Gosched() // hold it a while: another holder would collide here
				inUse.Delete(it)
				if (g+i)%17 == 0 {
					r.ref.Send(&Drop[int64]{Now: r.now(), Item: it})
					r.close(it)
					continue
				}
				r.give(it)
			}
		}()
	}
	wg.Wait()
	s := r.stats()
	if s.Waiting != 0 || s.Busy != 0 {
		t.Errorf("after the storm: %d waiting, %d busy", s.Waiting, s.Busy)
	}
	if s.Live > 10 {
		t.Errorf("live %d over size 10", s.Live)
	}
	r.balance()
}

// TestCancellationStorm parks 10,000 waiters on a pool of four and cancels
// them at random moments while resources come and go.
func TestCancellationStorm(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 4, Idle: 4}})
	var wg sync.WaitGroup
	var served, cancelled atomic.Int64
	var inUse sync.Map
	sem := make(chan struct{}, 200) // at most 200 goroutines at once, for the race detector's sake
	for i := range 10000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rnd := rand.New(rand.NewPCG(uint64(i), 7))
			ctx, cancel := context.WithCancel(context.Background())
			if rnd.IntN(2) == 0 {
				cancel() // cancelled before, or while, it waits
			} else {
				defer cancel()
			}
			it, err := r.get(ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("waiter %d: %v", i, err)
				}
				cancelled.Add(1)
				return
			}
			served.Add(1)
			if _, dup := inUse.LoadOrStore(it, i); dup {
				t.Errorf("resource %d lent twice", it)
			}
			runtime.Gosched() // hold it a while: another holder would collide here
			inUse.Delete(it)
			r.give(it)
		}()
	}
	wg.Wait()
	if served.Load() == 0 || cancelled.Load() == 0 {
		t.Fatalf("served %d, cancelled %d: the storm should have both", served.Load(), cancelled.Load())
	}
	s := r.stats()
	if s.Waiting != 0 || s.Busy != 0 {
		t.Errorf("after the storm: %d waiting, %d busy (reserved room leaked?)", s.Waiting, s.Busy)
	}
	if s.Live > 4 {
		t.Errorf("live %d over size 4", s.Live)
	}
	r.balance()
}

// TestPanicKeepsBooks makes the actor panic with resources lent and idle,
// and checks that it goes on with the same books.
func TestPanicKeepsBooks(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 3, Idle: 3}})
	a, _ := r.get(context.Background())
	b, _ := r.get(context.Background())
	r.give(b)
	before := r.stats()

	r.ref.Send(&inspect[int64]{fn: func(*books[int64]) { panic("injected") }})

	after := r.stats()
	if after.Live != before.Live || after.Idle != before.Idle || after.Busy != before.Busy {
		t.Fatalf("books changed across a panic: before %+v, after %+v", before, after)
	}
	// The lent one still comes home, and the idle one is still lent out.
	r.give(a)
	if got, _ := r.get(context.Background()); got != a {
		t.Errorf("after the panic got %d, want the newest returned, %d", got, a)
	}
	r.balance()
}

// TestWaiterGetsReturnedBeforeMake: a resource coming home goes to the
// oldest waiter; nothing new is made while one could serve.
func TestWaiterGetsReturnedBeforeMake(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 1}})
	first, _ := r.get(context.Background())
	got := make(chan int64, 2)
	for range 2 {
		m := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
		r.ref.Send(m)
		go func() { a := <-m.Reply; got <- a.Item }()
	}
	if s := r.stats(); s.Waiting != 2 {
		t.Fatalf("waiting %d, want 2", s.Waiting)
	}
	r.give(first)
	if it := <-got; it != first {
		t.Fatalf("oldest waiter got %d, want the returned %d", it, first)
	}
	if r.next.Load() != 1 {
		t.Errorf("made %d resources, want 1", r.next.Load())
	}
	r.give(first)
	<-got
	r.give(first)
}

// TestLaterWakesParkedCaller: after a failed make, the backoff holds makes
// back, and the parked caller is answered by a Tick exactly when the hold
// ends, not by polling.
func TestLaterWakesParkedCaller(t *testing.T) {
	for _, c := range lateClocks {
		t.Run(c.name, func(t *testing.T) { laterWakesParkedCaller(t, c.opts, c.most) })
	}
}

func laterWakesParkedCaller(t *testing.T, opts []moontest.Option, most time.Duration) {
	bo := policy.Backoff{Base: time.Second, Factor: 2, Cap: time.Minute, Attempts: 3, Jitter: policy.Rigid}
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 2}, Ward: policy.Ward{Backoff: bo}}, opts...)
	if a := r.take(false); a.Verdict != policy.Make {
		t.Fatalf("first take: %v", a.Verdict)
	}
	failedAt := r.now()
	r.ref.Send(&Unmade{Now: r.now()})
	if a := r.take(false); a.Verdict != policy.Later || a.After != time.Second {
		t.Fatalf("after a failure: %v after %v, want Later after 1s", a.Verdict, a.After)
	}
	m := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	if err := r.clock.WaitPending(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(999 * time.Millisecond)
	select {
	case a := <-m.Reply:
		t.Fatalf("answered %v before the hold ended", a.Verdict)
	default:
	}
	if _, ok := r.clock.AdvanceNext(); !ok { // the wake-up, as late as it fires
		t.Fatal("no wake-up pending")
	}
	a := <-m.Reply
	if at := time.Duration(r.now() - failedAt); a.Verdict != policy.Make || at < time.Second || at > time.Second+most {
		t.Fatalf("got %v at +%v, want Make at +1s (late by at most %v)", a.Verdict, at, most)
	}
	r.ref.Send(&Release{Now: r.now()})
	if s := r.stats(); s.Busy != 0 {
		t.Errorf("busy %d after release", s.Busy)
	}
}

// TestShutdownWithLent: the engine's shutdown closes idle resources now,
// waits for lent ones within its ctx, and a lent one that comes home after
// the pool closed is closed, not kept.
func TestShutdownWithLent(t *testing.T) {
	// Not newRig: this test shuts the engine down itself, with a ctx ended.
	clock := moontest.NewClock(t)
	eng := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
	retired := make(chan struct{}, 1)
	var ref *engine.Ref
	r := &rig{harness: &harness{t: t, clock: clock, e: eng, t0: clock.Now()}, retired: retired}
	ref, err := SpawnPool[int64](eng, "pool", PoolConfig{Limits: policy.Limits{Size: 4, Idle: 4}, Retired: retired},
		func(ctx context.Context) error {
			c := &Close{Now: clock.Now(), Reply: make(chan Stats, 1)}
			r.ref.Send(c)
			<-c.Reply
			r.collect()
			d := &Drained{Reply: make(chan Stats, 1)}
			r.ref.Send(d)
			select {
			case <-d.Reply:
				r.collect()
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	r.ref = ref
	lent, _ := r.get(context.Background())
	idle, _ := r.get(context.Background())
	r.give(idle)

	// A shutdown whose ctx ends while a resource is still out says so.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := eng.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("shutdown with a resource out and a dead ctx: %v", err)
	}
	if _, ok := r.closed.Load(idle); !ok {
		t.Error("the idle resource was not closed at shutdown")
	}
	// The lent one comes home to a stopped pool: refused, so closed.
	r.give(lent)
	if _, ok := r.closed.Load(lent); !ok {
		t.Error("the lent resource was not closed when it came home")
	}
	if r.closes.Load() != 2 {
		t.Errorf("closed %d, want 2", r.closes.Load())
	}
	// A take on the stopped pool is refused, never left waiting.
	if a := r.take(true); !errors.Is(a.Err, ErrStopped) {
		t.Errorf("take after shutdown: %+v", a)
	}
}

// TestPanicAnswersOnce: a request whose handling panics before it was
// answered is refused exactly once, and the actor goes on with its books.
func TestPanicAnswersOnce(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 2, Idle: 2}})
	held, _ := r.get(context.Background())
	var saved *policy.Pool[int64]
	done := make(chan struct{})
	r.ref.Send(&inspect[int64]{fn: func(b *books[int64]) { saved, b.pool = b.pool, nil; close(done) }})
	<-done

	m := &Take[int64]{Now: r.now(), Reply: make(chan Answer[int64], 2)}
	r.ref.Send(m) // the nil pool panics inside Take's handling
	if a := <-m.Reply; !errors.Is(a.Err, ErrStopped) {
		t.Fatalf("the panicking Take was answered %+v, want ErrStopped", a)
	}

	r.ref.Send(&inspect[int64]{fn: func(b *books[int64]) { b.pool = saved }})
	if s := r.stats(); s.Busy != 1 {
		t.Fatalf("busy %d after the panic, want the 1 still lent", s.Busy)
	}
	if len(m.Reply) != 0 {
		t.Fatal("the panicking Take got a second answer")
	}
	r.give(held)
	r.balance()
}

// TestPoolRefusesForeignRequest: a request the pool does not serve (a
// limiter's Allow sent to it by mistake) is refused, not left unanswered.
func TestPoolRefusesForeignRequest(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 1}})
	m := &Allow{Now: r.now(), N: 1, Reply: make(chan Permit, 1)}
	r.ref.Send(m)
	if p := <-m.Reply; p.OK || !errors.Is(p.Err, ErrStopped) {
		t.Fatalf("an Allow sent to a pool: %+v, want refused", p)
	}
	if s := r.stats(); s.Live != 0 {
		t.Fatalf("the stray request changed the books: %+v", s)
	}
}
