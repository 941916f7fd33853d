package client

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

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// holders tracks who holds each conn, to catch one lent to two callers at
// once or one lent after it was closed.
type holders struct {
	mu   sync.Mutex
	held map[*conn]bool
}

func (h *holders) take(t testing.TB, be *backend, c *conn) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[c] {
		t.Errorf("conn %d lent to two callers at once", c.id)
	}
	be.mu.Lock()
	open := be.live[c]
	be.mu.Unlock()
	if !open {
		t.Errorf("conn %d lent after it was closed", c.id)
	}
	h.held[c] = true
}

func (h *holders) give(c *conn) {
	h.mu.Lock()
	delete(h.held, c)
	h.mu.Unlock()
}

// TestRackNeverLendsTwice: eight callers take, put back and discard
// connections as fast as they can, mostly through the rack, while another
// resizes and resets the pool and moves the clock past Keep, which revokes
// the rack and retires what lies on it. No connection is ever lent to two
// callers at once or after it was closed, none is closed twice (the
// backend fails the test), and none is lost.
func TestRackNeverLendsTwice(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 6, Idle: 4, Keep: time.Second}})
	h := &holders{held: map[*conn]bool{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ops atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithCancel(r.ctx)
				if i%7 == g%7 {
					cancel() // a Get that gives up at once, parked or not
				}
				c, err := r.pool.Get(ctx)
				cancel()
				if err != nil {
					continue
				}
				h.take(t, r.be, c)
				h.give(c)
				if i%11 == 0 {
					if err := r.pool.Discard(c); err != nil {
						t.Errorf("discard: %v", err)
					}
				} else if err := r.pool.Put(c); err != nil {
					t.Errorf("put: %v", err)
				}
				ops.Add(1)
			}
		}()
	}
	limits := []policy.Limits{
		{Size: 6, Idle: 4, Keep: time.Second},
		{Size: 2, Idle: 1},
		{Size: 8, Idle: 8, Life: 3 * time.Second},
		{Size: 3, Idle: 3, Keep: time.Second},
	}
	for round := range 200 {
		n := ops.Load()
		r.waitFor("some Gets", func() bool { return ops.Load() >= n+20 })
		switch round % 3 {
		case 0:
			if err := r.pool.SetLimits(limits[round/3%len(limits)]); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := r.pool.Reset(); err != nil {
				t.Fatal(err)
			}
		case 2:
			r.clock.Advance(700 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	if s := r.pool.Stats(); s.Gets < ops.Load() {
		t.Errorf("Stats counted %d Gets, fewer than the %d that got a conn", s.Gets, ops.Load())
	}
	r.balance()
}

// TestRackWaiterFirst: while a caller waits in line, a resource put back
// goes to it, not onto the rack for a later Get, and TryGet does not
// overtake it; once the line is empty the rack serves again.
func TestRackWaiterFirst(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1, Idle: 1}})
	a := r.get()
	r.put(a)
	a = r.get() // from the rack now
	got := make(chan *conn)
	go func() {
		c, err := r.pool.Get(r.ctx)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	r.waitFor("the second Get to wait", func() bool { return r.pool.Stats().Waiting == 1 })
	r.put(a)
	if _, err := r.pool.TryGet(r.ctx); !errors.Is(err, ErrNoneIdle) {
		t.Errorf("TryGet with the conn promised to a waiting Get: %v, want ErrNoneIdle", err)
	}
	if c := <-got; c != a {
		t.Fatalf("the waiting Get got conn %d, want %d", c.id, a.id)
	}
	r.put(a)
	before := r.pool.Stats().Gets
	r.put(r.get())
	r.put(r.get())
	if s := r.pool.Stats(); s.Gets != before+2 || s.Idle != 1 || s.Busy != 0 {
		t.Errorf("gets %d, idle %d, busy %d; want %d, 1, 0", s.Gets, s.Idle, s.Busy, before+2)
	}
	r.balance()
}

// TestRackIdleLimit: with Idle below Size, a burst that grows the pool
// leaves no more than Idle idle, on the rack and in the books together,
// whichever way each resource comes home.
func TestRackIdleLimit(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 6, Idle: 2}})
	for round := range 4 {
		var held []*conn
		for range 6 {
			held = append(held, r.get())
		}
		for i, c := range held {
			r.put(c)
			if s := r.pool.Stats(); s.Idle > 2 {
				t.Fatalf("round %d, after %d puts: %d idle, want at most 2", round, i+1, s.Idle)
			}
		}
		if s := r.pool.Stats(); s.Idle != 2 || s.Live != 2 || s.Surplus != int64(4*(round+1)) {
			t.Fatalf("round %d: idle %d, live %d, surplus %d; want 2, 2, %d", round, s.Idle, s.Live, s.Surplus, 4*(round+1))
		}
	}
	r.balance()
}

// TestRackKeepLate: what lies on the rack is retired by Keep when the
// pool's timer fires, counted from its last Put, however late the timer:
// with every timer 5 s late it is still lent at Keep+4 s (the timer has
// not fired), and gone at Keep+5 s, counted Evicted. A Get just before
// that keeps it: its Put starts its Keep again.
func TestRackKeepLate(t *testing.T) {
	clock := vclock.NewVirtual(vclock.WithLateness(5 * time.Second))
	r := newRigOn(t, clock, PoolConfig[*conn]{Limits: policy.Limits{Size: 2, Idle: 2, Keep: time.Minute}})
	r.be.closedC = make(chan *conn, 4)
	a := r.get()
	r.put(a)
	r.put(r.get()) // from the rack, and back
	r.pool.Stats()
	clock.Advance(time.Minute + 4*time.Second) // the timer, due at Keep, fires at Keep+5 s
	c := r.get()
	if c != a {
		t.Fatalf("got conn %d, want %d", c.id, a.id)
	}
	r.put(c) // idle from now
	r.pool.Stats()
	clock.Advance(time.Minute + 4*time.Second)
	select {
	case c := <-r.be.closedC:
		t.Fatalf("conn %d closed before the late timer fired", c.id)
	default:
	}
	clock.Advance(time.Second)
	if c := r.waitCloses(1)[0]; c != a {
		t.Fatalf("closed conn %d, want %d", c.id, a.id)
	}
	if s := r.pool.Stats(); s.Evicted != 1 || s.Live != 0 {
		t.Errorf("evicted %d, live %d; want 1, 0", s.Evicted, s.Live)
	}
	r.balance()
}

// The operations of FuzzPoolRack, one per pair of input bytes.
const (
	rackTryGet   = iota // TryGet
	rackPut             // arg: which held conn
	rackPutAgain        // arg: which conn once held and not now: must be refused
	rackDiscard         // arg: which held conn
	rackLimits          // arg: the new limits
	rackReset           // Reset
	rackAdvance         // arg: seconds to move the clock
	rackWait            // a Get on its own goroutine, which may wait in line
	rackCancel          // arg: which waiting Get gives up
	rackOps
)

// FuzzPoolRack drives a pool with its rack through Gets, Puts, double
// Puts, Discards, resizes, Resets, the clock and callers that wait and give
// up, and checks after each step what a user relies on: no conn is lent
// to two callers at once or after it closed, a Put of a conn not held is
// refused with ErrNotLent, the idle stay within Idle, Stats add up, and at
// the end every conn opened is closed exactly once.
func FuzzPoolRack(f *testing.F) {
	f.Add([]byte{rackTryGet, 0, rackPut, 0, rackTryGet, 0, rackPutAgain, 0, rackPut, 0})
	f.Add([]byte{rackTryGet, 0, rackTryGet, 0, rackWait, 0, rackPut, 1, rackTryGet, 0, rackPut, 0, rackLimits, 3})
	f.Add([]byte{rackTryGet, 0, rackPut, 0, rackAdvance, 90, rackTryGet, 0, rackReset, 0, rackPut, 0, rackPutAgain, 0})
	f.Add([]byte{rackTryGet, 0, rackTryGet, 0, rackTryGet, 0, rackPut, 0, rackPut, 0, rackLimits, 1, rackPut, 0, rackDiscard, 0})
	f.Add([]byte{rackTryGet, 0, rackPut, 0, rackWait, 0, rackTryGet, 0, rackWait, 0, rackCancel, 0, rackPut, 0, rackAdvance, 61})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 400 {
			ops = ops[:400]
		}
		limits := func(arg byte) policy.Limits {
			l := policy.Limits{Size: int(arg%4) + 1}
			l.Idle = int(arg>>2) % (l.Size + 1)
			if arg&0x40 != 0 {
				l.Keep = time.Minute
			}
			if arg&0x80 != 0 {
				l.Life = 2 * time.Minute
			}
			return l
		}
		r := newRig(t, PoolConfig[*conn]{Limits: limits(0xc7)})
		h := &holders{held: map[*conn]bool{}}
		var held, once []*conn
		var waiters []context.CancelFunc
		var wg sync.WaitGroup
		var mu sync.Mutex // guards held against the waiting Gets
		// getting counts the waiting Gets not yet done: one may hold a
		// conn it has not yet noted in held.
		var getting atomic.Int64
		idle := limits(0xc7).Idle
		defer func() {
			for _, cancel := range waiters {
				cancel()
			}
			wg.Wait()
			for _, c := range held {
				h.give(c)
				_ = r.pool.Put(c)
			}
			if err := r.pool.Close(r.ctx); err != nil {
				t.Errorf("close: %v", err)
			}
			r.balance()
		}()
		pick := func(n int, arg byte) (int, bool) { return int(arg) % max(n, 1), n > 0 }
		// step runs one op under mu, which a Fatalf's Goexit unlocks too.
		step := func(i int, op, arg byte) {
			mu.Lock()
			defer mu.Unlock()
			switch op {
			case rackTryGet:
				if c, err := r.pool.TryGet(r.ctx); err == nil {
					h.take(t, r.be, c)
					held = append(held, c)
				}
			case rackPut, rackDiscard:
				if k, ok := pick(len(held), arg); ok {
					c := held[k]
					held = append(held[:k], held[k+1:]...)
					h.give(c)
					once = append(once, c)
					var err error
					if op == rackPut {
						err = r.pool.Put(c)
					} else {
						err = r.pool.Discard(c)
					}
					if err != nil {
						t.Fatalf("step %d: put or discard conn %d: %v", i/2, c.id, err)
					}
				}
			case rackPutAgain:
				if k, ok := pick(len(once), arg); ok {
					c := once[k]
					h.mu.Lock()
					mine := h.held[c]
					h.mu.Unlock()
					if !mine && getting.Load() == 0 {
						if err := r.pool.Put(c); !errors.Is(err, ErrNotLent) {
							t.Fatalf("step %d: a second Put of conn %d: %v, want ErrNotLent", i/2, c.id, err)
						}
					}
				}
			case rackLimits:
				l := limits(arg)
				if err := r.pool.SetLimits(l); err != nil {
					t.Fatal(err)
				}
				idle = l.Idle
			case rackReset:
				if err := r.pool.Reset(); err != nil {
					t.Fatal(err)
				}
			case rackAdvance:
				r.clock.Advance(time.Duration(arg) * time.Second)
			case rackWait:
				if len(waiters) < 4 {
					ctx, cancel := context.WithCancel(r.ctx)
					waiters = append(waiters, cancel)
					wg.Add(1)
					getting.Add(1)
					go func() {
						defer wg.Done()
						defer getting.Add(-1)
						c, err := r.pool.Get(ctx)
						if err != nil {
							return
						}
						mu.Lock()
						h.take(t, r.be, c)
						held = append(held, c)
						mu.Unlock()
					}()
				}
			case rackCancel:
				if k, ok := pick(len(waiters), arg); ok {
					waiters[k]()
				}
			}
			s := r.pool.Stats()
			if s.Idle < 0 || s.Busy < 0 || s.Live != s.Idle+s.Busy {
				t.Fatalf("step %d: idle %d, busy %d, live %d", i/2, s.Idle, s.Busy, s.Live)
			}
			if idle > 0 && s.Idle > idle {
				t.Fatalf("step %d: %d idle, more than Idle %d", i/2, s.Idle, idle)
			}
		}
		for i := 0; i+1 < len(ops); i += 2 {
			step(i, ops[i]%rackOps, ops[i+1])
		}
	})
}

// TestRackLifeWhileOut: a conn taken from the rack that lives past its
// Life while its caller holds it is closed when put back, not laid on the
// rack for the next Get, whether or not the pool's timer fired meanwhile.
func TestRackLifeWhileOut(t *testing.T) {
	for _, fired := range []bool{true, false} {
		r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 2, Idle: 2, Life: time.Minute}})
		r.be.closedC = make(chan *conn, 4)
		a := r.get()
		r.put(a)
		a = r.get() // from the rack
		if fired {
			r.pool.Stats()
			r.clock.Advance(time.Minute) // the timer fires while a is out
		} else {
			r.clock.StopAll()
			r.clock.Advance(time.Minute)
		}
		r.put(a)
		if c := r.waitCloses(1)[0]; c != a {
			t.Fatalf("timer fired %v: closed conn %d, want %d", fired, c.id, a.id)
		}
		if c := r.get(); c == a {
			t.Fatalf("timer fired %v: conn %d lent past its Life", fired, a.id)
		} else {
			r.put(c)
		}
		r.balance()
	}
}

// TestRackHugeKeep: a Keep of centuries (a "never" some write as the
// largest Duration) does not wrap round the pool's timer: Life still
// retires on time what lies on the rack.
func TestRackHugeKeep(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 2, Idle: 2, Keep: time.Duration(math.MaxInt64), Life: time.Minute}})
	r.be.closedC = make(chan *conn, 4)
	a := r.get()
	r.put(a)
	r.pool.Stats()
	r.clock.Advance(2 * time.Minute) // past a's Life
	if c := r.waitCloses(1)[0]; c != a {
		t.Fatalf("closed conn %d, want %d", c.id, a.id)
	}
	r.balance()
}

// TestRackSweepKeepsIdleOrder: what the rack sends home takes its place
// among the books' idle by when it was put back, so SetLimits still closes
// the longest idle first: f and g, put back onto the rack at 1 s and 2 s,
// go before h, put back through the actor at 3 s.
func TestRackSweepKeepsIdleOrder(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 3, Idle: 3, MinIdle: 1, Keep: time.Hour}})
	r.be.closedC = make(chan *conn, 8)
	r.waitFor("the warm-up", func() bool { return r.pool.Stats().Idle == 1 })
	f := r.get() // the rack's
	r.waitFor("a fill", func() bool { return r.pool.Stats().Idle == 1 })
	g := r.get() // the rack's: it holds Idle less MinIdle, two
	r.waitFor("a fill", func() bool { return r.pool.Stats().Idle == 1 })
	h := r.get() // the actor's own
	r.clock.Advance(time.Second)
	r.put(f)
	r.clock.Advance(time.Second)
	r.put(g)
	r.clock.Advance(time.Second)
	r.put(h)
	if err := r.pool.SetLimits(policy.Limits{Size: 3, Idle: 1, Keep: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.waitCloses(2) {
		if c == h {
			t.Errorf("SetLimits closed conn %d, the most recently returned; want %d and %d, the longest idle", h.id, f.id, g.id)
		}
	}
}

// TestRackDoublePutAndDiscard: a conn lying on the rack, put back already,
// is refused a second Put and a Discard (ErrNotLent), and lent once more.
func TestRackDoublePutAndDiscard(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 2, Idle: 2}})
	c := r.get()
	r.put(c)
	c = r.get() // from the rack
	r.put(c)    // on the rack
	if err := r.pool.Put(c); !errors.Is(err, ErrNotLent) {
		t.Errorf("second Put: %v, want ErrNotLent", err)
	}
	if err := r.pool.Discard(c); !errors.Is(err, ErrNotLent) {
		t.Errorf("Discard after Put: %v, want ErrNotLent", err)
	}
	if d := r.get(); d != c {
		t.Errorf("got conn %d, want %d", d.id, c.id)
	} else {
		r.put(d)
	}
	r.balance()
}

// TestRackGetsOwnBackAtAnyDepth: a goroutine that puts a conn back and
// then gets one gets that conn again, from its own slot of the rack,
// however deep in its stack it calls Put and Get; eight other conns lie
// on the rack, put back by goroutines of their own.
func TestRackGetsOwnBackAtAnyDepth(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 16, Idle: 16}})
	var held []*conn
	for range 9 {
		held = append(held, r.get())
	}
	var wg sync.WaitGroup
	for _, c := range held[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.pool.Put(c); err != nil {
				t.Errorf("put %d: %v", c.id, err)
			}
		}()
	}
	wg.Wait()
	r.put(held[0])
	done := make(chan []string, 1)
	go func() {
		var wrong []string
		for depth := range 400 {
			deepen(depth, func() {
				c, err := r.pool.Get(r.ctx)
				if err != nil {
					t.Errorf("depth %d: get: %v", depth, err)
					return
				}
				if err := r.pool.Put(c); err != nil {
					t.Errorf("depth %d: put %d: %v", depth, c.id, err)
					return
				}
				d, err := r.pool.Get(r.ctx)
				if err != nil {
					t.Errorf("depth %d: get: %v", depth, err)
					return
				}
				if d != c {
					wrong = append(wrong, fmt.Sprintf("depth %d: put conn %d back, then got conn %d", depth, c.id, d.id))
				}
				if err := r.pool.Put(d); err != nil {
					t.Errorf("depth %d: put %d: %v", depth, d.id, err)
				}
			})
		}
		done <- wrong
	}()
	select {
	case wrong := <-done:
		if len(wrong) > 0 {
			t.Errorf("%d of 400 depths got another conn back, as %s", len(wrong), wrong[0])
		}
	case <-r.ctx.Done():
		t.Fatal("the Gets and Puts at 400 depths did not finish")
	}
	if s := r.pool.Stats(); s.Live != 9 || s.Idle != 9 {
		t.Errorf("live %d, idle %d; want 9 and 9", s.Live, s.Idle)
	}
	r.balance()
}

// deepen calls f from n frames further down the stack.
//
//go:noinline
func deepen(n int, f func()) {
	if n > 0 {
		deepen(n-1, f)
		return
	}
	f()
}

// BenchmarkRackTail is a Get and a Put of a pool of 1,000 made up front,
// by 1 or 8 goroutines, as the bench's Pool rows run them. One call in 16
// is timed on its own; p50-ns and p99-ns are their latencies, the clock's
// own cost included. Beside the Pool rows' p99 it shows where the rack's
// tail lies without the rest of the bench.
func BenchmarkRackTail(b *testing.B) {
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			eng := engine.New(engine.WithHeatEvery(0))
			defer eng.Shutdown(context.Background())
			const size = 1000
			p, err := NewPool(eng, PoolConfig[*conn]{
				Open:   func(context.Context) (*conn, error) { return new(conn), nil },
				Limits: policy.Limits{Size: size, Idle: size},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			ctx := context.Background()
			held := make([]*conn, size)
			for i := range held {
				if held[i], err = p.Get(ctx); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range held {
				if err := p.Put(c); err != nil {
					b.Fatal(err)
				}
			}
			lats := make([][]time.Duration, g)
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lat := make([]time.Duration, 0, b.N/g/16+1)
					for i := w; i < b.N; i += g {
						var start time.Time
						if i/g%16 == 0 {
							start = time.Now()
						}
						c, err := p.Get(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if err := p.Put(c); err != nil {
							b.Error(err)
							return
						}
						if i/g%16 == 0 {
							lat = append(lat, time.Since(start))
						}
					}
					lats[w] = lat
				}()
			}
			wg.Wait()
			b.StopTimer()
			var all []time.Duration
			for _, l := range lats {
				all = append(all, l...)
			}
			if len(all) == 0 {
				return
			}
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2]), "p50-ns")
			b.ReportMetric(float64(all[len(all)*99/100]), "p99-ns")
		})
	}
}
