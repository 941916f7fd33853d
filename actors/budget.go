package actors

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// Tally is what the callers of a budget count without asking its actor:
// first attempts and latencies, one atomic add each. The actor folds them
// into its policy.Budget and policy.Quantile before each answer, and on a
// timer every slot of the window while callers count. When a timer finds
// nothing new, the actor sleeps; the next count wakes it with a Fold.
//
// First attempts are counted only while the budget watches: from its
// start or a Spend, until a whole window passes without a Spend. A budget
// nobody asks for a retry or a hedge needs no count, and its callers then
// pay one atomic load, not an add on a shared line. So the first Spend
// after a quiet window is judged on the floor, and the share grows back
// with the first attempts counted from then on.
//
// A count is folded in dated at the actor's previous fold, the earliest
// instant it can have happened. So a first attempt never stays in the
// window longer than it should: the budget errs towards refusing.
//
// It also holds the quantiles the actor last worked out for the latencies
// asked most recently, so a caller that wants a hedge delay finds it here
// without a message. An answer is published only while the actor folds on
// its timer, which a Latency starts, and is worked out again at each fold.
type Tally struct {
	// firsts count first attempts ever, in stripes on lines of their own:
	// a caller adds to the one its goroutine's stack falls on (see
	// tallySpot), so callers on different processors seldom meet.
	firsts   [tallyStripes]tallyStripe
	watching atomic.Bool // first attempts are counted
	asleep   atomic.Bool // the actor folds on no timer: the next count wakes it
	_        [62]byte    // keeps the flags, read on every count, off the lines written
	// lease is how many retries and hedges callers may take without
	// asking the actor, before the engine's clock reaches until. A
	// caller that takes one counts it here. The actor counts what was
	// taken at its next fold, and lends again.
	lease atomic.Int64
	until atomic.Int64
	_     [48]byte
	ref   *engine.Ref
	pub   [published]quote
	lat   [policy.QuantileBuckets]atomic.Uint32 // latencies ever, by bucket, wrapping
}

// tallyStripes is how many stripes a Tally counts first attempts in.
const tallyStripes = 8

// tallyStripe is one stripe's count, on a cache line of its own.
type tallyStripe struct {
	n atomic.Uint64
	_ [56]byte
}

// tallySpot is the stripe for the calling goroutine: picked by where its
// stack is, which differs between goroutines and stays put for one
// (unless its stack moves). Goroutines' stacks start at 2 KB and double,
// so the address is taken in 2 KB units and mixed, lest stacks of 8 KB
// all land on one stripe.
func tallySpot() int {
	var mark byte
	h := uint64(uintptr(unsafe.Pointer(&mark)) >> 11)
	return int(h * 0x9e3779b97f4a7c15 >> 61) // the top three bits: 0 to 7
}

// published is how many quantiles a Tally holds ready.
const published = 4

// quote is one published quantile: p's bits and the duration, or -1 for
// too few samples. A p of noQuote is none. seq is odd while the actor
// writes, so a reader that sees it change reads again from the actor.
type quote struct {
	seq atomic.Uint64
	p   atomic.Uint64
	d   atomic.Int64
}

// noQuote is the bits of a NaN, which no caller's p matches.
var noQuote = math.Float64bits(math.NaN())

// First counts one first attempt, if the budget watches. Small enough to
// be inlined, it costs one atomic load when the budget does not.
func (t *Tally) First() {
	if t.watching.Load() {
		t.first()
	}
}

// first counts one first attempt.
func (t *Tally) first() {
	t.firsts[tallySpot()].n.Add(1)
	if t.asleep.Load() {
		t.wake()
	}
}

// Lease takes one retry or hedge from what the actor lent, at now on the
// engine's clock. It is false when nothing is lent, or the loan has run
// out or expired: then the caller asks the actor with a Spend.
func (t *Tally) Lease(now int64) bool {
	if now >= t.until.Load() {
		return false
	}
	for {
		n := t.lease.Load()
		if n <= 0 {
			return false
		}
		if t.lease.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Count counts one first attempt, whether the budget watches or not: for
// a request about to ask for a retry, whose first attempt First may have
// let pass.
func (t *Tally) Count() { t.first() }

// Watching reports whether First counts now.
func (t *Tally) Watching() bool { return t.watching.Load() }

// Observe counts one latency.
func (t *Tally) Observe(d time.Duration) {
	t.lat[policy.QuantileBucket(d)].Add(1)
	if t.asleep.Load() {
		t.wake()
	}
}

// Firsts is how many first attempts have been counted, ever.
func (t *Tally) Firsts() int64 { return int64(t.sum()) }

// sum adds up the stripes.
func (t *Tally) sum() uint64 {
	var n uint64
	for i := range t.firsts {
		n += t.firsts[i].n.Load()
	}
	return n
}

// Quote is the p-quantile the actor last published, and whether it has
// published one for p. A p it answered "too few" for is not found, nor
// one being written: the caller asks the actor with a Latency, which
// counts what came since.
func (t *Tally) Quote(p float64) (d time.Duration, found bool) {
	bits := math.Float64bits(p)
	for i := range t.pub {
		q := &t.pub[i]
		seq := q.seq.Load()
		if q.p.Load() != bits {
			continue
		}
		v := q.d.Load()
		if seq&1 != 0 || q.seq.Load() != seq || v < 0 { // being written, or too few
			return 0, false
		}
		return time.Duration(v), true
	}
	return 0, false
}

// wake sends the actor a Fold, if this caller is the one to wake it.
func (t *Tally) wake() {
	if t.asleep.CompareAndSwap(true, false) {
		t.ref.Send(Fold{})
	}
}

// SpawnBudget starts a retry budget's actor on e under name (a fresh name
// when empty), with a policy.NewBudget(ratio, minPerSecond, window). The
// latencies go to a policy.NewQuantile(window) and to another over a
// tenth of the window. A Latency is answered from the tenth when it holds
// ten samples at or above the quantile, else from the whole window, else
// with the last answer for its quantile (see budgetActor.quantile). It
// returns the Tally its callers count first attempts and latencies on.
//
// It answers Spend (OK and Left), Latency (OK and After), Left (Left),
// Fold and Tick. Each folds in the Tally first, so an answer counts every
// first attempt made before its request. While callers count, the actor
// folds as each slot of the budget begins, a twentieth of the window (and
// at most every millisecond), so counts are dated within that much. After
// each, it lends on the Tally what the budget allows until its next slot
// (see Tally.Lease), while first attempts are counted. So the loan is
// renewed as it runs out.
func SpawnBudget(e *engine.Engine, name string, ratio, minPerSecond float64, window time.Duration) (*engine.Ref, *Tally, error) {
	if e == nil {
		return nil, nil, errNoEngine
	}
	a := &budgetActor{
		budget: *policy.NewBudget(ratio, minPerSecond, window),
		tally:  &Tally{},
		at:     e.Now(),
	}
	// The latencies' windows follow the budget's, which NewBudget has
	// brought within its bounds.
	a.lat = *policy.NewQuantile(a.budget.Window())
	a.recent = *policy.NewQuantile(max(a.budget.Window()/recentShare, 1))
	a.asked = a.at
	a.tally.watching.Store(true)
	a.window = int64(a.budget.Window())
	a.every = max(a.budget.Window()/20, time.Millisecond)
	a.alarm.clock = e.Clock()
	a.tally.asleep.Store(true)
	for i := range a.tally.pub {
		a.tally.pub[i].p.Store(noQuote)
		a.watch[i], a.last[i] = math.NaN(), -1
	}
	ref, err := e.Spawn(name, a, nil)
	if err != nil {
		return nil, nil, err
	}
	a.tally.ref = ref
	return ref, a.tally, nil
}

// budgetActor owns one budget and its latencies.
type budgetActor struct {
	budget policy.Budget
	lat    policy.Quantile
	recent policy.Quantile // the latencies of the last tenth of the window
	tally  *Tally
	folded uint64                         // first attempts folded in
	seen   [policy.QuantileBuckets]uint32 // latencies folded in, by bucket
	at     int64                          // the latest instant seen: the last fold's
	every  time.Duration                  // how often to fold while awake
	window int64                          // the budget's window
	asked  int64                          // the latest Spend's instant
	leased int64                          // what the Tally was last lent
	awake  bool                           // the alarm folds every every
	// counted is whether a fold found something since the last Tick.
	counted bool
	watch   [published]float64 // the quantiles asked for, by the Tally's index
	// last is the latest answer for each quantile watched, -1 for none
	// yet: a quantile once known is answered from it while too few
	// latencies are counted to tell.
	last  [published]time.Duration
	next  int // the index the next new quantile takes
	alarm alarm
	inFlight
}

// Bind gives the alarm the actor's Ref; the engine calls it at Spawn.
func (a *budgetActor) Bind(r *engine.Ref) { a.alarm.bind(r) }

func (a *budgetActor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		return
	}
	a.Handle(c.Message())
}

// Handle runs one message; the engine calls it straight for user messages
// (see engine.Handler), and Receive for the rest. A request it does not
// serve, or whose handling panics, is refused (see inFlight).
func (a *budgetActor) Handle(msg any) {
	defer a.unanswered()
	a.hold(msg)
	a.handle(msg)
}

func (a *budgetActor) handle(msg any) {
	switch m := msg.(type) {
	case *Spend:
		a.fold(m.Now)
		ok := a.budget.Spend(a.at)
		m.answer(Permit{OK: ok, Left: a.budget.Left(a.at)})
		a.answered()
		a.countFirsts()
		a.lend()
	case *Latency:
		a.fold(m.Now)
		a.foldLatencies()
		d, ok := a.quantile(m.P)
		m.answer(Permit{OK: ok, After: d})
		a.answered()
		if !math.IsNaN(m.P) {
			// Published, the answer must be kept current: by folds on the
			// timer, until one finds nothing new.
			a.wake()
			a.quote(m.P, d, ok)
		}
		a.lend()
	case *Left:
		a.fold(m.Now)
		reply(m.Reply, Permit{Left: a.budget.Left(a.at)})
		a.answered()
		a.lend()
	case Fold, *Fold:
		a.fold(a.alarm.clock.Now())
		a.foldLatencies()
		a.quiet()
		a.wake()
		a.lend()
	case *Tick:
		a.alarm.fired(m)
		a.fold(m.Now)
		a.foldLatencies()
		a.quiet()
		if a.counted {
			// Something was counted since the last Tick, folded in by it
			// or by a request: callers are still counting.
			a.counted = false
			a.publish()
			a.alarm.set(a.at, a.nextFold(), true)
		} else {
			a.sleep()
		}
		a.lend()
	case *actor.Stopped:
		a.alarm.stop()
		a.unpublish()
		a.tally.lease.Store(0)
		a.leased = 0
	}
}

// fold brings the books to now (or the latest instant seen, if later),
// folding in the first attempts the Tally counted since the last fold,
// dated then: the books stand at a.at, and what is folded in is counted
// there before they move on.
func (a *budgetActor) fold(now int64) {
	f := a.tally.sum()
	n := f - a.folded
	a.folded = f
	a.counted = a.counted || n > 0
	for n > 0 { // First takes an int
		k := min(n, math.MaxInt32)
		a.budget.First(a.at, int(k))
		n -= k
	}
	a.at = max(a.at, now)
	a.collect()
}

// collect takes back the loan and counts what callers took of it, dated
// now: no earlier than they took it, so it stays in the window no less
// long than it should. What they took counts as asked, as a Spend does.
func (a *budgetActor) collect() {
	if a.leased == 0 {
		return
	}
	taken := a.leased - a.tally.lease.Swap(0)
	a.leased = 0
	if taken > 0 {
		a.budget.Spent(a.at, int(min(taken, math.MaxInt32)))
		a.asked = a.at
	}
}

// lend lets callers take what the budget allows now without asking,
// until its next slot begins (see policy.Budget.Lease). Only while first
// attempts are counted: a caller's first retry after a quiet window asks,
// and starts the count.
func (a *budgetActor) lend() {
	if !a.tally.watching.Load() {
		return
	}
	n, until := a.budget.Lease(a.at)
	k := int64(min(n, 1<<30)) // n may be +Inf
	if k <= 0 {
		return
	}
	a.tally.until.Store(until)
	a.tally.lease.Store(k)
	a.leased = k
}

// quiet stops the count of first attempts once a whole window has passed
// without a Spend: nobody needs it. The actor finds out at its next fold,
// on its timer or woken by a count after a sleep.
func (a *budgetActor) quiet() {
	if a.tally.watching.Load() && a.at-a.asked >= a.window {
		a.tally.watching.Store(false)
	}
}

// countFirsts has callers count first attempts from now on, for a window past
// this Spend at least. The alarm runs, so that a Tick can stop the count.
func (a *budgetActor) countFirsts() {
	a.asked = a.at
	if !a.tally.watching.Load() {
		a.tally.watching.Store(true)
		a.wake()
	}
}

// foldLatencies folds in the latencies the Tally counted since the last
// time, at the latest instant seen. Only the answers about latencies need
// them, and the timer.
func (a *budgetActor) foldLatencies() {
	for i := range a.seen {
		if c := a.tally.lat[i].Load(); c != a.seen[i] {
			a.lat.AddN(policy.QuantileValue(i), int(c-a.seen[i]), a.at)
			a.recent.AddN(policy.QuantileValue(i), int(c-a.seen[i]), a.at)
			a.seen[i] = c
			a.counted = true
		}
	}
}

// wake arms the alarm that folds while callers count, if it is not armed.
// Callers stop waking the actor: it will fold what they count.
func (a *budgetActor) wake() {
	if a.awake {
		return
	}
	a.awake = true
	a.tally.asleep.Store(false)
	a.alarm.set(a.at, a.nextFold(), true)
}

// nextFold is when the timer folds next: as the budget's next slot
// begins, when what it lent runs out, and no later than every from now.
// Folded then, the loan is renewed at once, and callers seldom find it
// spent and ask the actor. A fold is at least a millisecond after the
// last.
func (a *budgetActor) nextFold() int64 {
	_, until := a.budget.Lease(a.at)
	return max(min(until, later(a.at, a.every)), later(a.at, time.Millisecond))
}

// sleep stops folding on a timer, unless the Tally counted something
// while the actor was deciding to: then it folds on. The quantiles
// published go, since nothing keeps them current.
func (a *budgetActor) sleep() {
	a.awake = false
	// A caller counts, then looks at asleep; the actor sets asleep, then
	// looks at the counts. One of the two sees the other.
	a.tally.asleep.Store(true)
	if a.pending() {
		// Counted just now: take the wake-up back, if no caller has.
		if a.tally.asleep.CompareAndSwap(true, false) {
			a.wake()
			return
		}
		// A caller woke it, and its Fold is on its way.
	}
	a.unpublish()
}

// pending reports whether the Tally holds anything not yet folded in.
func (a *budgetActor) pending() bool {
	if a.tally.sum() != a.folded {
		return true
	}
	for i := range a.seen {
		if a.tally.lat[i].Load() != a.seen[i] {
			return true
		}
	}
	return false
}

// quantile is the p-quantile of the latencies: of the last tenth of the
// window when it holds recentTail samples at or above it, else of the
// whole window. So the quote follows a change of latency within a tenth
// of the window, and still answers for a client too quiet to fill one.
// When the whole window holds too few, it is the last answer for p, if p
// holds a place among those watched and was answered since it took it: a
// client back from a spell quieter than the window hedges on what it
// knew, not on nothing, until it knows again.
func (a *budgetActor) quantile(p float64) (time.Duration, bool) {
	if float64(a.recent.Samples(a.at))*(1-p) >= recentTail {
		if d, ok := a.recent.At(p, a.at); ok {
			return d, true
		}
	}
	if d, ok := a.lat.At(p, a.at); ok {
		return d, true
	}
	if i := a.place(p); i >= 0 && a.last[i] >= 0 {
		return a.last[i], true
	}
	return 0, false
}

// place is p's index among the quantiles watched, or -1.
func (a *budgetActor) place(p float64) int {
	for i, w := range a.watch {
		if w == p {
			return i
		}
	}
	return -1
}

// The latencies' quantile comes from the last recentShare-th of the
// window when that holds recentTail samples at or above it. Ten are
// enough to place a p 0.97 within about a percent of the requests.
const (
	recentShare = 10
	recentTail  = 10
)

// quote publishes the p-quantile, in p's place if it has one, else in
// the place taken longest ago.
func (a *budgetActor) quote(p float64, d time.Duration, ok bool) {
	i := a.place(p)
	if i < 0 {
		i = a.next
		a.next = (a.next + 1) % published
		a.watch[i], a.last[i] = p, -1
	}
	v := int64(-1)
	if ok {
		v = int64(d)
		a.last[i] = d
	}
	q := &a.tally.pub[i]
	q.seq.Add(1)
	q.p.Store(math.Float64bits(p))
	q.d.Store(v)
	q.seq.Add(1)
}

// publish works out the published quantiles again.
func (a *budgetActor) publish() {
	for i := range a.watch {
		if a.tally.pub[i].p.Load() == noQuote {
			continue
		}
		d, ok := a.quantile(a.watch[i])
		a.quote(a.watch[i], d, ok)
	}
}

// unpublish withdraws every published quantile.
func (a *budgetActor) unpublish() {
	for i := range a.tally.pub {
		q := &a.tally.pub[i]
		q.seq.Add(1)
		q.p.Store(noQuote)
		q.seq.Add(1)
	}
}
