package client

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
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// Tests of the pool's answers to misuse and failure, each named after what
// it guards against.

// TestOpenReturnsLentResource: an Open that hands back a resource the pool
// has lent already is refused: one resource is never lent to two holders,
// and no room stays reserved, so Close with no deadline returns.
func TestOpenReturnsLentResource(t *testing.T) {
	shared := &conn{id: 1}
	r := newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 3, Idle: 3},
		Open:   func(context.Context) (*conn, error) { return shared, nil },
		Close:  func(*conn) error { return nil },
	})
	first := r.get()
	c, err := r.pool.Get(r.ctx)
	if !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second Get: %v (conn %v), want ErrDuplicate", err, c)
	}
	var oe *OpenError
	if !errors.As(err, &oe) {
		t.Errorf("second Get: %T, want an *OpenError", err)
	}
	s := r.pool.Stats()
	if s.Busy != 1 || s.Live != 1 || s.Duplicates != 1 {
		t.Errorf("busy %d, live %d, duplicates %d; want 1, 1, 1", s.Busy, s.Live, s.Duplicates)
	}
	r.put(first)
	if s := r.pool.Stats(); s.Busy != 0 {
		t.Errorf("busy %d after everything came home: a reservation leaked", s.Busy)
	}
	if err := r.pool.Close(context.Background()); err != nil { // hung before the fix
		t.Fatal(err)
	}
}

// TestOpenReturnsIdleResource: an Open that hands back a resource sitting
// idle in the pool is refused, and the idle one is neither closed nor lost:
// the pool lends it later, open.
func TestOpenReturnsIdleResource(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	var r *rig
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 3, Idle: 3},
		Open: func(ctx context.Context) (*conn, error) {
			if calls.Add(1) == 3 {
				<-release
				return r.be.live1(), nil // the first conn again
			}
			return r.be.open(ctx)
		},
	})
	a, b := r.get(), r.get()
	errc := make(chan error, 1)
	go func() {
		_, err := r.pool.Get(r.ctx) // the third Open, held until a is idle
		errc <- err
	}()
	r.waitFor("the third Open", func() bool { return calls.Load() == 3 })
	r.put(a)
	close(release)
	if err := <-errc; !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Get whose Open returned the idle conn: %v, want ErrDuplicate", err)
	}
	if r.be.closes.Load() != 0 {
		t.Fatalf("closed %d: the pool closed its own idle conn", r.be.closes.Load())
	}
	if c := r.get(); c != a {
		t.Errorf("got conn %d, want the idle %d", c.id, a.id)
	} else {
		r.put(c)
	}
	r.put(b)
	if s, closed := r.pool.Stats(), r.pool.closedBooks(); s.Idle != 2 || s.Busy != 0 || closed {
		t.Errorf("idle %d, busy %d, closed %v; want 2, 0, false", s.Idle, s.Busy, closed)
	}
	r.balance()
}

// live1 is connection 1, which the backend opened first.
func (b *backend) live1() *conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.live {
		if c.id == 1 {
			return c
		}
	}
	b.t.Fatal("connection 1 is not live")
	return nil
}

// closedBooks says whether the pool's actor has begun to close it.
func (p *Pool[T]) closedBooks() bool { return p.books().Closed }

// statsOpening is a Stats and, from the same snapshot, how many Opens are
// under way.
func (p *Pool[T]) statsOpening() (Stats, int) {
	b := p.books()
	return p.statsOf(b), b.Opening
}

// TestCloseTwiceAfterNameReused: a second Close of a pool whose name has
// passed to a new pool leaves the new pool alone: Close stops its own
// actor, never one found by name.
func TestCloseTwiceAfterNameReused(t *testing.T) {
	clock := vclock.NewVirtual()
	be := newBackend(t, clock)
	eng := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
	defer eng.Shutdown(context.Background())
	cfg := PoolConfig[*conn]{Open: be.open, Close: be.close, Name: "db"}
	old, err := NewPool(eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh, err := NewPool(eng, cfg)
	if err != nil {
		t.Fatalf("a new pool under the freed name: %v", err)
	}
	if err := old.Close(context.Background()); err != nil {
		t.Errorf("second close of the old pool: %v", err)
	}
	c, err := fresh.Get(context.Background())
	if err != nil {
		t.Fatalf("the new pool after the old one closed again: %v", err)
	}
	if err := fresh.Put(c); err != nil {
		t.Error(err)
	}
	if err := fresh.Close(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestOpenPanics: a panic in Open reaches the Get as an error, counts as a
// failed make for the ward, and the process goes on, though the Open ran on
// a goroutine of the pool's.
func TestOpenPanics(t *testing.T) {
	boom := errors.New("dial bug")
	var r *rig
	var panicked atomic.Bool
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 1},
		Open: func(ctx context.Context) (*conn, error) {
			if panicked.CompareAndSwap(false, true) {
				panic(boom)
			}
			return r.be.open(ctx)
		},
	})
	_, err := r.pool.Get(r.ctx)
	var pe *PanicError
	var oe *OpenError
	if !errors.As(err, &oe) || !errors.As(err, &pe) || !errors.Is(err, boom) {
		t.Fatalf("Get whose Open panicked: %v, want an *OpenError wrapping a *PanicError wrapping the value", err)
	}
	if len(pe.Stack) == 0 {
		t.Error("the PanicError has no stack")
	}
	if s := r.pool.Stats(); s.Panics != 1 || s.MakeFailures != 1 || s.Busy != 0 {
		t.Errorf("panics %d, make failures %d, busy %d; want 1, 1, 0", s.Panics, s.MakeFailures, s.Busy)
	}
	r.put(r.get()) // the room is free again
}

// TestClosePanics: a panic in Close, on the caller's Put, on the pool's
// closer goroutine and in Close's drain, is reported as a *CloseError and
// never ends the process.
func TestClosePanics(t *testing.T) {
	var r *rig
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 3, Idle: 1, Keep: time.Minute},
		Close: func(c *conn) error {
			_ = r.be.close(c)
			panic("close bug")
		},
	})
	a, b, c := r.get(), r.get(), r.get()
	r.put(a)
	var pe *PanicError
	if err := r.pool.Put(b); !errors.As(err, &pe) { // idle is full: Put closes it
		t.Fatalf("Put that closed with a panicking Close: %v, want a *PanicError", err)
	}
	r.clock.Advance(time.Minute) // a is evicted and closed on the closer goroutine
	r.waitFor("the evicted conn closed", func() bool { return r.be.closes.Load() == 2 })
	r.put(c)
	err := r.pool.Close(r.ctx) // c is idle: closed in the drain
	var ce *CloseError
	if !errors.As(err, &ce) || !errors.As(err, &pe) {
		t.Fatalf("Close: %v, want a *CloseError wrapping a *PanicError", err)
	}
	if s := r.pool.Stats(); s.Panics != 3 || s.CloseFailures != 3 {
		t.Errorf("panics %d, close failures %d; want 3, 3", s.Panics, s.CloseFailures)
	}
	r.balance()
}

// TestOpenFinishingAfterClose: an Open that completes after Close began
// does not hand its Get a resource of a closed pool: the Get is answered
// ErrClosed and the resource closed.
func TestOpenFinishingAfterClose(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	var r *rig
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 1},
		Open: func(ctx context.Context) (*conn, error) {
			close(entered)
			<-release // deaf to the pool's cancellation
			return r.be.open(ctx)
		},
	})
	got := make(chan error, 1)
	go func() {
		c, err := r.pool.Get(r.ctx)
		if err == nil {
			err = errors.New("got a conn from a closed pool")
			_ = r.pool.Put(c)
		}
		got <- err
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- r.pool.Close(r.ctx) }()
	r.waitFor("Close to begin", func() bool { return r.pool.closedBooks() })
	close(release)
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Errorf("Get whose Open finished after Close began: %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("close: %v", err)
	}
	if r.be.made.Load() != 1 || r.be.closes.Load() != 1 {
		t.Errorf("made %d, closed %d; want 1, 1", r.be.made.Load(), r.be.closes.Load())
	}
}

// TestCloseErrorCountsWhatWasOutstanding: Close's error says what was
// still lent when its ctx ended, and a pool with nothing out reports no
// error even when ctx has ended too: a drain that finishes in the same
// instant is no "0 still lent".
func TestCloseErrorCountsWhatWasOutstanding(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 50 {
		r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}})
		r.put(r.get())
		if err := r.pool.Close(done); err != nil {
			t.Fatalf("round %d: close with nothing lent and an ended ctx: %v", i, err)
		}
	}
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 2}})
	c, d := r.get(), r.get()
	err := r.pool.Close(done)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "2 still lent and 0 being opened") {
		t.Errorf("close with two lent: %v", err)
	}
	r.put(c)
	r.put(d)
}

// TestGetNilContext: a nil ctx is an error, not a nil dereference.
func TestGetNilContext(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}})
	//lint:ignore SA1012 a nil ctx is the point
	if _, err := r.pool.Get(nil); err == nil { //nolint:staticcheck
		t.Fatal("Get(nil): no error")
	}
	if s := r.pool.Stats(); s.Busy != 0 || s.Waiting != 0 {
		t.Errorf("Get(nil) left busy %d, waiting %d", s.Busy, s.Waiting)
	}
}

// TestGetHeldPastDeadline: while the ward's backoff holds makes back for
// longer than ctx allows and nothing is lent, Get answers at once with the
// rest of the hold instead of sitting out ctx. With a resource lent, which
// may come back in time, it waits.
func TestGetHeldPastDeadline(t *testing.T) {
	backoff := policy.Backoff{Base: 2 * time.Second, Factor: 2, Cap: time.Minute, Attempts: 1 << 20, Jitter: policy.Rigid}
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}, Ward: policy.Ward{Backoff: backoff}})
	r.be.up.Store(r.clock.Now() + int64(time.Hour))
	if _, err := r.pool.Get(r.ctx); !errors.As(err, new(*OpenError)) {
		t.Fatalf("first Get against a dead backend: %v", err)
	}
	r.clock.Advance(500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := r.pool.Get(ctx)
	var we *WaitError
	if !errors.As(err, &we) || !errors.Is(err, ErrExceedsDeadline) {
		t.Fatalf("Get during a 2 s hold with a 300 ms ctx: %v, want a *WaitError", err)
	}
	if we.Wait != 1500*time.Millisecond {
		t.Errorf("the error carries a wait of %v, want the 1.5 s left of the hold", we.Wait)
	}
	if s := r.pool.Stats(); s.HeldPastDeadline != 1 || s.Waiting != 0 {
		t.Errorf("held %d, waiting %d; want 1, 0", s.HeldPastDeadline, s.Waiting)
	}
	// A ctx long enough to outlive the hold waits for it.
	r.be.up.Store(0)
	long, cancelLong := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLong()
	got := make(chan *conn, 1)
	go func() {
		c, err := r.pool.Get(long)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	r.waitFor("the caller to wait out the hold", func() bool { return r.pool.Stats().Waiting == 1 })
	r.clock.Advance(1500 * time.Millisecond)
	c := <-got
	// With c lent, a short ctx waits: c may come back in time.
	ctx2, cancel2 := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.pool.Get(ctx2)
		errc <- err
	}()
	r.waitFor("the second caller to wait", func() bool { return r.pool.Stats().Waiting == 1 })
	cancel2()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a conn lent: %v, want it to have waited until cancelled", err)
	}
	r.put(c)
	r.balance()
}

// TestWardReasons: every refusal and hold is counted by its cause, the
// error says which cause it met, and Stats shows the ward's state: the
// breaker's refusal share, the backoff's hold and its probe.
func TestWardReasons(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 1},
		Ward: policy.Ward{
			Breaker: policy.Throttle{K: 2, Floor: 1, Cap: 1}, // the book's rule: refuses from the first failure
			Backoff: policy.Backoff{Base: 2 * time.Second, Factor: 2, Cap: time.Minute, Jitter: policy.Rigid},
		},
	})
	r.be.up.Store(r.clock.Now() + int64(time.Hour))
	if _, err := r.pool.Get(r.ctx); !errors.As(err, new(*OpenError)) {
		t.Fatalf("first Get against a dead backend: %v", err)
	}
	s := r.pool.Stats()
	if s.Holding != 2*time.Second || s.Refusal <= 0 || s.Probing {
		t.Errorf("after one failure: holding %v, refusal %v, probing %v; want 2s, > 0, false", s.Holding, s.Refusal, s.Probing)
	}
	// The breaker refuses; the error says so, and is a shed.
	r.clock.Advance(2 * time.Second)
	var refused error
	for range 10 {
		if _, err := r.pool.Get(r.ctx); errors.Is(err, ErrBreaker) {
			refused = err
			break
		}
		r.clock.Advance(time.Minute) // past whatever hold the failure began
	}
	if !errors.Is(refused, ErrShed) || errors.Is(refused, ErrOverloaded) || errors.Is(refused, ErrTooManyWaiting) {
		t.Fatalf("refused by the breaker: %v, want ErrBreaker, matching ErrShed and no other cause", refused)
	}
	if s := r.pool.Stats(); s.ShedBreaker == 0 || s.Shed != s.ShedBreaker {
		t.Errorf("shed %d, by the breaker %d", s.Shed, s.ShedBreaker)
	}
}

// TestHeldAndQueueReasons: a bucket's holds are counted while a caller
// waits for a token, and a caller past MaxWaiting gets ErrTooManyWaiting.
func TestHeldAndQueueReasons(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{
		Limits:     policy.Limits{Size: 2},
		MaxWaiting: 1,
		Ward:       policy.Ward{Bucket: policy.Rate{PerSecond: 1, Burst: 1}},
	})
	a := r.get() // spends the bucket's one token
	got := make(chan *conn, 1)
	go func() { got <- r.get() }()
	r.waitFor("the second caller held by the bucket", func() bool { return r.pool.Stats().Waiting == 1 })
	if s := r.pool.Stats(); s.HeldBucket == 0 {
		t.Errorf("a caller waits for the bucket, and no hold is counted: %d", s.HeldBucket)
	}
	_, err := r.pool.Get(r.ctx)
	if !errors.Is(err, ErrTooManyWaiting) || !errors.Is(err, ErrShed) || errors.Is(err, ErrBreaker) {
		t.Errorf("Get past MaxWaiting: %v, want ErrTooManyWaiting", err)
	}
	if s := r.pool.Stats(); s.TooManyWaiting != 1 || s.Shed != 1 {
		t.Errorf("too many waiting %d, shed %d; want 1, 1", s.TooManyWaiting, s.Shed)
	}
	r.clock.Advance(time.Second)
	r.put(<-got)
	r.put(a)
	r.balance()
}

// TestShedErrors: each policy reason for a Shed becomes its own error, and
// every one but closed matches ErrShed.
func TestShedErrors(t *testing.T) {
	for _, c := range []struct {
		why  policy.Reason
		want error
		shed bool
	}{
		{policy.ReasonBreaker, ErrBreaker, true},
		{policy.ReasonShedder, ErrOverloaded, true},
		{policy.ReasonClosed, ErrClosed, false},
		{policy.NoReason, ErrShed, true},
	} {
		err := shedError(c.why)
		if !errors.Is(err, c.want) || errors.Is(err, ErrShed) != c.shed {
			t.Errorf("%v: %v; want %v, matching ErrShed: %v", c.why, err, c.want, c.shed)
		}
	}
}

// TestDialScheduleDeadBackend: against a dead backend with only a backoff
// in the ward, once the first failures are in, each hold ends in exactly
// one dial, the probe, however many callers wait; the others dial only
// once one works. No hold ends in a burst of dials, one per waiting
// caller up to the pool's size.
func TestDialScheduleDeadBackend(t *testing.T) {
	for _, callers := range []int{1, 16} {
		t.Run(fmt.Sprintf("%d callers", callers), func(t *testing.T) {
			const outage = 3 * time.Second
			backoff := policy.Backoff{Base: 100 * time.Millisecond, Factor: 2, Cap: time.Second, Jitter: policy.Rigid}
			clock := vclock.NewVirtual()
			start := clock.Now()
			r := newRigOn(t, clock, PoolConfig[*conn]{Limits: policy.Limits{Size: 8}, Ward: policy.Ward{Backoff: backoff}})
			r.be.up.Store(start + int64(outage))
			ctx, cancel := context.WithCancel(r.ctx)
			defer cancel()
			var served atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						c, err := r.pool.Get(ctx)
						if err == nil {
							served.Add(1)
							_ = r.pool.Put(c)
							return
						}
						if !errors.As(err, new(*OpenError)) && ctx.Err() == nil {
							t.Errorf("get: %v", err)
							return
						}
					}
				}()
			}
			quiet := func() bool { return served.Load()+int64(r.pool.Stats().Waiting) == int64(callers) }
			if err := drive(ctx, clock, quiet, func() bool { return served.Load() == int64(callers) }); err != nil {
				t.Errorf("at +%v: %v (served %d of %d)", time.Duration(clock.Now()-start), err, served.Load(), callers)
				cancel()
			}
			wg.Wait()

			perInstant := map[int64]int{}
			var instants []int64
			for _, at := range r.be.tries() {
				if perInstant[at] == 0 {
					instants = append(instants, at)
				}
				perInstant[at]++
			}
			first := perInstant[instants[0]]
			if first > min(callers, 8) {
				t.Errorf("%d dials at the start, more than the callers or the pool's size", first)
			}
			for k, at := range instants[1:] {
				if at >= start+int64(outage) {
					break // the backend is back: the probe worked, and the rest may dial
				}
				if n := perInstant[at]; n != 1 {
					t.Errorf("%d dials at +%v (hold %d), want the one probe", n, time.Duration(at-start), k+1)
				}
			}
			if served.Load() != int64(callers) {
				t.Errorf("served %d of %d once the backend was back", served.Load(), callers)
			}
			t.Logf("dials at %v", offsets(r.be.tries(), start))
			r.balance()
		})
	}
}

// TestStoppedUnderCloseLosesNothing: a pool whose actor is stopped while a
// Close is still getting ready (a second Close, or a Shutdown, whose ctx
// had ended) still closes every idle resource, and that Close says the
// actor was stopped.
func TestStoppedUnderCloseLosesNothing(t *testing.T) {
	unblock := make(chan struct{})
	entered := make(chan struct{})
	var first atomic.Bool
	var r *rig
	r = newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 3, Idle: 3, Keep: time.Minute},
		Close: func(c *conn) error {
			if first.CompareAndSwap(false, true) {
				close(entered)
				<-unblock // the closer goroutine is busy here
			}
			return r.be.close(c)
		},
	})
	a, b, c := r.get(), r.get(), r.get()
	r.put(a)
	r.clock.Advance(30 * time.Second)
	r.put(b)
	r.put(c)
	r.clock.Advance(30 * time.Second) // a is evicted; its Close blocks
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- r.pool.Close(context.Background()) }()
	r.waitFor("the first Close to begin", func() bool { return r.pool.closing.Load() })
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.pool.Close(done); !errors.Is(err, context.Canceled) {
		t.Errorf("second Close with an ended ctx: %v, want context.Canceled", err)
	}
	close(unblock)
	if err := <-closed; !errors.Is(err, engine.ErrStopped) {
		t.Errorf("first Close: %v, want engine.ErrStopped", err)
	}
	if n := r.be.closes.Load(); n != 3 {
		t.Errorf("closed %d of 3: idle resources were left open", n)
	}
	if s := r.pool.Stats(); s.Live != 0 {
		t.Errorf("live %d after Close", s.Live)
	}
}
