package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
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
type oursSimLimiter struct {
	clock   *watchedClock
	eng     *client.Engine
	g       *client.AdaptiveGate
	cls     classCtx
	passes  map[int]client.Pass
	waiters map[int]*simCtx // in line, or answered and not yet settled
	answers chan simAnswer
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
	w := &simCtx{Context: ctx, clock: o.clock, deadline: deadline, done: make(chan struct{})}
	o.waiters[ticket] = w
	go func() {
		p, err := o.g.Enter(w)
		o.answers <- simAnswer{ticket: ticket, pass: p, err: err}
	}()
	return waiting
}

func (o *oursSimLimiter) leave(ticket int, _ int64) {
	p := o.passes[ticket]
	p.Leave()
	delete(o.passes, ticket)
}

func (o *oursSimLimiter) expire(ticket int) {
	if w := o.waiters[ticket]; w != nil {
		w.end()
	}
}

// settle takes in the answers of requests that left the line, until every
// request still unanswered is in it: then the gate has nothing under way
// that the simulation has not seen. Stats is a round trip to the gate's
// actor, so what it counts as queued is after every message sent before.
func (o *oursSimLimiter) settle() ([]answer, error) {
	var out []answer
	give := time.Now().Add(10 * time.Second)
	for {
		for more := true; more; {
			select {
			case a := <-o.answers:
				out = append(out, o.answered(a))
			default:
				more = false
			}
		}
		if len(o.waiters) == 0 || o.g.Stats().Queued == len(o.waiters) {
			break
		}
		if time.Now().After(give) {
			return out, fmt.Errorf("moonpool: %d requests neither in line nor answered after 10s", len(o.waiters))
		}
		runtime.Gosched()
	}
	slices.SortFunc(out, func(a, b answer) int { return a.ticket - b.ticket })
	return out, nil
}

// answered is the simulation's answer for what Enter said.
func (o *oursSimLimiter) answered(a simAnswer) answer {
	delete(o.waiters, a.ticket)
	var we *client.WaitError
	switch {
	case a.err == nil:
		o.passes[a.ticket] = a.pass
		return answer{ticket: a.ticket, entered: true}
	case errors.Is(a.err, context.DeadlineExceeded):
		return answer{ticket: a.ticket, timedOut: true}
	case errors.Is(a.err, client.ErrShed), errors.As(a.err, &we):
		return answer{ticket: a.ticket}
	}
	return answer{ticket: a.ticket, err: a.err}
}

func (o *oursSimLimiter) limit() float64 { return o.lim }

// tick moves the clock to now. When that fired one of the engine's
// timers, Stats (a round trip to the gate's actor, behind what the timer
// sent it) waits until the actor has taken it in, and reads the limit.
func (o *oursSimLimiter) tick(now int64) {
	o.clock.AdvanceTo(now)
	if o.clock.fired.Swap(false) {
		o.lim = float64(o.g.Stats().Limit)
	}
}

// simCtx is a request's context on the virtual clock: its deadline is on
// the simulation's clock, and it ends when the simulation ends it.
type simCtx struct {
	context.Context // the request's priority
	clock           *watchedClock
	deadline        int64
	done            chan struct{}
	ended           atomic.Bool
}

// Deadline is as far away on the machine's clock as the request's
// deadline is on the virtual one.
func (c *simCtx) Deadline() (time.Time, bool) {
	return time.Now().Add(time.Duration(c.deadline - c.clock.Now())), true
}

func (c *simCtx) Done() <-chan struct{} { return c.done }

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
