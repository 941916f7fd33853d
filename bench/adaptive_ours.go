package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
)

// The suite's own side: client.AdaptiveGate at its defaults.

// classCtx are the contexts a request carries: the highest class critical,
// the other low when the scenario has classes, normal when it has none.
type classCtx struct{ top, rest context.Context }

func classesOf(s *adaptiveScenario) classCtx {
	if s.critical > 0 {
		return classCtx{
			top:  client.WithPriority(context.Background(), client.PriorityCritical),
			rest: client.WithPriority(context.Background(), client.PriorityLow),
		}
	}
	return classCtx{top: context.Background(), rest: context.Background()}
}

func (c classCtx) of(critical bool) context.Context {
	if critical {
		return c.top
	}
	return c.rest
}

// ---- on the virtual clock ----

// watchedClock is a moontest clock that notes when one of the engine's
// timers fired: its actor then has a message to take in before the
// simulation goes on.
type watchedClock struct {
	*moontest.Clock
	fired atomic.Bool
}

// Until is how far off t is on the virtual clock, whose readings are
// Unix nanoseconds: the gate reads a request's deadline with it.
func (w *watchedClock) Until(t time.Time) time.Duration { return time.Duration(t.UnixNano() - w.Now()) }

func (w *watchedClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	return w.Clock.AfterFunc(d, func() {
		w.fired.Store(true)
		f()
	})
}

// oursSimLimiter is an AdaptiveGate on an engine of its own, on a virtual
// clock the simulation moves. A request enters with TryEnter while there
// is room, and otherwise with Enter on a goroutine of its own, which
// waits in the gate's line. Its context ends when the simulation says its
// deadline has passed.
//
// Whatever the gate's actor does must happen at the instant the
// simulation means, the same way every run. So every message to it is
// followed by a round trip (Stats) before the clock moves, and the
// simulation waits for each waiter's ask to be sent, or its answer to
// come back, instead of polling.
type oursSimLimiter struct {
	clock   *watchedClock
	eng     *client.Engine
	g       *client.AdaptiveGate
	cls     classCtx
	passes  map[int]client.Pass
	waiters map[int]*simCtx // not yet answered
	fresh   []int           // waiters whose ask may not have reached the actor
	answers chan simAnswer
	got     []answer // answers taken in, not yet settled
	lim     float64
}

// simAnswer is what Enter said to a request that went in line.
type simAnswer struct {
	ticket int
	pass   client.Pass
	err    error
}

// oursSim builds our side for one virtual-clock run of s.
func oursSim(s *adaptiveScenario) (simLimiter, func(), error) {
	c := &watchedClock{Clock: moontest.NewClock(nil)}
	eng := client.NewEngine(client.WithClock(c))
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{})
	if err != nil {
		_ = eng.Shutdown(context.Background())
		return nil, nil, err
	}
	o := &oursSimLimiter{clock: c, eng: eng, g: g, cls: classesOf(s),
		passes: map[int]client.Pass{}, waiters: map[int]*simCtx{}, answers: make(chan simAnswer, 1024)}
	o.lim = float64(g.Stats().Limit)
	stop := func() {
		for _, w := range o.waiters {
			w.end()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			warn("Adaptive: gate close: %v", err)
		}
		if err := eng.Shutdown(ctx); err != nil {
			warn("Adaptive: engine shutdown: %v", err)
		}
	}
	return o, stop, nil
}

func (o *oursSimLimiter) origin() int64 { return o.clock.Now() }

func (o *oursSimLimiter) enter(_ int64, ticket int, critical bool, deadline int64) entry {
	ctx := o.cls.of(critical)
	if p, ok := o.g.TryEnter(ctx); ok {
		o.passes[ticket] = p
		return entered
	}
	w := &simCtx{Context: ctx, deadline: deadline, done: make(chan struct{}), asked: make(chan struct{})}
	o.waiters[ticket] = w
	o.fresh = append(o.fresh, ticket)
	go func() {
		p, err := o.g.Enter(w)
		o.answers <- simAnswer{ticket: ticket, pass: p, err: err}
	}()
	return waiting
}

// leave gives the room back. Leave may send the gate's actor a message
// (room to hand on, or a wake-up that sets its timer), which it would
// take in whenever its goroutine runs: sync waits until it has.
func (o *oursSimLimiter) leave(ticket int, _ int64) {
	p := o.passes[ticket]
	p.Leave()
	delete(o.passes, ticket)
	o.sync()
}

// expire ends a waiter's context and waits for its answer: the actor
// first catches up with the clock, so that what it does at this instant
// is done before the waiter's withdrawal reaches it.
func (o *oursSimLimiter) expire(ticket int) {
	w := o.waiters[ticket]
	if w == nil {
		return
	}
	o.sync()
	w.end()
	give := time.After(10 * time.Second)
	for o.waiters[ticket] != nil {
		select {
		case a := <-o.answers:
			o.take(a)
		case <-give:
			o.got = append(o.got, answer{ticket: ticket, err: errors.New("moonpool: a waiter whose context ended did not return within 10s")})
			delete(o.waiters, ticket)
		}
	}
}

// sync waits until the gate's actor has taken in every message sent so
// far and read the clock's instant, and notes the limit. Stats is a round
// trip to the actor.
func (o *oursSimLimiter) sync() { o.lim = float64(o.g.Stats().Limit) }

// settle waits until each fresh waiter's ask has gone to the actor (its
// context's Done is read only after), asks the actor how many wait in
// line, and takes in the answers of all the others.
func (o *oursSimLimiter) settle() ([]answer, error) {
	give := time.After(10 * time.Second)
	for _, t := range o.fresh {
		w := o.waiters[t]
		for w != nil && o.waiters[t] != nil {
			select {
			case <-w.asked:
				w = nil
			case a := <-o.answers:
				o.take(a)
			case <-give:
				return nil, fmt.Errorf("moonpool: a waiter neither asked nor was answered within 10s")
			}
		}
	}
	o.fresh = o.fresh[:0]
	if len(o.waiters) > 0 || len(o.got) > 0 {
		queued := o.g.Stats().Queued
		for len(o.waiters) > queued {
			select {
			case a := <-o.answers:
				o.take(a)
			case <-give:
				return nil, fmt.Errorf("moonpool: %d requests neither in line nor answered within 10s", len(o.waiters)-queued)
			}
		}
	}
	out := o.got
	o.got = nil
	if len(out) > 0 {
		// A waiter let in as its context ended gave its room back: let
		// the actor take that in too.
		o.sync()
	}
	slices.SortFunc(out, func(a, b answer) int { return a.ticket - b.ticket })
	return out, nil
}

// take notes what Enter said to a waiter.
func (o *oursSimLimiter) take(a simAnswer) {
	delete(o.waiters, a.ticket)
	var we *client.WaitError
	switch {
	case a.err == nil:
		o.passes[a.ticket] = a.pass
		o.got = append(o.got, answer{ticket: a.ticket, entered: true})
	case errors.Is(a.err, context.DeadlineExceeded):
		o.got = append(o.got, answer{ticket: a.ticket, timedOut: true})
	case errors.Is(a.err, client.ErrShed), errors.As(a.err, &we):
		o.got = append(o.got, answer{ticket: a.ticket})
	default:
		o.got = append(o.got, answer{ticket: a.ticket, err: a.err})
	}
}

func (o *oursSimLimiter) limit() float64 { return o.lim }

// tick moves the clock to now, one timer at a time. A timer of the
// engine's sends the gate's actor a Tick, which sets the next timer from
// the clock's reading: the actor takes it in before the clock moves on.
func (o *oursSimLimiter) tick(now int64) {
	for {
		d, ok := o.clock.Next()
		if !ok || o.clock.Now()+int64(d) > now {
			break
		}
		o.clock.AdvanceNext()
		if o.clock.fired.Swap(false) {
			o.sync()
		}
	}
	o.clock.AdvanceTo(now)
}

// simCtx is a request's context on the virtual clock: its deadline is on
// the simulation's clock, and it ends when the simulation ends it.
type simCtx struct {
	context.Context // the request's priority
	deadline        int64
	done            chan struct{}
	ended           atomic.Bool
	asked           chan struct{} // closed when Done is first read
	once            sync.Once
}

// Deadline is the request's deadline on the virtual clock, read back
// through watchedClock.Until: no reading of the machine's clock comes
// between, so a busy machine cannot move it.
func (c *simCtx) Deadline() (time.Time, bool) { return time.Unix(0, c.deadline), true }

// Done is read by Enter only once its ask has gone to the actor, to wait
// for the answer: the simulation learns from it that the ask is on its way.
func (c *simCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.done
}

func (c *simCtx) Err() error {
	if c.ended.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// end ends the context, once.
func (c *simCtx) end() {
	if c.ended.CompareAndSwap(false, true) {
		close(c.done)
	}
}

// ---- on the real clock ----

// oursReal is an AdaptiveGate on the suite's engine, entered with Enter:
// a request without room waits in its line, within its deadline. A
// request that times out still Leaves: it reached the dependency, and its
// latency is the news the gate needs.
func oursReal(eng *engine.Engine, s *adaptiveScenario) (realLimiter, error) {
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{})
	if err != nil {
		return nil, err
	}
	return &oursRealLimiter{g: g, classes: s.critical > 0}, nil
}

type oursRealLimiter struct {
	g       *client.AdaptiveGate
	classes bool
}

func (o *oursRealLimiter) enter(ctx context.Context, critical bool) (realPass, error) {
	switch {
	case critical:
		ctx = client.WithPriority(ctx, client.PriorityCritical)
	case o.classes:
		ctx = client.WithPriority(ctx, client.PriorityLow)
	}
	p, err := o.g.Enter(ctx)
	if err != nil {
		var we *client.WaitError
		if !errors.Is(err, client.ErrShed) && !errors.As(err, &we) && ctx.Err() == nil {
			return nil, unexpected{fmt.Errorf("moonpool: %w", err)}
		}
		return nil, err
	}
	return &oursPass{p}, nil
}

func (o *oursRealLimiter) limit() float64 { return float64(o.g.Stats().Limit) }

func (o *oursRealLimiter) close() { closeWithin(o.g.Close) }

type oursPass struct{ p client.Pass }

func (p *oursPass) done(bool) { p.p.Leave() }

// ---- the hot path ----

// adaptiveHotName is the row of Enter and Leave with room.
const adaptiveHotName = "Enter+Leave with room"

// adaptiveHotRow is TryEnter and Leave on an AdaptiveGate whose room (at
// least 1,024) is never short, against TryAcquire(1) and Release(1) on a
// semaphore of 1,024, every caller on the one gate.
func adaptiveHotRow(eng *engine.Engine, cfg config) row {
	return row{
		suite:   "Adaptive",
		name:    adaptiveHotName,
		callers: cfg.callers,
		sides: []side{
			{name: adaptiveOurs, ours: true, build: func(int) (contender, error) { return oursAdaptiveHot(eng) }},
			{name: "semaphore", build: func(int) (contender, error) { return theirGate(), nil }},
		},
		batch: 4,
		every: 16,
		count: countAllowed,
	}
}

func oursAdaptiveHot(eng *engine.Engine) (contender, error) {
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: gateLimit, Max: 4 * gateLimit, Start: gateLimit})
	if err != nil {
		return contender{}, err
	}
	ctx := context.Background()
	var in atomic.Int64
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if p, ok := g.TryEnter(ctx); ok {
					p.Leave()
					a++
				}
			}
			in.Add(int64(a))
		},
		close: func() { closeWithin(g.Close) },
		count: in.Load,
	}, nil
}
