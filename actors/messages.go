package actors

import (
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// The protocol. Every request carries the caller's timestamp, Now, read from
// the engine's clock. A pool's Take and Give may carry 0 instead, "not
// read", when the pool's answer cannot depend on the time (see
// SpawnPool); the actor then reads the engine's clock itself in the one
// case that still wants it, a caller parking or being served from the FIFO.
// A request that wants an answer carries a Reply channel with room for one,
// or (Take, Give and Drop) an engine.Reply slot, so the actor never waits on
// a slow reader; the caller must not touch a request it has sent until its
// answer has arrived. A request that reaches a stopped actor is answered
// with ErrStopped.

// Pool requests.
type (
	// Take asks a pool for a resource. Without Wait it is answered at once,
	// Wait when callers are parked ahead of it. With Wait, a Wait or Later verdict
	// parks the caller in the pool's FIFO instead of being answered, and the
	// answer comes when a resource or room is there for it: Ready with the
	// resource, or Make with room reserved. Stale never reaches a caller: the
	// actor retires stale resources itself (see Collect). A waiting Take with
	// a Deadline (0: none) is answered ErrHeld at once, with After the rest
	// of the hold, when the ward holds makes back past that instant and
	// nothing is lent that could come back first: it could only time out.
	Take[T comparable] struct {
		Now      int64
		Wait     bool
		Deadline int64
		Reply    chan Answer[T]
		Slot     *engine.Reply[Answer[T]] // if not nil, the answer goes here rather than to Reply
		gen      uint64                   // which parking this is; owned by the actor
	}
	// Give returns a lent resource. Answer.Kept says whether the pool kept it;
	// if not, the caller closes it. With Strict, a resource the pool has not
	// lent is refused with ErrNotLent (a misuse: given twice, or never lent).
	// Unchecked says the caller neither used nor checked it (its check was
	// cut short): it keeps the time it was last known good, so the next Take
	// asks for a check again (see policy.Pool.GiveUnchecked). Racked says a
	// caller found it revoked on the pool's Rack and hands it home (see
	// SpawnPoolRack); the caller closes it unless Answer.Kept.
	Give[T comparable] struct {
		Now       int64
		Item      T
		Strict    bool
		Unchecked bool
		Racked    bool
		Reply     chan Answer[T]
		Slot      *engine.Reply[Answer[T]] // if not nil, the answer goes here rather than to Reply
	}
	// Made registers a resource made after a Make. Answer.Kept is false when
	// the pool could not take it (it closed meanwhile); the caller closes it.
	// A resource the pool already holds, idle or lent, is refused with
	// ErrDuplicate and the room freed: it is on the books once already, and
	// leaves them once, so the caller must not close it.
	// Gen is the Answer.Gen of the Make: one made in an earlier generation
	// is refused with ErrOutdated (see Reset).
	Made[T comparable] struct {
		Now   int64
		Item  T
		Gen   uint32
		Reply chan Answer[T]
	}
	// Unmade says the make that a Make answered failed: the room is free
	// again and the ward hears of the failure. No answer.
	Unmade struct{ Now int64 }
	// Release frees the room a Make reserved without trying to make anything,
	// for a caller that gave up first; the ward hears nothing. No answer.
	Release struct{ Now int64 }
	// Drop says a lent resource broke; the caller closes it. With Strict, a
	// resource the pool has not lent is refused with ErrNotLent and nothing
	// changes. Reply, if not nil, gets the answer.
	Drop[T comparable] struct {
		Now    int64
		Item   T
		Strict bool
		Cause  Cause // why it leaves, for Stats; the zero Cause is Broken
		Reply  chan Answer[T]
		Slot   *engine.Reply[Answer[T]] // if not nil, the answer goes here rather than to Reply
	}
	// Cancel withdraws a parked Take. If it was still parked, it is answered
	// with ErrCancelled; if it had been answered already, nothing happens, and
	// the caller gives back what the answer granted. Either way the Take gets
	// exactly one answer. No answer of its own.
	Cancel[T comparable] struct{ Take *Take[T] }
	// Close closes the pool: Takes are refused with ErrClosed, parked callers
	// are answered ErrClosed, idle resources go to be retired, and lent ones
	// are retired as they come home. Reply gets the stats at that moment.
	Close struct {
		Now   int64
		Reply chan Stats
	}
	// Drained is answered once nothing is lent or being made.
	Drained struct{ Reply chan Stats }
	// Collect takes the resources the pool has retired (stale, evicted,
	// surplus after Close) for the caller to close. The pool signals its
	// Retired channel when there is something to collect.
	Collect[T comparable] struct{ Reply chan []T }
	// Inspect asks for the pool's stats; Now dates the ward's state in them.
	Inspect struct {
		Now   int64
		Reply chan Stats
	}
	// SetLimits holds the pool to Limits from Now on (see
	// policy.Pool.SetLimits): idle resources now surplus are retired at
	// once (Surplus), lent ones beyond Size as they come home, and parked
	// callers are served at once from any new room. Reply, if not nil, gets
	// nil once they apply, or ErrClosed for a closed pool, which keeps its
	// limits.
	SetLimits struct {
		Now    int64
		Limits policy.Limits
		Reply  chan error
	}
	// Reset starts a new generation (see policy.Pool.Reset): every idle
	// resource is retired now, every lent one as it comes home, and every
	// one a make begun before it opens is refused (ErrOutdated), all
	// counted as Stats.Outdated; Takes from then on get resources made
	// after it. Reply, if not nil, gets nil once done, or ErrClosed for a
	// closed pool.
	Reset struct {
		Now   int64
		Reply chan error
	}
	// Fill asks whether to open one resource in the background, to keep
	// Limits.MinIdle idle (see policy.Pool.Fill). The answer is Make with
	// room reserved, to be followed by Filled or Unfilled; Later or Shed
	// when the ward holds back or refuses (the pool signals Fills again
	// when it is worth asking); or Wait when there is nothing to do,
	// including while callers are parked, whose own makes come first.
	Fill[T comparable] struct {
		Now   int64
		Reply chan Answer[T]
	}
	// Filled registers a resource opened after a Fill's Make, idle.
	// Answer.Kept false means the pool could not keep it (closed, or
	// full): the caller closes it. A resource the pool holds already is
	// refused with ErrDuplicate and must not be closed.
	Filled[T comparable] struct {
		Now   int64
		Item  T
		Gen   uint32 // the Fill's Answer.Gen, as for Made
		Reply chan Answer[T]
	}
	// Unfilled says the open a Fill's Make asked for did not happen: it
	// failed (Failed, and the ward hears of it), or the pool was closing
	// (the room is only freed). No answer.
	Unfilled struct {
		Now    int64
		Failed bool
	}
	// Due asks for the next idle resource due a keep-alive check (see
	// PoolConfig.KeepAlive), lent to the owner: Answer.Verdict Ready with
	// the Item, which goes back with Checked, or Wait when none is due or
	// the pool is closed. The owner asks again after each check, so at
	// most one resource is out of service for it at a time.
	Due[T comparable] struct {
		Now   int64
		Reply chan Answer[T]
	}
	// Checked hands back a resource Due lent, with the check's outcome: a
	// good one (OK) goes back among the idle, a bad one leaves the books
	// (Stats.CheckFailures). Answer.Kept false means the caller closes it.
	Checked[T comparable] struct {
		Now   int64
		Item  T
		OK    bool
		Reply chan Answer[T]
	}
	// Heat reports how hot the process is, for the ward's shedder.
	Heat struct {
		Now   int64
		Value float64
	}
	// Fleet hands the pool its fleet's view (see policy.Pool.SetFleet) at
	// Now (0: the actor reads the engine's clock). Parked callers are
	// served at once by the new view. Seq, if not 0, orders the views of
	// senders that race: a view whose Seq is not above the last one
	// applied is ignored. No answer.
	Fleet struct {
		Now  int64
		Seq  uint64
		View policy.FleetView
	}
)

// FleetReport is what a pool tells its fleet (see PoolConfig.Fleet): failed
// makes and the outcome of a fleet probe, never an ordinary make that
// worked. A healthy pool sends none.
type FleetReport struct {
	Now      int64 // when the report was sent, on the engine's clock
	Failures int   // makes that failed since the last report, a failed probe among them
	Probed   bool  // a fleet probe finished; ProbeOK says how
	ProbeOK  bool  // the probe's make worked
}

// Cause says why a Drop takes a lent resource off the books, so that Stats
// counts it under the right name.
type Cause uint8

// The causes.
const (
	Broken      Cause = iota // its holder found it broken (Stats.Broken)
	Unwanted                 // its holder's Reuse said no (Stats.Unreused)
	CheckFailed              // the pool's check of it failed (Stats.CheckFailures)
)

// Answer is a pool's reply.
type Answer[T comparable] struct {
	Verdict policy.Verdict
	Item    T             // for Ready
	After   time.Duration // for Later
	Kept    bool          // for Give and Made
	Check   bool          // for Ready: the resource sat for CheckIdle or longer; check it before use
	Why     policy.Reason // for Shed and Later (and ErrHeld): which part said no
	// Gen is, for Make, the pool's generation (the low 32 bits of
	// policy.Pool.Gen, which fit where Answer has room to spare, so that
	// it costs no answer anything), to be handed back with Made or Filled.
	Gen uint32
	Err error // ErrStopped, ErrClosed, ErrNotLent, ErrCancelled, ErrTooManyWaiting, ErrHeld, ErrDuplicate, ErrOutdated
}

// Tick is the engine's timer firing, which an actor asks of the engine's
// clock and sends itself: a pool evicts and wakes callers parked on Later;
// a limiter wakes its waiters. Now is the clock's reading when the
// timer fired, which is later than the instant it was asked for (real timers
// always are): stamped with the earlier instant, an actor would grant and
// schedule from a time already past and lose the lateness for good.
type Tick struct{ Now int64 }

// Limiter requests (Bucket, Window, and their keyed forms).
type (
	// Allow asks for N tokens (a bucket; a window counts one event whatever
	// N) for Key (keyed limiters only). A bucket's N <= 0 asks for nothing
	// and is granted at once, even while callers are parked. Without Wait it
	// is answered at once. With Wait, a refusal parks the caller in FIFO
	// order until it is granted; if the wait would end after Deadline (0:
	// none) it is answered at once with ErrDeadline and After set to the
	// wait it would have faced, and a parked caller whose turn comes after
	// its Deadline (a window's wait behind others is estimated from below)
	// is answered ErrDeadline then. Parked callers whose turn has come by
	// Now are granted before the Allow is decided, so a refusal's After is
	// never 0.
	Allow struct {
		Now      int64
		Key      string
		N        float64
		Wait     bool
		Deadline int64
		Reply    chan Permit
		Slot     *engine.Reply[Permit] // if not nil, the answer goes here rather than to Reply
		gen      uint64
	}
	// Withdraw withdraws a parked Allow, which is then answered with
	// ErrCancelled unless it was granted first. Either way the Allow gets
	// exactly one answer. No answer of its own.
	Withdraw struct{ Allow *Allow }
	// Left asks how many tokens or events are left for Key now, how long a
	// newcomer wanting one would wait, behind those parked, and how many
	// are parked. It takes nothing and grants nothing.
	Left struct {
		Now   int64
		Key   string
		Reply chan Permit
	}
	// Retune changes a bucket's Rate and Burst (read as SpawnBucket reads
	// them), or a window's Allow, at Now, keeping what it holds: the tokens
	// earned so far count at the old rate and the new rate applies from
	// Now; a lower burst cuts the tokens held to it; a window keeps its
	// counted events. Lent credit is taken back first, so the limiter never
	// admits more than the retuned policy would. Parked callers keep their
	// places and are served by the new numbers (one wanting more than a new
	// burst is answered ErrDeadline). Answered with OK and Left. A keyed
	// limiter retunes every key it holds, and makes new keys by the new
	// numbers (its answer carries no Left).
	Retune struct {
		Now         int64
		Rate, Burst float64 // a bucket's
		Allow       int     // a window's
		Reply       chan Permit
	}
	// Reserve asks a bucket for N tokens at once, as an Allow without Wait,
	// and on a grant names the reservation in Permit.Ticket, which an
	// Unreserve can give back while it is outstanding. A bucket keeps at most
	// MaxReservations outstanding: beyond that the oldest is forgotten, and
	// its Unreserve gives back nothing. A window answers it as an Allow, with
	// no Ticket.
	Reserve struct {
		Now   int64
		N     float64
		Reply chan Permit
	}
	// Unreserve gives back the tokens of the reservation Ticket names, as many
	// as its absence would have left in the bucket at Now: its N, less what
	// the bucket could not have held since (a bucket that filled up in the
	// meantime lost the difference to its burst; golang/go#69419 is the
	// mistake of giving back too many). Answered with OK and Left, the
	// tokens given back; a Ticket unknown, cancelled before, or 0 gives back
	// nothing and is answered with OK false.
	Unreserve struct {
		Now    int64
		Ticket uint64
		Reply  chan Permit
	}
	// Enter asks a gate for room; it answers at once, never queues.
	Enter struct{ Reply chan Permit }
	// Leave gives a gate's room back. No answer.
	Leave struct{}
)

// Budget requests (see SpawnBudget). A budget also answers Left, with the
// retries and hedges it would allow now, and Tick.
type (
	// Spend asks a budget for one retry (or, with Hedge, one hedge) at Now.
	// Answered with OK, counted if so, and Left, what it would allow after.
	Spend struct {
		Now   int64
		Hedge bool
		Reply chan Permit
		Slot  *engine.Reply[Permit] // if not nil, the answer goes here rather than to Reply
	}
	// Latency asks a budget for the P-quantile of the latencies counted
	// over the last tenth of its window, or over the whole window while
	// that tenth holds fewer than ten at or above it (see SpawnBudget and
	// policy.Quantile.At).
	// Answered with OK and the quantile in After. While the window holds
	// too few samples, it is the last answer for P, if P was answered
	// since it took its place among the four kept; else OK is false.
	Latency struct {
		Now   int64
		P     float64
		Reply chan Permit
		Slot  *engine.Reply[Permit] // if not nil, the answer goes here rather than to Reply
	}
	// Fold wakes a budget's actor to fold in what its Tally counted. A
	// Tally sends it; no answer.
	Fold struct{}
)

// Permit is a limiter's, gate's or budget's reply.
type Permit struct {
	OK    bool          // granted
	After time.Duration // refused: how long until it could be granted, never 0 for an Allow refused without Err (policy.Never: never); for Left: the wait a newcomer wanting one would face now
	Left  float64       // for Allow: what a caller that does not wait could still have now (0 while callers are parked); for Left: tokens or events left, or a gate's room (+Inf with no limit); for Enter: the room left
	// Held, for a gate's Enter and Left, is how many are inside.
	Held int
	// Parked, for Left: how many callers are parked (for Key), so a caller
	// can tell that a Wait it started is in line.
	Parked int
	// Waited, for an Allow with Wait granted after it was parked, is how
	// long it was parked, on the actor's clock: from its Now to the instant
	// its tokens were there. 0 for one granted at once.
	Waited time.Duration
	// Ticket, for a granted Reserve of a bucket, names the reservation for
	// an Unreserve; 0 otherwise.
	Ticket uint64
	Err    error
}

// Refuse answers a Take that reached a stopped actor.
func (m *Take[T]) Refuse() { m.answer(Answer[T]{Verdict: policy.Shed, Err: ErrStopped}) }

// Refuse answers a Give that reached a stopped actor.
func (m *Give[T]) Refuse() { m.answer(Answer[T]{Err: ErrStopped}) }

// Refuse answers a Made that reached a stopped actor.
func (m *Made[T]) Refuse() { m.Reply <- Answer[T]{Err: ErrStopped} }

// Refuse answers a Drop that reached a stopped actor, if it wants an answer.
func (m *Drop[T]) Refuse() { m.answer(Answer[T]{Err: ErrStopped}) }

// Refuse answers a Collect that reached a stopped actor.
func (m *Collect[T]) Refuse() { m.Reply <- nil }

// Refuse answers a Close that reached a stopped actor.
func (m *Close) Refuse() { m.Reply <- Stats{} }

// Refuse answers a Drained that reached a stopped actor.
func (m *Drained) Refuse() { m.Reply <- Stats{} }

// Refuse answers a SetLimits that reached a stopped actor.
func (m *SetLimits) Refuse() { replyErr(m.Reply, ErrStopped) }

// Refuse answers a Reset that reached a stopped actor.
func (m *Reset) Refuse() { replyErr(m.Reply, ErrStopped) }

// Refuse answers a Fill that reached a stopped actor.
func (m *Fill[T]) Refuse() { m.Reply <- Answer[T]{Verdict: policy.Shed, Err: ErrStopped} }

// Refuse answers a Filled that reached a stopped actor.
func (m *Filled[T]) Refuse() { m.Reply <- Answer[T]{Err: ErrStopped} }

// Refuse answers a Due that reached a stopped actor.
func (m *Due[T]) Refuse() { m.Reply <- Answer[T]{Verdict: policy.Wait, Err: ErrStopped} }

// Refuse answers a Checked that reached a stopped actor.
func (m *Checked[T]) Refuse() { m.Reply <- Answer[T]{Err: ErrStopped} }

// Refuse answers an Inspect that reached a stopped actor.
func (m *Inspect) Refuse() { m.Reply <- Stats{} }

// Refuse answers an Allow that reached a stopped actor.
func (m *Allow) Refuse() { m.answer(Permit{After: policy.Never, Err: ErrStopped}) }

// Refuse answers a Left that reached a stopped actor.
func (m *Left) Refuse() { m.Reply <- Permit{Err: ErrStopped} }

// Refuse answers a Retune that reached a stopped actor.
func (m *Retune) Refuse() { reply(m.Reply, Permit{Err: ErrStopped}) }

// Refuse answers a Reserve that reached a stopped actor.
func (m *Reserve) Refuse() { reply(m.Reply, Permit{After: policy.Never, Err: ErrStopped}) }

// Refuse answers an Unreserve that reached a stopped actor.
func (m *Unreserve) Refuse() { reply(m.Reply, Permit{Err: ErrStopped}) }

// Refuse answers an Enter that reached a stopped actor.
func (m *Enter) Refuse() { m.Reply <- Permit{Err: ErrStopped} }

// Refuse answers a Spend that reached a stopped actor.
func (m *Spend) Refuse() { m.answer(Permit{Err: ErrStopped}) }

// Refuse answers a Latency that reached a stopped actor.
func (m *Latency) Refuse() { answerTo(m.Slot, m.Reply, Permit{Err: ErrStopped}) }

// answer sends a Spend's one answer where the caller waits for it.
func (m *Spend) answer(p Permit) { answerTo(m.Slot, m.Reply, p) }

// answer sends a Latency's one answer where the caller waits for it.
func (m *Latency) answer(p Permit) { answerTo(m.Slot, m.Reply, p) }

// answerTo puts p in slot, or else sends it on ch without blocking.
func answerTo(slot *engine.Reply[Permit], ch chan Permit, p Permit) {
	if slot != nil {
		slot.Put(p)
		return
	}
	reply(ch, p)
}

// handle is where a queue keeps the parking of a Take.
func (m *Take[T]) handle() *uint64 { return &m.gen }

// handle is where a queue keeps the parking of an Allow.
func (m *Allow) handle() *uint64 { return &m.gen }

// answer sends a Take's one answer where the caller waits for it.
func (m *Take[T]) answer(a Answer[T]) {
	if m.Slot != nil {
		m.Slot.Put(a)
		return
	}
	m.Reply <- a
}

// answer sends a Give's one answer where the caller waits for it.
func (m *Give[T]) answer(a Answer[T]) {
	if m.Slot != nil {
		m.Slot.Put(a)
		return
	}
	m.Reply <- a
}

// answer sends a Drop's answer, if it wants one.
func (m *Drop[T]) answer(a Answer[T]) {
	switch {
	case m.Slot != nil:
		m.Slot.Put(a)
	case m.Reply != nil:
		m.Reply <- a
	}
}

// answer sends an Allow's one answer where the caller waits for it, without
// blocking (see reply).
func (m *Allow) answer(p Permit) {
	if m.Slot != nil {
		m.Slot.Put(p)
		return
	}
	reply(m.Reply, p)
}

// Adaptive gate requests (see SpawnAdaptive). An adaptive gate also takes
// Leave (room given back), Fold (wake to read the AdaptiveRoom) and Tick.
type (
	// AdaptiveEnter asks an adaptive gate for room for a caller of Class
	// (0, the lowest, to AdaptiveClasses-1; out of range is clamped). It
	// is answered OK at once when there is room and nobody waits. Without
	// Wait it is refused at once otherwise, with ErrOverLimit. With Wait
	// the caller is parked in line: higher classes first, first come first
	// within a class. It is refused at once with ErrDeadline, After the
	// expected wait, when the wait and a latency and a quarter would pass
	// Deadline (0: none; the latency is the mean of the calls timed last,
	// at least 8 once 8 have finished, and at most twice the last
	// window's), and with ErrTooManyWaiting when the line is full of callers
	// of its class or higher. A parked caller may be evicted by a higher
	// class (ErrTooManyWaiting), or as the limit falls (ErrOverLimit), and
	// is refused with ErrDeadline if its turn comes less than a latency and
	// a quarter before its Deadline.
	AdaptiveEnter struct {
		Now      int64
		Class    int
		Wait     bool
		Deadline int64
		Slot     *engine.Reply[Permit]
	}
	// AdaptiveWithdraw withdraws a parked AdaptiveEnter, which is then
	// answered with ErrCancelled unless it was granted first. Either way
	// the Enter gets exactly one answer. No answer of its own.
	AdaptiveWithdraw struct{ Enter *AdaptiveEnter }
	// AdaptiveInspect asks an adaptive gate for its stats.
	AdaptiveInspect struct{ Reply chan AdaptiveStats }
)

// AdaptiveClasses is how many priority classes an adaptive gate knows.
const AdaptiveClasses = 4

// AdaptiveStats is an adaptive gate's state and its counts since it
// started.
type AdaptiveStats struct {
	Limit    int           // how many may be inside at once now
	InFlight int           // inside now
	Queued   int           // waiting in line now
	Baseline time.Duration // the latency the limit takes as no queue; 0 before any
	Latency  time.Duration // the last window's mean latency; 0 before any
	// Classes counts by class, the lowest at index 0.
	Classes [AdaptiveClasses]AdaptiveClass
}

// AdaptiveClass is one priority class's counts.
type AdaptiveClass struct {
	Entered   int64 // let in
	Shed      int64 // refused for want of room: TryEnter, or evicted as the limit fell
	QueueFull int64 // refused with the line full, or evicted by a higher class
	Deadline  int64 // refused: the expected wait would pass the deadline, or its turn came too late to finish
	Cancelled int64 // withdrawn while waiting: the caller's ctx ended
}

// Refuse answers an AdaptiveEnter that reached a stopped actor.
func (m *AdaptiveEnter) Refuse() { m.Slot.Put(Permit{Err: ErrStopped}) }

// Refuse answers an AdaptiveInspect that reached a stopped actor.
func (m *AdaptiveInspect) Refuse() { m.Reply <- AdaptiveStats{} }
