package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// ErrOverLimit says an AdaptiveGate had no room for the caller's priority:
// a waiter was evicted as the limit fell, lowest priority first. Only a
// line that follows the limit (Queue zero) is cut so; a fixed Queue never
// is. It matches ErrShed. A full line answers ErrTooManyWaiting instead, and a
// deadline too close a *WaitError.
var ErrOverLimit = actors.ErrOverLimit

// AdaptiveConfig sets an AdaptiveGate's numbers. The zero AdaptiveConfig
// is the defaults: room from 1 to 1,000, starting at 20, updated every
// 100 ms, and a line twice as long as the limit.
type AdaptiveConfig struct {
	// Min is the least room. Zero or less is 1.
	Min int
	// Max is the most room. Zero or less is 1,000. A Max under Min is Min.
	// Min and Max above 1<<30 are 1<<30.
	Max int
	// Start is the room before any call has finished. Zero or less is 20,
	// held within Min and Max. While the latency and a quarter fit within
	// the deadlines of the callers who wait, the limit does not fall below
	// Start: a queue they can afford keeps the dependency busy. Past their
	// deadlines it falls only as far as they need.
	Start int
	// Healthy is a latency that never counts as congestion: while calls
	// finish within it on average, the limit never falls. Zero or less
	// is none.
	Healthy time.Duration
	// Queue is the most callers waiting in line. Zero is twice the limit,
	// about two latencies of waiting; it follows the limit, and when the
	// limit falls the line is cut to fit, waiters refused with
	// ErrOverLimit. Above zero is a fixed line that is never cut. Below
	// zero is no line: a caller without room is refused at once, with
	// ErrTooManyWaiting.
	Queue int
	// Window is how often the limit may change. Zero or less is 100 ms;
	// below 1 ms is 1 ms (policy.MinAdaptiveWindow).
	// A window is stretched, up to ten times, until 16 calls finish in it.
	Window time.Duration
}

// AdaptiveStats is an AdaptiveGate's state now and its counts since
// NewAdaptiveGate. Classes is indexed by priority from the lowest:
// Classes[p-PriorityLow] counts priority p, so Classes[0] is PriorityLow
// and Classes[3] PriorityCritical.
type AdaptiveStats = actors.AdaptiveStats

// AdaptiveClass is one priority's counts in AdaptiveStats: Entered, and
// the refusals by cause (Shed, QueueFull, Deadline, Cancelled).
type AdaptiveClass = actors.AdaptiveClass

// AdaptiveGate caps how many calls to a dependency run at once, at a limit
// it finds itself: the limit grows while more calls at once bring more
// throughput at the same latency, and falls when latency grows with the
// calls in flight, which is a queue at the dependency. A dependency that
// slows down on its own does not wear the limit down: see policy.Adaptive
// for the rule.
//
// Enter lets a caller in, or puts it in line, or refuses it. A Pass comes
// back to the gate with Leave, which also measures the call, or Drop.
// Under overload the line lets the highest priority in first
// (WithPriority), and refuses the lowest first.
//
// A Pool behind the gate can hold its size to the limit: see FollowLimit.
//
// With room, Enter and Leave send the actor no message while it is
// awake: room is lent ahead of time, and latencies are added up in
// stripes the actor reads on a timer. Once a quiet gate's actor has
// stopped its timer, the first Leave or Drop sends it one message to
// wake it. Neither allocates.
//
// An AdaptiveGate is safe for concurrent use. Build one with
// NewAdaptiveGate; the zero AdaptiveGate is not usable.
type AdaptiveGate struct {
	clock  engine.Clock
	ref    *engine.Ref
	room   *actors.AdaptiveRoom
	closed atomic.Bool
	// asks are Enter requests with their reply slots, kept for reuse so a
	// wait allocates nothing. Each gate keeps its own: one made in a
	// testing/synctest bubble then only uses what was made there.
	asks sync.Pool
}

// adaptiveAsk is an AdaptiveEnter with its reply slot, for reuse.
type adaptiveAsk struct {
	req  actors.AdaptiveEnter
	slot engine.Reply[actors.Permit]
}

// NewAdaptiveGate starts an adaptive gate on eng, reading cfg as
// AdaptiveConfig says. It does not block. It returns an error if eng is
// nil or refuses the actor (shut down).
func NewAdaptiveGate(eng *Engine, cfg AdaptiveConfig) (*AdaptiveGate, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewAdaptiveGate: nil engine")
	}
	pc := policy.AdaptiveConfig{Min: cfg.Min, Max: cfg.Max, Start: cfg.Start, Healthy: cfg.Healthy, Window: cfg.Window}
	ref, room, err := actors.SpawnAdaptive(eng, "", pc, cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("moonpool: NewAdaptiveGate: %w", err)
	}
	return &AdaptiveGate{clock: eng.Clock(), ref: ref, room: room}, nil
}

// Pass is a caller's room in an AdaptiveGate. Give it back once, with
// Leave when the call went to the dependency, or Drop when it did not. A
// second Leave or Drop on the same Pass does nothing. A copy of a Pass is
// the same room: give back one of the copies only. The zero Pass holds no
// room; its Leave and Drop do nothing.
type Pass struct {
	g     *AdaptiveGate
	start int64 // when Enter let it in, on the engine's clock, if timed
	timed bool  // the call's latency is measured
}

// Leave gives the room back and counts the call's latency: the time on
// the engine's clock since Enter returned the Pass. Under heavy traffic
// the gate times only some of the calls, a few hundred a window, which
// is enough for their mean and spares the rest two clock readings. It
// never blocks.
func (p *Pass) Leave() {
	g := p.g
	if g == nil {
		return
	}
	p.g = nil
	var back bool
	if p.timed {
		back = g.room.Leave(time.Duration(g.clock.Now() - p.start))
	} else {
		back = g.room.Drop()
	}
	if back || g.closed.Load() {
		return
	}
	g.ref.Send(actors.Leave{})
}

// Drop gives the room back without counting a latency: the call did not
// reach the dependency. It never blocks.
func (p *Pass) Drop() {
	g := p.g
	if g == nil {
		return
	}
	p.g = nil
	if g.room.Drop() || g.closed.Load() {
		return
	}
	g.ref.Send(actors.Leave{})
}

// Enter lets the caller in, with the priority ctx carries (PriorityFrom),
// and returns its Pass. With room it answers at once. Without, the caller
// waits in line, higher priorities first, until there is room. It is
// refused instead:
//
//   - at once with a *WaitError (ErrExceedsDeadline) when ctx's deadline
//     comes before the expected wait and a latency and a quarter more:
//     the wait is one latency for each limit's worth of callers ahead,
//     the latency the mean of the calls timed last (at least 8 once 8
//     have finished, at most twice the last window's mean). So is a
//     waiter whose turn comes less than that latency and a quarter before
//     its deadline: it could not finish, and the room goes to the next;
//   - with ErrTooManyWaiting when the line is full of callers of its
//     priority or higher, at once or when a higher one takes its place;
//   - with ErrOverLimit when the limit falls and a line that follows it
//     (Queue zero) is cut, lowest priority first;
//   - with ctx's error when ctx ends while it waits: it leaves the line;
//   - with ErrClosed after Close.
//
// ErrTooManyWaiting and ErrOverLimit match ErrShed. A nil ctx is read as
// context.Background().
func (g *AdaptiveGate) Enter(ctx context.Context) (Pass, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	class := PriorityFrom(ctx).class()
	if ok, timed := g.enter(class); ok {
		return g.pass(timed), nil
	}
	if g.closed.Load() {
		return Pass{}, ErrClosed
	}
	if ctx.Err() != nil {
		return Pass{}, ctxError(ctx, "enter")
	}
	now := g.clock.Now()
	a := g.ask()
	a.req = actors.AdaptiveEnter{Now: now, Class: class, Wait: true, Deadline: deadlineOf(ctx, g.clock, now), Slot: &a.slot}
	a.slot.Ask(g.ref, &a.req)
	if !a.slot.Await(g.ref, ctx.Done()) {
		g.ref.Send(&actors.AdaptiveWithdraw{Enter: &a.req})
		a.slot.Await(g.ref, nil)
		p := a.slot.Take()
		// a stays out of the pool: the Withdraw may still be queued.
		if p.OK { // let in as ctx ended: the room goes back unused
			pass := Pass{g: g}
			pass.Drop()
		}
		if p.OK || errors.Is(p.Err, actors.ErrCancelled) {
			return Pass{}, ctxError(ctx, "enter")
		}
		return Pass{}, adaptiveErr(p)
	}
	p := a.slot.Take()
	g.asks.Put(a)
	if !p.OK {
		return Pass{}, adaptiveErr(p)
	}
	return g.pass(true), nil
}

// pass is a Pass of g's let in now, timed or not.
func (g *AdaptiveGate) pass(timed bool) Pass {
	if !timed {
		return Pass{g: g}
	}
	return Pass{g: g, start: g.clock.Now(), timed: true}
}

// TryEnter lets the caller in if there is room now for the priority ctx
// carries. It never waits in line: without room lent ahead of time it
// asks the gate's actor, which answers at once. While callers wait in line
// there is no room: they come first. After Close it says no. A nil ctx
// carries no priority.
func (g *AdaptiveGate) TryEnter(ctx context.Context) (Pass, bool) {
	class := PriorityFrom(ctx).class()
	if ok, timed := g.enter(class); ok {
		return g.pass(timed), true
	}
	if g.closed.Load() {
		return Pass{}, false
	}
	a := g.ask()
	a.req = actors.AdaptiveEnter{Now: g.clock.Now(), Class: class, Slot: &a.slot}
	a.slot.Ask(g.ref, &a.req)
	a.slot.Await(g.ref, nil)
	p := a.slot.Take()
	g.asks.Put(a)
	if !p.OK {
		return Pass{}, false
	}
	return g.pass(true), true
}

// enter takes lent room for a caller of class, if some is free. A caller
// that finds none while the actor answers someone else spins a moment,
// without yielding (see actors.AdaptiveRoom.Settled), and tries the room
// lent after, rather than queue on the actor behind them.
func (g *AdaptiveGate) enter(class int) (ok, timed bool) {
	if ok, timed = g.room.Enter(class); ok || !g.room.Settled() {
		return ok, timed
	}
	return g.room.Enter(class)
}

// ask is an Enter request from g.asks, or a new one.
func (g *AdaptiveGate) ask() *adaptiveAsk {
	a, _ := g.asks.Get().(*adaptiveAsk)
	if a == nil {
		a = new(adaptiveAsk)
	}
	return a
}

// adaptiveErr is the client's error for a refused Enter.
func adaptiveErr(p actors.Permit) error {
	switch {
	case errors.Is(p.Err, actors.ErrDeadline):
		return &WaitError{Wait: p.After, By: "the adaptive gate"}
	case errors.Is(p.Err, actors.ErrStopped):
		return ErrClosed
	case p.Err != nil:
		return p.Err
	}
	return errors.New("moonpool: enter: refused without a reason")
}

// Stats is the gate's state now and its counts so far. It asks the
// gate's actor and waits for the answer. After Close it is the zero
// AdaptiveStats.
func (g *AdaptiveGate) Stats() AdaptiveStats {
	if g.closed.Load() {
		return AdaptiveStats{}
	}
	reply := make(chan AdaptiveStats, 1)
	g.ref.Send(&actors.AdaptiveInspect{Reply: reply})
	return <-reply
}

// Close stops the gate's actor, waiting within ctx. Callers in line are
// refused with ErrClosed, and so is every Enter after. Passes out may
// still Leave or Drop, to no effect. A second Close does nothing and
// returns nil, as does a Close after the engine shut down.
func (g *AdaptiveGate) Close(ctx context.Context) error {
	return stopActor(ctx, g.ref, &g.closed)
}
