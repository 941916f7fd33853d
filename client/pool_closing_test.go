package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// stuckClose is a pool's Close whose first call waits until release is
// closed. The rest close at once, on the backend.
type stuckClose struct {
	be      *backend
	first   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newStuckClose() *stuckClose {
	return &stuckClose{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *stuckClose) close(c *conn) error {
	if s.first.CompareAndSwap(false, true) {
		close(s.entered)
		<-s.release
	}
	return s.be.close(c)
}

// await waits for ch within the safety net, failing t with what otherwise.
func await[V any](t *testing.T, ctx context.Context, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

// closerStuck builds a pool with Keep whose closer goroutine is held in the
// Close of an evicted resource. A Close of the pool then stays between its
// start and the moment its actor hears of it until s.release is closed.
func closerStuck(t *testing.T, size int, open func(r *rig) func(context.Context) (*conn, error)) (*rig, *stuckClose) {
	t.Helper()
	s := newStuckClose()
	var r *rig
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: size, Keep: time.Minute},
		Open:   func(ctx context.Context) (*conn, error) { return open(r)(ctx) },
		Close:  func(c *conn) error { return s.close(c) },
	})
	s.be = r.be
	r.put(r.get())
	r.clock.Advance(time.Minute) // evicted: the closer goroutine closes it, and is held there
	await(t, r.ctx, s.entered, "the closer to close the evicted resource")
	return r, s
}

// TestOpenLandingAsPoolClosesIsNotLent: an Open that finishes after Close
// has begun, but before the pool's actor has heard of it, is not lent. Its
// Get is answered ErrClosed, and the resource is closed once, by the pool.
func TestOpenLandingAsPoolClosesIsNotLent(t *testing.T) {
	var holding atomic.Bool
	started := make(chan struct{}, 1)
	hold := make(chan struct{})
	r, s := closerStuck(t, 2, func(r *rig) func(context.Context) (*conn, error) {
		return func(ctx context.Context) (*conn, error) {
			if holding.Load() {
				started <- struct{}{}
				<-hold // deaf to the pool's cancellation
			}
			return r.be.open(ctx)
		}
	})
	holding.Store(true)
	got := make(chan error, 1)
	go func() {
		c, err := r.pool.Get(r.ctx)
		if err == nil {
			err = errors.New("lent a resource of a closing pool")
			_ = r.pool.Put(c)
		}
		got <- err
	}()
	await(t, r.ctx, started, "the Open to start")
	closed := make(chan error, 1)
	go func() { closed <- r.pool.Close(r.ctx) }()
	r.waitFor("Close to begin", r.pool.closing.Load)
	close(hold)
	if err := await(t, r.ctx, got, "the Get"); !errors.Is(err, ErrClosed) {
		t.Errorf("step 1: Get whose Open landed as the pool closed: %v, want ErrClosed", err)
	}
	close(s.release)
	if err := await(t, r.ctx, closed, "Close"); err != nil {
		t.Errorf("step 2: Close: %v", err)
	}
	if made, closes := r.be.made.Load(), r.be.closes.Load(); made != 2 || closes != 2 {
		t.Errorf("step 3: made %d, closed %d; want 2, 2", made, closes)
	}
	if st := r.pool.Stats(); st.ShedClosed != 1 || st.Shed != 1 {
		t.Errorf("step 4: ShedClosed %d, Shed %d; want the refused Get counted once in each", st.ShedClosed, st.Shed)
	}
}

// TestPutAsPoolClosesServesNoWaiter: a resource put back after Close has
// begun, but before the pool's actor has heard of it, is not lent to a
// caller waiting in line. The caller is answered ErrClosed, and the
// resource is closed once, by the pool.
func TestPutAsPoolClosesServesNoWaiter(t *testing.T) {
	r, s := closerStuck(t, 2, func(r *rig) func(context.Context) (*conn, error) { return r.be.open })
	x, y := r.get(), r.get()
	got := make(chan error, 1)
	go func() {
		c, err := r.pool.Get(r.ctx)
		if err == nil {
			err = errors.New("lent a resource of a closing pool")
			_ = r.pool.Put(c)
		}
		got <- err
	}()
	r.waitFor("a caller in line", func() bool { return r.pool.Stats().Waiting == 1 })
	closed := make(chan error, 1)
	go func() { closed <- r.pool.Close(r.ctx) }()
	r.waitFor("Close to begin", r.pool.closing.Load)
	r.put(x)
	if err := await(t, r.ctx, got, "the caller in line"); !errors.Is(err, ErrClosed) {
		t.Errorf("step 1: the caller in line as the pool closed: %v, want ErrClosed", err)
	}
	r.put(y)
	close(s.release)
	if err := await(t, r.ctx, closed, "Close"); err != nil {
		t.Errorf("step 2: Close: %v", err)
	}
	if made, closes := r.be.made.Load(), r.be.closes.Load(); made != 3 || closes != 3 {
		t.Errorf("step 3: made %d, closed %d; want 3, 3", made, closes)
	}
}

// shutdownRig is a pool of fake connections on an engine of its own, for
// tests that shut the engine down themselves.
func shutdownRig(t *testing.T, cfg PoolConfig[*conn]) (*engine.Engine, *backend, *Pool[*conn]) {
	t.Helper()
	clock := vclock.NewVirtual()
	be := newBackend(t, clock)
	eng := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
	if cfg.Open == nil {
		cfg.Open = be.open
	}
	if cfg.Close == nil {
		cfg.Close = be.close
	}
	p, err := NewPool(eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return eng, be, p
}

// TestShutdownStoppedUnderReportsLent: a Shutdown busy closing the idle
// resources, whose pool's actor another Close stops under it, still says a
// resource was lent and that the actor was stopped. The lent one is
// closed when it comes home.
func TestShutdownStoppedUnderReportsLent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	s := newStuckClose()
	eng, be, p := shutdownRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 2, Idle: 2},
		Close:  func(c *conn) error { return s.close(c) },
	})
	s.be = be
	lent, idle := p.mustGet(t), p.mustGet(t)
	if err := p.Put(idle); err != nil {
		t.Fatal(err)
	}
	down := make(chan error, 1)
	go func() { down <- eng.Shutdown(context.Background()) }()
	await(t, ctx, s.entered, "Shutdown to close the idle resource")
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := p.Close(done); !errors.Is(err, context.Canceled) {
		t.Errorf("step 1: Close with an ended ctx: %v, want context.Canceled", err)
	}
	close(s.release)
	err := await(t, ctx, down, "Shutdown")
	if err == nil || !errors.Is(err, engine.ErrStopped) || !strings.Contains(err.Error(), "1 still lent") {
		t.Errorf("step 2: Shutdown with a resource lent, stopped under: %v, want ErrStopped and 1 still lent", err)
	}
	if err := p.Put(lent); err != nil {
		t.Errorf("step 3: Put after Shutdown: %v", err)
	}
	if made, closes := be.made.Load(), be.closes.Load(); made != 2 || closes != 2 {
		t.Errorf("step 4: made %d, closed %d; want 2, 2", made, closes)
	}
}

// TestShutdownAndCloseEndingTogether: a Shutdown and a Close share a ctx
// that ends while a resource is lent. Whichever of them stops the pool's
// actor, Shutdown says the resource is still lent.
func TestShutdownAndCloseEndingTogether(t *testing.T) {
	net, cancelNet := context.WithTimeout(context.Background(), safety)
	defer cancelNet()
	for round := range 100 {
		eng, be, p := shutdownRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}})
		lent := p.mustGet(t)
		ctx, cancel := context.WithCancel(context.Background())
		down := make(chan error, 1)
		go func() { down <- eng.Shutdown(ctx) }()
		spinUntil(t, net, "Shutdown to begin closing the pool", p.closing.Load)
		closed := make(chan error, 1)
		go func() { closed <- p.Close(ctx) }()
		cancel()
		err := await(t, net, down, "Shutdown")
		// The Close may stop the actor before ctx's end reaches Shutdown's
		// hook: then the cause is that it was stopped.
		stopped := errors.Is(err, context.Canceled) || errors.Is(err, engine.ErrStopped)
		if !stopped || !strings.Contains(err.Error(), "1 still lent") {
			t.Fatalf("round %d: Shutdown whose ctx ended with a resource lent: %v, want 1 still lent", round, err)
		}
		// Close stops the actor if it ends first, and is done if it stopped first.
		if err := await(t, net, closed, "Close"); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Close whose ctx ended: %v, want nil or context.Canceled", round, err)
		}
		if err := p.Put(lent); err != nil {
			t.Fatalf("round %d: Put after Shutdown: %v", round, err)
		}
		if made, closes := be.made.Load(), be.closes.Load(); made != 1 || closes != 1 {
			t.Fatalf("round %d: made %d, closed %d; want 1, 1", round, made, closes)
		}
	}
}

// TestResetDuringOpenWhoseCloseFails: an Open begun before a Reset and done
// after it is closed, and its Get takes again even when that Close fails.
// The failure was not the caller's: it is counted, not returned.
func TestResetDuringOpenWhoseCloseFails(t *testing.T) {
	boom := errors.New("boom")
	h := newHeldOpen()
	var r *rig
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 2},
		Open:   h.open,
		Close: func(c *conn) error {
			if err := r.be.close(c); err != nil || c.id != 1 {
				return err
			}
			return boom
		},
	})
	h.r = r
	type result struct {
		c   *conn
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := r.pool.Get(r.ctx)
		got <- result{c, err}
	}()
	await(t, r.ctx, h.started, "the Open to start")
	if err := r.pool.Reset(); err != nil {
		t.Fatal(err)
	}
	close(h.hold)
	res := await(t, r.ctx, got, "the Get")
	if res.err != nil || res.c == nil || res.c.id != 2 {
		t.Fatalf("step 1: Get across a Reset whose close failed: conn %v, %v; want conn 2", res.c, res.err)
	}
	r.put(res.c)
	if s := r.pool.Stats(); s.Outdated != 1 || s.CloseFailures != 1 || s.Live != 1 {
		t.Errorf("step 2: outdated %d, close failures %d, live %d; want 1, 1, 1", s.Outdated, s.CloseFailures, s.Live)
	}
	r.balance()
}
