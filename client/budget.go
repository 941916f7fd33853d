package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// ErrBudget says a retry was refused by its retry budget: retries were
// already the share of first attempts the budget allows. Retry returns it
// in a *RetryError with the last failure, so errors.Is finds both.
var ErrBudget = errors.New("moonpool: retry budget spent")

// BudgetConfig sets a Budget's numbers. The zero BudgetConfig is the
// defaults: a tenth of first attempts, at least one a second, over ten
// seconds.
type BudgetConfig struct {
	// Ratio is the share of first attempts that may be retried or hedged.
	// Zero or less, or NaN, is 0.1 (gRFC A6's tokenRatio).
	Ratio float64
	// MinPerSecond lets a quiet client retry a little: the budget always
	// allows MinPerSecond × Window over the window. Zero is 1. Below
	// zero, or NaN, is none.
	MinPerSecond float64
	// Window is how far back the budget counts. Zero or less is ten
	// seconds (Finagle's). HedgeDelay reads the latencies of its last
	// tenth, or of all of it when the tenth holds too few.
	Window time.Duration
}

// Budget is a retry budget shared by many callers. It lets a retry or a
// hedge through only if, counting it, the retries and hedges of the last
// Window are at most
//
//	max(Ratio × the first attempts of the last Window, MinPerSecond × Window)
//
// So a failing backend gets at most 1 + Ratio attempts per request,
// whatever each caller's Attempts say, once first attempts pass
// MinPerSecond/Ratio a second: ten a second with the defaults, which
// hold an outage to 1.1 attempts per request. Below that the floor lets a
// quiet client retry now and then.
//
// The ratio is gRFC A6's tokenRatio and the window Finagle's. Finagle
// allows 20% plus ten a second, and Envoy 20% of active requests. A tenth
// is the smaller share, and the floor is a floor, not an addition, so the
// bound does not grow with it.
//
// Give it to Retry with WithBudget, or to the HTTP and gRPC clients of
// moonhttp and moongrpc. Each request counts as one First. A refused
// retry returns the last error at once. A refused hedge is not sent.
//
// A budget counts first attempts only while it watches: from NewBudget
// or a retry or hedge asked, until a whole Window passes without one. So
// while every call succeeds, First costs one atomic load. A request made
// through Retry that asks for a retry has its first attempt counted all
// the same. Other first attempts made while the budget did not watch are
// not counted: those of hedged requests, and those of callers who call
// First and then Retry themselves. The first retries
// after a quiet Window are then judged on the floor, and the share grows
// back as first attempts are counted. This errs towards refusing.
//
// First and Observe never wait, and cost at most one atomic add. The
// budget's actor folds them in, dated no later than they happened, so a
// count never stays in the window too long. Retry and Hedge take what
// the actor lent, one compare-and-swap, and ask it only when that is spent:
// the actor lends what the budget allows until the window's next
// twentieth begins, and counts what was taken at its next fold. It folds
// as that twentieth begins, so the loan is renewed as it runs out. The
// window is counted in twentieths, and their width only ever refuses
// more (see policy.Budget).
//
// A Budget is safe for concurrent use. A nil *Budget bounds nothing:
// First and Observe do nothing, Retry and Hedge say yes. Build one with
// NewBudget; the zero Budget is not usable.
type Budget struct {
	tally  *actors.Tally
	eng    *engine.Engine
	ref    *engine.Ref
	closed atomic.Bool
	counts budgetCounts
	// asks are Spend requests with their reply slots, kept for reuse so
	// Retry and Hedge allocate nothing. Each budget keeps its own: one
	// made in a testing/synctest bubble then only uses what was made
	// there.
	asks sync.Pool
}

// budgetCounts are a Budget's answers, ever. First attempts are the
// Tally's.
type budgetCounts struct {
	retries, hedges, refusedRetries, refusedHedges atomic.Int64
}

// BudgetStats are a Budget's counts since NewBudget, and what it would
// allow now.
type BudgetStats struct {
	Firsts         int64 // first attempts counted (see Budget on when)
	Retries        int64 // retries allowed
	Hedges         int64 // hedges allowed
	RefusedRetries int64 // retries refused, after Close too
	RefusedHedges  int64 // hedges refused, after Close too
	// Left is how many more retries and hedges the budget would allow
	// now: 0 after Close, math.MaxInt when nothing bounds them.
	Left int
}

// NewBudget starts a retry budget on eng, reading cfg as BudgetConfig
// says. It returns an error if eng is nil or refuses the actor (shut
// down).
func NewBudget(eng *Engine, cfg BudgetConfig) (*Budget, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewBudget: nil engine")
	}
	ratio, floor, window := cfg.numbers()
	ref, tally, err := actors.SpawnBudget(eng, "", ratio, floor, window)
	if err != nil {
		return nil, fmt.Errorf("moonpool: NewBudget: %w", err)
	}
	return &Budget{tally: tally, eng: eng, ref: ref}, nil
}

// numbers are the policy's numbers for c, as BudgetConfig reads them.
func (c BudgetConfig) numbers() (ratio, minPerSecond float64, window time.Duration) {
	ratio, minPerSecond, window = c.Ratio, c.MinPerSecond, c.Window
	if !(ratio > 0) {
		ratio = policy.DefaultBudgetRatio
	}
	switch {
	case minPerSecond == 0:
		minPerSecond = policy.DefaultBudgetMin
	case !(minPerSecond > 0):
		minPerSecond = 0
	}
	if window <= 0 {
		window = policy.DefaultBudgetWindow
	}
	return ratio, minPerSecond, window
}

// First counts one first attempt: call it once per request, as its first
// attempt goes out. Retry with WithBudget calls it for you. It never
// blocks. While the budget watches (see Budget) it costs one atomic add.
// Otherwise it counts nothing and costs one atomic load. After Close it
// counts to no effect.
func (b *Budget) First() {
	if b != nil {
		b.tally.First()
	}
}

// Retry is whether a retry may go now, counting it if so. It takes one
// of what the budget's actor lent, or else asks the actor, which answers
// at once. After Close it says no.
func (b *Budget) Retry() bool {
	if b == nil {
		return true
	}
	ok := b.spend(false)
	if ok {
		b.counts.retries.Add(1)
	} else {
		b.counts.refusedRetries.Add(1)
	}
	return ok
}

// Hedge is whether a hedge may go now, counting it if so. Retries and
// hedges spend the same budget. After Close it says no.
func (b *Budget) Hedge() bool {
	if b == nil {
		return true
	}
	ok := b.spend(true)
	if ok {
		b.counts.hedges.Add(1)
	} else {
		b.counts.refusedHedges.Add(1)
	}
	return ok
}

// budgetAsk is a Spend or a Latency with its reply slot, for reuse.
type budgetAsk struct {
	spend   actors.Spend
	latency actors.Latency
	slot    engine.Reply[actors.Permit]
}

// ask sends the actor the request that fill makes of a pooled ask, and
// returns its answer.
func (b *Budget) ask(fill func(a *budgetAsk) any) actors.Permit {
	a, _ := b.asks.Get().(*budgetAsk)
	if a == nil {
		a = new(budgetAsk)
	}
	a.slot.Ask(b.ref, fill(a))
	a.slot.Await(b.ref, nil)
	p := a.slot.Take()
	b.asks.Put(a)
	return p
}

// spend takes one retry or hedge from the loan, or asks the actor.
func (b *Budget) spend(hedge bool) bool {
	if b.closed.Load() {
		return false
	}
	now := b.eng.Now()
	if b.tally.Lease(now) {
		return true
	}
	p := b.ask(func(a *budgetAsk) any {
		a.spend = actors.Spend{Now: now, Hedge: hedge, Slot: &a.slot}
		return &a.spend
	})
	return p.OK
}

// Observe counts the latency of a first attempt, for HedgeDelay. It costs
// one atomic add and never blocks.
func (b *Budget) Observe(d time.Duration) {
	if b != nil {
		b.tally.Observe(d)
	}
}

// HedgeDelay is the p-quantile of the latencies Observe counted: how long
// to wait before a hedge, for p of 0.95, say. It is false until enough
// were counted to answer for p: 20, with five at or above the quantile
// (100 for p 0.95; see policy.Quantile.At). The duration is within 3.2%
// of the latency at that rank.
//
// Once it has answered for p, it answers true. When the window holds too
// few again, after a spell quieter than the window, say, the answer is
// the last delay worked out for p. A fresh one replaces it once enough
// latencies are counted, at the actor's next fold. So a client's first
// requests after a pause are hedged on what it knew. The budget keeps
// four p. A fifth takes the place of the one that took its place longest
// ago, and what was known of that one is gone.
//
// It reads the latencies of the last tenth of the window when they hold
// ten at or above the quantile (200 for p 0.95), else those of the whole
// window. So when latency shifts, the delay follows within about a tenth
// of the window. A stall lengthens it for that long, not for a whole
// window. A slowdown gets more requests hedged for that long too. A
// client too quiet to fill a tenth is answered from the whole window.
//
// The first ask for a p goes to the budget's actor. It then publishes the
// answer and works it out again every twentieth of the window, while
// anything is counted or asked, so later asks cost a few atomic loads. An
// answer is thus up to a twentieth of the window old. Until p is
// answered, every ask waits for the actor's answer, so the first delay
// is there as soon as enough latencies are. A client whose window never
// holds enough for p (p 0.99 at under 50 requests a second, with the
// default window) asks the actor for every request it could hedge.
//
// A p outside [0, 1] is read as the nearest end. NaN, a nil Budget and
// a closed one say false.
func (b *Budget) HedgeDelay(p float64) (time.Duration, bool) {
	if b == nil || math.IsNaN(p) || b.closed.Load() {
		return 0, false
	}
	p = min(max(p, 0), 1) // also reads -0 as 0, so it finds 0's quote
	if d, found := b.tally.Quote(p); found {
		return d, true
	}
	now := b.eng.Now()
	r := b.ask(func(a *budgetAsk) any {
		a.latency = actors.Latency{Now: now, P: p, Slot: &a.slot}
		return &a.latency
	})
	return r.After, r.OK && r.Err == nil
}

// Stats are the budget's counts since NewBudget, and what it would allow
// now, which the budget's actor answers.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{Left: math.MaxInt}
	}
	s := BudgetStats{
		Firsts:         b.tally.Firsts(),
		Retries:        b.counts.retries.Load(),
		Hedges:         b.counts.hedges.Load(),
		RefusedRetries: b.counts.refusedRetries.Load(),
		RefusedHedges:  b.counts.refusedHedges.Load(),
	}
	if !b.closed.Load() {
		ch := make(chan actors.Permit, 1)
		b.ref.Send(&actors.Left{Now: b.eng.Now(), Reply: ch})
		if p := <-ch; p.Err == nil {
			s.Left = whole(p.Left)
		}
	}
	return s
}

// Close stops the budget's actor, waiting within ctx. Afterwards Retry and
// Hedge say no and HedgeDelay says false. A second Close does nothing and
// returns nil, as does a Close after the engine shut down.
func (b *Budget) Close(ctx context.Context) error {
	if b == nil {
		return nil
	}
	if ctx == nil {
		return fmt.Errorf("moonpool: Budget.Close: %w", errNilContext)
	}
	return stopActor(ctx, b.ref, &b.closed)
}
