package client

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// TestTryGetNeverWaits: TryGet lends an idle resource, opens one when there
// is room, and otherwise answers ErrNoneIdle at once: when every resource
// is lent, when the ward holds opens back, and when a Get is in line ahead
// of it (which it does not overtake). Its ctx has no deadline: a TryGet
// that waited would hang the test.
func TestTryGetNeverWaits(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 2},
		Ward:   policy.Ward{Bucket: policy.Rate{PerSecond: 1, Burst: 1}},
	})
	ctx := context.Background()
	a, err := r.pool.TryGet(ctx) // room and a token: opened
	if err != nil {
		t.Fatalf("TryGet with room: %v", err)
	}
	if _, err := r.pool.TryGet(ctx); !errors.Is(err, ErrNoneIdle) {
		t.Fatalf("TryGet with the bucket empty: %v, want ErrNoneIdle", err)
	}
	r.put(a)
	if got, err := r.pool.TryGet(ctx); err != nil || got != a {
		t.Fatalf("TryGet with one idle: %v, %v; want conn %d", got, err, a.id)
	}
	r.clock.Advance(time.Second) // a token again
	b, err := r.pool.TryGet(ctx)
	if err != nil {
		t.Fatalf("TryGet with room after a second: %v", err)
	}
	if _, err := r.pool.TryGet(ctx); !errors.Is(err, ErrNoneIdle) {
		t.Fatalf("TryGet with both lent: %v, want ErrNoneIdle", err)
	}

	got := make(chan *conn, 1)
	go func() { got <- r.get() }()
	r.waitFor("a Get in line", func() bool { return r.pool.Stats().Waiting == 1 })
	if _, err := r.pool.TryGet(ctx); !errors.Is(err, ErrNoneIdle) {
		t.Fatalf("TryGet behind a waiting Get: %v, want ErrNoneIdle", err)
	}
	r.put(a) // to the Get in line, not to a TryGet
	r.put(<-got)
	r.put(b)
	r.balance()
}

// TestReuse: a resource Reuse refuses is closed on Put, counted as
// Unreused, and its room goes to a fresh one; one it accepts is kept; a
// Reuse that panics refuses; a Put of what the pool never lent asks Reuse
// but closes nothing.
func TestReuse(t *testing.T) {
	var dirty sync.Map
	r := newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 1},
		Reuse: func(c *conn) bool {
			if v, ok := dirty.Load(c); ok && v == "panic" {
				panic("reuse blew up")
			}
			_, bad := dirty.Load(c)
			return !bad
		},
	})
	a := r.get()
	r.put(a)
	if got := r.get(); got != a {
		t.Fatalf("a clean conn was not kept: got %d, want %d", got.id, a.id)
	}
	dirty.Store(a, "mid-transaction")
	r.put(a)
	b := r.get()
	if b == a {
		t.Fatalf("a conn Reuse refused was lent again")
	}
	dirty.Store(b, "panic")
	r.put(b)
	s := r.pool.Stats()
	if s.Unreused != 2 || s.Panics != 1 || s.Live != 0 || s.Closes != 2 {
		t.Errorf("unreused %d panics %d live %d closes %d; want 2, 1, 0, 2", s.Unreused, s.Panics, s.Live, s.Closes)
	}
	if err := r.pool.Put(&conn{id: 99}); !errors.Is(err, ErrNotLent) {
		t.Errorf("put of a stranger: %v, want ErrNotLent", err)
	}
	r.balance()
}

// TestSetLimitsUnderLoad: with callers parked, a larger Size serves them
// at once; a smaller one closes the surplus as it comes home, never
// taking a resource from its holder, and the last one home goes to the
// caller still in line. Nothing is lent twice (holders tracks who has
// what) and every connection is closed exactly once (the backend checks).
func TestSetLimitsUnderLoad(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 2}})
	var mu sync.Mutex
	holders := map[*conn]bool{}
	lend := func(c *conn) {
		mu.Lock()
		defer mu.Unlock()
		if holders[c] {
			t.Errorf("conn %d lent twice", c.id)
		}
		holders[c] = true
	}
	back := func(c *conn) {
		mu.Lock()
		delete(holders, c)
		mu.Unlock()
		r.put(c)
	}
	a, b := r.get(), r.get()
	lend(a)
	lend(b)
	got := make(chan *conn, 3)
	for range 3 {
		go func() {
			c := r.get()
			lend(c)
			got <- c
		}()
	}
	r.waitFor("three in line", func() bool { return r.pool.Stats().Waiting == 3 })

	if err := r.pool.SetLimits(policy.Limits{Size: 4}); err != nil {
		t.Fatal(err)
	}
	c, d := <-got, <-got // served at once, from the new room
	if s := r.pool.Stats(); s.Waiting != 1 || s.Live != 4 {
		t.Fatalf("after growing: waiting %d live %d, want 1 and 4", s.Waiting, s.Live)
	}

	if err := r.pool.SetLimits(policy.Limits{Size: 1}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*conn{a, b, c} { // surplus: each closed on its way home
		back(x)
		if s := r.pool.Stats(); s.Waiting != 1 {
			t.Fatalf("conn %d home over the new size went to the caller in line", x.id)
		}
	}
	r.waitFor("three closed", func() bool { return r.be.closes.Load() == 3 })
	back(d) // within the size: to the caller in line
	e := <-got
	if e != d {
		t.Errorf("the last in line got conn %d, want %d", e.id, d.id)
	}
	if s := r.pool.Stats(); s.Surplus != 3 || s.Live != 1 {
		t.Errorf("surplus %d live %d, want 3 and 1", s.Surplus, s.Live)
	}
	back(e)
	r.balance()
}

// TestResetGenerations: Reset closes the idle at once and the lent as they
// come home, even with a caller in line, who gets a fresh one instead; Gets
// after it never see a resource made before it.
func TestResetGenerations(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 3}})
	a, b, c := r.get(), r.get(), r.get()
	r.put(c) // idle at the Reset
	if err := r.pool.Reset(); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the idle one closed", func() bool { return r.be.closes.Load() == 1 })
	d := r.get() // fresh: conn 4
	got := make(chan *conn, 1)
	go func() { got <- r.get() }()
	r.waitFor("one in line", func() bool { return r.pool.Stats().Waiting == 1 })
	r.put(a) // outdated: closed, and its room opens a fresh one for the caller in line
	e := <-got
	r.put(b)
	for _, x := range []*conn{d, e} {
		if x.id <= 3 {
			t.Errorf("got conn %d after the Reset, made before it", x.id)
		}
		r.put(x)
	}
	s := r.pool.Stats()
	if s.Outdated != 3 || s.Resets != 1 || r.be.closes.Load() != 3 || s.Live != 2 {
		t.Errorf("outdated %d resets %d closed %d live %d; want 3, 1, 3, 2", s.Outdated, s.Resets, r.be.closes.Load(), s.Live)
	}
	r.balance()
}

// TestResetUnderLoad: callers take and give back while Reset runs again and
// again. No connection is lent to two callers, none made before a Reset
// returned is lent by a Get that began after it (connections are numbered
// as made: before each Reset the test notes the last number, and once the
// Reset returns every Get must get a higher one), the backend sees none
// closed twice (it fails the test), and when the load stops every
// connection made is closed or still in the pool. Fewer callers than Size,
// and Resets paced by the Gets, so that each Reset finds idle connections
// and callers that come after it.
func TestResetUnderLoad(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 4, Idle: 4}})
	var inUse sync.Map
	var wg sync.WaitGroup
	var mark atomic.Int64 // the last conn made before the latest Reset that returned
	var gets atomic.Int64
	stop := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				old := mark.Load()
				c := r.get()
				if c.id <= old {
					t.Errorf("conn %d lent after a Reset that returned, made before it (at or before conn %d)", c.id, old)
				}
				if _, dup := inUse.LoadOrStore(c, true); dup {
					t.Errorf("conn %d lent twice", c.id)
				}
				runtime.Gosched()
				inUse.Delete(c)
				r.put(c)
				gets.Add(1)
			}
		}()
	}
	for range 50 {
		n := gets.Load()
		r.waitFor("some Gets since the last Reset", func() bool { return gets.Load() >= n+6 })
		before := r.be.made.Load()
		if err := r.pool.Reset(); err != nil {
			t.Fatal(err)
		}
		mark.Store(before)
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	if s := r.pool.Stats(); s.Resets != 50 {
		t.Errorf("resets %d, want 50", s.Resets)
	}
	r.balance()
}

// jitterSchedule opens 100 connections in one instant on a pool with
// LifeJitter and seed, hands them back, and lets the eviction timer retire
// them: how many went in each virtual second after the opens.
func jitterSchedule(t *testing.T, seed uint64) map[int64]int {
	r := newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 100, Idle: 100, Life: time.Hour, LifeJitter: 1000 * time.Second},
		Seed:   seed,
	})
	start := r.clock.Now()
	var held []*conn
	for range 100 {
		held = append(held, r.get())
	}
	for _, c := range held {
		r.put(c)
	}
	out := map[int64]int{}
	idle := r.pool.Stats().Idle
	for idle > 0 {
		if _, ok := r.clock.AdvanceNext(); !ok {
			t.Fatalf("%d idle and no timer pending", idle)
		}
		now := r.pool.Stats().Idle // read after the Tick: the actor has handled it
		if gone := idle - now; gone > 0 {
			out[(r.clock.Now()-start)/int64(time.Second)] += gone
		}
		idle = now
	}
	if s := r.pool.Stats(); s.Evicted != 100 {
		t.Errorf("evicted %d, want 100", s.Evicted)
	}
	return out
}

// TestLifeJitterThroughThePool: through the pool actor, 100 connections
// opened together retire across the jitter span, no second holding more
// than a few, and the same seed gives the same schedule.
func TestLifeJitterThroughThePool(t *testing.T) {
	a := jitterSchedule(t, 7)
	most, first := 0, int64(math.MaxInt64)
	for s, n := range a {
		most, first = max(most, n), min(first, s)
	}
	if most > 3 || len(a) < 90 || first < 3600-1000 {
		t.Errorf("retired from second %d over %d seconds, at most %d in one; want from %d, over at least 90, at most 3: %v",
			first, len(a), most, 3600-1000, a)
	}
	if b := jitterSchedule(t, 7); !maps.Equal(a, b) {
		t.Errorf("the same seed gave two schedules:\n%v\n%v", a, b)
	}
}

// warm drives the clock, one timer at a time, until done: each step waits
// for the pool's background work to settle first (nothing being opened,
// and a timer pending: the ward's hold, or the bucket's next token), so
// that every open happens at the instant the pool chose for it.
func (r *rig) warm(done func(Stats) bool) {
	r.t.Helper()
	for {
		var s Stats
		r.waitFor("the warm-up to settle", func() bool {
			var opening int
			s, opening = r.pool.statsOpening()
			return opening == 0 && (done(s) || r.clock.Pending() > 0)
		})
		if done(s) {
			return
		}
		r.clock.AdvanceNext()
	}
}

// TestMinIdleWarmUpDuringOutage: MinIdle 5 with the backend down for 30
// virtual seconds under a ward. The background opens go one at a time,
// spaced exactly as the backoff says (Rigid, so its ceilings), never
// closer than the bucket allows; once the backend is back the pool
// reaches 5 idle, spaced by the bucket, and stays there as callers come
// and go, never over Size.
func TestMinIdleWarmUpDuringOutage(t *testing.T) {
	const outage = 30 * time.Second
	clock := vclock.NewVirtual()
	start := clock.Now()
	backoff := policy.Backoff{Base: time.Second, Factor: 2, Cap: 8 * time.Second, Attempts: 1 << 20, Jitter: policy.Rigid}
	// The backend is down before the pool starts: its warm-up begins at
	// once, in NewPool.
	be := newBackend(t, clock)
	up := start + int64(outage)
	be.up.Store(up)
	r := newRigOn(t, clock, PoolConfig[*conn]{
		Open:   be.open,
		Close:  be.close,
		Limits: policy.Limits{Size: 7, Idle: 7, MinIdle: 5},
		Ward:   policy.Ward{Bucket: policy.Rate{PerSecond: 1, Burst: 1}, Backoff: backoff},
		Seed:   1,
	})
	r.be = be
	r.warm(func(s Stats) bool { return s.Idle == 5 || clock.Now() > up+int64(time.Minute) })
	tries := r.be.tries()
	want := []int64{start}
	for k := 1; want[k-1] < up; k++ {
		want = append(want, want[k-1]+int64(backoff.Ceiling(k)))
	}
	for k := 1; k < 5; k++ { // the rest, once it is up: one a token
		want = append(want, want[len(want)-1]+int64(time.Second))
	}
	if !slices.Equal(tries, want) {
		t.Errorf("opens at %v,\nwant %v (seconds from the start)", secondsFrom(start, tries), secondsFrom(start, want))
	}
	s := r.pool.Stats()
	if s.Idle != 5 || s.Live != 5 || s.MakeFailures != int64(len(want)-5) {
		t.Errorf("idle %d live %d failures %d; want 5, 5, %d", s.Idle, s.Live, s.MakeFailures, len(want)-5)
	}

	// Callers come: the pool tops itself up behind them, within Size.
	held := []*conn{r.get(), r.get(), r.get(), r.get()}
	r.warm(func(s Stats) bool { return s.Live == 7 })
	if s := r.pool.Stats(); s.Idle != 3 || s.Live != 7 {
		t.Errorf("with 4 lent: idle %d live %d, want 3 and 7 (Size)", s.Idle, s.Live)
	}
	for _, c := range held { // and go: the idle limit closes the surplus
		r.put(c)
	}
	if s := r.pool.Stats(); s.Idle != 7 || s.Live != 7 {
		t.Errorf("all home: idle %d live %d, want 7 and 7", s.Idle, s.Live)
	}
	r.balance()
}

func secondsFrom(start int64, at []int64) []float64 {
	out := make([]float64, len(at))
	for i, a := range at {
		out[i] = float64(a-start) / float64(time.Second)
	}
	return out
}

// forgetful takes a connection and never puts it back: the caller a leak
// report must name.
func forgetful(r *rig) *conn { return r.get() }

// TestLeakReport: a resource lent past LeakAfter is reported once through
// the engine's logger, with the stack of the Get that took it, and counted
// in Leaked; one put back in time is not reported.
func TestLeakReport(t *testing.T) {
	var log syncBuffer
	clock := vclock.NewVirtual()
	r := &rig{t: t, clock: clock, be: newBackend(t, clock)}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.eng = engine.New(engine.WithClock(clock), engine.WithHeatEvery(0),
		engine.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	p, err := NewPool(r.eng, PoolConfig[*conn]{Open: r.be.open, Close: r.be.close, LeakAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r.pool = p
	defer r.eng.Shutdown(ctx)

	kept := forgetful(r)
	back := r.get()
	r.clock.Advance(30 * time.Second)
	r.put(back)
	r.clock.Advance(30 * time.Second) // kept is a minute out; back was home in time
	r.clock.Advance(time.Hour)        // reported once, not again
	out := log.String()
	if n := strings.Count(out, "lent longer than LeakAfter"); n != 1 || r.pool.Stats().Leaked != 1 {
		t.Fatalf("%d reports, %d leaked; want 1 and 1:\n%s", n, r.pool.Stats().Leaked, out)
	}
	if !strings.Contains(out, "client.forgetful") {
		t.Errorf("the report does not name the caller of Get, forgetful:\n%s", out)
	}
	r.put(kept)
	if err := r.pool.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer a logger may write to from the clock's
// goroutine while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStatsCounts: Max follows SetLimits; Gets counts every Get and
// TryGet, EmptyGets those that found nothing idle; GetTime adds the time
// in line and in Open.
func TestStatsCounts(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}})
	a := r.get() // opened: empty
	r.put(a)
	a = r.get() // idle
	got := make(chan *conn, 1)
	go func() { got <- r.get() }() // waits: empty
	r.waitFor("one in line", func() bool { return r.pool.Stats().Waiting == 1 })
	r.clock.Advance(3 * time.Second)
	r.put(a)
	r.put(<-got)
	if _, err := r.pool.TryGet(r.ctx); err != nil {
		t.Fatal(err)
	}
	s := r.pool.Stats()
	if s.Max != 1 || s.Gets != 4 || s.EmptyGets != 2 || s.GetTime != 3*time.Second {
		t.Errorf("max %d gets %d empty %d time %v; want 1, 4, 2, 3s", s.Max, s.Gets, s.EmptyGets, s.GetTime)
	}
	if err := r.pool.SetLimits(policy.Limits{Size: 5}); err != nil || r.pool.Stats().Max != 5 {
		t.Errorf("after SetLimits: %v, max %d; want 5", err, r.pool.Stats().Max)
	}
	r.put(a)
}

// TestStatsLimits: Max, MaxIdle and MinIdle are the limits as the pool
// reads them (nothing below zero, MinIdle no more than Idle), from
// NewPool and then from each SetLimits. A SetLimits refused after Close
// leaves them as they were.
func TestStatsLimits(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: Limits{Size: 2, Idle: 1, MinIdle: 3}})
	for i, step := range []struct {
		set                   *Limits // nil: NewPool's
		max, maxIdle, minIdle int
	}{
		{nil, 2, 1, 1},
		{&Limits{Size: 5, Idle: 4, MinIdle: 2}, 5, 4, 2},
		{&Limits{Size: -1, Idle: -3, MinIdle: -1}, 0, 0, 0},
		{&Limits{Size: 3, MinIdle: 2}, 3, 0, 2},
		{&Limits{Size: 3, Idle: 2, MinIdle: 3}, 3, 2, 2},
	} {
		if step.set != nil {
			if err := r.pool.SetLimits(*step.set); err != nil {
				t.Fatalf("step %d: SetLimits: %v", i, err)
			}
		}
		if s := r.pool.Stats(); s.Max != step.max || s.MaxIdle != step.maxIdle || s.MinIdle != step.minIdle {
			t.Errorf("step %d: max %d, max idle %d, min idle %d; want %d, %d, %d",
				i, s.Max, s.MaxIdle, s.MinIdle, step.max, step.maxIdle, step.minIdle)
		}
	}
	if err := r.pool.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.pool.SetLimits(Limits{Size: 9, Idle: 9, MinIdle: 9}); !errors.Is(err, ErrClosed) {
		t.Errorf("SetLimits after Close: %v, want ErrClosed", err)
	}
	if s := r.pool.Stats(); s.Max != 3 || s.MaxIdle != 2 || s.MinIdle != 2 {
		t.Errorf("after Close: max %d, max idle %d, min idle %d; want 3, 2, 2", s.Max, s.MaxIdle, s.MinIdle)
	}
}

// TestStatsSums: Shed is its four causes added up, and Closes its eight
// reasons, in a pool that sheds and closes for several of them.
func TestStatsSums(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: Limits{Size: 1, Idle: 1}, MaxWaiting: 1})
	r.pool.Discard(r.get())
	a := r.get()
	got := make(chan error, 1)
	go func() {
		_, err := r.pool.Get(r.ctx)
		got <- err
	}()
	r.waitFor("one in line", func() bool { return r.pool.Stats().Waiting == 1 })
	if _, err := r.pool.Get(r.ctx); !errors.Is(err, ErrTooManyWaiting) {
		t.Fatalf("Get past MaxWaiting: %v, want ErrTooManyWaiting", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- r.pool.Close(r.ctx) }()
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("Get in line at Close: %v, want ErrClosed", err)
	}
	r.put(a)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	s := r.pool.Stats()
	if s.TooManyWaiting != 1 || s.ShedClosed != 1 || s.Broken != 1 || s.Shutdown != 1 {
		t.Errorf("too many waiting %d, shed closed %d, broken %d, shutdown %d; want 1 each",
			s.TooManyWaiting, s.ShedClosed, s.Broken, s.Shutdown)
	}
	if sum := s.ShedClosed + s.ShedOverloaded + s.ShedBreaker + s.TooManyWaiting; s.Shed != sum {
		t.Errorf("shed %d, its causes add up to %d", s.Shed, sum)
	}
	sum := s.Stale + s.Evicted + s.Surplus + s.Broken + s.Unreused + s.CheckFailures + s.Outdated + s.Shutdown
	if s.Closes != sum || s.Closes != 2 {
		t.Errorf("closes %d, its reasons add up to %d; want 2", s.Closes, sum)
	}
}

// TestZeroOptionsOff: PoolConfig{Open, Close} with every other option at
// its zero value turns each of them off: nothing opened until a Get, no
// timer armed (no keep-alive, no leak watch), no check, no background
// open, every resource Put kept, and their counts at zero.
func TestZeroOptionsOff(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{})
	if r.be.made.Load() != 0 || r.clock.Pending() != 0 {
		t.Fatalf("before any Get: %d opened, %d timers", r.be.made.Load(), r.clock.Pending())
	}
	a := r.get()
	r.clock.Advance(time.Hour)
	r.put(a)
	if got := r.get(); got != a {
		t.Fatalf("got %d, want the idle %d back unchecked", got.id, a.id)
	}
	r.put(a)
	s := r.pool.Stats()
	if r.clock.Pending() != 0 || r.be.made.Load() != 1 || s.Max != 0 || s.Idle != 1 ||
		s.CheckFailures+s.Leaked+s.Unreused+s.Outdated+s.Resets != 0 {
		t.Errorf("timers %d opened %d max %d idle %d, new counts %d %d %d %d %d",
			r.clock.Pending(), r.be.made.Load(), s.Max, s.Idle,
			s.CheckFailures, s.Leaked, s.Unreused, s.Outdated, s.Resets)
	}
}

// TestSetLimitsMinIdle: raising MinIdle on a running pool warms it up to
// the new number in the background; lowering it stops there.
func TestSetLimitsMinIdle(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 5}})
	if err := r.pool.SetLimits(policy.Limits{Size: 5, MinIdle: 3}); err != nil {
		t.Fatal(err)
	}
	r.waitFor("three idle", func() bool { s, opening := r.pool.statsOpening(); return s.Idle == 3 && opening == 0 })
	if err := r.pool.SetLimits(policy.Limits{Size: 5}); err != nil {
		t.Fatal(err)
	}
	c := r.get()
	r.put(c)
	if s := r.pool.Stats(); s.Idle != 3 || r.be.made.Load() != 3 {
		t.Errorf("idle %d, opened %d; want 3 and 3", s.Idle, r.be.made.Load())
	}
	r.balance()
}

// gate is a Check that holds each call until the test lets it go: entered
// gets the resource being checked, and a value sent on release is the
// check's outcome.
type gate struct {
	entered chan *conn
	release chan error
}

func newGate() *gate { return &gate{entered: make(chan *conn, 8), release: make(chan error)} }

func (g *gate) check(ctx context.Context, c *conn) error {
	g.entered <- c
	select {
	case err := <-g.release:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// keepAliveRig is a pool of size whose keep-alive checks every second,
// through g, what sat idle for that long; Get never checks (CheckIdle is
// an hour). It returns once the keep-alive's timer is set.
func keepAliveRig(t *testing.T, size int) (*rig, *gate) {
	t.Helper()
	g := newGate()
	r := newRig(t, PoolConfig[*conn]{
		Limits:    policy.Limits{Size: size},
		Check:     g.check,
		CheckIdle: time.Hour,
		KeepAlive: time.Second,
	})
	r.waitFor("the keep-alive's timer", func() bool { return r.clock.Pending() > 0 })
	return r, g
}

// TestStrayPutDuringKeepAlive: a resource a keep-alive check holds is not
// its last holder's any more: a second Put or a Discard of it is refused
// with ErrNotLent and changes nothing, so it is not lent to a caller while
// the check holds it, nor closed under the check, and the check hands it
// back to the pool as before.
func TestStrayPutDuringKeepAlive(t *testing.T) {
	r, g := keepAliveRig(t, 1)
	a := r.get()
	r.put(a)
	r.clock.Advance(time.Second)
	if c := <-g.entered; c != a {
		t.Fatalf("the keep-alive checks conn %d, want %d", c.id, a.id)
	}
	if err := r.pool.Put(a); !errors.Is(err, ErrNotLent) {
		t.Errorf("a stray Put during the check: %v, want ErrNotLent", err)
	}
	if err := r.pool.Discard(a); !errors.Is(err, ErrNotLent) {
		t.Errorf("a stray Discard during the check: %v, want ErrNotLent", err)
	}
	if c, err := r.pool.TryGet(r.ctx); !errors.Is(err, ErrNoneIdle) {
		t.Errorf("TryGet while the only conn is checked: %v, %v; want ErrNoneIdle", c, err)
		if err == nil {
			r.put(c)
		}
	}
	g.release <- nil
	r.waitFor("the check done", func() bool { return r.pool.Stats().Idle == 1 })
	if c := r.get(); c != a {
		t.Errorf("after the check got conn %d, want %d", c.id, a.id)
	} else {
		r.put(c)
	}
	if s := r.pool.Stats(); s.Live != 1 || s.Broken != 0 || r.be.closes.Load() != 0 {
		t.Errorf("live %d broken %d closed %d, want 1, 0, 0", s.Live, s.Broken, r.be.closes.Load())
	}
	r.balance()
}

// TestKeepAliveOneAtATime: a keep-alive sweep takes one idle resource out
// of service at a time, so a slow check holds up no caller: with every one
// of Size 3 idle and due, and the first check hanging, a Get still gets
// another at once. The sweep goes on, once the first check is done, to the
// one still due (the one the Get used is not).
func TestKeepAliveOneAtATime(t *testing.T) {
	r, g := keepAliveRig(t, 3)
	all := []*conn{r.get(), r.get(), r.get()}
	for _, c := range all {
		r.put(c)
	}
	r.clock.Advance(time.Second)
	first := <-g.entered // hangs until released
	c, err := r.pool.TryGet(r.ctx)
	if err != nil {
		t.Fatalf("Get while one check hangs: %v; want another idle one", err)
	}
	if c == first {
		t.Fatalf("got conn %d, which the keep-alive is checking", c.id)
	}
	r.put(c)
	g.release <- nil
	second := <-g.entered // the sweep goes on
	if second == first || second == c {
		t.Errorf("the second check is of conn %d, want the one neither checked nor used", second.id)
	}
	g.release <- nil
	r.waitFor("the sweep done", func() bool { return r.pool.Stats().Idle == 3 })
	if n := len(g.entered); n != 0 {
		t.Errorf("%d more checks, want none: the rest was used or checked", n)
	}
	r.balance()
}

// TestCheckCutShortChecksAgain: a Get whose ctx ends during the check of
// an idle connection (dead, its ping hanging) puts it back still due a
// check: the check said nothing of it. The next Get, within CheckIdle of
// the first, checks it again, finds it dead, and gets a fresh one, where a
// put-back that counted as a use lent it the dead one unchecked.
func TestCheckCutShortChecksAgain(t *testing.T) {
	g := newGate()
	r := newRig(t, PoolConfig[*conn]{
		Limits:    policy.Limits{Size: 2},
		Check:     g.check,
		CheckIdle: time.Second,
	})
	dead := r.get()
	r.put(dead)
	r.clock.Advance(time.Second) // due a check
	ctx, cancel := context.WithCancel(r.ctx)
	first := make(chan error, 1)
	go func() {
		_, err := r.pool.Get(ctx)
		first <- err
	}()
	if c := <-g.entered; c != dead {
		t.Fatalf("checking conn %d, want %d", c.id, dead.id)
	}
	cancel() // the caller gives up during the check
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first Get: %v, want context.Canceled", err)
	}
	next := make(chan *conn, 1)
	go func() { next <- r.get() }()
	select {
	case c := <-g.entered:
		if c != dead {
			t.Fatalf("the next Get checks conn %d, want %d", c.id, dead.id)
		}
		g.release <- errors.New("dead")
	case c := <-next:
		r.put(c)
		t.Fatalf("the next Get was lent conn %d unchecked, right after a check cut short", c.id)
	}
	c := <-next
	if c == dead {
		t.Fatalf("the next Get was lent the dead conn")
	}
	r.put(c)
	if s := r.pool.Stats(); s.CheckFailures != 1 {
		t.Errorf("check failures %d, want 1", s.CheckFailures)
	}
	r.balance()
}

// TestMinIdleWithKeepNoChurn: with MinIdle 2 and Keep a minute, a pool
// left alone for five minutes keeps its two warm connections: Keep retires
// none of the last MinIdle, as HikariCP and pgxpool spare theirs, so
// nothing is closed and nothing opened beyond the first two.
func TestMinIdleWithKeepNoChurn(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 4, Keep: time.Minute, MinIdle: 2}})
	r.warm(func(s Stats) bool { return s.Idle == 2 })
	for range 10 {
		r.clock.Advance(30 * time.Second)
		r.waitFor("the pool to settle", func() bool { _, opening := r.pool.statsOpening(); return opening == 0 })
	}
	if s := r.pool.Stats(); s.Evicted != 0 || s.Made != 2 || s.Idle != 2 || r.be.made.Load() != 2 {
		t.Errorf("after 5 idle minutes: evicted %d made %d idle %d opened %d; want 0, 2, 2, 2",
			s.Evicted, s.Made, s.Idle, r.be.made.Load())
	}
	r.balance()
}

// heldOpen is an Open whose first call signals started and then waits
// until hold is closed; the rest open at once, from r's backend.
type heldOpen struct {
	r       *rig
	calls   atomic.Int64
	started chan struct{}
	hold    chan struct{}
}

func newHeldOpen() *heldOpen {
	return &heldOpen{started: make(chan struct{}, 1), hold: make(chan struct{})}
}

func (h *heldOpen) open(ctx context.Context) (*conn, error) {
	if h.calls.Add(1) == 1 {
		h.started <- struct{}{}
		<-h.hold
	}
	return h.r.be.open(ctx)
}

// TestResetDuringOpen: an Open begun before a Reset and done after it is
// not lent to anyone: the connection is closed (Outdated), and the Get
// that asked for it takes again and gets one opened after the Reset.
func TestResetDuringOpen(t *testing.T) {
	h := newHeldOpen()
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 2}, Open: h.open})
	h.r = r
	got := make(chan *conn, 1)
	go func() { got <- r.get() }()
	<-h.started // the Open is under way
	if err := r.pool.Reset(); err != nil {
		t.Fatal(err)
	}
	close(h.hold)
	c := <-got
	if c.id != 2 {
		t.Errorf("the Get got conn %d, want 2: conn 1 was opened across the Reset", c.id)
	}
	r.put(c)
	if s := r.pool.Stats(); s.Outdated != 1 || r.be.closes.Load() != 1 || s.Live != 1 {
		t.Errorf("outdated %d closed %d live %d, want 1, 1, 1", s.Outdated, r.be.closes.Load(), s.Live)
	}
	r.balance()
}

// TestReuseNotAskedForAbandonedOpen: a resource opened for a Get that gave
// up goes to the pool without Reuse being asked: no caller ever had it, so
// there is nothing for Reuse to judge.
func TestReuseNotAskedForAbandonedOpen(t *testing.T) {
	h := newHeldOpen()
	var asked atomic.Int64
	r := newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 1},
		Open:   h.open,
		Reuse:  func(*conn) bool { asked.Add(1); return true },
	})
	h.r = r
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := r.pool.Get(ctx)
		done <- err
	}()
	<-h.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the Get: %v, want context.Canceled", err)
	}
	close(h.hold)
	r.waitFor("the abandoned open in the pool", func() bool { return r.pool.Stats().Idle == 1 })
	if n := asked.Load(); n != 0 {
		t.Errorf("Reuse asked %d times, want 0: no caller had the resource", n)
	}
	r.balance()
}

// TestCloseDuringKeepAliveCheck: Close with context.Background() while a
// keep-alive check hangs returns: the check's ctx ends with the pool, the
// resource goes back unjudged, and Close closes it with the rest. A tick
// that comes after the checker stopped leaves nothing lent to no one:
// TestCloseAfterKeepAliveTick in actors.
func TestCloseDuringKeepAliveCheck(t *testing.T) {
	r, g := keepAliveRig(t, 2)
	a, b := r.get(), r.get()
	r.put(a)
	r.put(b)
	r.clock.Advance(time.Second)
	<-g.entered
	done := make(chan error, 1)
	go func() { done <- r.pool.Close(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-r.ctx.Done():
		t.Fatal("Close never returned")
	}
	if n := r.be.closes.Load(); n != 2 {
		t.Errorf("closed %d, want both", n)
	}
}
