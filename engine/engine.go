package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// Clock is the engine's one clock: every timestamp an actor sees and every
// timer it asks for comes from here. Now is in nanoseconds and only its
// differences matter. AfterFunc runs f once after d. Production uses the
// real clock; tests hand in a virtual one so time moves only when they say.
//
// A context's deadline is a time.Time on the machine's clock: the
// clients read how far off it is with time.Until. A Clock that also has
// a method Until(time.Time) time.Duration is asked instead. A virtual
// clock whose contexts carry deadlines on its own time gives one, so a
// deadline means the same in every run however the machine is loaded.
type Clock = vclock.Clock

// Timer is a pending AfterFunc; Stop reports whether it stopped the timer
// before it fired.
type Timer = vclock.Timer

// Errors the engine answers with.
var (
	// ErrShutdown is returned by Spawn after Shutdown has begun.
	ErrShutdown = errors.New("moonpool/engine: engine is shut down")
	// ErrNameTaken is returned by Spawn when the name is in use.
	ErrNameTaken = errors.New("moonpool/engine: name is taken")
	// ErrNotFound is returned by Stop for a name nobody holds.
	ErrNotFound = errors.New("moonpool/engine: no actor by that name")
	// ErrReservedName is returned by Spawn for a name that begins with
	// ReservedPrefix.
	ErrReservedName = errors.New("moonpool/engine: names beginning with " + ReservedPrefix + " are the engine's")
	// ErrStopped is the cause (context.Cause) of a shutdown hook's ctx
	// ending because its actor was stopped under it: by a Stop or Shutdown
	// whose own ctx ended while this hook was still running.
	ErrStopped = errors.New("moonpool/engine: actor stopped")
)

// ReservedPrefix begins every fresh name Spawn makes up, and no name a
// caller may choose, so a fresh name can never be taken already. protoactor
// names its own anonymous actors with it too.
const ReservedPrefix = "$"

// Option configures an Engine.
type Option func(*Engine)

// WithClock makes c the engine's clock. The default is the real, monotonic
// clock. A nil c is ignored.
func WithClock(c Clock) Option {
	return func(e *Engine) {
		if c != nil {
			e.clock = c
		}
	}
}

// WithLogger sends the engine's and protoactor's log lines to l. The default
// discards them: a library prints nothing unless asked. A nil l is ignored.
func WithLogger(l *slog.Logger) Option {
	return func(e *Engine) {
		if l != nil {
			e.logger = l
		}
	}
}

// withDispatch chooses how actors' messages are run, for the engine's tests
// and benchmarks (see scheduling); budget is
// how many messages a sender may run inline under hybrid (values below 1 are
// read as 1). The default is hybrid with a budget of 16 (see the package
// documentation).
func withDispatch(d scheduling, budget int) Option {
	return func(e *Engine) {
		if d <= synchronized {
			e.dispatch = d
		}
		e.budget = max(budget, 1)
	}
}

// WithHeatEvery sets how often the engine measures the process's heat for
// the pools' shedders (see Heat). The default is 250 ms; zero or less turns
// measuring off, and shedders then never see the process as hot.
func WithHeatEvery(d time.Duration) Option {
	return func(e *Engine) { e.heatEvery = d }
}

// Engine owns the actor system, the clock, the timers and the names. Pools
// and limiters run as its actors; Shutdown stops them all. The zero Engine is
// not usable: build one with New. Its methods are safe for concurrent use.
type Engine struct {
	system    *actor.ActorSystem
	clock     Clock
	logger    *slog.Logger
	dispatch  scheduling
	budget    int
	heatEvery time.Duration
	settle    *settler // for a virtual clock: see Ref.Fire; nil otherwise
	names     *names
	down      atomic.Bool
	seq       atomic.Uint64
	// downDone is closed once the Shutdown that set down has finished,
	// with its result in downErr, for any later Shutdown to return.
	downDone chan struct{}
	downErr  error
}

// New starts an engine and its directory actor. It does not block; Shutdown
// stops everything it started.
func New(opts ...Option) *Engine {
	e := &Engine{
		clock:     vclock.Real(),
		logger:    slog.New(slog.DiscardHandler),
		dispatch:  hybrid,
		budget:    defaultBudget,
		heatEvery: 250 * time.Millisecond,
		downDone:  make(chan struct{}),
	}
	for _, o := range opts {
		o(e)
	}
	if v := vclock.Of(e.clock); v != nil {
		e.settle = &settler{}
		e.settle.remove = v.AfterEach(e.settle.wait)
	}
	logger := e.logger
	e.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }),
		actor.WithDeadLetterRequestLogging(false),
	)
	newNames(e)
	return e
}

// Clock is the engine's clock.
func (e *Engine) Clock() Clock { return e.clock }

// Now reads the engine's clock, in nanoseconds.
func (e *Engine) Now() int64 { return e.clock.Now() }

// Logger is where the engine logs; it discards unless WithLogger was given.
func (e *Engine) Logger() *slog.Logger { return e.logger }

// Sleep blocks for d on the engine's clock, or until ctx is done, in which
// case it returns an error matching ctx.Err(). It leaves no timer behind.
func (e *Engine) Sleep(ctx context.Context, d time.Duration) error {
	return vclock.Sleep(ctx, e.clock, d)
}

// Spawn starts a as an actor under name, or under a fresh name when name is
// empty. Fresh names begin with ReservedPrefix, which a caller's name may
// not (ErrReservedName), so they never collide with one. shutdown, if not
// nil, is what Stop and Shutdown run before stopping the actor: it hands
// the actor's resources back and waits, within ctx, for lent ones to come
// home. Spawn does not block on the actor. Once Shutdown has begun it
// answers ErrShutdown; a Spawn already under way when Shutdown begins
// finishes first, and Shutdown stops its actor with the others.
func (e *Engine) Spawn(name string, a actor.Actor, shutdown func(context.Context) error) (*Ref, error) {
	if e.down.Load() {
		return nil, ErrShutdown
	}
	if name == "" {
		name = fmt.Sprintf("%sactor-%d", ReservedPrefix, e.seq.Add(1))
	} else if strings.HasPrefix(name, ReservedPrefix) {
		return nil, fmt.Errorf("%w: %q", ErrReservedName, name)
	}
	mb := newMailbox(e.dispatch, e.budget)
	mb.direct, _ = a.(Handler)
	ref := &Ref{name: name, mb: mb, engine: e, shutdown: shutdown}
	ref.gone, ref.markGone = context.WithCancel(context.Background())
	if b, ok := a.(Binder); ok {
		b.Bind(ref)
	}
	// The name is held for this Spawn, but nobody can find the Ref, nor
	// Shutdown stop it, until its PID is set: done publishes it.
	if err := e.names.add(ref); err != nil {
		return nil, err
	}
	props := actor.PropsFromProducer(
		func() actor.Actor { return &member{inner: a, mb: mb, gone: ref.markGone} },
		actor.WithMailbox(func() actor.Mailbox { return mb }),
		actor.WithDispatcher(e.dispatcher()),
		actor.WithGuardian(resume{}),
	)
	pid, err := e.system.Root.SpawnNamed(props, name)
	if err != nil {
		e.names.done(ref, false)
		ref.markGone()
		if errors.Is(err, actor.ErrNameExists) {
			return nil, ErrNameTaken
		}
		return nil, err
	}
	ref.pid = pid
	e.names.done(ref, true)
	return ref, nil
}

func (e *Engine) dispatcher() actor.Dispatcher {
	if e.dispatch == synchronized {
		return actor.NewSynchronizedDispatcher(throughput)
	}
	return actor.NewDefaultDispatcher(throughput)
}

// WatchHeat calls fn with the process's heat (see HeatTarget) every
// WithHeatEvery on the engine's clock, until the returned cancel is called.
// fn runs on the engine's directory actor and must not block: a pool's handle
// passes the reading on to its actor as a message. Nothing is measured while
// nobody watches.
func (e *Engine) WatchHeat(fn func(now int64, heat float64)) (cancel func()) {
	id := e.seq.Add(1)
	e.names.watchHeat(id, fn)
	return func() { e.names.unwatchHeat(id) }
}

// Lookup finds the actor spawned under name.
func (e *Engine) Lookup(name string) (*Ref, bool) { return e.names.get(name) }

// Stop runs the named actor's shutdown (within ctx) and stops it, as the
// actor's Ref.Stop does. It answers ErrNotFound for a name nobody holds.
func (e *Engine) Stop(ctx context.Context, name string) error {
	ref, ok := e.names.get(name)
	if !ok {
		return ErrNotFound
	}
	return ref.Stop(ctx)
}

// Shutdown stops every actor: it runs each one's shutdown concurrently, so
// idle resources are handed back for closing and lent ones are waited for
// within ctx, then stops the actors and the actor system. It returns ctx's
// error if ctx ended before every shutdown finished; the actors are stopped
// all the same, even one whose Stop (a pool's Close, say) with a longer ctx
// is still waiting, and no goroutine of the engine's is left. ctx bounds
// everything Shutdown owns.
//
// Once Shutdown has begun, Spawn answers ErrShutdown; a Spawn already
// under way finishes first and its actor is stopped with the rest. A
// second Shutdown waits, within its own ctx, for the first to end and
// returns the first's result (or its own ctx's error if that ends first).
func (e *Engine) Shutdown(ctx context.Context) error {
	if !e.down.CompareAndSwap(false, true) {
		select {
		case <-e.downDone:
			return e.downErr
		default:
		}
		select {
		case <-e.downDone:
			return e.downErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	refs := e.names.all() // waits for Spawns under way
	errs := make(chan error, len(refs))
	for _, r := range refs {
		go func() { errs <- r.close(ctx) }()
	}
	var first error
	for range refs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	e.names.stop()
	e.system.Shutdown()
	if e.settle != nil {
		e.settle.stop()
	}
	e.downErr = first
	close(e.downDone)
	return first
}

// Binder is an actor that wants its own Ref, for the timers it asks of the
// engine's clock. Spawn calls Bind before anyone can reach the actor.
type Binder interface {
	Bind(*Ref)
}

// Ref is a handle on one actor of the engine: its name, its protoactor PID,
// and a direct line to its mailbox.
type Ref struct {
	name     string
	pid      *actor.PID
	mb       *mailbox
	engine   *Engine
	shutdown func(context.Context) error
	closing  atomic.Bool
	halted   atomic.Bool // protoactor has been told to stop it: once only
	// gone ends when the actor has stopped (or never started): a shutdown
	// hook's ctx ends with it, so no hook outlives its actor.
	gone     context.Context
	markGone context.CancelFunc
}

// Name is the name the actor was spawned under.
func (r *Ref) Name() string { return r.name }

// Engine is the engine the actor runs on.
func (r *Ref) Engine() *Engine { return r.engine }

// Send delivers msg to the actor's mailbox. It goes straight to the mailbox,
// which is all protoactor does for a local actor, so a message for a stopped
// actor is refused by the mailbox (see Refusable) instead of becoming a dead
// letter. It blocks only while the mailbox is full.
func (r *Ref) Send(msg any) { r.mb.PostUserMessage(msg) }

// Fire is Send for a timer's function: the Tick an actor asked its clock
// for. It is meant for nothing else. Like Send, it blocks only while the
// actor's mailbox is full, and may run the actor on the calling goroutine
// when it is idle.
//
// On a virtual clock (a moontest.Clock, or a clock that embeds one),
// whose timers fire on the goroutine that moves it, the clock moves on
// only once the actor has run msg, or is stopped or suspended. A timer the
// actor sets in answer is then set before the clock moves on, so moving
// the clock a second fires every timer due within that second, however
// many the actor sets one after another, even while other goroutines keep
// the actor busy. The clock waits at most a second of real time for each:
// an actor whose handler moves the clock itself runs the Tick after.
func (r *Ref) Fire(msg any) {
	at := r.mb.post(msg)
	if at != 0 && r.engine.settle != nil {
		r.engine.settle.add(r.mb, at-1)
	}
}

// settler keeps the messages timers have sent that their actors had not
// run by the time Fire returned, for the virtual clock to wait on after
// the timer's function (see Ref.Fire). The wait is there, not in Fire,
// so a timer's function run by an actor itself never waits on its own
// mailbox.
type settler struct {
	mu     sync.Mutex
	due    []settling
	off    bool   // the engine is shut down: nothing more is kept
	remove func() // stops the clock calling wait
}

type settling struct {
	mb  *mailbox
	pos uint64 // where the message was queued
}

func (s *settler) add(mb *mailbox, pos uint64) {
	s.mu.Lock()
	if !s.off && !mb.closed.Load() {
		s.due = append(s.due, settling{mb, pos})
	}
	s.mu.Unlock()
}

// wait returns once every message added has run, or its actor has stopped
// or is suspended, or settle gave up on it.
func (s *settler) wait() {
	for {
		s.mu.Lock()
		due := s.due
		s.due = nil
		s.mu.Unlock()
		if len(due) == 0 {
			return
		}
		for _, d := range due {
			d.mb.settle(d.pos)
		}
	}
}

// stop unhooks the settler from the clock and drops what it kept.
func (s *settler) stop() {
	s.remove()
	s.mu.Lock()
	s.off, s.due = true, nil
	s.mu.Unlock()
}

// Inline reports whether msg is being run by the goroutine that sent it,
// which is then the one running the actor: an answer to it may be left
// with Reply.Set, without atomic operations, since its sender cannot be
// waiting. Only the actor itself may ask, while it handles msg.
func (r *Ref) Inline(msg any) bool { return r != nil && r.mb.inline == msg }

// Stopped reports whether the actor has stopped.
func (r *Ref) Stopped() bool { return r.mb.closed.Load() }

// Stop runs the actor's shutdown within ctx, stops the actor and frees its
// name. It blocks until the actor has stopped. If ctx ends first, the
// actor is stopped anyway and ctx's error is returned; if another Stop (or
// Shutdown) is already running the shutdown, this one waits for it within
// ctx and, should ctx end first, stops the actor under it, whose hook then
// sees its ctx end with cause ErrStopped. Stop acts on this Ref's actor
// only: once it is stopped its name may go to another actor, and stopping
// this Ref again does nothing and returns nil. Requests that reach a
// stopped actor are refused, never lost.
func (r *Ref) Stop(ctx context.Context) error {
	err := r.close(ctx)
	r.engine.names.remove(r)
	return err
}

func (r *Ref) close(ctx context.Context) error {
	if !r.closing.CompareAndSwap(false, true) {
		// Someone else is closing it: wait for them within our ctx, and
		// past it stop the actor ourselves, since our caller's ctx bounds
		// what our caller owns.
		select {
		case <-r.mb.quit:
			<-r.mb.done
			return nil
		case <-ctx.Done():
			r.halt()
			return ctx.Err()
		}
	}
	var err error
	if r.shutdown != nil {
		hctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(r.gone, func() { cancel(ErrStopped) })
		err = r.shutdown(hctx)
		stop()
		cancel(nil)
	}
	r.halt()
	return err
}

// halt stops the actor and waits until it has stopped and its goroutine
// has returned. Two closers may both get here; only one tells protoactor,
// since a second Stop would reach a process already gone and become a dead
// letter.
func (r *Ref) halt() {
	if r.halted.CompareAndSwap(false, true) {
		r.engine.system.Root.Stop(r.pid)
	}
	r.wait()
}

// wait blocks until the actor has stopped and its goroutine has returned.
func (r *Ref) wait() {
	<-r.mb.quit
	<-r.mb.done
}

// member wraps an actor so that its mailbox learns when it has stopped.
type member struct {
	inner actor.Actor
	mb    *mailbox
	gone  context.CancelFunc // ends the Ref's gone; nil for the directory
}

func (m *member) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Stopped); ok {
		// Even if the actor panics on its way out.
		defer func() {
			m.mb.stop()
			if m.gone != nil {
				m.gone()
			}
		}()
	}
	m.inner.Receive(c)
}

// resume is the supervision strategy of every engine actor: a panic resumes
// the same instance with its state, rather than protoactor's default restart,
// which would build a fresh actor and forget every resource it had lent.
type resume struct{}

func (resume) HandleFailure(_ *actor.ActorSystem, s actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, _, _ any) {
	s.ResumeChildren(child)
}
