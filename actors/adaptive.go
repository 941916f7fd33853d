package actors

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// ErrOverLimit says an adaptive gate had no room for the caller: a
// TryEnter found none, or a waiter was evicted as the limit fell, lowest
// class first. It matches ErrShed.
var ErrOverLimit error = &shed{"moonpool: shed: over the adaptive limit"}

// AdaptiveRoom is what the callers of an adaptive gate touch without
// asking its actor: the room it lent ahead of time, and the latencies of
// the calls that left, added up in stripes. The actor reads the stripes on
// a timer of the engine's clock while calls finish; when a timer finds
// nothing new it sleeps, and the next Leave wakes it with a Fold.
//
// One word holds the room lent, and the Enters and Leaves through it since
// it was lent, so the actor learns from it how many came in without
// asking. Enter and Leave each cost one compare-and-swap on it; Enter
// also counts its class on the caller's own stripe, and a timed call's
// Leave adds its latency there. While
// anybody waits in line nothing is lent, so every Enter goes to the actor
// and a waiting caller is never overtaken.
type AdaptiveRoom struct {
	w       atomic.Uint64 // lent<<48 | entered<<24 | left
	_       [56]byte      // the word on a line of its own
	stripes [tallyStripes]adaptiveStripe
	asleep  atomic.Bool   // the actor reads on no timer: the next Leave wakes it
	busy    atomic.Bool   // the actor took the room back to answer a message, and may lend again
	mask    atomic.Uint64 // an Enter whose count in the lease has none of these bits set is timed
	ref     *engine.Ref
}

// The fields of an AdaptiveRoom's word. A lease is at most roomMost, and
// the Enters and Leaves through one at most roomField each: the actor
// takes the lease back far more often than that.
const (
	roomField = 1<<24 - 1
	roomIn    = 1 << 24
	roomLent  = 48
	roomMost  = 1<<16 - 1
)

// adaptiveStripe is one stripe's counts, on a cache line of its own.
type adaptiveStripe struct {
	entered [AdaptiveClasses]atomic.Int64 // let in from the lent room, by class
	n       atomic.Int64                  // calls that left with a latency
	sum     atomic.Int64                  // their latencies, ns
	_       [16]byte
}

// Enter takes a unit of lent room for a caller of class, if some is free.
// It reports whether it did, and whether the call is one to time: all of
// them while a window holds few calls, and one in two, four and so on as
// it holds more, so that a window times a few hundred. Reading the clock
// costs more than the rest of Enter and Leave. It never blocks.
func (r *AdaptiveRoom) Enter(class int) (ok, timed bool) {
	for w := r.w.Load(); ; w = r.w.Load() {
		in, out := w>>24&roomField, w&roomField
		if in-out >= w>>roomLent || in == roomField {
			return false, false
		}
		if r.w.CompareAndSwap(w, w+roomIn) {
			// Every class is counted on a stripe, none by the word less
			// the others: a read between the word and a stripe would
			// count the call in the wrong class for a moment.
			r.stripes[tallySpot()].entered[clampClass(class)].Add(1)
			return true, (in+1)&r.mask.Load() == 0
		}
	}
}

// Leave counts a call that took rtt and gives its room back. It reports
// false when the room must go back to the actor instead, as a Leave
// message. It never blocks.
func (r *AdaptiveRoom) Leave(rtt time.Duration) bool {
	s := &r.stripes[tallySpot()]
	s.n.Add(1)
	s.sum.Add(int64(max(rtt, 0)))
	return r.Drop()
}

// Drop gives room back without a latency, as Leave does: to the lease
// while some of it is taken.
func (r *AdaptiveRoom) Drop() bool {
	if r.asleep.Load() {
		r.wake()
	}
	for w := r.w.Load(); ; w = r.w.Load() {
		in, out := w>>24&roomField, w&roomField
		if in == out {
			return false
		}
		if r.w.CompareAndSwap(w, w+1) {
			return true
		}
	}
}

// Settled waits a short bounded while for the actor to finish the
// message it took the room back for, if it took it back and may lend
// again (nobody waits), and reports whether it did: the room is lent
// again then, if any is free, and a caller whose Enter found none
// meanwhile can enter rather than queue on the actor behind it. It
// reports false at once otherwise. Like Credit.Settled, it spins and
// never yields the processor.
func (r *AdaptiveRoom) Settled() bool { return settled(&r.busy) }

// wake sends the actor a Fold, if this caller is the one to wake it.
func (r *AdaptiveRoom) wake() {
	if r.asleep.CompareAndSwap(true, false) {
		r.ref.Send(Fold{})
	}
}

// counts adds up the stripes.
func (r *AdaptiveRoom) counts() (n, sum int64, entered [AdaptiveClasses]int64) {
	for i := range r.stripes {
		s := &r.stripes[i]
		n += s.n.Load()
		sum += s.sum.Load()
		for c := range entered {
			entered[c] += s.entered[c].Load()
		}
	}
	return n, sum, entered
}

// clampClass is class held within the classes.
func clampClass(class int) int { return min(max(class, 0), AdaptiveClasses-1) }

// SpawnAdaptive starts an adaptive gate's actor on e under name (a fresh
// name when empty): a gate whose room follows a policy.Adaptive read from
// cfg, with a line of at most queue waiting callers (0: twice the limit,
// following it; below 0: none). It returns the AdaptiveRoom callers
// go through first.
//
// It answers AdaptiveEnter, AdaptiveWithdraw and AdaptiveInspect, and
// takes Leave, Fold and Tick. Every request first takes the lent room
// back, so each answer is exact (see AdaptiveRoom.Settled for the callers
// who find none meanwhile). Leave, Fold and Tick leave it lent while
// nobody waits, and lend what they free, unless the limit moves or the
// lease's counts near their end: callers go on entering while the actor
// reads. When the limit rises, waiters are let in, highest class first;
// when it falls, the line is cut to its new length, the lowest class and
// the latest comers first.
func SpawnAdaptive(e *engine.Engine, name string, cfg policy.AdaptiveConfig, queue int) (*engine.Ref, *AdaptiveRoom, error) {
	if e == nil {
		return nil, nil, errNoEngine
	}
	now := e.Now()
	a := &adaptiveActor{
		ctl:   *policy.NewAdaptive(cfg, now),
		room:  &AdaptiveRoom{},
		queue: queue,
		every: cfg.Window,
	}
	if a.every <= 0 {
		a.every = policy.DefaultAdaptiveWindow
	}
	a.every = max(a.every, policy.MinAdaptiveWindow) / adaptiveLooks
	a.alarm.clock = e.Clock()
	a.room.asleep.Store(true)
	a.lend() // before anyone can reach the actor: its first callers need not ask
	ref, err := e.Spawn(name, a, nil)
	if err != nil {
		return nil, nil, err
	}
	a.room.ref = ref
	return ref, a.room, nil
}

// adaptiveActor owns one adaptive limit, the room it lends and its line.
type adaptiveActor struct {
	ctl   policy.Adaptive
	room  *AdaptiveRoom
	held  int // inside, counting the room lent as held
	lent  int // room lent and not taken back
	queue int // the line's length as configured
	// line holds the waiting callers by class, first come first.
	line    [AdaptiveClasses][]*AdaptiveEnter
	waiting int
	counts  [AdaptiveClasses]AdaptiveClass
	// What the stripes held at the last read.
	seenN, seenSum int64
	seenEntered    [AdaptiveClasses]int64
	every          time.Duration // how often the timer reads while awake: a fourth of a window
	strideAt       int64         // when the stride was last set
	strideSeen     int64         // the calls let in by then
	fast           int64         // Enters through the lent room, ever
	awake          bool
	stopped        bool
	alarm          alarm
	inFlight

	// The latencies of the calls that finished last: fresh gathers them
	// until it holds adaptiveRecent calls, and then becomes last.
	last, fresh struct{ n, sum int64 }
}

// Bind gives the alarm the actor's Ref; the engine calls it at Spawn.
func (a *adaptiveActor) Bind(r *engine.Ref) { a.alarm.bind(r) }

func (a *adaptiveActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Stopping, *actor.Stopped:
		a.reclaim()
		a.stopped = true
		a.alarm.stop()
		a.room.asleep.Store(false) // nobody to wake
		for c := range a.line {
			for _, m := range a.line[c] {
				m.Slot.Put(Permit{Err: ErrStopped})
			}
			a.line[c] = nil
		}
		a.waiting = 0
	default:
		if _, ok := c.Message().(*actor.Started); !ok {
			a.Handle(c.Message())
		}
	}
}

// Handle runs one message; the engine calls it straight for user messages
// (see engine.Handler), and Receive for the rest. For a request, the lent
// room is taken back first, so the books are exact while it runs, and lent
// again after. A Leave, Fold or Tick while a lease is out and nobody waits
// leaves it out: it reads what callers hold through it without taking it
// back, and lends what it frees. Only if the limit moves, or the lease's
// counts have run half their range, is the lease taken back and lent
// afresh.
func (a *adaptiveActor) Handle(msg any) {
	defer a.unanswered()
	a.hold(msg)
	handled := false
	if a.lent > 0 && a.waiting == 0 && !a.stopped && keepsLease(msg) {
		limit := a.ctl.Limit()
		a.handle(msg)
		if a.ctl.Limit() == limit && a.waiting == 0 && a.through() < roomField/2 {
			a.topUp()
			return
		}
		handled = true // the lease is taken back and lent afresh below
	}
	if a.waiting == 0 && !a.stopped {
		// A lend may follow: callers who find no room meanwhile may wait
		// for it (see Settled). With callers in line nothing is lent, and
		// they had better ask at once.
		a.room.busy.Store(true)
		defer a.room.busy.Store(false) // after the lend below
	}
	a.reclaim()
	if !handled {
		a.handle(msg)
	}
	if !a.stopped {
		a.lend()
	}
}

// keepsLease reports whether msg is one Handle may run with the lease out.
func keepsLease(msg any) bool {
	switch msg.(type) {
	case Leave, *Leave, Fold, *Fold, *Tick:
		return true
	}
	return false
}

func (a *adaptiveActor) handle(msg any) {
	switch m := msg.(type) {
	case *AdaptiveEnter:
		a.fold(m.Now)
		a.enter(m)
	case *AdaptiveWithdraw:
		a.withdraw(m.Enter)
	case Leave, *Leave:
		// The caller is held outside the lease: whoever Leaves with a
		// message found nobody inside through it.
		if a.held-a.lent > 0 {
			a.held--
		}
		a.serve()
	case *AdaptiveInspect:
		a.fold(a.alarm.clock.Now())
		s := AdaptiveStats{
			Limit:    a.ctl.Limit(),
			InFlight: a.held,
			Queued:   a.waiting,
			Baseline: a.ctl.Baseline(),
			Latency:  a.ctl.Latency(),
			Classes:  a.classes(),
		}
		m.Reply <- s
		a.answered()
	case Fold, *Fold:
		a.fold(a.alarm.clock.Now())
	case *Tick:
		a.alarm.fired(m)
		if a.fold(m.Now) == 0 && a.inside() == 0 && a.sleep() {
			return
		}
		a.alarm.set(m.Now, later(m.Now, a.every), true)
	}
}

// sleep stops reading on a timer, unless a call finished since the fold
// that found nothing new, and reports whether it stopped. A Leave after
// the store of asleep wakes the actor; one between the fold and the store
// would not, but its latency shows in the stripes, and the actor stays
// awake. (A call not timed leaves no latency to read.)
func (a *adaptiveActor) sleep() bool {
	a.room.asleep.Store(true)
	if n, _, _ := a.room.counts(); n == a.seenN {
		a.awake = false
		return true
	}
	// A Leave that saw the store has sent a Fold already; either way the
	// timer goes on.
	a.room.asleep.Store(false)
	return false
}

// adaptiveLooks is how many times a window the timer reads the stripes
// and the in-flight count while calls finish.
const adaptiveLooks = 4

// enter answers or parks m.
func (a *adaptiveActor) enter(m *AdaptiveEnter) {
	c := clampClass(m.Class)
	// The limit weighs its queue against the deadlines of the callers
	// who ask.
	if m.Deadline != 0 {
		a.ctl.Deadline(time.Duration(m.Deadline - m.Now))
	}
	limit := a.ctl.Limit()
	if a.held < limit && a.waiting == 0 {
		a.held++
		a.counts[c].Entered++
		m.Slot.Put(Permit{OK: true, Held: a.held})
		a.answered()
		return
	}
	a.ctl.Full()
	if !m.Wait {
		a.counts[c].Shed++
		m.Slot.Put(Permit{Err: ErrOverLimit, Held: a.held})
		a.answered()
		return
	}
	if wait, ok := a.expected(c); ok && m.Deadline != 0 && m.Deadline-m.Now < int64(wait)+a.needed() {
		a.counts[c].Deadline++
		m.Slot.Put(Permit{Err: ErrDeadline, After: wait, Held: a.held})
		a.answered()
		return
	}
	if a.waiting >= a.length() {
		low := a.lowest()
		if low < 0 || low >= c {
			a.counts[c].QueueFull++
			m.Slot.Put(Permit{Err: ErrTooManyWaiting, Held: a.held})
			a.answered()
			return
		}
		a.evict(low, ErrTooManyWaiting)
		a.counts[low].QueueFull++
	}
	a.line[c] = append(a.line[c], m)
	a.waiting++
	a.answered()
}

// needed is how long a caller needs before its deadline once let in: the
// recent latency and a quarter; 0 while none is known.
func (a *adaptiveActor) needed() int64 {
	return int64(float64(a.recent()) * adaptiveMargin)
}

// recent is the mean latency of the calls that finished last, at least
// adaptiveRecent of them once that many have (all of them at the reads
// that brought the count there, and those read since), and at most twice
// the limit's own latency, so that one call far slower than the rest
// moves it little; before any has finished, the limit's own latency (0
// while none is known). It is what a caller let in now can expect: a
// window's mean is up to a window old, and while a queue builds at the
// dependency it holds the shorter latencies of the calls that went first.
func (a *adaptiveActor) recent() time.Duration {
	w := a.ctl.Latency()
	n, sum := a.last.n+a.fresh.n, a.last.sum+a.fresh.sum
	if n <= 0 || sum < 0 {
		return w
	}
	r := time.Duration(sum / n)
	if w > 0 && r-w > w {
		r = 2 * w
	}
	return r
}

// adaptiveRecent is how many finished calls make a recent latency.
const adaptiveRecent = 8

// expected is how long a caller of class c would wait in line now: one
// latency for each limit's worth of callers ahead of it, itself counted.
// It is false while no latency is known.
func (a *adaptiveActor) expected(c int) (time.Duration, bool) {
	rtt := a.recent()
	if rtt <= 0 {
		return 0, false
	}
	ahead := 1
	for k := c; k < AdaptiveClasses; k++ {
		ahead += len(a.line[k])
	}
	limit := max(a.ctl.Limit(), 1)
	return time.Duration(min(float64(rtt)*float64(ahead)/float64(limit), float64(policy.Never))), true
}

// adaptiveLine is how many limits' worth of callers the line holds when
// its length follows the limit: about two latencies of waiting.
const adaptiveLine = 2

// adaptiveMargin is the latency a caller needs left before its deadline,
// over the recent latency: a latency may grow by a quarter before the
// limit falls.
const adaptiveMargin = 1.25

// length is how many may wait in line now.
func (a *adaptiveActor) length() int {
	switch {
	case a.queue < 0:
		return 0
	case a.queue == 0:
		return adaptiveLine * a.ctl.Limit()
	}
	return a.queue
}

// lowest is the lowest class with someone in line, or -1.
func (a *adaptiveActor) lowest() int {
	for c := range a.line {
		if len(a.line[c]) > 0 {
			return c
		}
	}
	return -1
}

// evict refuses the latest comer of class c with err.
func (a *adaptiveActor) evict(c int, err error) {
	q := a.line[c]
	m := q[len(q)-1]
	q[len(q)-1] = nil
	a.line[c] = q[:len(q)-1]
	a.waiting--
	m.Slot.Put(Permit{Err: err, Held: a.held})
}

// withdraw answers m ErrCancelled if it is still in line.
func (a *adaptiveActor) withdraw(m *AdaptiveEnter) {
	c := clampClass(m.Class)
	i := slices.Index(a.line[c], m)
	if i < 0 {
		return // answered already
	}
	a.line[c] = slices.Delete(a.line[c], i, i+1)
	a.waiting--
	a.counts[c].Cancelled++
	m.Slot.Put(Permit{Err: ErrCancelled, Held: a.held})
}

// serve lets waiters in while there is room, highest class first, and
// cuts the line to its length, lowest class and latest comers first. A
// waiter whose deadline is less than a latency and a quarter away when its
// turn comes is refused with ErrDeadline instead: it could not finish in
// time.
func (a *adaptiveActor) serve() {
	limit := a.ctl.Limit()
	var now int64
	rtt := a.needed()
	if a.waiting > 0 && rtt > 0 {
		now = a.alarm.clock.Now()
	}
	for c := AdaptiveClasses - 1; c >= 0 && a.held < limit; c-- {
		for len(a.line[c]) > 0 && a.held < limit {
			m := a.line[c][0]
			a.line[c][0] = nil
			a.line[c] = a.line[c][1:]
			a.waiting--
			if rtt > 0 && m.Deadline != 0 && m.Deadline-now < rtt {
				// Its turn came too late to finish: the room goes to
				// the next, who may.
				a.counts[c].Deadline++
				m.Slot.Put(Permit{Err: ErrDeadline, After: time.Duration(rtt), Held: a.held})
				continue
			}
			a.held++
			a.counts[c].Entered++
			m.Slot.Put(Permit{OK: true, Held: a.held})
		}
	}
	for a.waiting > a.length() {
		low := a.lowest()
		a.evict(low, ErrOverLimit)
		a.counts[low].Shed++
	}
}

// fold reads the stripes into the limit, decides if a window is over at
// now, and lets waiters in or cuts the line if the limit moved. It keeps
// the timer running while calls finish, and returns how many it read.
func (a *adaptiveActor) fold(now int64) int64 {
	n, sum, entered := a.room.counts()
	dn, dsum := n-a.seenN, sum-a.seenSum
	a.seenN, a.seenSum, a.seenEntered = n, sum, entered
	a.ctl.Sample(dn, time.Duration(dsum))
	if dn > 0 && dsum >= 0 {
		a.fresh.n += dn
		a.fresh.sum += dsum
		if a.fresh.n >= adaptiveRecent {
			a.last, a.fresh = a.fresh, a.last
			a.fresh.n, a.fresh.sum = 0, 0
		}
	}
	a.ctl.InFlight(a.inside())
	a.stride(now)
	if a.ctl.Update(now) {
		a.serve()
	}
	if (dn > 0 || a.held > 0) && !a.awake && !a.stopped {
		a.awake = true
		a.room.asleep.Store(false)
		a.alarm.set(now, later(now, a.every), true)
	}
	return dn
}

// stride sets how many calls of each the callers time, one in mask+1, from
// the calls let in since it last looked, at most a tick ago, as a rate a
// window: enough to time adaptiveTimed of them a window, and all of them
// below that.
func (a *adaptiveActor) stride(now int64) {
	if now-a.strideAt < int64(a.every) {
		return
	}
	total := a.fast + int64(a.through())
	for c := range a.counts {
		total += a.counts[c].Entered
	}
	seen, since := a.strideSeen, now-a.strideAt
	a.strideAt, a.strideSeen = now, total
	if seen == 0 && total > 0 {
		return // the first look: since is not known
	}
	per := float64(total-seen) * float64(a.every*adaptiveLooks) / float64(since)
	mask := uint64(0)
	for per >= 2*adaptiveTimed && mask < 1<<20 {
		mask = mask<<1 | 1
		per /= 2
	}
	a.room.mask.Store(mask)
}

// classes is the counts by class: the actor's own, and the Enters through
// the lent room, read from the stripes. Each only grows.
func (a *adaptiveActor) classes() [AdaptiveClasses]AdaptiveClass {
	cs := a.counts
	for c, e := range a.seenEntered {
		cs[c].Entered += e
	}
	return cs
}

// adaptiveTimed is about how many calls a window times, at the least.
const adaptiveTimed = 256

// reclaim takes the lent room back: what is still free leaves the count.
func (a *adaptiveActor) reclaim() {
	if a.lent == 0 {
		return
	}
	in, out := roomCounts(a.room.w.Swap(0))
	a.held -= a.lent - (in - out)
	a.fast += int64(in)
	a.lent = 0
}

// inside is how many callers are inside: those held, less the lent room
// nobody has taken.
func (a *adaptiveActor) inside() int {
	if a.lent == 0 {
		return a.held
	}
	in, out := roomCounts(a.room.w.Load())
	return a.held - a.lent + in - out
}

// through is how many callers have entered through the lease out.
func (a *adaptiveActor) through() int {
	if a.lent == 0 {
		return 0
	}
	in, _ := roomCounts(a.room.w.Load())
	return in
}

// roomCounts is how many entered and how many left through the lease an
// AdaptiveRoom's word holds.
func roomCounts(w uint64) (in, out int) { return int(w >> 24 & roomField), int(w & roomField) }

// topUp adds the free room to the lease out, while nobody waits. Callers
// only count in the word, so the actor adds to its lent field.
func (a *adaptiveActor) topUp() {
	n := min(a.ctl.Limit()-a.held, roomMost-a.lent)
	if n <= 0 || a.waiting > 0 {
		return
	}
	a.held += n
	a.lent += n
	a.room.w.Add(uint64(n) << roomLent)
}

// lend lends all the free room, unless somebody waits: they come first.
func (a *adaptiveActor) lend() {
	if a.waiting > 0 {
		return
	}
	n := min(a.ctl.Limit()-a.held, roomMost)
	if n <= 0 {
		return
	}
	a.held += n
	a.lent = n
	a.room.w.Store(uint64(n) << roomLent)
}
