package engine

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// scheduling is how an actor's messages get a goroutine to run on. hybrid
// is what every engine uses; the other three are kept for the engine's own
// tests and benchmarks, which measure hybrid against them (see DESIGN.md).
type scheduling uint8

const (
	// hybrid, the default: a sender that finds the actor idle runs the actor
	// on its own goroutine for at most a few messages (the inline budget),
	// which makes an uncontended call cost a function call rather than two
	// goroutine switches; past the budget the actor's own long-lived
	// goroutine takes over, so no sender ever runs more than the budget of
	// other callers' messages.
	hybrid scheduling = iota
	// dedicated gives every actor one long-lived goroutine that runs all of
	// its messages; senders only enqueue.
	dedicated
	// stock is protoactor's default dispatcher: a new goroutine whenever the
	// mailbox goes from idle to busy.
	stock
	// synchronized is protoactor's synchronized dispatcher: the sender that
	// finds the actor idle runs every message queued until the mailbox is
	// empty, however many other callers keep adding.
	synchronized
)

// String names the dispatch.
func (d scheduling) String() string {
	switch d {
	case hybrid:
		return "hybrid"
	case dedicated:
		return "dedicated"
	case stock:
		return "stock"
	case synchronized:
		return "synchronized"
	}
	return "scheduling(?)"
}

// Refusable is a request that can be answered without its actor: a message
// that reaches a stopped actor is refused (its caller told the actor is
// gone) instead of being dropped, so no caller waits for an answer that will
// never come.
type Refusable interface {
	Refuse()
}

// Handler is an actor that takes its user messages straight from the
// engine's mailbox. The mailbox calls Handle for every user message instead
// of passing it through protoactor's invoker and actor.Context, which on a
// round trip of a hundred nanoseconds is a fifth of the cost; protoactor's
// own messages (envelopes, poison pills, auto-responders) still go through
// the invoker, and so does everything on the system path: Started,
// Stopping, Stopped, failures and supervision. A panic in Handle goes to the
// supervisor exactly as one in Receive does.
type Handler interface {
	Handle(msg any)
}

const (
	running int64 = 1 // the status word's low bit: somebody holds the mailbox
	queued  int64 = 2 // one message counted in the status word
)

const (
	mailboxSize = 1024 // user messages queued before a sender waits: backpressure, not loss
	systemSize  = 256  // system messages are few: start, stop, suspend, resume, failure
	throughput  = 300  // messages run before the actor's goroutine yields, as protoactor's default
	// defaultBudget is how many messages a sender that takes an idle
	// mailbox runs, its own included, before it hands the rest to the
	// actor's goroutine: enough to answer the few callers a second
	// processor queues meanwhile (combining), few enough that no caller
	// runs others' work for long.
	defaultBudget = 16
)

// mailbox is a protoactor Mailbox run by one of the schedulings. It
// exists for three reasons: protoactor's default mailbox cannot bound how
// many messages one sender runs inline, it drops messages that reach a
// stopped actor (which would leave a blocking caller waiting for ever), and
// its queues and invoker cost more than the work of a pool's Take.
//
// Its state is one status word: the low bit says somebody holds the
// mailbox (runs its messages), the rest counts the messages queued, user
// and system. A sender counts its message before queueing it, so the count
// is never below what is queued, and a word of zero means nobody holds the
// mailbox and nobody is ahead: the sender may run its message at once. The
// holder lets go with one atomic operation and then looks once more
// (see let), which is what makes a message queued while it was letting go
// impossible to strand.
type mailbox struct {
	state     atomic.Int64
	user      *ring
	system    chan any
	systems   atomic.Int32 // system messages in the channel, raised after each send
	suspended atomic.Bool
	closed    atomic.Bool
	// handed says the mailbox is held for the dedicated goroutine, which
	// has not started on it yet. Whoever clears it holds the mailbox: that
	// goroutine when it wakes, or under hybrid a sender or a waiting caller
	// passing by (see help), so queued callers are not kept waiting for a
	// goroutine the scheduler may not run for a while.
	handed atomic.Bool
	// starving says the last parked caller to run again took longer than
	// starveAfter from its answer (see ran); woken, that the actor has
	// woken a caller since, for the sender that ran it to yield to
	// (yieldIfStarving).
	starving atomic.Bool
	woken    atomic.Bool
	mode     scheduling
	budget   int
	spin     spinner
	direct   Handler // the actor, if it takes user messages straight
	inline   any     // the message its own sender is running; only the holder touches it
	invoker  actor.MessageInvoker
	dispatch actor.Dispatcher
	kick     chan struct{} // wakes the dedicated goroutine; at most one outstanding
	quit     chan struct{} // closed when the actor stops
	done     chan struct{} // closed when the dedicated goroutine, if any, has returned
}

func newMailbox(mode scheduling, budget int) *mailbox {
	if budget < 1 {
		budget = 1
	}
	m := &mailbox{
		user:   newRing(mailboxSize),
		system: make(chan any, systemSize),
		mode:   mode,
		budget: budget,
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	m.spin.init()
	switch mode {
	case hybrid, dedicated:
		m.kick = make(chan struct{}, 1)
	default:
		close(m.done)
	}
	return m
}

// PostUserMessage queues a message and makes sure something will run it.
// It blocks only while the mailbox holds mailboxSize messages.
//
// Under hybrid, a sender that finds the mailbox idle with nothing counted
// runs its message at once without passing it through the queue: nobody
// can be ahead of it, not even a sender half way through queueing, since
// senders count first. It then runs what others queued meanwhile, up to the
// budget, and hands the rest to the actor's goroutine.
func (m *mailbox) PostUserMessage(msg any) { m.post(msg) }

// post is PostUserMessage, reporting where msg was queued: its place in
// the ring plus one, or 0 if its sender ran it at once.
func (m *mailbox) post(msg any) uint64 {
	if m.mode == hybrid && m.state.Load() == 0 && m.state.CompareAndSwap(0, running) {
		if !m.suspended.Load() && !m.closed.Load() {
			m.inline = msg
			m.invoke(msg)
			m.inline = nil
			if m.drain(1, m.budget) {
				m.handoff()
			}
			m.yieldIfStarving()
			return 0
		}
		// Suspended or stopped: let go, and queue it as everyone does; a
		// full queue must not be waited on while holding the mailbox.
		if !m.let() {
			m.run() // something arrived meanwhile that may run now
		}
	}
	m.state.Add(queued)
	at := m.user.push(msg) + 1
	m.claim()
	m.yieldIfStarving()
	return at
}

// settle waits until the user message queued at pos has run (head has
// passed it: see ring.pop), or the actor is stopped or suspended, or a
// second has passed, and reports whether the message ran. Under hybrid it
// runs the actor here if the actor waits for a goroutine. The second is
// for a holder that waits on the caller itself (a handler that moves the
// virtual clock): the message then runs once that holder is free.
func (m *mailbox) settle(pos uint64) bool {
	var start time.Time
	for spins := 0; ; spins++ {
		switch {
		case m.user.head.Load() > pos:
			return true
		case m.closed.Load() || m.suspended.Load():
			return false
		}
		m.help()
		if spins < settleSpins {
			runtime.Gosched()
			continue
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > settleMost {
			return false
		}
		time.Sleep(settleNap)
	}
}

// How settle waits: it yields settleSpins times, then naps settleNap at a
// time, for at most settleMost in all.
const (
	settleSpins = 1000
	settleNap   = 50 * time.Microsecond
	settleMost  = time.Second
)

// starveAfter is how long a caller may take from being answered, after it
// parked, to running again before the mailbox counts it starved:
// sync.Mutex's threshold for its starvation mode.
const starveAfter = 1e6 // nanoseconds

// ran notes how long a parked caller answered at woken (nanotime) took to
// run again: over starveAfter, the mailbox starves; under, it does not.
func (m *mailbox) ran(woken int64) {
	late := nanotime()-woken > starveAfter
	if late != m.starving.Load() {
		m.starving.Store(late)
	}
	if !late && m.woken.Load() {
		m.woken.Store(false) // noted while it starved: nobody need yield now
	}
}

// wokeOne notes, while the mailbox starves, that the actor has just woken
// a parked caller (Reply.Put), for the sender running it to yield to.
func (m *mailbox) wokeOne() {
	if m.starving.Load() {
		m.woken.Store(true)
	}
}

// yieldIfStarving gives up the processor once, for a sender that has just
// run the actor at once or queued its message (and perhaps run the actor
// after), if the actor woke a parked caller while the mailbox starves: the
// waker itself, most often, since the note is taken by the first sender to
// finish, but not always. A caller the actor answers is made runnable
// behind the goroutine that answered it; and with more runnable goroutines than
// processors, a sender that never blocks (it finds the actor idle and runs
// it, time after time) keeps its processor for the rest of its time slice,
// up to 10 ms, while the callers it answered wait: at 512 callers on two
// processors, parked callers took 2.4 ms on average from their answer to
// running again. So once one is seen to take over starveAfter, the
// senders that wake callers yield to them, until one runs again within
// starveAfter: sync.Mutex's starvation mode, where the unlocker hands
// itself over to the waiter. Otherwise it costs one atomic load. It does
// not cure 512 callers on two processors: a run that answers several
// parked callers leaves only the last next in line for the processor, and
// the others wait behind every runnable goroutine (bench/RESULTS.md).
func (m *mailbox) yieldIfStarving() {
	if m.starving.Load() && m.woken.Load() && m.woken.CompareAndSwap(true, false) {
		runtime.Gosched()
	}
}

// PostSystemMessage queues a protoactor system message.
func (m *mailbox) PostSystemMessage(msg any) {
	m.state.Add(queued)
	m.system <- msg
	m.systems.Add(1)
	m.claim()
}

// claim takes the mailbox after queueing, if nobody holds it, and runs it.
// A holder that let go before the message was published looks again
// afterwards (see let), so one of the two always runs it.
func (m *mailbox) claim() {
	for s := m.state.Load(); s&running == 0; s = m.state.Load() {
		if m.state.CompareAndSwap(s, s|running) {
			m.run()
			return
		}
	}
	m.help()
}

// help takes over a mailbox handed to the dedicated goroutine that has not
// started on it, under hybrid, and runs up to the budget of its messages:
// a caller passing by does the work instead of waiting for a goroutine to
// be scheduled, which on a busy machine can take a whole time slice.
func (m *mailbox) help() {
	if m.mode == hybrid && m.handed.Load() && m.handed.CompareAndSwap(true, false) {
		if m.drain(0, m.budget) {
			m.handoff()
		}
	}
}

// RegisterHandlers is called by protoactor when the actor is spawned.
func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.dispatch = dispatcher
}

// Start starts the dedicated goroutine, for the dispatches that have one.
func (m *mailbox) Start() {
	if m.kick != nil {
		go m.loop()
	}
}

// UserMessageCount reports how many messages are queued, user and system.
func (m *mailbox) UserMessageCount() int { return max(0, int(m.state.Load()/queued)) }

func (m *mailbox) loop() {
	defer close(m.done)
	for {
		select {
		case <-m.kick:
			if m.handed.CompareAndSwap(true, false) { // else a helper took it
				m.drain(0, 0)
			}
		case <-m.quit:
			// Whatever is still queued is refused here or by whoever posts
			// next, so no caller is left waiting. A handoff that raced with
			// quit leaves a held mailbox: drain it.
			if m.handed.CompareAndSwap(true, false) {
				m.drain(0, 0)
			} else if s := m.state.Load(); s&running == 0 && m.state.CompareAndSwap(s, s|running) {
				m.drain(0, 0)
			}
			return
		}
	}
}

// stop marks the actor stopped: its goroutine returns, and from now on user
// messages are refused rather than run. quit doubles as the stopped signal.
func (m *mailbox) stop() {
	if m.closed.CompareAndSwap(false, true) {
		close(m.quit)
	}
}

// run schedules a mailbox its caller has just taken.
func (m *mailbox) run() {
	switch {
	case m.closed.Load():
		m.drain(0, 0)
	case m.mode == hybrid:
		if m.drain(0, m.budget) {
			m.handoff()
		}
	case m.mode == dedicated:
		m.handoff()
	default:
		m.dispatch.Schedule(m.process)
	}
}

// pending says whether anything is counted.
func (m *mailbox) pending() bool { return m.state.Load() >= queued }

// handoff passes a held mailbox to its dedicated goroutine, or to whoever
// helps first (see handed); the kick channel never holds more than one.
func (m *mailbox) handoff() {
	if m.closed.Load() {
		// The goroutine is gone or going: whoever holds the mailbox drains
		// it, refusing what is left.
		m.drain(0, 0)
		return
	}
	m.handed.Store(true)
	select {
	case m.kick <- struct{}{}:
	default: // a kick is pending already: the goroutine will look at handed
	}
	if m.closed.Load() && m.handed.CompareAndSwap(true, false) {
		m.drain(0, 0) // the goroutine may have gone meanwhile
	}
}

func (m *mailbox) process() { m.drain(0, 0) }

// drain runs messages while it holds the mailbox, n of them already run by
// its caller. With limit > 0 it runs until n reaches limit and reports true
// if it stopped with messages left (still holding the mailbox, for the
// caller to hand off); otherwise it runs until nothing it may run is left,
// yielding every throughput messages, and returns false having let go.
func (m *mailbox) drain(n, limit int) (more bool) {
	for {
		for limit <= 0 || n < limit {
			if !m.step() {
				break
			}
			n++
			if limit <= 0 && n%throughput == 0 {
				runtime.Gosched()
			}
		}
		if limit > 0 && n >= limit && m.pending() {
			return true
		}
		if m.let() {
			return false
		}
	}
}

// let lets the mailbox go, and reports false if it took it back because a
// message it may run arrived meanwhile. A sender whose message was counted
// but not yet published when the holder looked (or found the actor
// suspended) saw the mailbox held and left the message to the holder; so
// after letting go the holder looks again. Either the sender's claim comes
// after the letting go, and it sees the mailbox free; or its publishing
// came before it, and the holder sees the message.
func (m *mailbox) let() bool {
	if m.state.And(^running) == running {
		return true // nothing was counted: nobody is half way through queueing
	}
	if !m.runnable() {
		return true
	}
	for s := m.state.Load(); s&running == 0; s = m.state.Load() {
		if m.state.CompareAndSwap(s, s|running) {
			return false
		}
	}
	return true // somebody else holds it now and will run it
}

// runnable says whether a message that may run now is published.
func (m *mailbox) runnable() bool {
	return m.systems.Load() > 0 || !m.suspended.Load() && m.user.ready()
}

// step runs one message, system messages first. It reports false when there
// is nothing it may run.
func (m *mailbox) step() (ran bool) {
	if m.state.Load() < queued {
		return false // the common case, without touching the queues
	}
	if m.systems.Load() > 0 {
		var msg any
		select {
		case msg = <-m.system:
		default:
			return false
		}
		m.systems.Add(-1)
		m.state.Add(-queued)
		m.system1(msg)
		return true
	}
	if m.suspended.Load() {
		return false
	}
	msg, ok := m.user.pop()
	if !ok {
		return false // counted, not yet published: its sender will see to it
	}
	m.state.Add(-queued)
	if m.closed.Load() {
		if r, ok := msg.(Refusable); ok {
			r.Refuse()
		}
	} else {
		m.invoke(msg)
	}
	m.user.done()
	return true
}

// system1 runs one system message, handing a panic to the supervisor.
func (m *mailbox) system1(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	switch msg.(type) {
	case *actor.SuspendMailbox:
		m.suspended.Store(true)
	case *actor.ResumeMailbox:
		m.suspended.Store(false)
	default:
		m.invoker.InvokeSystemMessage(msg)
	}
}

// invoke runs one user message, handing a panic to the supervisor: the
// engine's strategy resumes the actor, keeping its state. A Handler gets it
// straight, unless it is one of protoactor's own, which need its context.
func (m *mailbox) invoke(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	if m.direct != nil {
		switch msg.(type) {
		case *actor.MessageEnvelope, *actor.PoisonPill, actor.AutoRespond:
		default:
			m.direct.Handle(msg)
			return
		}
	}
	m.invoker.InvokeUserMessage(msg)
}
