package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// PoolConfig says how a Pool opens and closes its resources and which rules
// it holds them to. Only Open is required.
type PoolConfig[T comparable] struct {
	// Open makes a new resource. It runs on a goroutine of its own, outside
	// the pool, so a slow Open holds up only the caller that needs it. Its
	// ctx carries the values of the Get that asked for it but not that Get's
	// cancellation or deadline: a caller that gives up does not waste the
	// connection already half made, which goes to the pool instead (the loss
	// jackc/pgx#1259 describes). Give Open its own timeout, such as
	// net.Dialer.Timeout. Its ctx is cancelled when the pool closes, and
	// Close waits for Open to return, so Open must return soon after.
	//
	// A panic in Open is recovered: the Get that asked is answered an
	// *OpenError wrapping a *PanicError, and the ward hears of a failed make.
	// A resource equal to one the pool holds already (idle or lent) is
	// refused with an *OpenError wrapping ErrDuplicate and left unclosed,
	// since closing it would close the one the pool holds.
	Open func(ctx context.Context) (T, error)
	// Close ends a resource the pool no longer wants: stale, evicted,
	// surplus, discarded, or left at Close. Its errors are counted in Stats
	// and returned to whoever caused the close, never panicked on; a panic
	// in Close is recovered and reported the same way, as a *CloseError
	// wrapping a *PanicError. nil means the resources need no closing.
	Close func(T) error
	// Limits bound the pool. The zero Limits bounds nothing; most servers
	// want DefaultLimits, ten as HikariCP has it. With MinIdle the
	// pool opens resources in the background, one at a time, from the start
	// and whenever fewer are idle: through the Ward, so a warm-up during an
	// outage is spaced and held back as callers' opens are, and never while
	// callers wait in line, whose own opens come first.
	Limits Limits
	// Ward stands between the pool and its backend: breaker, bucket, backoff
	// and shedder, each optional and each configured by value, so one Ward
	// may serve many pools; each pool builds its own state from it. The zero
	// Ward holds nothing back. Its Draw is ignored; jitter is drawn from a
	// source seeded by Seed. See policy.Ward for the order its parts are
	// asked in, the one-probe rule after a failed Open, and which backoff
	// settings it reads (not Attempts).
	Ward Ward
	// MaxWaiting caps the callers waiting for a resource; past it Get fails
	// at once with ErrShed rather than queueing. Zero or less is no cap.
	MaxWaiting int
	// Seed seeds the backoff's jitter and the draws of Limits.LifeJitter.
	// Zero, the default, draws a random seed for each pool, so replicas of
	// a service that failed together spread their retries apart; set one
	// only to make a test reproducible.
	Seed uint64
	// Check, if not nil, tells whether a resource still works (a ping). A
	// resource that went unused for CheckIdle or longer is checked before
	// Get lends it; one that fails is closed (counted in
	// Stats.CheckFailures) and Get goes on to the next, the caller seeing
	// no error. It runs on the caller's goroutine, outside the pool, so a
	// slow check holds up only its own caller; its ctx is the Get's,
	// ended after five seconds (HikariCP's validationTimeout default) on
	// the engine's clock, when the check counts as failed. An error because the
	// Get's own ctx ended is not the resource's fault: it goes back to the
	// pool. A panic is recovered and counts as a failure.
	Check func(ctx context.Context, item T) error
	// CheckIdle is how long a resource must have gone unused (and
	// unchecked) before Get checks it: pgxpool pings one idle over a
	// second, HikariCP validates one unused for 500 ms. 0 checks every
	// one. Without Check it does nothing.
	CheckIdle time.Duration
	// KeepAlive, if above zero, checks the idle resources in the
	// background at that period, so one the server dropped is found
	// before a caller meets it: each idle resource unused and unchecked
	// for KeepAlive is lent to the check (never to a caller meanwhile),
	// then kept or closed. A check does not count as a use, so Keep still
	// retires what no caller wants. With MinIdle, what it closes is
	// replaced. Without Check it does nothing.
	KeepAlive time.Duration
	// LeakAfter, if above zero, reports a resource lent for longer than
	// this, once, as a warning through the engine's logger
	// (engine.WithLogger), with the stack of the Get that took it, and
	// counts it in Stats.Leaked: a caller that forgot its Put. The stack
	// is captured only when LeakAfter is set, so 0, the default, costs
	// nothing. Time is the engine's clock.
	LeakAfter time.Duration
	// Reuse, if not nil, is asked on each Put whether the resource may be
	// lent again; false closes it instead, as Discard does, and counts it in
	// Stats.Unreused (a connection left mid-transaction, say). It runs on
	// the caller's goroutine, outside the pool, and must not block; a panic
	// in it is recovered and read as false. nil asks nothing: every
	// resource may be lent again.
	Reuse func(T) bool
	// Name is the pool's name on the engine; "" picks a fresh one. Names
	// beginning with engine.ReservedPrefix ("$") are the engine's own and
	// are refused.
	Name string
	// Fleet, if not nil, shares the Ward's view of the backend with the same
	// pool in other processes (see Fleet; moonredis.NewFleet builds one).
	// The pool joins it in NewPool and leaves it in Close. The fleet may
	// hold the pool's Opens (Stats.HeldFleet), let it make the fleet's
	// probe, and space its Opens after a recovery (Stats.HeldRamp). The
	// pool tells it only of failed Opens and of probes, so a healthy pool
	// costs the fleet nothing. nil is no fleet: the Ward alone decides.
	Fleet Fleet
}

// Pool lends resources made by PoolConfig.Open (connections, usually) to
// callers that hand them back, and keeps them within PoolConfig.Limits.
//
// Get blocks until a resource is there or ctx is done, and TryGet takes
// only what is there now; Put hands one back, Discard says it broke, and
// Close shuts the pool. SetLimits resizes it and Reset starts it afresh
// while it runs. The books live in a pool
// actor on the engine; a Pool is the blocking face of it, and does the
// opening, closing and sleeping the actor never does. A Pool is safe for
// concurrent use. Build one with NewPool; the zero Pool is not usable.
type Pool[T comparable] struct {
	eng   *engine.Engine
	ref   *engine.Ref
	rack  *actors.Rack[T] // idle resources the actor lays out for Get without a message
	open  func(context.Context) (T, error)
	close func(T) error
	reuse func(T) bool
	check func(context.Context, T) error

	// tickets holds request structs with their answer slot, so a Get and a
	// Put allocate nothing in the steady state. A ticket goes back only once
	// its one answer has been read: the actor is done with it then (it
	// reads a request before answering it). A ticket whose Take was
	// withdrawn is not reused, since the Cancel naming it may still be on
	// its way.
	tickets sync.Pool

	// stampTake and stampGive say whether a Take or a Give needs the
	// engine's time (see policy.Stamps): a clock reading costs about as
	// much as the pool's bookkeeping, and a pool without a ward, Keep or
	// Life answers the same whatever the time.
	stampTake, stampGive bool

	closing atomic.Bool // no new Gets
	kill    context.Context
	stop    context.CancelFunc // cancels every Open under way

	// opens counts the Open goroutines under way; its top bit, once set,
	// says no more may start, and the last one to finish after that closes
	// opened. A counter rather than a WaitGroup behind a mutex: the pool's
	// books need no lock, and neither does this.
	opens  atomic.Int64
	opened chan struct{}

	checks    chan struct{}     // the actor signals idle resources due a keep-alive check
	fills     chan struct{}     // the actor signals that MinIdle wants a background open
	filled    chan struct{}     // closed when the filler goroutine has returned
	retired   chan struct{}     // the actor signals retired resources to collect
	leftovers chan []T          // what the actor held when it stopped, if it stopped before Close collected
	lastBooks chan actors.Stats // the actor's books as it stopped
	quit      chan struct{}     // stops the closer goroutine
	quitted   chan struct{}     // closed when the closer goroutine has returned
	unwatch   func()            // stops the heat readings, if a shedder wants them
	leave     func()            // leaves the pool's Fleet, if it has one

	ready chan struct{} // closed once NewPool has finished building the Pool
	once  sync.Once     // runs the shutdown once, from Close or the engine
	final atomic.Pointer[actors.Stats]

	closeFailures atomic.Int64
	panics        atomic.Int64
	closedLends   atomic.Int64 // Gets refused by lend as the pool closed, which the actor never saw

	leakAfter time.Duration
	loansMu   sync.Mutex
	loans     map[T]*loan // with LeakAfter: each resource lent, with its Get's stack
	leaked    atomic.Int64

	getTime atomic.Int64 // time Gets spent opening and checking, on the engine's clock

	limitsMu sync.Mutex             // one SetLimits at a time
	limits   atomic.Pointer[Limits] // the limits as the pool reads them, for Stats
}

// loan is a resource lent while LeakAfter is set: where it was taken, and
// the timer that reports it if it is not back in time.
type loan struct {
	pcs   []uintptr
	timer engine.Timer
}

// NewPool starts a pool on eng. It returns an error if eng or cfg.Open is
// nil, or if the engine refuses the pool (shut down, name taken). The pool
// opens nothing until the first Get. Shutting the engine down closes the
// pool as Close does.
func NewPool[T comparable](eng *Engine, cfg PoolConfig[T]) (*Pool[T], error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewPool: nil engine")
	}
	if cfg.Open == nil {
		return nil, errors.New("moonpool: NewPool: PoolConfig.Open is nil")
	}
	p := &Pool[T]{
		eng:       eng,
		open:      cfg.Open,
		close:     cfg.Close,
		reuse:     cfg.Reuse,
		leakAfter: max(cfg.LeakAfter, 0),
		check:     cfg.Check,
		checks:    make(chan struct{}, 1),
		fills:     make(chan struct{}, 1),
		filled:    make(chan struct{}),
		retired:   make(chan struct{}, 1),
		leftovers: make(chan []T, 1),
		lastBooks: make(chan actors.Stats, 1),
		quit:      make(chan struct{}),
		quitted:   make(chan struct{}),
		ready:     make(chan struct{}),
		opened:    make(chan struct{}),
	}
	p.tickets.New = func() any { return new(ticket[T]) }
	p.holdLimits(cfg.Limits)
	p.stampTake, p.stampGive = policy.Stamps(cfg.Limits, cfg.Ward)
	if cfg.Check != nil {
		p.stampTake = true // how long a resource sat is read from the Take's time
	}
	keepAlive := cfg.KeepAlive
	if cfg.Check == nil {
		keepAlive = 0
	}
	var link *fleetLink
	var report func(FleetReport)
	if cfg.Fleet != nil {
		link = &fleetLink{}
		report, p.leave = cfg.Fleet.Join(link.set)
		p.stampTake = true // the fleet's ramp reads the Take's time
	}
	p.kill, p.stop = context.WithCancel(context.Background())
	ref, rack, err := actors.SpawnPoolRack[T](eng, cfg.Name, actors.PoolConfig{
		Limits:     cfg.Limits,
		Ward:       cfg.Ward,
		Seed:       cfg.Seed,
		MaxWaiting: cfg.MaxWaiting,
		Retired:    p.retired,
		Check:      cfg.Check != nil,
		CheckIdle:  cfg.CheckIdle,
		KeepAlive:  max(keepAlive, 0),
		Checks:     p.checks,
		Fills:      p.fills,
		Leftovers:  p.leftovers,
		Last:       p.lastBooks,
		Fleet:      report,
	}, p.shutdown, p.unrack)
	if err != nil {
		p.stop()
		if p.leave != nil {
			p.leave()
		}
		return nil, fmt.Errorf("moonpool: NewPool: %w", err)
	}
	p.ref, p.rack = ref, rack
	if link != nil {
		link.attach(ref)
	}
	if cfg.Ward.Shedder.On() {
		p.unwatch = eng.WatchHeat(func(now int64, heat float64) {
			ref.Send(&actors.Heat{Now: now, Value: heat})
		})
	}
	go p.closer()
	go p.background()
	if keepAlive > 0 {
		ref.Send(&actors.Tick{Now: eng.Now()}) // starts the keep-alive's timer
	}
	if cfg.Limits.MinIdle > 0 {
		select {
		case p.fills <- struct{}{}: // warm up from the start
		default:
		}
	}
	close(p.ready)
	return p, nil
}

// background opens resources while the pool's actor says MinIdle wants
// them, and checks the idle ones a keep-alive hands it. One per pool; it
// ends when the pool closes, handing back any resource it was checking.
func (p *Pool[T]) background() {
	defer close(p.filled)
	for {
		select {
		case <-p.fills:
			p.fill()
		case <-p.checks:
			p.keepAlive()
		case <-p.kill.Done():
			return
		}
	}
}

// keepAlive checks the idle resources due a check, borrowing one from the
// actor at a time so the others stay there for callers, and hands each
// back with the outcome, until none is due or the pool is closing.
func (p *Pool[T]) keepAlive() {
	for p.kill.Err() == nil {
		m := &actors.Due[T]{Now: p.eng.Now(), Reply: make(chan actors.Answer[T], 1)}
		p.ref.Send(m)
		a := <-m.Reply
		if a.Verdict != policy.Ready {
			return
		}
		item := a.Item
		ok := p.vet(p.kill, item) == nil ||
			p.kill.Err() != nil // a check cut short by Close says nothing of the resource
		c := &actors.Checked[T]{Now: p.eng.Now(), Item: item, OK: ok, Reply: make(chan actors.Answer[T], 1)}
		p.ref.Send(c)
		if a := <-c.Reply; !a.Kept {
			_ = p.closeItem(item)
		}
	}
}

// timed adds the time since start to Stats.GetTime.
func (p *Pool[T]) timed(start int64) {
	p.getTime.Add(max(p.eng.Now()-start, 0))
}

// checkTimeout is how long PoolConfig.Check may take, on the engine's
// clock, before its ctx ends and the resource counts as failed: HikariCP's
// validationTimeout default.
const checkTimeout = 5 * time.Second

// errCheckTimeout is the cause of a check's ctx ended by checkTimeout.
var errCheckTimeout = errors.New("moonpool: check timed out")

// vet runs PoolConfig.Check on item within checkTimeout, turning a panic
// into an error.
func (p *Pool[T]) vet(ctx context.Context, item T) (err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := p.eng.Clock().AfterFunc(checkTimeout, func() { cancel(errCheckTimeout) })
	defer func() {
		t.Stop()
		cancel(nil)
		if v := recover(); v != nil {
			p.panics.Add(1)
			err = newPanicError(v)
		}
	}()
	return p.check(ctx, item)
}

// checkOut vets an idle resource Get was lent before handing it over; one
// that fails is closed and the Get goes on to the next, each failure taking
// one resource off the books, so the tries end.
func (p *Pool[T]) checkOut(ctx context.Context, item T, wait bool) (T, error) {
	start := p.eng.Now()
	err := p.vet(ctx, item)
	p.timed(start)
	if err == nil {
		return p.lend(item)
	}
	var zero T
	if ctx.Err() != nil { // the caller gave up, not the resource
		p.putUnchecked(item)
		return zero, ctxError(ctx, "get")
	}
	_ = p.discard(item, actors.CheckFailed)
	return p.get(ctx, wait, actors.Home())
}

// putUnchecked hands back a resource whose check its Get cut short: as it
// was, still due a check (the check said nothing of it), so the next Get
// checks it rather than take it for good. It was never the caller's: no
// loan to forget, no Reuse to ask.
func (p *Pool[T]) putUnchecked(item T) {
	m := &actors.Give[T]{Now: p.eng.Now(), Item: item, Strict: true, Unchecked: true,
		Reply: make(chan actors.Answer[T], 1)}
	p.ref.Send(m)
	if a := <-m.Reply; a.Err != nil || !a.Kept {
		_ = p.closeItem(item)
	}
}

// fill opens one resource after another, for as long as the actor answers
// Fill with Make: through the ward, so a warm-up during an outage is
// spaced and held back as callers' opens are. The actor signals again when
// it is worth asking after a Later or Shed.
func (p *Pool[T]) fill() {
	for p.kill.Err() == nil {
		m := &actors.Fill[T]{Now: p.eng.Now(), Reply: make(chan actors.Answer[T], 1)}
		p.ref.Send(m)
		a := <-m.Reply
		if a.Verdict != policy.Make {
			return
		}
		if !p.startOpen() {
			p.ref.Send(&actors.Unfilled{Now: p.eng.Now()})
			return
		}
		p.fillOne(a.Gen)
		p.endOpen()
	}
}

// fillOne runs Open for the room a Fill of generation gen reserved and
// hands the resource to the pool, idle.
func (p *Pool[T]) fillOne(gen uint32) {
	item, err := p.safeOpen(p.kill)
	if err != nil {
		// A pool closing under the Open is no news about the backend.
		p.ref.Send(&actors.Unfilled{Now: p.eng.Now(), Failed: p.kill.Err() == nil})
		return
	}
	f := &actors.Filled[T]{Now: p.eng.Now(), Item: item, Gen: gen, Reply: make(chan actors.Answer[T], 1)}
	p.ref.Send(f)
	switch a := <-f.Reply; {
	case errors.Is(a.Err, actors.ErrDuplicate):
		// On the books already: it leaves them once, not here.
	case a.Err != nil || !a.Kept:
		_ = p.closeItem(item)
	}
}

// Get lends a resource: an idle one if there is one (the most recently
// returned first), else a new one from Open if the limits and the ward
// allow, else it waits, in line behind earlier callers, until one comes back
// or room is made.
//
// It returns ErrClosed once the pool is closing; an error matching ErrShed
// when it is refused, which errors.Is tells apart further as ErrBreaker (the
// ward's breaker refuses Opens), ErrOverloaded (the ward's shedder finds the
// process too hot) or ErrTooManyWaiting (MaxWaiting callers already in
// line); and an *OpenError when the Open it ran failed; that failure is
// reported to the ward, so the breaker and backoff see the backend failing.
//
// When the ward holds makes back (bucket or backoff) past ctx's deadline and
// nothing is lent that could come back sooner, Get returns at once a
// *WaitError (errors.Is ErrExceedsDeadline) whose Wait is the rest of the
// hold, rather than wait out a deadline it cannot meet. A Fleet's hold has
// no known end: it counts as lasting until the fleet's next probe
// (FleetView.ProbeEvery), and its WaitError names "the fleet's hold".
//
// When ctx is done first, Get returns an error matching ctx.Err() under
// errors.Is and leaves nothing behind: its place in line is withdrawn, and a
// resource or room granted in the same instant is handed back. An Open
// already under way is not cancelled: the resource it makes goes to the
// pool for the next caller. A nil ctx is refused with an error.
//
// Get reads the engine's clock only when the pool's answer depends on the
// time: with a ward. Without one, a Get that finds an idle resource costs
// no clock reading, and Put costs one only with Keep or Life set; a Get
// then judges staleness by the latest time the pool has seen, and the
// pool's eviction timer retires idle resources at their deadline, so Keep
// and Life are exact up to that timer's lateness (see actors.SpawnPool).
//
// While nobody waits in line, a Get first looks on the pool's rack, where
// the resources it lent lately lie once put back (see actors.Rack), and
// takes one with one atomic swap, without a message to the pool's actor;
// each goroutine finds first what it put back last. Unless PoolConfig.Check
// is set or the ward has a shedder: then every Get asks the actor.
func (p *Pool[T]) Get(ctx context.Context) (T, error) {
	return p.get(ctx, true, actors.Home()) // Home reads this frame, laid out as Put's
}

// TryGet lends a resource if one can be had now: an idle one, or a new one
// from Open if the limits and the ward allow one at this instant. Otherwise
// it returns ErrNoneIdle at once: it never waits in line, and it does not
// overtake callers of Get already waiting. It waits only for the work it
// does itself, within ctx, as Get does: the Open it runs, and with
// PoolConfig.Check the checks of the idle resources it is lent (up to five
// seconds each, and one that fails is closed and the next tried, so it may
// check several). Its other errors are Get's.
func (p *Pool[T]) TryGet(ctx context.Context) (T, error) {
	return p.get(ctx, false, actors.Home())
}

// lend is what a Get returns for item, its loan watched when LeakAfter is
// set. A pool that began closing since the Get did lends nothing: item
// goes home, to be closed with the rest, and the Get gets ErrClosed. So no
// Get gets a resource once another has been told ErrClosed.
func (p *Pool[T]) lend(item T) (T, error) {
	if p.closing.Load() {
		var zero T
		_ = p.give(item) // its Close, if it fails, is counted: it was never the caller's
		p.closedLends.Add(1)
		return zero, ErrClosed
	}
	if p.leakAfter > 0 {
		p.watch(item)
	}
	return item, nil
}

// holder names what a ward's hold of reason why is, for a *WaitError.
func holder(why policy.Reason) string {
	switch why {
	case policy.ReasonBackoff:
		return "the ward's backoff"
	case policy.ReasonProbe:
		return "the ward's probe"
	case policy.ReasonBucket:
		return "the ward's bucket"
	case policy.ReasonFleet:
		return "the fleet's hold"
	case policy.ReasonRamp:
		return "the fleet's ramp"
	}
	return "the ward"
}

// watch remembers where item was taken, and reports it if it is not back
// within LeakAfter.
func (p *Pool[T]) watch(item T) {
	l := &loan{pcs: make([]uintptr, 40)}
	l.pcs = l.pcs[:runtime.Callers(2, l.pcs)] // the pool's own frames are dropped in report
	l.timer = p.eng.Clock().AfterFunc(p.leakAfter, func() { p.report(item, l) })
	p.loansMu.Lock()
	if p.loans == nil {
		p.loans = make(map[T]*loan)
	}
	p.loans[item] = l
	p.loansMu.Unlock()
}

// poolFrames begins the name of every method of Pool, as a stack names it.
const poolFrames = "github.com/moonpool-go/moonpool/client.(*Pool["

// forgetLoan forgets item's loan: it is on its way back.
func (p *Pool[T]) forgetLoan(item T) {
	p.loansMu.Lock()
	l := p.loans[item]
	delete(p.loans, item)
	p.loansMu.Unlock()
	if l != nil {
		l.timer.Stop()
	}
}

// report logs a loan that outlived LeakAfter, once.
func (p *Pool[T]) report(item T, l *loan) {
	p.loansMu.Lock()
	still := p.loans[item] == l
	p.loansMu.Unlock()
	if !still {
		return // back already, or lent again since: another loan
	}
	p.leaked.Add(1)
	var b strings.Builder
	frames := runtime.CallersFrames(l.pcs)
	ours := true // the Pool's own frames come first: Get, and what it called
	for {
		f, more := frames.Next()
		if ours = ours && strings.HasPrefix(f.Function, poolFrames); !ours {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	p.eng.Logger().Warn("moonpool: resource lent longer than LeakAfter, not put back",
		"pool", p.ref.Name(), "after", p.leakAfter, "stack", b.String())
}

// forgetLoans stops every leak timer: the pool is closed.
func (p *Pool[T]) forgetLoans() {
	p.loansMu.Lock()
	loans := p.loans
	p.loans = nil
	p.loansMu.Unlock()
	for _, l := range loans {
		l.timer.Stop()
	}
}

// get is Get, or with !wait TryGet, which looks first in slot home of
// the rack (see actors.Home).
func (p *Pool[T]) get(ctx context.Context, wait bool, home int) (T, error) {
	var zero T
	if ctx == nil {
		return zero, errNilContext
	}
	if p.closing.Load() {
		return zero, ErrClosed
	}
	if ctx.Err() != nil {
		return zero, ctxError(ctx, "get")
	}
	if item, ok := p.rack.Take(home); ok {
		return p.lend(item)
	}
	t := p.tickets.Get().(*ticket[T])
	tk := &t.take
	tk.Now, tk.Wait, tk.Slot = p.stamp(p.stampTake), wait, &t.slot
	tk.Deadline = 0
	if p.stampTake { // only the ward's holds look at the deadline
		tk.Deadline = deadlineOf(ctx, p.eng.Clock(), tk.Now)
	}
	t.slot.Ask(p.ref, tk)
	var a actors.Answer[T]
	if t.slot.Ready() { // answered already when the actor ran inline
		a = t.slot.Take()
		p.tickets.Put(t)
	} else {
		a = p.await(ctx, t)
		if a.Err == errWithdrawn {
			return zero, ctxError(ctx, "get")
		}
	}
	switch {
	case errors.Is(a.Err, actors.ErrHeld):
		return zero, &WaitError{Wait: a.After, By: holder(a.Why)}
	case a.Err != nil:
		return zero, refusal(a.Err)
	case a.Verdict == policy.Ready && a.Check:
		return p.checkOut(ctx, a.Item, wait)
	case a.Verdict == policy.Ready:
		return p.lend(a.Item)
	case a.Verdict == policy.Make:
		item, err := p.make(ctx, a.Gen)
		if err == errOutdated { // opened for a generation a Reset ended: closed, take again
			return p.get(ctx, wait, home)
		}
		if err != nil {
			return zero, err
		}
		return p.lend(item)
	case a.Verdict == policy.Shed:
		return zero, shedError(a.Why)
	case !wait: // Wait or Later: nothing to be had now
		return zero, ErrNoneIdle
	}
	// A waiting Take parks on Wait and Later; it is never answered either.
	return zero, fmt.Errorf("moonpool: get: unexpected answer %v", a.Verdict)
}

// errOutdated marks an Open begun before a Reset and done after it: the
// pool refused the resource, and the Get takes again.
var errOutdated = errors.New("moonpool: opened before a Reset")

// errWithdrawn marks a Take withdrawn because its ctx ended.
var errWithdrawn = errors.New("moonpool: withdrawn")

// errNilContext answers a call given a nil ctx.
var errNilContext = errors.New("moonpool: nil Context")

// deadlineOf is ctx's deadline on the engine's clock c, read at now: 0
// for none, and the end of the clock for one too far off to count.
func deadlineOf(ctx context.Context, c Clock, now int64) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	left := until(c, dl)
	switch {
	case left <= 0:
		return now - 1 // passed already, in all but name
	case int64(left) > math.MaxInt64-now:
		return math.MaxInt64
	}
	return now + int64(left)
}

// await waits for a parked Take's answer, or withdraws it when ctx ends:
// then the one answer it gets is handed back and errWithdrawn returned.
func (p *Pool[T]) await(ctx context.Context, t *ticket[T]) actors.Answer[T] {
	if t.slot.Await(p.ref, ctx.Done()) {
		a := t.slot.Take()
		p.tickets.Put(t)
		return a
	}
	p.ref.Send(&actors.Cancel[T]{Take: &t.take})
	t.slot.Await(p.ref, nil) // exactly one answer, whichever came first
	a := t.slot.Take()
	// t stays out of the pool: the Cancel naming it may still be queued.
	if a.Err == nil {
		p.giveBack(a)
	}
	return actors.Answer[T]{Err: errWithdrawn}
}

// stamp is the engine's time if want, else 0: "not read" (see
// actors.SpawnPool).
func (p *Pool[T]) stamp(want bool) int64 {
	if want {
		return p.eng.Now()
	}
	return 0
}

// giveBack returns what a withdrawn Take was granted in the same instant.
func (p *Pool[T]) giveBack(a actors.Answer[T]) {
	switch a.Verdict {
	case policy.Ready:
		_ = p.give(a.Item)
	case policy.Make:
		p.ref.Send(&actors.Release{Now: p.eng.Now()})
	}
}

// refusal is an actor's error as the client returns it: a stopped actor is
// a closed pool; every other sentinel is the client's already.
func refusal(err error) error {
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	return err
}

// ctxError is ctx's error for the call op, with its cause when the cause
// says more.
func ctxError(ctx context.Context, op string) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("moonpool: %s: %w (%w)", op, err, cause)
	}
	return fmt.Errorf("moonpool: %s: %w", op, err)
}

// opening is one Open under way and the Get waiting for it. Whichever of
// the two moves state first decides where the resource goes: to the Get, or,
// once the Get has given up, to the pool.
type opening[T comparable] struct {
	state atomic.Int32 // underway, then handed or abandoned
	done  chan made[T] // room for one: the Open goroutine never blocks on it
}

const (
	underway int32 = iota
	handed
	abandoned
)

type made[T comparable] struct {
	item T
	err  error
}

// make runs Open on a goroutine of its own for the room the actor reserved
// in generation gen, and waits for it, or for ctx.
func (p *Pool[T]) make(ctx context.Context, gen uint32) (T, error) {
	var zero T
	defer p.timed(p.eng.Now())
	if p.closing.Load() || !p.startOpen() {
		p.ref.Send(&actors.Release{Now: p.eng.Now()})
		return zero, ErrClosed
	}
	o := &opening[T]{done: make(chan made[T], 1)}
	go p.opener(openContext{Context: p.kill, values: ctx}, gen, o)
	select {
	case r := <-o.done:
		return r.item, r.err
	case <-ctx.Done():
		if o.state.CompareAndSwap(underway, abandoned) {
			return zero, ctxError(ctx, "get")
		}
		r := <-o.done // handed over just now: take it
		return r.item, r.err
	}
}

const noMoreOpens = int64(1) << 62

// startOpen counts one more Open goroutine, unless Close has stopped them.
func (p *Pool[T]) startOpen() bool {
	for {
		v := p.opens.Load()
		if v&noMoreOpens != 0 {
			return false
		}
		if p.opens.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// endOpen counts one Open goroutine out; the last one after stopOpens
// closes opened.
func (p *Pool[T]) endOpen() {
	if p.opens.Add(-1) == noMoreOpens {
		close(p.opened)
	}
}

// stopOpens lets no more Open start; opened closes once none is running.
func (p *Pool[T]) stopOpens() {
	if p.opens.Or(noMoreOpens) == 0 {
		close(p.opened)
	}
}

// opener opens one resource and tells the actor how it went.
func (p *Pool[T]) opener(ctx context.Context, gen uint32, o *opening[T]) {
	defer p.endOpen()
	item, err := p.safeOpen(ctx)
	var r made[T]
	switch {
	case err != nil && p.kill.Err() != nil:
		// The pool closed under the Open: no news about the backend.
		p.ref.Send(&actors.Release{Now: p.eng.Now()})
		r.err = fmt.Errorf("%w: open cut short: %w", ErrClosed, err)
	case err != nil:
		p.ref.Send(&actors.Unmade{Now: p.eng.Now()})
		r.err = &OpenError{Err: err}
	default:
		m := &actors.Made[T]{Now: p.eng.Now(), Item: item, Gen: gen, Reply: make(chan actors.Answer[T], 1)}
		p.ref.Send(m)
		if a := <-m.Reply; errors.Is(a.Err, actors.ErrDuplicate) {
			// On the books already: it leaves them once, not here.
			r.err = &OpenError{Err: ErrDuplicate}
		} else if errors.Is(a.Err, actors.ErrOutdated) {
			// Never the caller's: a failed Close is counted, and the Get
			// takes again all the same.
			_ = p.closeItem(item)
			r.err = errOutdated
		} else if a.Err != nil || !a.Kept {
			r.err = ErrClosed
			if cerr := p.closeItem(item); cerr != nil {
				r.err = errors.Join(ErrClosed, cerr)
			}
		} else {
			r.item = item
		}
	}
	if o.state.CompareAndSwap(underway, handed) {
		o.done <- r
		return
	}
	// The Get gave up: a resource it would have had goes to the pool.
	if r.err == nil {
		_ = p.give(r.item)
	}
}

// safeOpen runs the user's Open, turning a panic into an error: a bug in a
// dial function must not take the server down from a goroutine of ours.
func (p *Pool[T]) safeOpen(ctx context.Context) (item T, err error) {
	defer func() {
		if v := recover(); v != nil {
			p.panics.Add(1)
			err = newPanicError(v)
		}
	}()
	return p.open(ctx)
}

// openContext is Open's context: the caller's values, the pool's
// cancellation. It has no deadline of its own.
type openContext struct {
	context.Context // the pool's: done when the pool closes
	values          context.Context
}

func (c openContext) Value(key any) any { return c.values.Value(key) }

// Put hands back a resource Get lent. If the pool will not keep it (it is
// closing, the idle limit is full, the resource has lived past Life, it
// was lent before a Reset, SetLimits left the pool over its new Size, or
// PoolConfig.Reuse said no), Put closes it, returning a *CloseError if
// that Close failed.
//
// Put of a resource this pool has not lent — never lent, or already put
// back — returns ErrNotLent and leaves it alone, before Close as after it.
// Once the pool's actor has stopped (Close has returned, or the engine shut
// down) there are no books left to check against, and whatever is put is
// closed; put each resource back exactly once. The pool cannot tell one
// holder from the next: with PoolConfig.Reuse set, Reuse runs before the
// books are asked, so a stray second Put calls Reuse on a resource that
// another caller may hold by then (and a false closes nothing: the Put is
// refused with ErrNotLent all the same).
//
// Put takes no ctx because it waits for nothing but the pool actor's
// answer, which never waits itself; it runs the pool's Close, when it must,
// on the caller's goroutine. A resource Get took from the pool's rack goes
// back there with one atomic operation while nobody waits in line (see
// Get), and to the actor otherwise.
func (p *Pool[T]) Put(item T) error {
	return p.put(item, actors.Home()) // Home reads this frame, laid out as Get's
}

// put is Put, which lays item in slot home of the rack (see actors.Home)
// if it came from there.
func (p *Pool[T]) put(item T, home int) error {
	if p.leakAfter > 0 {
		p.forgetLoan(item)
	}
	if p.reuse != nil && !p.reusable(item) {
		return p.discard(item, actors.Unwanted)
	}
	if p.rack.Give(item, home) {
		return nil
	}
	return p.give(item)
}

// reusable asks PoolConfig.Reuse, reading a panic as no: a resource its
// own check could not judge is not worth lending again.
func (p *Pool[T]) reusable(item T) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			p.panics.Add(1)
			ok = false
		}
	}()
	return p.reuse(item)
}

// give hands item back: for Put, or a resource granted to a Get that gave
// up in the same instant, which was never its caller's, so it has no loan
// and nothing has been done with it for Reuse to judge.
func (p *Pool[T]) give(item T) error {
	a := p.ask(item, giving, 0)
	switch {
	case errors.Is(a.Err, actors.ErrNotLent):
		return ErrNotLent
	case a.Err != nil || !a.Kept:
		return p.closeItem(item)
	}
	return nil
}

// unrack hands home a resource a Get or Put found revoked on the rack
// (see actors.Rack), closing it if the pool will not keep it.
func (p *Pool[T]) unrack(item T) {
	if a := p.ask(item, unracking, 0); a.Err != nil || !a.Kept {
		_ = p.closeItem(item)
	}
}

// ticket is one caller's reusable request: a Take, or a strict Give or
// Drop, and the slot its answer comes to.
type ticket[T comparable] struct {
	take actors.Take[T]
	give actors.Give[T]
	drop actors.Drop[T]
	slot engine.Reply[actors.Answer[T]]
}

// homing is how ask sends a resource home.
type homing uint8

const (
	giving    homing = iota // a strict Give: Put
	dropping                // a strict Drop for a cause: Discard
	unracking               // a Give of a resource the rack handed home (Racked)
)

// ask sends item home as how says and waits for the answer.
func (p *Pool[T]) ask(item T, how homing, cause actors.Cause) actors.Answer[T] {
	var zero T
	t := p.tickets.Get().(*ticket[T])
	if how == dropping {
		t.drop = actors.Drop[T]{Now: p.eng.Now(), Item: item, Strict: true, Cause: cause, Slot: &t.slot}
		t.slot.Ask(p.ref, &t.drop)
	} else {
		t.give = actors.Give[T]{Now: p.stamp(p.stampGive), Item: item, Strict: how == giving, Racked: how == unracking, Slot: &t.slot}
		t.slot.Ask(p.ref, &t.give)
	}
	t.slot.Await(p.ref, nil)
	a := t.slot.Take()
	t.give.Item, t.drop.Item = zero, zero // the pool keeps no resource alive
	p.tickets.Put(t)
	return a
}

// Discard says a lent resource broke: the pool forgets it, freeing its
// room for a new one, and Discard closes it, returning a *CloseError if
// that Close failed. Use it for a connection found dead. Discard of a
// resource this pool has not lent returns ErrNotLent and closes nothing;
// after the pool's actor has stopped the resource is closed unchecked.
func (p *Pool[T]) Discard(item T) error {
	if p.leakAfter > 0 {
		p.forgetLoan(item)
	}
	return p.discard(item, actors.Broken)
}

// discard takes a lent resource off the books for cause and closes it.
func (p *Pool[T]) discard(item T, cause actors.Cause) error {
	if a := p.ask(item, dropping, cause); errors.Is(a.Err, actors.ErrNotLent) {
		return ErrNotLent
	}
	return p.closeItem(item)
}

// closeItem runs the user's Close, counting a failure. A panic in it is
// recovered and reported as a failure: Close runs on the pool's own
// goroutines too, where a panic would end the process.
func (p *Pool[T]) closeItem(item T) (err error) {
	if p.close == nil {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			p.panics.Add(1)
			p.closeFailures.Add(1)
			err = &CloseError{Count: 1, Err: newPanicError(v)}
		}
	}()
	if err := p.close(item); err != nil {
		p.closeFailures.Add(1)
		return &CloseError{Count: 1, Err: err}
	}
	return nil
}

// closer closes what the actor retires — stale, evicted, surplus — off the
// actor and off the callers' path. One per pool; it ends in Close.
func (p *Pool[T]) closer() {
	defer close(p.quitted)
	for {
		select {
		case <-p.retired:
			_ = p.collect()
		case <-p.quit:
			return
		}
	}
}

// collect closes every resource the actor has retired, and reports the
// Close failures.
func (p *Pool[T]) collect() error {
	m := &actors.Collect[T]{Reply: make(chan []T, 1)}
	p.ref.Send(m)
	return p.closeAll(<-m.Reply)
}

// closeAll closes items and reports the Close failures.
func (p *Pool[T]) closeAll(items []T) error {
	var errs []error
	for _, item := range items {
		if err := p.closeItem(item); err != nil {
			errs = append(errs, err.(*CloseError).Err)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return &CloseError{Count: 1, Err: errs[0]}
	}
	return &CloseError{Count: len(errs), Err: errors.Join(errs...)}
}

// Close shuts the pool. From its start Get returns ErrClosed, waiting
// callers are answered ErrClosed, Opens under way are cancelled, and idle
// resources are closed. It then waits, within ctx, for lent resources to
// come home through Put or Discard, closing each as it does; one put back
// after ctx ended is still closed. Close returns once the pool's actor and
// goroutines have stopped.
//
// It returns an error matching ctx.Err() if resources were still lent when
// ctx ended, one matching engine.ErrStopped if the pool's actor was stopped
// under it (a Shutdown or another Close whose ctx ended first; the idle
// resources are closed all the same), and a *CloseError if any Close
// failed. Calling Close again, or after the engine's Shutdown (which closes
// every pool this way), does nothing and returns nil.
//
// ctx bounds the wait for lent resources, not the user's own functions:
// Close waits for an Open under way to return (its ctx is cancelled) and
// runs PoolConfig.Close on what it retires, so an Open or a Close that
// hangs holds Close, and the engine's Shutdown, up with it.
func (p *Pool[T]) Close(ctx context.Context) error {
	// By the Ref, not the name: the name may belong to a newer pool by now.
	return p.ref.Stop(ctx)
}

// shutdown is the pool's half of Close, run once, by Close through the
// engine or by the engine's Shutdown, before the actor stops.
func (p *Pool[T]) shutdown(ctx context.Context) error {
	<-p.ready
	var err error
	p.once.Do(func() { err = p.drain(ctx) })
	return err
}

func (p *Pool[T]) drain(ctx context.Context) error {
	p.closing.Store(true)
	p.stop() // cancel Opens under way: nothing new is made for a closing pool
	<-p.filled
	if p.unwatch != nil {
		p.unwatch()
	}
	if p.leave != nil {
		p.leave()
	}
	// From here on this goroutine closes what is retired, so that the
	// failures of closes Close causes are Close's to report.
	close(p.quit)
	<-p.quitted
	c := &actors.Close{Now: p.eng.Now(), Reply: make(chan actors.Stats, 1)}
	p.ref.Send(c)
	last := <-c.Reply // the books as Close found them; zero if the actor had stopped
	var errs []error
	if !last.Closed {
		// Stopped under us (a Shutdown whose ctx ended first): the actor
		// handed what it held to leftovers as it stopped, closed below.
		errs = append(errs, fmt.Errorf("moonpool: close: %w before Close reached it", engine.ErrStopped))
	}
	if err := p.collect(); err != nil {
		errs = append(errs, err)
	}
	d := &actors.Drained{Reply: make(chan actors.Stats, 1)}
	p.ref.Send(d)
	var out actors.Stats // what was outstanding when the wait ended
	select {
	case out = <-d.Reply: // drained, or answered as the actor was stopped under us
	case <-ctx.Done():
		out = p.inspect() // a drain that finished in the same instant is no failure
	}
	if !out.Closed {
		// Refused: the actor was stopped under us, by a Shutdown or a Close
		// whose ctx ended. Its books as it stopped say what was still out.
		out = p.stoppedBooks()
	}
	if out.Closed {
		last = out
	}
	if out.Busy > 0 {
		cause := context.Cause(ctx) // engine.ErrStopped when Shutdown stopped the actor
		if cause == nil {
			cause = engine.ErrStopped
		}
		errs = append(errs, fmt.Errorf("moonpool: close: %d still lent and %d being opened: %w", out.Busy-out.Opening, out.Opening, cause))
	}
	p.stopOpens()
	<-p.opened
	if err := p.collect(); err != nil {
		errs = append(errs, err)
	}
	select {
	case items := <-p.leftovers:
		if err := p.closeAll(items); err != nil {
			errs = append(errs, err)
		}
	default:
	}
	s := p.inspect()
	if !s.Closed { // refused by a stopped actor: keep the last real snapshot
		if b := p.stoppedBooks(); b.Closed {
			last = b
		}
		s = last
		s.Live, s.Idle, s.Busy, s.Opening, s.Waiting = 0, 0, 0, 0, 0
	}
	p.final.Store(&s)
	p.forgetLoans()
	return errors.Join(errs...)
}

// stoppedBooks is the pool's books as its actor stopped, once it has; the
// zero Stats before. It may be read more than once.
func (p *Pool[T]) stoppedBooks() actors.Stats {
	select {
	case s := <-p.lastBooks:
		p.lastBooks <- s // room for one, and nobody else sends: it goes back at once
		return s
	default:
		return actors.Stats{}
	}
}

func (p *Pool[T]) inspect() actors.Stats {
	m := &actors.Inspect{Now: p.eng.Now(), Reply: make(chan actors.Stats, 1)}
	p.ref.Send(m)
	return <-m.Reply
}

// SetLimits holds the pool to limits from now on, as PoolConfig.Limits is
// read, while it runs. A larger Size serves callers waiting in line at
// once. A smaller one, or a smaller Idle, closes the surplus idle
// resources now (the longest idle first, counted as Surplus; without Keep
// or Life a Put onto the pool's rack notes no time, and what lies there
// counts as put back when SetLimits runs) and the
// surplus lent ones as they come home through Put, so none is taken from
// its holder and none is lent twice. A new Keep or Life applies to the
// resources already held.
//
// It blocks until the pool has applied the limits, which never waits on
// anything but the pool's actor, and returns ErrClosed once the pool is
// closing.
func (p *Pool[T]) SetLimits(limits Limits) error {
	if p.closing.Load() {
		return ErrClosed
	}
	// One SetLimits at a time, so the limits Stats reports are the ones
	// the actor applied last.
	p.limitsMu.Lock()
	defer p.limitsMu.Unlock()
	m := &actors.SetLimits{Now: p.eng.Now(), Limits: limits, Reply: make(chan error, 1)}
	p.ref.Send(m)
	if err := <-m.Reply; err != nil {
		return ErrClosed // closed, or its actor stopped
	}
	p.holdLimits(limits)
	return nil
}

// holdLimits keeps limits, as the pool reads them, for Stats.
func (p *Pool[T]) holdLimits(limits Limits) {
	// A policy.Pool clamps what it is given; asking one keeps Stats true
	// to the pool's own reading.
	l := policy.NewPool[int](limits, policy.Ward{}).Limits()
	p.limits.Store(&l)
}

// Reset makes the pool start afresh, for a backend whose every connection
// is suspect (after a failover, or a rotation of credentials): every idle
// resource is closed now, every lent one is closed when it comes home
// through Put, and Gets from now on get resources opened after the call.
// An Open begun before the call and done after it is closed too, and its
// Get, if still waiting, takes again (a fresh Open, or what comes home
// first). Every such close is counted in Stats.Outdated. The limits, the
// ward and the callers in line are unchanged: they are served by fresh
// opens as usual.
//
// It blocks until the pool has started the new generation (the idle are
// closed in the background) and returns ErrClosed once the pool is
// closing.
func (p *Pool[T]) Reset() error {
	if p.closing.Load() {
		return ErrClosed
	}
	m := &actors.Reset{Now: p.eng.Now(), Reply: make(chan error, 1)}
	p.ref.Send(m)
	if err := <-m.Reply; err != nil {
		return ErrClosed // closed, or its actor stopped
	}
	return nil
}

// Stats is a snapshot of a pool, as sql.DBStats is of a database: what it
// holds now, its limits now, and what it has done since NewPool. Counts
// are totals since then. Times are on the engine's clock. Pool.Stats fills
// every field.
type Stats struct {
	// Live is how many resources exist: idle, lent and being opened.
	Live int
	// Idle is how many sit in the pool, ready to lend.
	Idle int
	// Busy is how many are lent out or being opened.
	Busy int
	// Waiting is how many callers of Get are in line.
	Waiting int

	// Max is Limits.Size as the pool holds it now: the most live at once,
	// 0 for no limit. It follows SetLimits.
	Max int
	// MaxIdle is Limits.Idle as the pool holds it now: the most idle at
	// once, 0 for no limit. It follows SetLimits.
	MaxIdle int
	// MinIdle is Limits.MinIdle as the pool holds it now, never above a
	// MaxIdle. It follows SetLimits.
	MinIdle int

	// Gets counts calls of Get and TryGet on the open pool. A Get that
	// takes again, after a failed Check or a Reset, counts again.
	Gets int64
	// EmptyGets counts Gets that found nothing idle, and waited or opened.
	EmptyGets int64
	// GetTime is the total time Gets spent in line, opening and checking.
	// A Get served from the idle at once is not timed.
	GetTime time.Duration
	// Waited counts Gets that waited in line and were then answered.
	Waited int64
	// WaitTime is the total time the Gets of Waited spent in line.
	WaitTime time.Duration
	// Cancelled counts Gets whose ctx ended while they waited in line.
	Cancelled int64

	// Shed counts Gets refused: ShedClosed, ShedOverloaded, ShedBreaker and
	// TooManyWaiting added up.
	Shed int64
	// ShedClosed counts Gets refused with ErrClosed as the pool closed:
	// those in line at Close, or reaching the pool as it closed.
	ShedClosed int64
	// ShedOverloaded counts Gets refused with ErrOverloaded by the ward's
	// shedder.
	ShedOverloaded int64
	// ShedBreaker counts Gets refused with ErrBreaker by the ward's breaker.
	ShedBreaker int64
	// TooManyWaiting counts Gets refused with ErrTooManyWaiting: MaxWaiting
	// callers were in line already.
	TooManyWaiting int64
	// HeldPastDeadline counts Gets answered at once with a *WaitError: the
	// ward held Opens back past their ctx's deadline.
	HeldPastDeadline int64

	// The Held counts are the times the ward or the fleet held an Open
	// back, by cause. A caller in line counts again each time it reaches
	// the front and is held. A count that keeps growing while callers wait
	// is a pool starved by its ward: a bucket too small for the rate at
	// which resources break, say.
	//
	// HeldBackoff counts holds by the backoff after a failed Open.
	HeldBackoff int64
	// HeldProbe counts holds while the one Open let through after a hold
	// is out as a probe.
	HeldProbe int64
	// HeldBucket counts holds by the ward's bucket, spacing Opens out.
	HeldBucket int64
	// HeldFleet counts holds by the pool's Fleet while it holds every
	// replica's Opens.
	HeldFleet int64
	// HeldRamp counts holds by the Fleet's ramp after a recovery.
	HeldRamp int64

	// Made counts resources Open made that the pool took on.
	Made int64
	// MakeFailures counts Opens that failed.
	MakeFailures int64
	// Duplicates counts resources Open made that the pool already held,
	// each refused with ErrDuplicate.
	Duplicates int64

	// Closes counts resources the pool let go for any reason: the eight
	// counts below added up.
	Closes int64
	// Stale counts resources a Get found idle past Keep or Life.
	Stale int64
	// Evicted counts resources the pool's timer retired for sitting idle
	// past Keep or living past Life.
	Evicted int64
	// Surplus counts resources closed because the idle limit was full,
	// they had lived past Life, or SetLimits left them over the limits.
	Surplus int64
	// Broken counts resources their holders discarded.
	Broken int64
	// Unreused counts resources closed on Put because PoolConfig.Reuse
	// said no.
	Unreused int64
	// CheckFailures counts resources closed because PoolConfig.Check
	// failed on them, before a loan or in the background.
	CheckFailures int64
	// Outdated counts resources closed because Reset was called while they
	// were idle, lent or being opened.
	Outdated int64
	// Shutdown counts resources closed because the pool closed: idle at
	// Close, or put back after it.
	Shutdown int64

	// Resets counts calls of Reset on the open pool.
	Resets int64
	// CloseFailures counts calls of PoolConfig.Close that returned an
	// error or panicked.
	CloseFailures int64
	// Panics counts calls of PoolConfig.Open, Close, Reuse or Check that
	// panicked. Each was recovered and read as that call's failure.
	Panics int64
	// Leaked counts resources reported lent longer than
	// PoolConfig.LeakAfter.
	Leaked int64

	// Refusal is the share of Opens the ward's breaker refuses now, from 0
	// to its cap; 0 without a breaker.
	Refusal float64
	// Holding is how much longer the ward's backoff holds Opens back after
	// a failure; 0 when it does not.
	Holding time.Duration
	// Probing is whether one Open is out as the probe after a failure, the
	// others waiting for its outcome.
	Probing bool
	// Fleet is the state of the pool's Fleet as the pool last heard it:
	// FleetOpen without one, and FleetAlone while the fleet cannot be
	// reached and the Ward alone decides.
	Fleet FleetState
}

// Stats takes a snapshot of the pool, a round trip to its actor. After
// Close it reports the pool as Close left it.
func (p *Pool[T]) Stats() Stats { return p.statsOf(p.books()) }

// books are the actor's books now, or as Close left them.
func (p *Pool[T]) books() actors.Stats {
	s := p.inspect()
	if p.ref.Stopped() {
		if f := p.final.Load(); f != nil {
			s = *f
		}
	}
	return s
}

// statsOf is the Stats of the actor's books s.
func (p *Pool[T]) statsOf(s actors.Stats) Stats {
	var limits Limits
	if l := p.limits.Load(); l != nil {
		limits = *l
	}
	return Stats{
		Live: s.Live, Idle: s.Idle, Busy: s.Busy, Waiting: s.Waiting,
		Max: s.Max, MaxIdle: limits.Idle, MinIdle: limits.MinIdle,

		Gets: s.Gets, EmptyGets: s.EmptyGets,
		GetTime: s.WaitTime + time.Duration(p.getTime.Load()),
		Waited:  s.Waited, WaitTime: s.WaitTime, Cancelled: s.Cancelled,

		Shed:             s.Shed + p.closedLends.Load(),
		ShedClosed:       s.ShedBy[policy.ReasonClosed] + p.closedLends.Load(),
		ShedOverloaded:   s.ShedBy[policy.ReasonShedder],
		ShedBreaker:      s.ShedBy[policy.ReasonBreaker],
		TooManyWaiting:   s.ShedWaiting,
		HeldPastDeadline: s.Held,
		HeldBackoff:      s.HeldBy[policy.ReasonBackoff],
		HeldProbe:        s.HeldBy[policy.ReasonProbe],
		HeldBucket:       s.HeldBy[policy.ReasonBucket],
		HeldFleet:        s.HeldBy[policy.ReasonFleet],
		HeldRamp:         s.HeldBy[policy.ReasonRamp],

		Made: s.Made, MakeFailures: s.MakeFailures, Duplicates: s.Duplicates,

		Closes: s.Stale + s.Evicted + s.Surplus + s.Broken + s.Unreused +
			s.CheckFailures + s.Outdated + s.Shutdown,
		Stale: s.Stale, Evicted: s.Evicted, Surplus: s.Surplus, Broken: s.Broken,
		Unreused: s.Unreused, CheckFailures: s.CheckFailures,
		Outdated: s.Outdated, Shutdown: s.Shutdown,

		Resets:        s.Resets,
		CloseFailures: p.closeFailures.Load(),
		Panics:        p.panics.Load(),
		Leaked:        p.leaked.Load(),

		Refusal: s.Refusal, Holding: s.Holding, Probing: s.Probing,
		Fleet: s.Fleet,
	}
}
