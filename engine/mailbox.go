package engine

import (
	"runtime"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Dispatch names how an actor's messages get a goroutine to run on. The
// choice and the numbers behind it are in the package documentation.
type Dispatch uint8

const (
	// Hybrid, the default: a sender that finds the actor idle runs the actor
	// on its own goroutine for at most a few messages (the inline budget),
	// which makes an uncontended call cost a function call rather than two
	// goroutine switches; past the budget the actor's own long-lived
	// goroutine takes over, so no sender ever runs more than the budget of
	// other callers' messages.
	Hybrid Dispatch = iota
	// Dedicated gives every actor one long-lived goroutine that runs all of
	// its messages; senders only enqueue.
	Dedicated
	// Spawn is protoactor's default dispatcher: a new goroutine whenever the
	// mailbox goes from idle to busy.
	Spawn
	// Synchronized is protoactor's synchronized dispatcher: the sender that
	// finds the actor idle runs every message queued until the mailbox is
	// empty, however many other callers keep adding.
	Synchronized
)

// String names the dispatch.
func (d Dispatch) String() string {
	switch d {
	case Hybrid:
		return "hybrid"
	case Dedicated:
		return "dedicated"
	case Spawn:
		return "spawn"
	case Synchronized:
		return "synchronized"
	}
	return "Dispatch(?)"
}

// Refusable is a request that can be answered without its actor: a message
// that reaches a stopped actor is refused (its caller told the actor is
// gone) instead of being dropped, so no caller waits for an answer that will
// never come.
type Refusable interface {
	Refuse()
}

const (
	idle int32 = iota
	running
)

const (
	mailboxSize = 4096 // user messages queued before a sender waits: backpressure, not loss
	systemSize  = 256  // system messages are few: start, stop, suspend, resume, failure
	throughput  = 300  // messages run before the actor's goroutine yields, as protoactor's default
)

// mailbox is a protoactor Mailbox whose queues are buffered channels and
// whose scheduling follows a Dispatch. It exists for two reasons: protoactor's
// default mailbox cannot bound how many messages one sender runs inline, and
// it drops messages that reach a stopped actor, which would leave a blocking
// caller waiting for ever.
type mailbox struct {
	user   chan any
	system chan any
	// users and systems count the messages queued, cheaper to read than a
	// channel's length. Each is raised after its send and lowered after its
	// receive, so it can lag the channel, and dip to -1 for a moment: read
	// anything at or below zero as empty. A sender raises it before its CAS,
	// so a drainer that stores idle and then looks never misses one.
	users     atomic.Int32
	systems   atomic.Int32
	status    atomic.Int32
	suspended atomic.Bool
	closed    atomic.Bool
	mode      Dispatch
	budget    int
	invoker   actor.MessageInvoker
	dispatch  actor.Dispatcher
	kick      chan struct{} // wakes the dedicated goroutine; at most one outstanding
	quit      chan struct{} // closed when the actor stops
	done      chan struct{} // closed when the dedicated goroutine, if any, has returned
}

func newMailbox(mode Dispatch, budget int) *mailbox {
	if budget < 1 {
		budget = 1
	}
	m := &mailbox{
		user:   make(chan any, mailboxSize),
		system: make(chan any, systemSize),
		mode:   mode,
		budget: budget,
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	switch mode {
	case Hybrid, Dedicated:
		m.kick = make(chan struct{}, 1)
	default:
		close(m.done)
	}
	return m
}

// PostUserMessage enqueues a message and makes sure something will run it.
// It blocks only while the mailbox holds mailboxSize messages.
//
// Under Hybrid, a sender that finds the actor idle with nothing queued runs
// its message at once without passing it through the queue: nobody can be
// ahead of it, and the queue's send and receive are most of an uncontended
// call's cost.
func (m *mailbox) PostUserMessage(msg any) {
	if m.mode == Hybrid && m.users.Load() <= 0 && m.systems.Load() <= 0 && m.status.CompareAndSwap(idle, running) {
		// The counters can lag their channels; the lengths cannot change
		// under us now (only the holder of running receives), so they say
		// for certain that nobody is ahead.
		if len(m.user) == 0 && len(m.system) == 0 && !m.suspended.Load() && !m.closed.Load() {
			m.invoke(msg)
			if m.drain(1, m.budget) {
				m.handoff()
			}
			return
		}
		// Someone is ahead, or the actor is suspended or stopped: let go,
		// and queue as everyone does (a full queue must not be waited on
		// while holding the mailbox).
		m.status.Store(idle)
	}
	m.user <- msg
	m.users.Add(1)
	m.schedule()
}

// PostSystemMessage enqueues a protoactor system message.
func (m *mailbox) PostSystemMessage(msg any) {
	m.system <- msg
	m.systems.Add(1)
	m.schedule()
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

// UserMessageCount reports how many user messages are queued.
func (m *mailbox) UserMessageCount() int { return max(0, int(m.users.Load())) }

func (m *mailbox) loop() {
	defer close(m.done)
	for {
		select {
		case <-m.kick:
			m.drain(0, 0)
		case <-m.quit:
			// Whatever is still queued is refused here or by whoever posts
			// next, so no caller is left waiting. A kick that raced with
			// quit hands over a running mailbox: drain it.
			select {
			case <-m.kick:
				m.drain(0, 0)
			default:
				if m.status.CompareAndSwap(idle, running) {
					m.drain(0, 0)
				}
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

func (m *mailbox) schedule() {
	if !m.status.CompareAndSwap(idle, running) {
		return
	}
	switch {
	case m.closed.Load():
		m.drain(0, 0)
	case m.mode == Hybrid:
		if m.drain(0, m.budget) {
			m.handoff()
		}
	case m.mode == Dedicated:
		m.handoff()
	default:
		m.dispatch.Schedule(m.process)
	}
}

// pending says whether anything is queued.
func (m *mailbox) pending() bool { return m.users.Load() > 0 || m.systems.Load() > 0 }

// handoff passes a running mailbox to its dedicated goroutine. The status
// stays running, so the kick channel never holds more than one.
func (m *mailbox) handoff() {
	if m.closed.Load() {
		// The goroutine is gone or going: whoever holds the mailbox drains
		// it, refusing what is left.
		m.drain(0, 0)
		return
	}
	select {
	case m.kick <- struct{}{}:
	case <-m.quit:
		m.drain(0, 0)
	}
}

func (m *mailbox) process() { m.drain(0, 0) }

// drain runs messages while the mailbox is running, n of them already run
// by its caller. With limit > 0 it runs until n reaches limit and reports
// true if it stopped with messages left (the mailbox still running, for the
// caller to hand off); otherwise it runs until the mailbox is empty, yielding
// every throughput messages, and returns false with the mailbox idle.
func (m *mailbox) drain(n, limit int) (more bool) {
	if limit > 0 && n >= limit && m.pending() {
		return true
	}
	for {
		for m.step() {
			n++
			if limit > 0 && n >= limit {
				if m.pending() {
					return true
				}
			} else if limit <= 0 && n%throughput == 0 {
				runtime.Gosched()
			}
		}
		m.status.Store(idle)
		// A sender may have enqueued after step saw nothing and failed its
		// CAS while we were running: look once more before leaving.
		if m.systems.Load() <= 0 && (m.suspended.Load() || m.users.Load() <= 0) {
			return false
		}
		if !m.status.CompareAndSwap(idle, running) {
			return false
		}
	}
}

// step runs one message, system messages first. It reports false when there
// is nothing it may run.
func (m *mailbox) step() (ran bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			// The supervisor decides what happens next; the engine's
			// strategy resumes, keeping the actor and its books.
			m.invoker.EscalateFailure(r, msg)
			ran = true
		}
	}()
	if !m.pending() {
		return false // the common case, without the cost of two selects
	}
	select {
	case msg = <-m.system:
		m.systems.Add(-1)
		switch msg.(type) {
		case *actor.SuspendMailbox:
			m.suspended.Store(true)
		case *actor.ResumeMailbox:
			m.suspended.Store(false)
		default:
			m.invoker.InvokeSystemMessage(msg)
		}
		return true
	default:
	}
	if m.suspended.Load() {
		return false
	}
	select {
	case msg = <-m.user:
		m.users.Add(-1)
		if m.closed.Load() {
			if r, ok := msg.(Refusable); ok {
				r.Refuse()
			}
			return true
		}
		m.invoke(msg)
		return true
	default:
		return false
	}
}

// invoke runs one user message, handing a panic to the supervisor: the
// engine's strategy resumes the actor, keeping its state.
func (m *mailbox) invoke(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	m.invoker.InvokeUserMessage(msg)
}
