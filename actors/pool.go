package actors

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// PoolConfig configures a pool actor.
type PoolConfig struct {
	Limits policy.Limits
	Ward   policy.Ward // Ward.Draw is ignored: the actor draws from its own source, seeded by Seed
	// Seed seeds the backoff's jitter. Zero, the default, draws a random
	// seed for each pool, so that replicas of one service started from the
	// same binary do not back off in lockstep; a test sets its own.
	Seed uint64
	// MaxWaiting caps the callers parked in the FIFO; past it a waiting Take
	// is answered Shed with ErrTooManyWaiting. Zero or less is no cap.
	MaxWaiting int
	// Retired, if not nil, is signalled (without blocking) whenever the pool
	// has retired resources waiting to be collected with Collect.
	Retired chan<- struct{}
	// Check says the owner checks resources before lending them: a Take's
	// Answer.Check is set for a resource that went unused and unchecked
	// for CheckIdle or longer (0: every one).
	Check     bool
	CheckIdle time.Duration
	// KeepAlive, if above zero, has the owner check, every KeepAlive, the
	// idle resources that went unused and unchecked that long: Checks is
	// signalled (without blocking) each period, and the owner then asks
	// Due for one after another, handing each back with Checked, until
	// Due answers Wait. The timer starts with the first Tick the owner
	// sends.
	KeepAlive time.Duration
	Checks    chan<- struct{}
	// Fills, if not nil, is signalled (without blocking) whenever fewer
	// than Limits.MinIdle are idle and no background make is under way:
	// the owner then asks Fill until it is told Wait, Later or Shed.
	Fills chan<- struct{}
	// Leftovers, if not nil, must be a chan []T with room for one: when the
	// actor stops, whatever it still holds idle or retired and uncollected
	// goes there, once, so that an actor stopped before a Close could
	// collect (a Shutdown whose ctx ended first) loses nothing. Any other
	// type is ignored.
	Leftovers any
	// Last, if not nil, must have room for one: when the actor stops, its
	// Stats as it stopped go there, once. An owner whose requests the
	// stopped actor refuses reads there what was still lent.
	Last chan<- Stats
	// Fleet, if not nil, hears what the pool's fleet must know (see
	// FleetReport). Failed makes are reported in batches, at most one
	// report per FleetBatch: the first failure after a quiet batch at
	// once, the rest at the batch's end. A fleet probe's outcome is
	// reported at once. A make that works is never reported, so a healthy
	// pool never calls it. The actor calls it, so it must not block; a
	// panic in it is recovered and logged. The fleet's view comes back in
	// Fleet messages.
	Fleet func(FleetReport)
	// FleetBatch is the least time between two reports of failures, on the
	// engine's clock; <= 0 is 10 ms.
	FleetBatch time.Duration
}

// fleetBatch is PoolConfig.FleetBatch's default: long enough to gather the
// failures of a pool's callers in an outage into one report, short next to
// the time a fleet takes to hold.
const fleetBatch = 10 * time.Millisecond

// SpawnPool starts a pool actor on e under name (a fresh name when empty).
// shutdown is the hook the engine runs before stopping it (see
// engine.Engine.Spawn); a client passes its own Close. The books live in a
// value the actor instance only points to, and the engine's supervision
// resumes a failed actor rather than restarting it, so a panic never loses a
// lent resource.
//
// Take and Give may come unstamped (Now 0) when their answer cannot depend
// on the time, as policy.Stamps says: a Take unless the pool has a ward, a
// Give unless it also has Keep or Life. An unstamped Take judges staleness
// by the latest time the pool has seen, so with Keep or Life it may lend a
// resource that went stale since; the eviction timer, which reads the
// clock when it fires, retires every idle resource at its deadline, so that
// happens only while the timer is late, and by no more than its lateness.
// The actor reads the clock itself when a caller parks or is served from
// the FIFO, so Stats.WaitTime is exact.
func SpawnPool[T comparable](e *engine.Engine, name string, cfg PoolConfig, shutdown func(context.Context) error) (*engine.Ref, error) {
	ref, _, err := SpawnPoolRack[T](e, name, cfg, shutdown, nil)
	return ref, err
}

// SpawnPoolRack is SpawnPool with a Rack (see Rack), for a client whose
// Gets and Puts try the rack before they ask the actor. back is how a
// caller that comes across a revoked resource hands it home: a Give with
// Racked set, closing the resource if the answer is not Kept. With a nil
// back there is no rack. The rack stays shut while the pool checks
// resources before lending them (PoolConfig.Check) or its ward has a
// shedder, whose count of what is lent the rack would bypass.
func SpawnPoolRack[T comparable](e *engine.Engine, name string, cfg PoolConfig, shutdown func(context.Context) error, back func(T)) (*engine.Ref, *Rack[T], error) {
	if e == nil {
		return nil, nil, errNoEngine
	}
	b := newBooks[T](e, cfg)
	if back != nil {
		b.rack = &Rack[T]{clock: e.Now, back: back}
		b.rackOK = rackAllowed(cfg.Check, cfg.Ward)
		b.rackLimits(b.pool.Limits())
	}
	ref, err := e.Spawn(name, &poolActor[T]{b: b}, shutdown)
	if err != nil {
		return nil, nil, err
	}
	return ref, b.rack, nil
}

// books is everything a pool actor knows. It outlives any one actor
// instance.
type books[T comparable] struct {
	pool    *policy.Pool[T]
	engine  *engine.Engine
	self    *engine.Ref
	max     int
	retired chan<- struct{}
	fills   chan<- struct{}
	filling int // background makes under way, after a Fill's Make
	minIdle int // Limits.MinIdle as the pool reads it: 0 keeps topUp off the hot path

	check     bool          // Answer.Check is wanted
	checkIdle time.Duration // for Answer.Check
	keepAlive time.Duration
	nextCheck int64           // when the keep-alive next signals checks
	checks    chan<- struct{} // signalled each keep-alive period
	leftovers chan []T        // what stop hands over, if the owner asked
	last      chan<- Stats    // the books as the actor stopped, if the owner asked
	rng       *rand.Rand

	q queue[*Take[T]] // parked Takes, in one line

	ageless bool // neither Keep nor Life: no resource ever has a deadline

	retire  []T          // retired resources for the client to close
	drained []chan Stats // Drained requests waiting for Busy() == 0

	timer   engine.Timer
	timerAt int64
	later   int64 // when a parked caller may next be made for, after Later; 0 if none

	stats Stats

	rack   *Rack[T]         // nil without one
	rackOK bool             // the pool's settings allow the rack at all
	pop    map[T]*racked[T] // the records of what the rack has lent, as callers see them
	racked int              // how many of them are on the rack or out from it

	fleet fleetBooks // what the pool owes its fleet, if it has one

	inFlight // the request being handled, until it is answered or parked
	// taking is that request when it is a Take: answer and refuseHeld ask
	// whether the Take they answer is it with one pointer compare.
	taking *Take[T]
}

func newBooks[T comparable](e *engine.Engine, cfg PoolConfig) *books[T] {
	b := &books[T]{engine: e, max: cfg.MaxWaiting, retired: cfg.Retired, fills: cfg.Fills,
		check: cfg.Check, checkIdle: cfg.CheckIdle, keepAlive: cfg.KeepAlive, checks: cfg.Checks}
	b.leftovers, _ = cfg.Leftovers.(chan []T)
	b.last = cfg.Last
	b.fleet = fleetBooks{report: cfg.Fleet, batch: cfg.FleetBatch}
	if b.fleet.batch <= 0 {
		b.fleet.batch = fleetBatch
	}
	b.q.init()
	b.q.newLine(-1)
	seed := cfg.Seed
	for seed == 0 {
		seed = rand.Uint64() // the package source is seeded at random per process
	}
	b.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ward := cfg.Ward
	ward.Draw = b.rng.Float64
	b.pool = policy.NewPool[T](cfg.Limits, ward)
	b.minIdle = b.pool.Limits().MinIdle
	_, timed := policy.Stamps(cfg.Limits, policy.Ward{})
	b.ageless = !timed
	return b
}

type poolActor[T comparable] struct{ b *books[T] }

// Bind gives the books their own address, for the timers' Ticks.
func (a *poolActor[T]) Bind(r *engine.Ref) { a.b.self = r }

// Receive runs one message. A panic (a bug: policy never panics on input)
// goes to the engine's supervision, which resumes this same actor with its
// books. The request being handled is refused (ErrStopped) if, and only if,
// it had not been answered or parked yet, so it gets exactly one answer.
func (a *poolActor[T]) Receive(c actor.Context) { a.Handle(c.Message()) }

// Handle runs one message; the engine calls it straight for user messages
// (see engine.Handler), and Receive for the rest.
func (a *poolActor[T]) Handle(msg any) {
	b := a.b
	defer b.unanswered()
	// The requests of every Get and Put are taken in hand by their type,
	// which costs less than hold's assertion to an interface.
	b.taking = nil // a Take left unanswered last time was refused then
	switch m := msg.(type) {
	case *Take[T]:
		b.taking = m
		b.holding(m)
		b.take(m)
		return
	case *Give[T]:
		b.holding(m)
		if m.Racked {
			b.handedIn(m)
		} else {
			b.give(m)
		}
		return
	}
	b.hold(msg)
	switch m := msg.(type) {
	case *Made[T]:
		b.made(m)
	case *Unmade:
		b.unmade(m.Now)
		b.settle(m.Now)
	case *Release:
		b.pool.Release()
		b.settle(m.Now)
	case *Drop[T]:
		b.drop(m)
	case *Cancel[T]:
		b.cancel(m.Take)
	case *Tick:
		b.tick(m.Now)
	case *Heat:
		b.pool.Heat(m.Value, m.Now)
	case *Fleet:
		if m.Seq != 0 {
			if m.Seq <= b.fleet.seq {
				return // overtaken by a later view
			}
			b.fleet.seq = m.Seq
		}
		now := b.stamped(m.Now)
		b.pool.SetFleet(m.View, now)
		b.settle(now)
	case *SetLimits:
		b.setLimits(m)
	case *Fill[T]:
		b.fill(m)
	case *Filled[T]:
		b.filled(m)
	case *Unfilled:
		b.unfilled(m)
	case *Due[T]:
		a := Answer[T]{Verdict: policy.Wait}
		if !b.pool.Closed() {
			if item, ok := b.pool.Due(b.stamped(m.Now), b.keepAlive); ok {
				a = Answer[T]{Verdict: policy.Ready, Item: item}
			}
		}
		m.Reply <- a
		b.answered()
	case *Checked[T]:
		b.checked(m)
	case *Reset:
		b.reset(m)
	case *Close:
		b.close(m.Now)
		m.Reply <- b.snapshot()
		b.answered()
	case *Drained:
		if b.pool.Busy() == 0 {
			m.Reply <- b.snapshot()
		} else {
			b.drained = append(b.drained, m.Reply)
		}
		b.answered()
	case *Collect[T]:
		out := b.retire
		b.retire = nil
		m.Reply <- out
		b.answered()
	case *Inspect:
		m.Reply <- b.inspect(m.Now)
		b.answered()
	case *inspect[T]:
		m.fn(b)
	case *actor.Stopping:
		b.stop()
	}
}

// inspect runs fn inside the actor: how tests read the books consistently
// and inject a failure.
type inspect[T comparable] struct{ fn func(*books[T]) }

func (b *books[T]) take(m *Take[T]) {
	now := m.Now // m is the caller's again once answered
	b.stats.Gets++
	if b.q.parked > 0 {
		// Parked callers are ahead: no overtaking, by a Take that waits or
		// by one that does not.
		if !m.Wait {
			b.answer(m, policy.Taken[T]{Verdict: policy.Wait})
			return
		}
		now = b.stamped(now)
		m.Now = now
		b.stats.EmptyGets++
		b.park(m)
		b.serve(now)
		return
	}
	if b.racked > 0 && b.pool.Idle() == 0 {
		b.sweep(now) // what lies on the rack comes before a make or a wait
	}
	t := b.decide(now)
	if m.Wait && b.held(m, now, t) {
		b.refuseHeld(m, t)
		return
	}
	if m.Wait && (t.Verdict == policy.Wait || t.Verdict == policy.Later) {
		if t.Verdict == policy.Later && t.Why != policy.ReasonProbe { // a probe's outcome re-serves the line itself
			b.wakeAt(now, t.After)
		}
		b.stats.EmptyGets++
		b.park(m)
		if b.rack != nil {
			b.serve(b.stamped(now)) // the rack, swept as it parked, may hold one now
		}
		return
	}
	if t.Verdict == policy.Make {
		b.stats.EmptyGets++
	}
	b.answer(m, t)
	if b.minIdle > 0 && t.Verdict == policy.Ready {
		b.topUp() // one fewer idle
	}
}

// decide asks the policy, retiring stale resources on the caller's behalf:
// the caller would only close them and ask again.
func (b *books[T]) decide(now int64) policy.Taken[T] {
	for {
		t := b.pool.Take(now)
		if t.Verdict == policy.Later {
			b.stats.HeldBy[t.Why]++
		}
		if t.Verdict != policy.Stale {
			return t
		}
		b.stats.Stale++
		b.retireItem(t.Item)
	}
}

// made registers what an Open made. A resource the pool holds already is
// refused: lending it would put one resource in two hands, and keeping the
// room reserved would leak it. One made for a pool that closed meanwhile is
// not kept: its caller closes it, as Close promised every Get from its start.
// Either way the room goes back without news for the ward, since the backend
// did nothing wrong.
func (b *books[T]) made(m *Made[T]) {
	now := m.Now // m is the caller's again once answered
	a, refused := b.unwanted(m.Item, m.Gen, now)
	if !refused {
		probe := b.pool.FleetProbe()
		b.pool.Made(m.Item, now)
		b.probed(now, probe)
		a.Kept = b.pool.Lent(m.Item)
		if a.Kept {
			b.stats.Made++
			b.rackOut(m.Item, now)
		}
	}
	m.Reply <- a
	b.answered()
	b.settle(now)
}

// unwanted refuses a resource made for room the pool reserved, when the
// pool holds it already, has closed since, or was Reset since the make
// began (gen is the make's), freeing the room (see made); refused is false
// when the pool may take it.
func (b *books[T]) unwanted(item T, gen uint32, now int64) (a Answer[T], refused bool) {
	switch {
	case b.pool.Holds(item):
		b.pool.Release()
		b.stats.Duplicates++
		return Answer[T]{Err: ErrDuplicate}, true
	case b.pool.Closed():
		b.pool.Release()
		b.stats.Shutdown++
		return Answer[T]{}, true
	case gen != uint32(b.pool.Gen()): // 2^32 Resets during one make are not a worry
		// The make worked, and the ward hears so; but the Reset said the
		// backend as it was is suspect, so the resource goes straight off
		// the books again, its room freed, and the caller closes it.
		probe := b.pool.FleetProbe()
		b.pool.Made(item, now)
		b.probed(now, probe)
		b.pool.Drop(item)
		b.stats.Outdated++
		return Answer[T]{Err: ErrOutdated}, true
	}
	return a, false
}

// held says whether a waiting Take can only time out: the ward holds makes
// back past its deadline and nothing is lent or being made that could come
// back to the pool first.
func (b *books[T]) held(m *Take[T], now int64, t policy.Taken[T]) bool {
	return t.Verdict == policy.Later && m.Deadline != 0 && b.pool.Busy() == 0 &&
		(m.Deadline <= now || int64(t.After) > m.Deadline-now)
}

// refuseHeld answers a Take that held says can only time out.
func (b *books[T]) refuseHeld(m *Take[T], t policy.Taken[T]) {
	b.stats.Held++
	m.answer(Answer[T]{Verdict: policy.Later, After: t.After, Why: t.Why, Err: ErrHeld})
	if b.taking == m {
		b.answered()
	}
}

func (b *books[T]) answer(m *Take[T], t policy.Taken[T]) {
	a := Answer[T]{Verdict: t.Verdict, Item: t.Item, After: t.After, Why: t.Why}
	if t.Verdict == policy.Make {
		a.Gen = uint32(b.pool.Gen())
	}
	if b.check && t.Verdict == policy.Ready {
		sat, _ := b.pool.Sat(t.Item, 0)
		a.Check = sat >= b.checkIdle
	}
	if t.Verdict == policy.Ready && b.rack != nil {
		b.rackOut(t.Item, m.Now)
	}
	if t.Verdict == policy.Shed {
		b.stats.Shed++
		b.stats.ShedBy[t.Why]++
		if t.Why == policy.ReasonClosed {
			a.Err = ErrClosed
		}
	}
	if m.Slot != nil && b.self.Inline(m) {
		m.Slot.Set(a) // the caller is running this actor: it is not waiting
	} else {
		m.answer(a)
	}
	if b.taking == m {
		b.answered()
	}
}

// answered is inFlight's, forgetting the Take in hand too.
func (b *books[T]) answered() {
	b.taking = nil
	b.inFlight.answered()
}

func (b *books[T]) park(m *Take[T]) {
	if b.max > 0 && b.q.parked >= b.max {
		b.stats.Shed++
		b.stats.ShedWaiting++
		m.answer(Answer[T]{Verdict: policy.Shed, Err: ErrTooManyWaiting})
		b.answered()
		return
	}
	m.Now = b.stamped(m.Now) // its wait is timed from here
	b.q.park(0, m, 1)
	b.answered() // in the FIFO's custody: it is answered from there
	b.line(m.Now)
}

// stamped is now, or the engine's time if the request came unstamped (a
// Take or Give of a pool whose answers do not depend on the time): a
// caller's wait in the FIFO is timed all the same.
func (b *books[T]) stamped(now int64) int64 {
	if now == 0 {
		return b.engine.Now()
	}
	return now
}

// serve answers parked callers, oldest first, for as long as the pool has a
// resource or room for them. A returned resource therefore goes to the
// oldest waiter before anything new is made.
func (b *books[T]) serve(now int64) {
	for {
		m, ok := b.q.front(0)
		if !ok {
			return
		}
		t := b.decide(now)
		if b.held(m, now, t) {
			b.q.pop(0)
			b.refuseHeld(m, t)
			continue
		}
		if t.Verdict == policy.Later && t.Why != policy.ReasonProbe { // a probe's outcome re-serves the line itself
			b.wakeAt(now, t.After)
		}
		if t.Verdict == policy.Wait || t.Verdict == policy.Later {
			return
		}
		b.q.pop(0)
		b.stats.Waited++
		b.stats.WaitTime += time.Duration(max(now-m.Now, 0)) // m.Now is when it parked
		b.answer(m, t)
	}
}

func (b *books[T]) cancel(m *Take[T]) {
	if _, ok := b.q.withdraw(m); !ok {
		return // answered already: the caller gives back what it got
	}
	b.stats.Cancelled++
	m.answer(Answer[T]{Verdict: policy.Wait, Err: ErrCancelled})
}

func (b *books[T]) give(m *Give[T]) {
	now := m.Now // m is the caller's again once answered
	if b.q.parked > 0 || now == 0 && !b.ageless {
		// A parked caller may be served: its wait is timed. Or SetLimits
		// gave Keep or Life to a pool whose client does not stamp a Give.
		now = b.stamped(now)
	}
	item := m.Item
	if b.pop != nil {
		if !b.fromRack(item) {
			m.answer(Answer[T]{Err: ErrNotLent}) // on the rack: put back already
			b.answered()
			return
		}
		b.trim(now, 1)
	}
	closed := b.pool.Closed()
	outdated := b.pool.Outdated()
	var kept, lent bool
	if m.Unchecked {
		kept, lent = b.pool.GiveUnchecked(item, now)
	} else {
		kept, lent = b.pool.GiveLent(item, now)
	}
	if !lent && m.Strict {
		m.answer(Answer[T]{Err: ErrNotLent})
		b.answered()
		return
	}
	if !lent {
		probe := b.pool.FleetProbe()
		kept = b.pool.Give(item, now) // an unknown one may fill a reserved make
		b.probed(now, probe)
	}
	if !kept {
		b.unkept(closed, outdated)
	}
	if m.Slot != nil && b.self.Inline(m) {
		m.Slot.Set(Answer[T]{Kept: kept})
	} else {
		m.answer(Answer[T]{Kept: kept})
	}
	b.answered()
	b.cameHome(now, item)
}

// cameHome serves the line with what came home at now and, if item is
// still idle after that, arms the timer for its deadline, which may be the
// next.
func (b *books[T]) cameHome(now int64, item T) {
	b.settle(now)
	if !b.ageless {
		if at, ok := b.pool.DeadlineOf(item); ok {
			b.arm(now, at)
		}
	}
}

// unkept counts a resource coming home that the books would not keep,
// given whether the pool was closed and how many were outdated before.
func (b *books[T]) unkept(closed bool, outdated int) {
	switch {
	case closed:
		b.stats.Shutdown++
	case b.pool.Outdated() < outdated:
		b.stats.Outdated++
	default:
		b.stats.Surplus++
	}
}

// handedIn takes back a resource a caller found revoked on the rack (see
// Rack): the books lent it to the rack, and take it back as any Give.
func (b *books[T]) handedIn(m *Give[T]) {
	now := b.stamped(m.Now)
	if x := b.pop[m.Item]; x != nil {
		b.homed(x)
	}
	closed, outdated := b.pool.Closed(), b.pool.Outdated()
	kept, lent := b.pool.GiveLent(m.Item, now)
	if lent && !kept {
		b.unkept(closed, outdated)
	}
	item := m.Item                           // m is the caller's again once answered
	m.answer(Answer[T]{Kept: kept || !lent}) // not lent: not the caller's to close
	b.answered()
	b.cameHome(now, item)
}

// fromRack notes that item, if a caller took it from the rack, is coming
// home through the actor; false means it lies on the rack, so whoever
// gives it has given it twice.
func (b *books[T]) fromRack(item T) bool {
	x := b.pop[item]
	if x == nil {
		return true
	}
	switch x.state.Load() {
	case rackIn:
		return false
	case rackOut:
		b.homed(x)
	}
	return true
}

func (b *books[T]) drop(m *Drop[T]) {
	now := m.Now // m is the caller's again once answered
	if b.pop != nil && !b.fromRack(m.Item) {
		if m.Strict {
			m.answer(Answer[T]{Err: ErrNotLent})
		} else {
			m.answer(Answer[T]{})
		}
		b.answered()
		return
	}
	lent := b.pool.Lent(m.Item)
	if m.Strict && !lent {
		m.answer(Answer[T]{Err: ErrNotLent})
		b.answered()
		return
	}
	if lent {
		switch m.Cause {
		case Unwanted:
			b.stats.Unreused++
		case CheckFailed:
			b.stats.CheckFailures++
		default:
			b.stats.Broken++
		}
	}
	b.pool.Drop(m.Item)
	m.answer(Answer[T]{})
	b.answered()
	b.settle(now)
}

// settle runs after anything that may free a resource or room: serve the
// parked and see whether a Close is drained. It does not look at eviction
// deadlines: only a resource coming home can bring the next one closer, and
// give arms for that one alone; everything else only moves it later, which a
// Tick that finds nothing due puts right.
func (b *books[T]) settle(now int64) {
	b.serve(now)
	if b.minIdle > 0 {
		b.topUp()
	}
	if len(b.drained) > 0 && b.pool.Busy() == 0 {
		s := b.snapshot()
		for _, r := range b.drained {
			r <- s
		}
		b.drained = b.drained[:0]
	}
	if b.rack != nil {
		b.trim(now, 0)
	}
}

// tick is the engine's timer: evict what is due, and try the parked again.
func (b *books[T]) tick(now int64) {
	if b.timer != nil && b.timerAt <= now {
		// This is the armed timer's Tick; a later one armed meanwhile stays.
		b.timer, b.timerAt = nil, 0
	}
	if b.later != 0 && now >= b.later {
		b.later = 0
	}
	if b.rack != nil {
		b.rackDue(now) // what sat on the rack past Keep or Life goes home to be evicted
	}
	n := len(b.retire)
	b.retire = b.pool.EvictInto(now, b.retire)
	if evicted := len(b.retire) - n; evicted > 0 {
		b.stats.Evicted += int64(evicted)
		b.signal()
	}
	b.settle(now)
	if at, ok := b.pool.Deadline(); ok {
		b.arm(now, at)
	}
	if b.later != 0 {
		b.arm(now, b.later)
	}
	if b.fleet.due != 0 {
		if now >= b.fleet.due {
			b.report(now, FleetReport{})
		} else {
			b.arm(now, b.fleet.due)
		}
	}
	if b.keepAlive > 0 {
		b.keepAliveAt(now)
	}
}

// keepAliveAt signals the owner to ask Due for the idle due a check, when
// the keep-alive's time has come, and keeps the timer on for the next.
// Nothing is lent here: a resource is lent to a check only when the owner
// is there to check it, so none sits out of service waiting for it.
func (b *books[T]) keepAliveAt(now int64) {
	if now >= b.nextCheck && !b.pool.Closed() {
		if b.checks != nil {
			select {
			case b.checks <- struct{}{}:
			default:
			}
		}
		b.nextCheck = now + int64(b.keepAlive)
	}
	if !b.pool.Closed() {
		b.arm(now, b.nextCheck)
	}
}

// checked takes back what a keep-alive check had.
func (b *books[T]) checked(m *Checked[T]) {
	now := b.stamped(m.Now)
	closed, outdated := b.pool.Closed(), b.pool.Outdated()
	kept := b.pool.Checked(m.Item, m.OK, now)
	switch {
	case kept:
	case !m.OK:
		b.stats.CheckFailures++
	default:
		b.unkept(closed, outdated) // Surplus: or stale, past Keep or Life while checked
	}
	m.Reply <- Answer[T]{Kept: kept}
	b.answered()
	b.cameHome(now, m.Item)
}

// wakeAt remembers that a make may be tried after d, and asks for a Tick
// then if callers are parked.
func (b *books[T]) wakeAt(now int64, d time.Duration) {
	at := now + int64(d)
	if d >= policy.Never || at < now {
		at = math.MaxInt64
	}
	if b.later == 0 || at < b.later {
		b.later = at
	}
	b.arm(now, b.later)
}

// arm keeps one timer, at the earliest instant anything is due.
func (b *books[T]) arm(now, at int64) {
	if at == math.MaxInt64 || b.self == nil || b.self.Stopped() {
		return
	}
	if b.timer != nil {
		if b.timerAt <= at {
			return
		}
		b.timer.Stop()
	}
	clock := b.engine.Clock()
	now = max(now, clock.Now()) // as the limiters' alarm counts (see alarm.set)
	d := time.Duration(max(at-now, 0))
	ref := b.self
	b.timerAt = at
	b.timer = clock.AfterFunc(d, func() { ref.Fire(&Tick{Now: clock.Now()}) })
}

func (b *books[T]) retireItem(item T) {
	b.retire = append(b.retire, item)
	b.signal()
}

func (b *books[T]) signal() {
	if b.retired == nil {
		return
	}
	select {
	case b.retired <- struct{}{}:
	default:
	}
}

func (b *books[T]) close(now int64) {
	if b.pool.Closed() {
		return
	}
	b.revoke(now, true)
	idle := b.pool.Close()
	b.stats.Shutdown += int64(len(idle))
	b.retire = append(b.retire, idle...)
	b.signal()
	b.q.drain(func(m *Take[T]) {
		b.stats.Shed++
		b.stats.ShedBy[policy.ReasonClosed]++
		m.answer(Answer[T]{Verdict: policy.Shed, Why: policy.ReasonClosed, Err: ErrClosed})
	})
	b.settle(now)
}

// stop runs as the actor stops: the timer goes, and whoever still waits is
// told the actor is gone.
func (b *books[T]) stop() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if !b.pool.Closed() { // stopped before a Close reached it: retire the idle now
		b.revoke(0, true)
		idle := b.pool.Close()
		b.stats.Shutdown += int64(len(idle))
		b.retire = append(b.retire, idle...)
	}
	if len(b.retire) > 0 && b.leftovers != nil {
		select {
		case b.leftovers <- b.retire:
			b.retire = nil
		default:
		}
	}
	b.q.drain((*Take[T]).Refuse)
	s := b.snapshot()
	for _, r := range b.drained {
		r <- s
	}
	b.drained = nil
	if b.last != nil {
		select {
		case b.last <- s:
		default:
		}
	}
}

// setLimits applies new limits: the surplus idle go now, the parked are
// served from any new room, and the eviction timer follows the new Keep
// and Life.
func (b *books[T]) setLimits(m *SetLimits) {
	if b.pool.Closed() {
		replyErr(m.Reply, ErrClosed)
		b.answered()
		return
	}
	now := b.stamped(m.Now)
	b.revoke(now, false) // what the rack lent is judged by the new limits as it comes home
	n := len(b.retire)
	b.retire = b.pool.SetLimits(m.Limits, b.retire)
	if surplus := len(b.retire) - n; surplus > 0 {
		b.stats.Surplus += int64(surplus)
		b.signal()
	}
	_, timed := policy.Stamps(m.Limits, policy.Ward{})
	b.ageless = !timed
	b.minIdle = b.pool.Limits().MinIdle
	b.rackLimits(b.pool.Limits())
	b.settle(now)
	if at, ok := b.pool.Deadline(); ok {
		b.arm(now, at)
	}
	replyErr(m.Reply, nil)
	b.answered()
}

// topUp signals the owner to Fill when fewer than MinIdle are idle, no
// background make is under way (they go one at a time, which is gentle on a
// backend and enough to keep up) and no caller is parked.
func (b *books[T]) topUp() {
	if b.fills != nil && b.filling == 0 && b.q.parked == 0 && b.pool.Idle() < b.minIdle && !b.pool.Closed() {
		select {
		case b.fills <- struct{}{}:
		default:
		}
	}
}

// fillRetry is when a background make the breaker refused is asked for
// again: the breaker gives no hint, and asking at every event would feed
// its count of requests.
const fillRetry = time.Second

// fill answers whether to make one in the background.
func (b *books[T]) fill(m *Fill[T]) {
	now := b.stamped(m.Now)
	t := policy.Taken[T]{Verdict: policy.Wait}
	if b.q.parked == 0 {
		t = b.pool.Fill(now, b.filling)
	}
	switch {
	case t.Verdict == policy.Make:
		b.filling++
	case t.Verdict == policy.Later:
		b.stats.HeldBy[t.Why]++
		if t.Why != policy.ReasonProbe { // a probe's outcome settles, and tops up, itself
			b.wakeAt(now, t.After)
		}
	case t.Verdict == policy.Shed:
		b.wakeAt(now, fillRetry)
	}
	m.Reply <- Answer[T]{Verdict: t.Verdict, After: t.After, Why: t.Why, Gen: uint32(b.pool.Gen())}
	b.answered()
}

// filled registers what a background make opened, idle.
func (b *books[T]) filled(m *Filled[T]) {
	now := b.stamped(m.Now)
	b.filling = max(b.filling-1, 0)
	a, refused := b.unwanted(m.Item, m.Gen, now)
	if !refused {
		b.stats.Made++
		probe := b.pool.FleetProbe()
		if a.Kept = b.pool.Give(m.Item, now); !a.Kept {
			b.stats.Surplus++
		}
		b.probed(now, probe)
	}
	m.Reply <- a
	b.answered()
	b.cameHome(now, m.Item)
}

// unfilled frees the room of a background make that made nothing.
func (b *books[T]) unfilled(m *Unfilled) {
	now := b.stamped(m.Now)
	b.filling = max(b.filling-1, 0)
	if m.Failed {
		b.unmade(now)
	} else {
		b.pool.Release()
	}
	b.settle(now)
}

// reset starts a new generation: the idle go now, the lent as they come
// home (see give).
func (b *books[T]) reset(m *Reset) {
	if b.pool.Closed() {
		replyErr(m.Reply, ErrClosed)
		b.answered()
		return
	}
	b.revoke(b.stamped(m.Now), false) // what the rack lent is outdated as it comes home
	n := len(b.retire)
	b.retire = b.pool.Reset(b.retire)
	b.stats.Resets++
	if idle := len(b.retire) - n; idle > 0 {
		b.stats.Outdated += int64(idle)
		b.signal()
	}
	replyErr(m.Reply, nil)
	b.answered()
	b.settle(b.stamped(m.Now))
}

// unmade hands the pool a failed make, and tells the fleet.
func (b *books[T]) unmade(now int64) {
	if b.pool.Reserved() == 0 {
		b.pool.Unmade(now) // nothing to fail: the time is noted all the same
		return
	}
	b.stats.MakeFailures++
	probe := b.pool.FleetProbe()
	b.pool.Unmade(now)
	if b.fleet.report == nil {
		return
	}
	now = b.stamped(now)
	b.fleet.failed++
	switch {
	case probe:
		b.report(now, FleetReport{Probed: true})
	case b.fleet.due != 0:
		// A report is due at the batch's end: this failure goes with it.
	case b.fleet.sent && now-b.fleet.last < int64(b.fleet.batch):
		b.fleet.due = b.fleet.last + int64(b.fleet.batch)
		b.arm(now, b.fleet.due)
	default:
		b.report(now, FleetReport{})
	}
}

// fleetBooks is what a pool owes its fleet: the failures not yet
// reported, and when the next report may go.
type fleetBooks struct {
	report func(FleetReport) // nil: no fleet
	batch  time.Duration     // the least time between two reports of failures
	failed int               // failed makes not yet reported
	due    int64             // when the failures held back are reported; 0 if none are
	last   int64             // when the last report went
	sent   bool              // whether any has
	seq    uint64            // the Seq of the last view applied
}

// probed tells the fleet its probe worked, when probe says the fleet's
// probe was out before the pool heard of a make that worked, and the pool
// says it is not out any more.
func (b *books[T]) probed(now int64, probe bool) {
	if probe && b.fleet.report != nil && !b.pool.FleetProbe() {
		b.report(b.stamped(now), FleetReport{Probed: true, ProbeOK: true})
	}
}

// report sends r with the failures held back. A fleet whose report
// panics loses that report, and the pool goes on.
func (b *books[T]) report(now int64, r FleetReport) {
	r.Now, r.Failures = now, b.fleet.failed
	b.fleet.failed, b.fleet.due = 0, 0
	b.fleet.last, b.fleet.sent = now, true
	b.stats.FleetReports++
	defer func() {
		if v := recover(); v != nil {
			b.engine.Logger().Warn("moonpool: a pool's fleet report panicked", "panic", v)
		}
	}()
	b.fleet.report(r)
}

// inspect is snapshot with the ward's state at now.
func (b *books[T]) inspect(now int64) Stats {
	s := b.snapshot()
	s.Refusal = b.pool.Refusal(now)
	if until, ok := b.pool.Held(now); ok && until > now {
		s.Holding = time.Duration(math.MaxInt64) // saturate: the two may be further apart than an int64 holds
		if d := until - now; d > 0 {
			s.Holding = time.Duration(d)
		}
	}
	s.Probing = b.pool.Probing()
	s.Fleet = b.pool.Fleet().StateAt(now)
	return s
}

func (b *books[T]) snapshot() Stats {
	s := b.stats
	s.Live, s.Idle, s.Busy = b.pool.Live(), b.pool.Idle(), b.pool.Busy()
	if b.rack != nil {
		n := b.onRack()
		s.Idle += n
		s.Busy -= n
		s.Gets += b.rack.takes()
	}
	s.Opening = b.pool.Reserved()
	s.Waiting = b.q.parked
	s.Max = b.pool.Limits().Size
	s.Closed = b.pool.Closed()
	s.Fleet = b.pool.Fleet().State
	return s
}

// replyErr sends err to ch, if there is a ch, without blocking: a caller
// gives a channel with room for one.
func replyErr(ch chan error, err error) {
	select {
	case ch <- err:
	default:
	}
}
