package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// safety is how long a test may run before it is declared hung. It is a net
// for a deadlock, never an assertion about speed: time in these tests is
// virtual and moves only when the test says.
const safety = 60 * time.Second

// conn is a fake connection: a number, and whether the server has dropped
// it.
type conn struct {
	id   int64
	dead atomic.Bool
}

// backend is a fake server on a virtual clock: it refuses connections while
// down, counts every open and close, and fails the test on a double close.
type backend struct {
	t     testing.TB
	clock *vclock.Virtual

	up      atomic.Int64 // Open fails before this instant
	made    atomic.Int64 // connections opened
	closes  atomic.Int64
	closedC chan *conn // every close, when not nil

	mu       sync.Mutex
	attempts []int64 // when each Open was tried
	live     map[*conn]bool
}

func newBackend(t testing.TB, clock *vclock.Virtual) *backend {
	return &backend{t: t, clock: clock, live: map[*conn]bool{}}
}

func (b *backend) open(ctx context.Context) (*conn, error) {
	now := b.clock.Now()
	b.mu.Lock()
	b.attempts = append(b.attempts, now)
	b.mu.Unlock()
	if now < b.up.Load() {
		return nil, errBackendDown
	}
	c := &conn{id: b.made.Add(1)}
	b.mu.Lock()
	b.live[c] = true
	b.mu.Unlock()
	return c, nil
}

var errBackendDown = errors.New("connection refused")

func (b *backend) close(c *conn) error {
	b.mu.Lock()
	ok := b.live[c]
	delete(b.live, c)
	b.mu.Unlock()
	if !ok {
		b.t.Errorf("conn %d closed twice, or never opened", c.id)
	}
	b.closes.Add(1)
	if b.closedC != nil {
		b.closedC <- c
	}
	return nil
}

// restart drops every connection the server has open.
func (b *backend) restart() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.live {
		c.dead.Store(true)
	}
}

func (b *backend) tries() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int64(nil), b.attempts...)
}

// rig is a Pool of fake connections on an engine with a virtual clock.
type rig struct {
	t     testing.TB
	ctx   context.Context // the safety net
	clock *vclock.Virtual
	eng   *engine.Engine
	be    *backend
	pool  *Pool[*conn]
}

func newRig(t testing.TB, cfg PoolConfig[*conn]) *rig {
	t.Helper()
	return newRigOn(t, vclock.NewVirtual(), cfg)
}

func (r *rig) get() *conn {
	r.t.Helper()
	c, err := r.pool.Get(r.ctx)
	if err != nil {
		r.t.Fatalf("get: %v", err)
	}
	return c
}

func (r *rig) put(c *conn) {
	r.t.Helper()
	if err := r.pool.Put(c); err != nil {
		r.t.Fatalf("put %d: %v", c.id, err)
	}
}

// balance checks that every connection opened is closed or still in the
// pool's books.
func (r *rig) balance() {
	r.t.Helper()
	s := r.pool.Stats()
	if made, closed := r.be.made.Load(), r.be.closes.Load(); made != closed+int64(s.Live) {
		r.t.Errorf("opened %d, closed %d, live %d: a connection is lost or closed twice", made, closed, s.Live)
	}
}

// waitCloses waits until the closer goroutine has closed n connections.
func (r *rig) waitCloses(n int) []*conn {
	r.t.Helper()
	var out []*conn
	for range n {
		select {
		case c := <-r.be.closedC:
			out = append(out, c)
		case <-r.ctx.Done():
			r.t.Fatalf("waited for %d closes, saw %d", n, len(out))
		}
	}
	return out
}

// waitFor spins, yielding, until ok says yes; for states reached by other
// goroutines with no event to wait on. The safety ctx bounds it.
func (r *rig) waitFor(what string, ok func() bool) {
	r.t.Helper()
	spinUntil(r.t, r.ctx, what, ok)
}

// spinUntil spins, yielding, until ok says yes, or fails t once ctx ends.
func spinUntil(t testing.TB, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// sleepClock is the callers' own clock in a storm: the same virtual time,
// but it counts the callers asleep on it, so the driver knows when every
// caller is blocked on something only the clock can end.
type sleepClock struct {
	v      *vclock.Virtual
	asleep atomic.Int64
}

func (c *sleepClock) Now() int64 { return c.v.Now() }

func (c *sleepClock) AfterFunc(d time.Duration, f func()) vclock.Timer {
	t := &sleepTimer{c: c}
	t.inner = c.v.AfterFunc(d, func() {
		if t.done.CompareAndSwap(false, true) {
			c.asleep.Add(-1)
		}
		f()
	})
	c.asleep.Add(1) // after registering: counted only once the timer is there to fire
	return t
}

type sleepTimer struct {
	c     *sleepClock
	inner vclock.Timer
	done  atomic.Bool
}

func (t *sleepTimer) Stop() bool {
	if t.inner.Stop() && t.done.CompareAndSwap(false, true) {
		t.c.asleep.Add(-1)
		return true
	}
	return false
}

// drive moves virtual time on, one deadline at a time, whenever quiet says
// every goroutine is blocked, until finished says the story is over. It
// returns an error if the safety net ends it or nothing is left to fire.
func drive(ctx context.Context, clock *vclock.Virtual, quiet, finished func() bool) error {
	for !finished() {
		for !quiet() {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			runtime.Gosched()
		}
		if finished() {
			return nil
		}
		if _, ok := clock.AdvanceNext(); !ok {
			return errors.New("every caller is blocked and no timer is pending")
		}
	}
	return nil
}

// TestReconnectionStorm: the backend is down for 30 virtual seconds while
// 500 callers want a connection. The ward (bucket, backoff, breaker) keeps
// the Open attempts during the outage few and spaced by the backoff's
// schedule; once the backend is back every caller is served; and every
// connection opened is closed or still live.
func TestReconnectionStorm(t *testing.T) {
	const callers = 500
	const outage = 30 * time.Second
	clock := vclock.NewVirtual()
	start := clock.Now()
	backoff := policy.Backoff{Base: time.Second, Factor: 2, Cap: 8 * time.Second, Attempts: 1 << 20, Jitter: policy.Rigid}
	const rate = 1.0 // makes per second, burst 1
	r := newRigOn(t, clock, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 10, Idle: 10},
		Ward: policy.Ward{
			Bucket:  policy.Rate{PerSecond: rate, Burst: 1},
			Backoff: backoff,
			Breaker: policy.Throttle{K: 2, Period: 10 * time.Second},
		},
		Seed: 1,
	})
	r.be.up.Store(start + int64(outage))

	sleeper := &sleepClock{v: clock}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	var wg sync.WaitGroup
	var served, shed, failed atomic.Int64
	var inUse sync.Map
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			retry := time.Second + time.Duration(i%10)*100*time.Millisecond
			for {
				c, err := r.pool.Get(ctx)
				switch {
				case err == nil:
					if _, dup := inUse.LoadOrStore(c, i); dup {
						t.Errorf("conn %d lent to two callers", c.id)
					}
					_ = vclock.Sleep(ctx, sleeper, 100*time.Millisecond) // use it
					inUse.Delete(c)
					if err := r.pool.Put(c); err != nil {
						t.Errorf("caller %d: put: %v", i, err)
					}
					served.Add(1)
					return
				case errors.Is(err, ErrShed):
					shed.Add(1)
				case errors.As(err, new(*OpenError)):
					failed.Add(1)
				default:
					if ctx.Err() == nil {
						t.Errorf("caller %d: %v", i, err)
					}
					return
				}
				if vclock.Sleep(ctx, sleeper, retry) != nil {
					return
				}
			}
		}()
	}
	quiet := func() bool {
		blocked := sleeper.asleep.Load() + served.Load()
		return blocked+int64(r.pool.Stats().Waiting) == callers
	}
	err := drive(ctx, clock, quiet, func() bool { return served.Load() == callers })
	if err != nil {
		t.Errorf("storm did not finish at +%v: %v (served %d of %d)", time.Duration(clock.Now()-start), err, served.Load(), callers)
		cancel()
	}
	wg.Wait()

	// During the outage: attempts no closer together than the backoff's
	// schedule and the bucket allow, and so no more than that schedule fits.
	var during []int64
	for _, at := range r.be.tries() {
		if at < start+int64(outage) {
			during = append(during, at)
		}
	}
	bound, at := 0, start
	for at < start+int64(outage) {
		bound++
		at += int64(backoff.Ceiling(bound))
	}
	if len(during) < 2 || len(during) > bound {
		t.Errorf("%d Open attempts during the outage, want 2..%d (one per backoff step)", len(during), bound)
	}
	for k := 1; k < len(during); k++ {
		gap := time.Duration(during[k] - during[k-1])
		if want := max(backoff.Ceiling(k), time.Duration(float64(time.Second)/rate)); gap < want {
			t.Errorf("attempt %d came %v after the one before, want at least %v", k+1, gap, want)
		}
	}
	s := r.pool.Stats()
	if s.MakeFailures != int64(len(during)) {
		t.Errorf("stats count %d make failures, the backend refused %d", s.MakeFailures, len(during))
	}
	if s.Live > 10 {
		t.Errorf("live %d over size 10", s.Live)
	}
	if s.Waiting != 0 || s.Busy != 0 {
		t.Errorf("after the storm: %d waiting, %d busy", s.Waiting, s.Busy)
	}
	t.Logf("outage attempts %d at %v; after: served %d, shed %d, open failures %d, made %d, ended at +%v",
		len(during), offsets(during, start), served.Load(), shed.Load(), failed.Load(), r.be.made.Load(), time.Duration(clock.Now()-start))
	r.balance()
	if err := r.pool.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	if made, closed := r.be.made.Load(), r.be.closes.Load(); made != closed {
		t.Errorf("after Close: opened %d, closed %d", made, closed)
	}
}

func offsets(ts []int64, start int64) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = time.Duration(t - start)
	}
	return out
}

func newRigOn(t testing.TB, clock *vclock.Virtual, cfg PoolConfig[*conn]) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	r := &rig{t: t, ctx: ctx, clock: clock, be: newBackend(t, clock)}
	r.eng = engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
	if cfg.Open == nil {
		cfg.Open = r.be.open
	}
	if cfg.Close == nil {
		cfg.Close = r.be.close
	}
	p, err := NewPool(r.eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.pool = p
	t.Cleanup(func() {
		if err := r.pool.Close(ctx); err != nil {
			t.Errorf("pool close: %v", err)
		}
		if err := r.eng.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
	})
	return r
}

// TestStaleAfterRestart: the server drops every pooled connection. Each
// dead one is handed out at most once, found dead by the caller's check and
// discarded; the pool refills with live ones.
func TestStaleAfterRestart(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 4, Idle: 4}})
	var first []*conn
	for range 4 {
		first = append(first, r.get())
	}
	for _, c := range first {
		r.put(c)
	}
	r.be.restart()

	// Four callers hold a connection each, as a server under load would;
	// each checks what it gets and discards a dead one.
	seen := map[*conn]bool{}
	var held []*conn
	for len(held) < 4 {
		c := r.get()
		if seen[c] {
			t.Fatalf("conn %d handed out again after it was found dead", c.id)
		}
		if c.dead.Load() {
			seen[c] = true
			if err := r.pool.Discard(c); err != nil {
				t.Fatal(err)
			}
			continue
		}
		held = append(held, c)
	}
	if len(seen) != 4 {
		t.Errorf("found %d dead, want all 4", len(seen))
	}
	s := r.pool.Stats()
	if s.Broken != 4 || s.Made != 8 || s.Live != 4 {
		t.Errorf("broken %d, made %d, live %d; want 4, 8, 4", s.Broken, s.Made, s.Live)
	}
	for _, c := range held {
		r.put(c)
	}
	r.balance()
}

// TestStaleByLife: with Life set, connections from before a restart age
// out by themselves: after Life none of them is handed out, and the pool
// opens fresh ones.
func TestStaleByLife(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 3, Idle: 3, Life: time.Minute}})
	r.be.closedC = make(chan *conn, 8)
	old := map[*conn]bool{}
	var cs []*conn
	for range 3 {
		c := r.get()
		old[c] = true
		cs = append(cs, c)
	}
	for _, c := range cs {
		r.put(c)
	}
	r.pool.Stats() // the actor has armed its eviction timer once it answers this
	r.clock.Advance(time.Minute)
	for _, c := range r.waitCloses(3) {
		if !old[c] {
			t.Errorf("closed conn %d, which is not one of the old", c.id)
		}
	}
	c := r.get()
	if old[c] {
		t.Fatalf("got conn %d, past its Life", c.id)
	}
	r.put(c)
	if s := r.pool.Stats(); s.Evicted != 3 || s.Live != 1 {
		t.Errorf("evicted %d, live %d; want 3, 1", s.Evicted, s.Live)
	}
	r.balance()
}

// TestIdleShrinkAfterBurst: a spike grows the pool to its size; then one
// caller every ten seconds keeps only the newest warm, and the other seven
// are evicted exactly when their Keep runs out.
func TestIdleShrinkAfterBurst(t *testing.T) {
	keep := time.Minute
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 8, Idle: 8, Keep: keep}})
	r.be.closedC = make(chan *conn, 16)
	var spike []*conn
	for range 8 {
		spike = append(spike, r.get())
	}
	for _, c := range spike {
		r.put(c)
	}
	newest := spike[7]
	steps := []struct {
		at   time.Duration // since the spike
		live int
	}{
		{10 * time.Second, 8},
		{20 * time.Second, 8},
		{50 * time.Second, 8},
		{60 * time.Second, 1}, // Keep is up for the seven not lent since
		{70 * time.Second, 1},
		{5 * time.Minute, 1},
	}
	start := r.clock.Now()
	for i, st := range steps {
		// One caller every ten seconds until this step.
		for r.clock.Now()-start < int64(st.at) {
			r.pool.Stats() // barrier: the eviction timer is armed
			r.clock.Advance(10 * time.Second)
			if r.clock.Now()-start >= int64(keep) && r.clock.Now()-start-int64(10*time.Second) < int64(keep) {
				for _, c := range r.waitCloses(7) {
					if c == newest {
						t.Errorf("step %d: evicted the newest, conn %d", i, c.id)
					}
				}
			}
			c := r.get()
			if c != newest {
				t.Errorf("step %d: got conn %d, want the newest returned, %d", i, c.id, newest.id)
			}
			r.put(c)
		}
		if s := r.pool.Stats(); s.Live != st.live {
			t.Errorf("step %d (+%v): live %d, want %d", i, st.at, s.Live, st.live)
		}
	}
	if s := r.pool.Stats(); s.Evicted != 7 || s.Made != 8 {
		t.Errorf("evicted %d, made %d; want 7, 8", s.Evicted, s.Made)
	}
	r.balance()
}

// TestRealTCP: a pool of real TCP connections to a server on 127.0.0.1 that
// drops connections at random. Callers discard what breaks; after Close the
// server has seen every connection it accepted closed.
func TestRealTCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted, closed atomic.Int64
	var server sync.WaitGroup
	server.Add(1)
	go func() {
		defer server.Done()
		for n := uint64(0); ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			server.Add(1)
			go func() {
				defer server.Done()
				defer closed.Add(1)
				defer c.Close()
				rnd := rand.New(rand.NewPCG(n, 42))
				in := bufio.NewReader(c)
				for {
					if _, err := in.ReadString('\n'); err != nil {
						return // the client closed
					}
					if rnd.IntN(8) == 0 {
						return // drop it, unanswered
					}
					if _, err := c.Write([]byte("pong\n")); err != nil {
						return
					}
				}
			}()
		}
	}()

	var dials, closes atomic.Int64
	eng := engine.New(engine.WithClock(vclock.NewVirtual()), engine.WithHeatEvery(0))
	defer eng.Shutdown(ctx)
	pool, err := NewPool(eng, PoolConfig[net.Conn]{
		Open: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
			if err == nil {
				dials.Add(1)
			}
			return c, err
		},
		Close:  func(c net.Conn) error { closes.Add(1); return c.Close() },
		Limits: policy.Limits{Size: 6, Idle: 6},
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var ok, broken atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				c, err := pool.Get(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				in := bufio.NewReader(c)
				_, err = c.Write([]byte("ping\n"))
				if err == nil {
					var line string
					line, err = in.ReadString('\n')
					if err == nil && line != "pong\n" {
						err = errors.New("bad reply " + line)
					}
				}
				if err != nil {
					broken.Add(1)
					_ = pool.Discard(c) // closing a dead socket may itself fail; it is still closed
					continue
				}
				ok.Add(1)
				if err := pool.Put(c); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if broken.Load() == 0 || ok.Load() == 0 {
		t.Fatalf("ok %d, broken %d: the server should have dropped some", ok.Load(), broken.Load())
	}
	if err := pool.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("server still has %d connections open after the pool closed", accepted.Load()-closed.Load())
	}
	if accepted.Load() != closed.Load() {
		t.Errorf("server accepted %d, closed %d", accepted.Load(), closed.Load())
	}
	if dials.Load() != closes.Load() {
		t.Errorf("pool opened %d, closed %d", dials.Load(), closes.Load())
	}
	s := pool.Stats()
	if s.Made != dials.Load() || s.Closes != closes.Load() || s.Broken != broken.Load() {
		t.Errorf("stats: made %d, closes %d, broken %d; counted %d, %d, %d",
			s.Made, s.Closes, s.Broken, dials.Load(), closes.Load(), broken.Load())
	}
	t.Logf("requests ok %d, broken %d; connections %d", ok.Load(), broken.Load(), dials.Load())
}

// TestGetCancelledBefore: a Get whose ctx is already done returns at once
// with ctx's error and reserves nothing.
func TestGetCancelledBefore(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.pool.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if s := r.pool.Stats(); s.Busy != 0 || s.Waiting != 0 || s.Live != 0 {
		t.Errorf("after a cancelled Get: busy %d, waiting %d, live %d", s.Busy, s.Waiting, s.Live)
	}
	if r.be.made.Load() != 0 {
		t.Errorf("a cancelled Get opened %d", r.be.made.Load())
	}
	// The room is there for the next caller.
	r.put(r.get())
}

// TestGetCancelledWhileWaiting: a caller in line gives up; its place is
// withdrawn and the resource coming back goes to the next caller.
func TestGetCancelledWhileWaiting(t *testing.T) {
	cause := errors.New("client went away")
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}})
	held := r.get()
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.pool.Get(ctx)
		errc <- err
	}()
	r.waitFor("the caller to wait", func() bool { return r.pool.Stats().Waiting == 1 })
	cancel(cause)
	err := <-errc
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("got %v, want context.Canceled and the cause", err)
	}
	s := r.pool.Stats()
	if s.Waiting != 0 || s.Cancelled != 1 {
		t.Errorf("waiting %d, cancelled %d; want 0, 1", s.Waiting, s.Cancelled)
	}
	r.put(held)
	if c := r.get(); c != held {
		t.Errorf("next caller got %d, want %d", c.id, held.id)
	} else {
		r.put(c)
	}
	r.balance()
}

// TestCancelledDuringSlowOpen: a Get that gives up while its Open is under
// way returns at once with ctx's error; the Open is not cancelled, and the
// connection it makes goes to the pool rather than being lost
// (jackc/pgx#1259). Meanwhile a slow Open does not hold up a caller who
// could have an idle connection.
func TestCancelledDuringSlowOpen(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	var openErr atomic.Value
	var r *rig
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 2},
		Open: func(ctx context.Context) (*conn, error) {
			entered <- struct{}{}
			<-release
			if err := ctx.Err(); err != nil {
				openErr.Store(err)
			}
			return r.be.open(ctx)
		},
	})
	// One idle connection to start with.
	close(release)
	idle := r.get()
	<-entered
	r.put(idle)
	release = make(chan struct{})

	hold := r.get() // takes the idle one
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.pool.Get(ctx) // nothing idle: opens
		errc <- err
	}()
	<-entered
	r.put(hold)
	if c := r.get(); c != hold { // the slow Open holds up no one
		t.Fatalf("got conn %d, want the idle %d", c.id, hold.id)
	} else {
		r.put(c)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) { // returned with the Open still blocked
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(release)
	// Size 2: one idle, one being made. Take both; the made one must come.
	a, b := r.get(), r.get()
	if a == b || (a != hold && b != hold) {
		t.Fatalf("got %d and %d", a.id, b.id)
	}
	if v := openErr.Load(); v != nil {
		t.Errorf("Open's ctx was cancelled with the Get's: %v", v)
	}
	if r.be.made.Load() != 2 {
		t.Errorf("opened %d, want 2: the made one was lost", r.be.made.Load())
	}
	r.put(a)
	r.put(b)
	if s := r.pool.Stats(); s.Made != 2 || s.Idle != 2 {
		t.Errorf("made %d, idle %d; want 2, 2", s.Made, s.Idle)
	}
	r.balance()
}

// TestCloseDuringSlowOpen: Close cancels an Open under way, the waiting Get
// gets ErrClosed, and Close returns only after the Open has returned.
func TestCloseDuringSlowOpen(t *testing.T) {
	entered := make(chan struct{})
	var returned atomic.Bool
	r := newRig(t, PoolConfig[*conn]{
		Open: func(ctx context.Context) (*conn, error) {
			close(entered)
			<-ctx.Done()
			returned.Store(true)
			return nil, ctx.Err()
		},
	})
	errc := make(chan error, 1)
	go func() {
		_, err := r.pool.Get(context.Background())
		errc <- err
	}()
	<-entered
	if err := r.pool.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Error("Close returned before the Open it cancelled")
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("Get during Close: %v, want ErrClosed", err)
	}
	if s := r.pool.Stats(); s.MakeFailures != 0 {
		t.Errorf("a cancelled Open was told to the ward as a failure (%d)", s.MakeFailures)
	}
}

// TestMisuse: the refusals a caller gets for using the pool wrongly.
func TestMisuse(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 2, Idle: 2}})
	c := r.get()
	r.put(c)
	if err := r.pool.Put(c); !errors.Is(err, ErrNotLent) {
		t.Errorf("put twice: %v, want ErrNotLent", err)
	}
	stranger := &conn{id: -1}
	if err := r.pool.Put(stranger); !errors.Is(err, ErrNotLent) {
		t.Errorf("put of a conn never lent: %v, want ErrNotLent", err)
	}
	if err := r.pool.Discard(c); !errors.Is(err, ErrNotLent) {
		t.Errorf("discard of an idle conn: %v, want ErrNotLent", err)
	}
	if err := r.pool.Discard(stranger); !errors.Is(err, ErrNotLent) {
		t.Errorf("discard of a conn never lent: %v, want ErrNotLent", err)
	}
	if r.be.closes.Load() != 0 {
		t.Errorf("a refused Put or Discard closed %d", r.be.closes.Load())
	}
	if s := r.pool.Stats(); s.Idle != 1 || s.Live != 1 {
		t.Errorf("after misuse: idle %d, live %d; want 1, 1", s.Idle, s.Live)
	}
	if err := r.pool.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Get(r.ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("get after close: %v, want ErrClosed", err)
	}
	if err := r.pool.Close(r.ctx); err != nil {
		t.Errorf("second close: %v", err)
	}
	r.balance()
}

// TestNewPoolRefuses: bad configuration is an error, not a panic later.
func TestNewPoolRefuses(t *testing.T) {
	eng := engine.New(engine.WithClock(vclock.NewVirtual()), engine.WithHeatEvery(0))
	defer eng.Shutdown(context.Background())
	if _, err := NewPool(eng, PoolConfig[int]{}); err == nil {
		t.Error("NewPool with no Open: no error")
	}
	if _, err := NewPool(nil, PoolConfig[int]{Open: func(context.Context) (int, error) { return 1, nil }}); err == nil {
		t.Error("NewPool with no engine: no error")
	}
	open := func(context.Context) (int, error) { return 1, nil }
	p, err := NewPool(eng, PoolConfig[int]{Open: open, Name: "db"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if _, err := NewPool(eng, PoolConfig[int]{Open: open, Name: "db"}); !errors.Is(err, engine.ErrNameTaken) {
		t.Errorf("a second pool named db: %v, want ErrNameTaken", err)
	}
}

// TestOpenFails: a failed Open reaches the caller as an *OpenError that
// unwraps to the cause, frees its room, and is counted.
func TestOpenFails(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}})
	r.be.up.Store(r.clock.Now() + 1)
	_, err := r.pool.Get(r.ctx)
	var oe *OpenError
	if !errors.As(err, &oe) || !errors.Is(err, errBackendDown) {
		t.Fatalf("got %v, want an *OpenError wrapping the refusal", err)
	}
	if s := r.pool.Stats(); s.MakeFailures != 1 || s.Busy != 0 {
		t.Errorf("make failures %d, busy %d; want 1, 0", s.MakeFailures, s.Busy)
	}
	r.clock.Advance(1)
	r.put(r.get()) // the room is free again
}

// TestMaxWaiting: past MaxWaiting callers in line, Get is shed at once.
func TestMaxWaiting(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}, MaxWaiting: 1})
	held := r.get()
	errc := make(chan error, 1)
	go func() {
		c, err := r.pool.Get(r.ctx)
		if err == nil {
			err = r.pool.Put(c)
		}
		errc <- err
	}()
	r.waitFor("one caller in line", func() bool { return r.pool.Stats().Waiting == 1 })
	if _, err := r.pool.Get(r.ctx); !errors.Is(err, ErrShed) {
		t.Errorf("second caller in line: %v, want ErrShed", err)
	}
	r.put(held)
	if err := <-errc; err != nil {
		t.Error(err)
	}
	if s := r.pool.Stats(); s.Shed != 1 {
		t.Errorf("shed %d, want 1", s.Shed)
	}
}

// TestCloseWithLent: Close closes the idle now and waits for the lent
// within its ctx; one put back after ctx ended is closed, not kept; and a
// failing Close function is reported, not panicked on.
func TestCloseWithLent(t *testing.T) {
	boom := errors.New("boom")
	var r *rig
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 3, Idle: 3},
		Close: func(c *conn) error {
			if err := r.be.close(c); err != nil {
				return err
			}
			if c.id == 1 {
				return boom
			}
			return nil
		},
	})
	idle, lent, broken := r.get(), r.get(), r.get()
	r.put(idle)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := r.pool.Close(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("close with one lent and a dead ctx: %v, want context.Canceled", err)
	}
	var ce *CloseError
	if !errors.As(err, &ce) || !errors.Is(err, boom) {
		t.Errorf("close: %v, want a *CloseError wrapping the failure", err)
	}
	if r.be.closes.Load() != 1 {
		t.Errorf("closed %d at Close, want the 1 idle", r.be.closes.Load())
	}
	if err := r.pool.Put(lent); err != nil {
		t.Errorf("put after close: %v", err)
	}
	if r.be.closes.Load() != 2 {
		t.Errorf("the lent one was not closed when it came home")
	}
	// A Discard after Close reaches a stopped actor: answered, not lost,
	// and the broken one is closed.
	if err := r.pool.Discard(broken); err != nil {
		t.Errorf("discard after close: %v", err)
	}
	if r.be.closes.Load() != 3 {
		t.Errorf("the discarded one was not closed after Close")
	}
	if s := r.pool.Stats(); s.CloseFailures != 1 || s.Shutdown != 1 {
		t.Errorf("close failures %d, shutdown %d; want 1, 1", s.CloseFailures, s.Shutdown)
	}
}

// TestEngineShutdownClosesPool: the engine's Shutdown closes the pool as
// Close would, and a Close afterwards is a no-op.
func TestEngineShutdownClosesPool(t *testing.T) {
	clock := vclock.NewVirtual()
	be := newBackend(t, clock)
	eng := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
	p, err := NewPool(eng, PoolConfig[*conn]{Open: be.open, Close: be.close, Limits: policy.Limits{Size: 2, Idle: 2}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.mustGet(t), p.mustGet(t)
	_ = p.Put(a)
	_ = p.Put(b)
	if err := eng.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if be.closes.Load() != 2 {
		t.Errorf("shutdown closed %d of 2 idle", be.closes.Load())
	}
	if err := p.Close(context.Background()); err != nil {
		t.Errorf("close after shutdown: %v", err)
	}
	if _, err := p.Get(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("get after shutdown: %v", err)
	}
	if s := p.Stats(); s.Shutdown != 2 || s.Live != 0 {
		t.Errorf("stats after shutdown: shutdown %d, live %d", s.Shutdown, s.Live)
	}
}

func (p *Pool[T]) mustGet(t *testing.T) T {
	t.Helper()
	c, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGetPutAllocs: a Get and Put of an idle resource allocate at most
// their two request messages.
func TestGetPutAllocs(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1, Idle: 1}})
	r.put(r.get())
	allocs := testing.AllocsPerRun(1000, func() {
		c, _ := r.pool.Get(r.ctx)
		_ = r.pool.Put(c)
	})
	// The race detector makes sync.Pool drop a share of what is put back,
	// on purpose, so there a ticket is sometimes made afresh.
	want := 0.0
	if raceEnabled() {
		want += 2
	}
	if allocs > want {
		t.Errorf("Get+Put allocates %v, want at most %v", allocs, want)
	}
}

// raceEnabled says whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// BenchmarkPoolGetPut is one Get and one Put of a pool of ten on the real
// clock, shared by 1 to 512 goroutines.
func BenchmarkPoolGetPut(b *testing.B) {
	for _, g := range []int{1, 8, 64, 512} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			eng := engine.New(engine.WithHeatEvery(0))
			defer eng.Shutdown(context.Background())
			n := 0
			p, err := NewPool(eng, PoolConfig[int]{
				Open:   func(context.Context) (int, error) { n++; return n, nil },
				Limits: policy.Limits{Size: 10, Idle: 10},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += g {
						c, err := p.Get(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if err := p.Put(c); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// TestShedderWatchesHeat: a pool whose ward has a shedder subscribes to the
// engine's heat readings, and Close ends the subscription, so the engine
// stops measuring.
func TestShedderWatchesHeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	clock := vclock.NewVirtual()
	eng := engine.New(engine.WithClock(clock), engine.WithHeatEvery(time.Second))
	defer eng.Shutdown(ctx)
	p, err := NewPool(eng, PoolConfig[int]{
		Open: func(context.Context) (int, error) { return 1, nil },
		Ward: policy.Ward{Shedder: policy.Overload{Hot: 0.9, Window: time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := clock.WaitRegistered(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.AdvanceNext() // a reading goes to the pool; the next is asked for
	if err := clock.WaitRegistered(ctx, 2); err != nil {
		t.Fatal(err)
	}
	c, err := p.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Put(c)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	clock.AdvanceNext() // the reading due finds nobody watching
	eng.Lookup("")      // a round trip through the engine's directory
	if n := clock.Pending(); n != 0 {
		t.Errorf("%d timers pending after the pool closed: the engine still measures heat for it", n)
	}
}

// TestReturnedTwiceNotLentTwice: a resource put back twice, once by its
// holder and once more by mistake, is never lent to two holders at once:
// the second Put is refused, the pool's books still count it once, and the
// next two Gets get two different resources.
func TestReturnedTwiceNotLentTwice(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 2, Idle: 2}})
	a, b := r.get(), r.get()
	r.put(a)
	if err := r.pool.Put(a); !errors.Is(err, ErrNotLent) {
		t.Fatalf("second put: %v, want ErrNotLent", err)
	}
	if s := r.pool.Stats(); s.Idle != 1 || s.Live != 2 {
		t.Fatalf("after a put twice: idle %d, live %d; want 1, 2", s.Idle, s.Live)
	}
	r.put(b)
	x, y := r.get(), r.get()
	if x == y {
		t.Fatalf("conn %d lent to two holders at once", x.id)
	}
	if s := r.pool.Stats(); s.Idle != 0 || s.Busy != 2 {
		t.Fatalf("both lent: idle %d, busy %d; want 0, 2", s.Idle, s.Busy)
	}
	r.put(x)
	r.put(y)
	r.balance()
}
