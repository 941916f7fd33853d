package engine

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// chain is an actor that, from a *start on, asks its clock for a Tick a
// second after each Tick, as a limiter waking one waiter after another
// does. A *hold blocks its handler, and so the actor, until hold.release
// closes; an *advance moves the clock from inside the handler.
type chain struct {
	self  *Ref
	clock Clock
	ticks atomic.Int64 // Ticks run
	last  atomic.Int64 // the clock's reading at the last Tick
}

type (
	start     struct{}
	chainTick struct{}
	hold      struct{ entered, release chan struct{} }
	advance   struct {
		clock *vclock.Virtual
		by    time.Duration
	}
)

func (c *chain) Bind(r *Ref)               { c.self = r }
func (c *chain) Receive(ctx actor.Context) {}

func (c *chain) Handle(msg any) {
	switch m := msg.(type) {
	case *start:
		c.next()
	case *chainTick:
		c.ticks.Add(1)
		c.last.Store(c.clock.Now())
		c.next()
	case *hold:
		close(m.entered)
		<-m.release
	case *advance:
		m.clock.Advance(m.by)
	}
}

func (c *chain) next() {
	self := c.self
	c.clock.AfterFunc(time.Second, func() { self.Fire(&chainTick{}) })
}

// TestFireSettlesOnAVirtualClock: on a virtual clock, a Tick fired while
// another goroutine holds the actor is run before the clock moves on, so
// the timer the actor sets in answer fires within the same Advance. Moved
// three seconds, the chain ticks three times, at each second.
func TestFireSettlesOnAVirtualClock(t *testing.T) {
	clock := vclock.NewVirtual()
	e := New(WithClock(clock))
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	c := &chain{clock: clock}
	ref, err := e.Spawn("", c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ref.Send(&start{})
	if err := clock.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// Another goroutine holds the actor while the first Tick fires.
	h := &hold{entered: make(chan struct{}), release: make(chan struct{})}
	go ref.Send(h)
	<-h.entered
	advanced := make(chan struct{})
	t0 := clock.Now()
	go func() {
		clock.Advance(3 * time.Second)
		close(advanced)
	}()
	for ref.mb.UserMessageCount() == 0 { // the first Tick, queued behind the hold
		if ctx.Err() != nil {
			t.Fatal("the first Tick never reached the actor")
		}
		runtime.Gosched()
	}
	close(h.release)
	select {
	case <-advanced:
	case <-ctx.Done():
		t.Fatal("Advance never returned")
	}
	if n, at := c.ticks.Load(), c.last.Load()-t0; n != 3 || at != int64(3*time.Second) {
		t.Fatalf("after Advance(3s): %d Ticks, the last at +%v; want 3, the last at +3s", n, time.Duration(at))
	}

	// A handler that moves the clock itself holds the actor while the
	// chain's next Tick fires at it: the clock gives up on that Tick
	// after a second of real time, and the actor runs it once the handler
	// returns.
	start := time.Now()
	ref.Send(&advance{clock: clock, by: time.Second})
	if n, took := c.ticks.Load(), time.Since(start); n != 4 || took > 10*time.Second {
		t.Fatalf("after a handler moved the clock: %d Ticks in %v, want 4", n, took)
	}

	// A stopped actor is not waited for.
	if err := ref.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	clock.AfterFunc(0, func() { ref.Fire(&chainTick{}) })
	clock.Advance(0)
	if n := c.ticks.Load(); n != 4 {
		t.Fatalf("a stopped actor ran a Tick: %d", n)
	}
}
