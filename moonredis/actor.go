package moonredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
	"github.com/redis/go-redis/v9"
)

// ask is one request to a limiter's actor: n of key, or (look) a look at
// what one would face. A waiting ask may take a slot up to its deadline.
type ask struct {
	key      string
	n        float64
	wait     bool
	look     bool
	deadline int64 // on the engine's clock; 0: none
	reply    chan verdict
	answered atomic.Bool // its one answer is given
}

// Refuse answers an ask that reached a stopped actor.
func (a *ask) Refuse() { a.answer(verdict{closed: true}) }

// answer sends a's one answer, unless it has one, and reports whether it
// did. Every ask gets exactly one: from the flight that carried it (its
// outcome, or its timer's), from the breaker, or from the actor stopping;
// or its caller, who made the call that carried it, took it from the
// outcome first (see limiter.take). A pooled ask is reused once it is
// answered, so a second answer would reach another caller. A probe's ask
// has no channel: nobody waits for it. The send never blocks the actor.
func (a *ask) answer(v verdict) bool {
	if !a.answered.CompareAndSwap(false, true) {
		return false
	}
	select {
	case a.reply <- v:
	default:
	}
	return true
}

// hand gives an ask from l.now the call that carries it, to make, before
// its answer: its channel holds both.
func (a *ask) hand(f *flight) { a.reply <- verdict{call: f} }

// verdict is the answer to an ask.
type verdict struct {
	ok       bool
	wait     time.Duration // a grant: until its slot; a refusal: until it would pass; a look: what one would wait
	landed   int64         // when the answer reached the actor, or the caller who took it, on the engine's clock: the slot is wait after a moment no later
	left     float64
	fallback bool  // Redis did not answer: the caller applies the FailMode
	cause    error // why, with fallback
	closed   bool
	call     *flight // not an answer: the call for the caller to make, before its answer (see launch)
}

// flight is one call to Redis: the batches of one or more keys, sent at
// now in one round trip, and once made, their outcome, which goes back to
// the actor in the same struct. The actor lands it once: when the outcome
// comes back, or when the late timer finds it past its deadline, whichever
// is first.
type flight struct {
	parts    []part
	runs     []run // the script runs that carry parts, in one round trip
	now      int64
	deadline int64           // now + Config.Timeout, on the engine's clock
	one      [1]part         // parts' array when it holds one key, the usual case
	run1     [1]run          // runs' array when one run carries every key
	ctx      context.Context // Config.Timeout on the real clock (a direct call's: a span's, see spans): Close cuts it short, through the actor or, for a direct call, through limiter.life
	cancel   context.CancelFunc
	probe    bool // a look the breaker sent to see whether Redis is back
	slot     int  // the call slot it holds while out (see limiter.slots)
	// direct: its caller made it without the actor (see limiter.direct),
	// for the one request in mine, and sends it to the actor only for
	// what the actor must hear: a failure, a refusal to remember, or a
	// call that worked while the breaker counted failures.
	direct bool
	mine   ask
	// The actor's: answered already, so an outcome after the timer is
	// dropped; and the flights sent before and after it still out.
	landed     bool
	prev, next *flight
}

// carry makes a, alone, the one batch f carries.
func (f *flight) carry(a *ask) {
	p := &f.one[0]
	p.key, p.one[0], p.waits = a.key, a, a.wait
	p.batch = p.one[:]
	f.parts = f.one[:]
}

// late is the message the late timer sends: the first flight out may be
// past its deadline.
type late struct{}

// freed is the message a caller sends when it frees a call slot while the
// actor is starved for one.
type freed struct{}

// cut is the message Close sends: cut every call out short.
type cut struct{}

// errStopping is the cause a flight's batches are answered with when the
// limiter began to stop before it could be sent; they are told it closed.
var errStopping = errors.New("moonredis: closed before the call was sent")

// errLate is the cause a flight's batches are answered with when Redis
// has not answered within Config.Timeout.
var errLate = fmt.Errorf("moonredis: no answer within Config.Timeout: %w", context.DeadlineExceeded)

// part is one key's batch in a flight, and its answers. The actor fills
// key and batch before the call; the call, off the actor, fills out and
// err.
type part struct {
	key   string
	batch []*ask
	waits bool // batch holds a Wait
	out   []verdict
	err   error
	one   [1]*ask    // batch's array when it holds one ask
	res   [1]verdict // out's, likewise
}

// run is one script run of a flight: the batches of parts[from:to], one
// key each, with their keys and arguments. The actor fills it before the
// call.
type run struct {
	from, to int
	keys     []string
	args     []any
	key1     [1]string // keys' array when the run carries one key
	argv     [8]any    // args' array when it carries one ask
	name     name      // its batch's name, ARGV[2]
}

// name is a batch's name as Redis reads it: the limiter's id, a dot and a
// sequence number. A run's arguments hold a pointer to it, which costs no
// allocation where a string would cost two.
type name struct {
	b [32]byte // the id is at most 13 bytes, and so is the number
	n int
}

// MarshalBinary is n's bytes, which go-redis writes as the argument.
func (n *name) MarshalBinary() ([]byte, error) { return n.b[:n.n], nil }

// String is n as a string, for a hook or a log that prints arguments.
func (n *name) String() string { return string(n.b[:n.n]) }

// How a flight of several keys goes to Redis, by the kind of client.
const (
	perRun  = iota // one script run per key, in one pipeline: the client may spread keys over servers
	oneRun         // one run for every key: one server holds them all
	perSlot        // one run per hash slot, in one pipeline: a cluster
)

// limiter is what Bucket and Window share: the actor that batches, the
// calls, the counts.
type limiter struct {
	eng    *engine.Engine
	ref    *engine.Ref
	cfg    Config
	script *redis.Script
	keys   *redis.Script // the script's form for several keys
	spread int           // how a flight of several keys goes: perRun, oneRun or perSlot
	a, b   any           // the script's ARGV[3] and ARGV[4], boxed once
	keep   any           // its ARGV[5]: twice Config.Timeout in milliseconds, boxed once
	id     string        // names the limiter in Redis, so a batch sent twice counts once
	idArgs []any         // ARGV[1] of a call in each call slot: id, then id#1, id#2 and so on, boxed once
	seq    atomic.Uint64
	once   bool         // name batches so one sent twice counts once; off only in a test
	self   bool         // the client ends a call at its ctx's deadline: callers may make their own (see launch)
	lone   bool         // with self, a caller may make its call without the actor (see direct); off only in a test
	late   func()       // the late timer's: sends late to the actor
	asked  atomic.Int64 // asks the actor has taken in: a test hook
	alone  atomic.Int64 // calls callers made without the actor (see direct): a test hook
	flying atomic.Int64 // calls in flight: a test hook
	armed  atomic.Bool  // the late timer is set and has not fired; written by the actor alone, read by tests
	trips  atomic.Int64 // times the breaker tripped: a test hook
	closes atomic.Int64 // times it closed again: a test hook; it is tripped while trips > closes
	asks   sync.Pool    // of *ask, for l.now: each limiter's own, so a channel stays in the synctest bubble it was made in
	// slots holds a bit for each call slot a call out holds, of
	// Config.MaxCalls; the actor and the callers making their own calls
	// (see direct) take and free them with compare-and-swap.
	slots atomic.Uint64
	// starved is set by the actor when it holds batches ready to go and
	// finds every call slot held; a caller that frees a slot then tells
	// it, and no caller makes a call of its own meanwhile, so what waits
	// goes first.
	starved atomic.Bool
	// steady says the breaker is closed and counts no failed call: only
	// then may a caller make a call without the actor. The actor sets it,
	// and a caller whose call failed clears it.
	steady atomic.Bool
	// unheard counts the failed direct calls the actor has not yet
	// counted: steady stays false until they are counted.
	unheard atomic.Int64
	// overs is what the actor's remembered refusals (owner.over) tell a
	// caller: for each cell, the latest instant, on the engine's clock,
	// to which a key hashed to it was refused. A caller whose key's cell
	// is not past asks the actor, which knows the key.
	overs   [overCells]atomic.Int64
	directs sync.Pool // of *flight, for direct
	// life is the parent of a direct call's ctx; shutdown ends it, which
	// cuts those calls short as cut does the actor's.
	life  context.Context
	end   context.CancelFunc
	spans spans // the direct calls' ctxs, children of life
	// held is when, on the engine's clock, FailLocal stops holding what
	// Redis lets through to the local share as well: math.MaxInt64 while
	// the breaker is tripped, a recovery span after the last failed call
	// or after the breaker closes, 0 once that has passed (see heldLocal).
	held atomic.Int64

	closed atomic.Bool
	calls  sync.WaitGroup
	// mu orders each calls.Add before shutdown's calls.Wait, or keeps it
	// from happening: a call launched while shutdown waits would race it.
	mu       sync.Mutex
	stopping bool
	stats    counts
}

// counts are a limiter's running counts (see Stats).
type counts struct {
	calls, sent, admitted, refused, fallbacks, failures, remembered atomic.Int64
}

// Stats are a limiter's counts since it started, in this process.
type Stats struct {
	Calls    int64 // calls sent to Redis (each one round trip, of one script run or a few), the breaker's probes included
	Sent     int64 // requests those calls carried, looks and probes included
	Admitted int64 // requests let through by Redis (and, while FailLocal holds Redis to it, by the local share too)
	// Refused counts requests refused: by Redis, from a refusal it gave
	// (Remembered), asking more than a bucket's burst, or, while FailLocal
	// holds Redis to the local share, by that share after Redis let them
	// through.
	Refused int64
	// Remembered counts the refusals of Refused answered in this process
	// without a call: an Allow, AllowN, Try or TryN of one or more for a
	// key Redis has just refused one, before the wait it gave has passed.
	Remembered int64
	Fallbacks  int64 // requests answered by the FailMode
	Failures   int64 // calls that failed or timed out, probes included
}

func (c *counts) read() Stats {
	return Stats{
		Calls: c.calls.Load(), Sent: c.sent.Load(), Admitted: c.admitted.Load(), Refused: c.refused.Load(),
		Fallbacks: c.fallbacks.Load(), Failures: c.failures.Load(), Remembered: c.remembered.Load(),
	}
}

// start spawns l's actor on eng.
func (l *limiter) start(eng *engine.Engine) error {
	if eng == nil {
		return errors.New("moonredis: nil engine")
	}
	l.eng = eng
	l.once = true
	l.keep = 2 * l.cfg.Timeout.Milliseconds()
	l.self = boundsCalls(l.cfg.Client)
	l.lone = true
	l.keys = keysOf(l.script)
	l.spread = spreadOf(l.cfg.Client)
	l.id = strconv.FormatUint(rand.Uint64(), 36)
	l.idArgs = make([]any, l.cfg.MaxCalls)
	for i := range l.idArgs {
		l.idArgs[i] = l.id
		if i > 0 {
			l.idArgs[i] = l.id + "#" + strconv.Itoa(i)
		}
	}
	l.asks.New = func() any { return &ask{reply: make(chan verdict, 2)} }
	l.directs.New = func() any { return new(flight) }
	l.life, l.end = context.WithCancel(context.Background())
	l.spans = spans{life: l.life, timeout: l.cfg.Timeout}
	l.steady.Store(true)
	o := &owner{l: l, lines: make(map[string]*line), over: make(map[string]int64),
		breaker: newBreaker(l.cfg.BreakerFailures, int64(l.cfg.Timeout))}
	ref, err := eng.Spawn("", o, l.shutdown)
	if err != nil {
		return err
	}
	l.ref = ref
	l.late = func() { ref.Fire(late{}) }
	return nil
}

// shutdown runs when the actor is stopped, by Close or the engine's
// Shutdown: calls in flight are cut short through their ctx (which ends a
// call waiting for a connection, not one waiting for a reply) and waited
// for within ctx, so no goroutine outlives the limiter.
func (l *limiter) shutdown(ctx context.Context) error {
	l.closed.Store(true)
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
	l.ref.Send(cut{}) // a call launched before stopping is out by the time the actor reads this
	l.end()           // and a direct call is out by now
	ended := make(chan struct{})
	go func() { l.calls.Wait(); close(ended) }()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// now sends a request that cannot be given up on to the actor and returns
// its answer. When the actor hands it the call that carries its request
// (l.self), it makes the call here, and takes its answer from the outcome
// without waiting for the actor to land it. Its ask comes from l.asks,
// with its channel, and goes back once answered and read: by this
// caller, or, when it took its answer itself, by the actor, which still
// reads the ask as it lands the call (see land). An ask taken while the
// actor stops goes to the garbage collector instead.
func (l *limiter) now(key string, n float64, look bool) verdict {
	if l.closed.Load() {
		return verdict{closed: true}
	}
	if v, ok := l.direct(key, n, look); ok {
		return v
	}
	a := l.asks.Get().(*ask)
	a.key, a.n, a.look, a.wait, a.deadline = key, n, look, false, 0
	a.answered.Store(false)
	l.ref.Send(a)
	v := <-a.reply
	if f := v.call; f != nil {
		l.run(f)
		own, took := l.take(f, a)
		l.ref.Send(f)
		l.calls.Done()
		if took {
			return own
		}
		v = <-a.reply
	}
	l.reuse(a)
	return v
}

// direct makes the call for one request of key itself, without the
// actor, and reports its answer, or false when it may not: the client
// must end a call at its ctx's deadline, the breaker must be closed and
// count no failure, nothing may wait at the actor for a call slot, a
// slot must be free, and, unless it is a look, the key may not have been
// refused of late. In a quiet limiter, the usual case, a request then
// costs its round trip and a few atomic operations, with no goroutine
// woken on the way. The actor hears of the call afterwards only when it
// must (see flight.direct).
//
// The answer is what the actor would give: a reply that comes after
// Config.Timeout on the engine's clock is a failure, answered by the
// FailMode, as the late timer would answer it.
func (l *limiter) direct(key string, n float64, look bool) (verdict, bool) {
	if !l.self || !l.lone || !l.steady.Load() || l.starved.Load() {
		return verdict{}, false
	}
	if !look && n >= 1 {
		if until := l.overs[l.cell(key)].Load(); until != 0 && l.eng.Now() < until {
			return verdict{}, false
		}
	}
	slot, ok := l.claim()
	if !ok {
		return verdict{}, false
	}
	if !l.enter() {
		l.free(slot)
		return verdict{closed: true}, true
	}
	l.alone.Add(1)
	l.flying.Add(1)
	f := l.directs.Get().(*flight)
	a := &f.mine
	a.key, a.n, a.look = key, n, look
	f.carry(a)
	p := &f.parts[0]
	f.now, f.slot, f.direct = l.eng.Now(), slot, true
	f.deadline = f.now + int64(l.cfg.Timeout)
	l.plan(f)
	l.stats.calls.Add(1)
	f.ctx, f.cancel = l.spans.ctx(), nop
	l.run(f)
	back := l.eng.Now()
	if p.err == nil && back > f.deadline {
		p.err = errLate
	}
	l.free(slot)
	l.flying.Add(-1)
	var v verdict
	switch {
	case l.closed.Load():
		v = verdict{closed: true}
	case p.err != nil:
		// Callers call alone no more, and FailLocal holds Redis to the
		// local share, from now: the actor would say so before it
		// answered.
		l.unheard.Add(1)
		l.steady.Store(false)
		l.holdFrom(back)
		l.stats.failures.Add(1)
		v = verdict{fallback: true, cause: p.err}
	default:
		v = p.out[0]
		v.landed = back
	}
	tell := !v.closed && (p.err != nil || !l.steady.Load() ||
		(!v.ok && !look && n == 1 && v.wait > time.Microsecond)) // a refusal to remember (see owner.remember)
	if tell {
		l.ref.Send(f) // the actor's now
	} else {
		l.putDirect(f)
		if l.starved.Load() && l.starved.CompareAndSwap(true, false) {
			l.ref.Send(freed{})
		}
	}
	l.calls.Done()
	return v, true
}

// enter counts a call about to be made in l.calls, which shutdown waits
// for, and reports true; or reports false, counting nothing, once the
// limiter has begun to stop.
func (l *limiter) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return false
	}
	l.calls.Add(1)
	return true
}

// holdFrom starts FailLocal's hold for a recovery span from now, as
// owner.hold does when the breaker is closed, unless it lasts longer
// already: a direct call has failed, and the actor will hear of it.
func (l *limiter) holdFrom(now int64) {
	if l.cfg.FailMode != FailLocal {
		return
	}
	until := now + int64(l.cfg.recovery())
	for {
		was := l.held.Load()
		if was >= until || l.held.CompareAndSwap(was, until) { // a trip's hold is math.MaxInt64
			return
		}
	}
}

// putDirect puts f, a direct call's flight that has ended, back in
// l.directs.
func (l *limiter) putDirect(f *flight) {
	*f = flight{}
	l.directs.Put(f)
}

// claim takes a free call slot, if one is.
func (l *limiter) claim() (int, bool) {
	for {
		held := l.slots.Load()
		slot := bits.TrailingZeros64(^held)
		if slot >= l.cfg.MaxCalls {
			return 0, false
		}
		if l.slots.CompareAndSwap(held, held|1<<slot) {
			return slot, true
		}
	}
}

// free gives back slot, which claim took.
func (l *limiter) free(slot int) { l.slots.And(^(1 << slot)) }

// maxCalls is the most call slots a limiter has: one bit each in slots.
const maxCalls = 64

// overCells is how many cells overs has. A key whose cell another key's
// refusal holds asks the actor, which answers as it would anyway.
const overCells = 256

// cell is key's cell in overs.
func (l *limiter) cell(key string) int {
	return int(maphash.String(cellSeed, key) % overCells)
}

var cellSeed = maphash.MakeSeed()

// reuse puts a, answered and read, back in l.asks.
func (l *limiter) reuse(a *ask) {
	a.key = "" // let the string go
	l.asks.Put(a)
}

// take is the answer of a, the ask whose caller made f's call, read from
// the outcome: false when a's key failed, or a has its answer already (f
// landed late, or the limiter stopped). It is the answer the actor would
// give, on the engine's clock now rather than when the actor reads f.
// Once it is taken, a is the actor's to put back.
func (l *limiter) take(f *flight, a *ask) (verdict, bool) {
	for i := range f.parts {
		p := &f.parts[i]
		for j, b := range p.batch {
			if b != a {
				continue
			}
			if p.err != nil || !a.answered.CompareAndSwap(false, true) {
				return verdict{}, false
			}
			v := p.out[j]
			v.landed = l.eng.Now()
			return v, true
		}
	}
	return verdict{}, false
}

// await sends a waiting request to the actor and returns its answer, or
// false when ctx is done first.
func (l *limiter) await(ctx context.Context, key string, n float64, deadline int64) (verdict, bool) {
	if l.closed.Load() {
		return verdict{closed: true}, true
	}
	a := &ask{key: key, n: n, wait: true, deadline: deadline, reply: make(chan verdict, 1)}
	l.ref.Send(a)
	select {
	case v := <-a.reply:
		return v, true
	case <-ctx.Done():
		return verdict{}, false
	}
}

// owner is the actor. Each key with requests in hand has a line: how many
// calls out carry it, and the asks that came since, for its next call. A
// key whose next batch waits for a call is in ready, and the next call
// takes the batches of up to Config.MaxKeys of them, in the order they
// became ready, in one round trip. It goes while fewer than
// Config.MaxCalls calls are out. A key may be in several calls out at
// once, unless one of them, or its next batch, holds a Wait: then it goes
// only when no call carries it, so that its waiters keep their order.
//
// Each call out holds one of MaxCalls call slots, and its script keeps
// its batch for the key under the limiter's id and that slot: so two
// calls out for one key never share a kept batch, and a batch sent again
// finds its own (see scripts.go).
//
// over remembers the keys Redis has refused an Allow or Try of one:
// until when, on the engine's clock, one more would be refused again. The
// limit only ever grows tighter from a refusal until its wait has passed
// (tokens and room come back only with time; other callers, in any
// process, only take), so a request of one or more for such a key before
// then is refused here, with the rest of that wait, and never goes to
// Redis. The instant is counted from when the call was sent, no later
// than Redis ran it, so it errs early: it may send a request a little
// before Redis would let it through, never refuse one Redis would take
// (but see the package documentation for when Redis forgets).
//
// The flights out are a list in the order they were sent, which is the
// order of their deadlines, and one timer on the engine's clock is set for
// the first one's: when it fires, every flight past its deadline is landed
// as failed and the timer is set for the next. A flight that lands leaves
// the list and the timer alone, so a call costs no timer of its own.
type owner struct {
	l            *limiter
	lines        map[string]*line
	over         map[string]int64
	sweep        int // refusals to remember before over may be swept again
	ready        []string
	breaker      breaker
	first, last  *flight      // the flights out the actor sent, first sent first
	timer        engine.Timer // the late timer, while l.armed says it is set and has not fired
	late         bool         // landing the late calls: pump waits until all have
	stopped      bool
	lineSpares   spares[line]   // lines keys have left, for keys to take again
	flightSpares spares[flight] // flights whose calls have ended, for calls to take again
}

type line struct {
	next      []*ask // for the next call
	out       int    // calls out that carry the key
	waitsOut  bool   // one of them carries a Wait
	nextWaits bool   // next holds a Wait
	ready     bool   // the key is in ready
}

// offer puts key in ready when its next batch may go: it has one, and no
// Wait is in it or in a call out for the key, or no call carries the key.
func (o *owner) offer(key string, ln *line) {
	if ln.ready || len(ln.next) == 0 || (ln.out > 0 && (ln.waitsOut || ln.nextWaits)) {
		return
	}
	ln.ready = true
	o.ready = append(o.ready, key)
}

// drop takes key's line, ln, away: key has no request in hand.
func (o *owner) drop(key string, ln *line) {
	delete(o.lines, key)
	o.lineSpares.keep(ln, maxSpare)
}

// maxSpare is the most lines kept for keys to take again.
const maxSpare = 1024

// reuse keeps f for a later call. A flight is large (its first key's
// batch, run and arguments are inside it), so taking one again saves the
// largest allocation of a call. Only a flight that has landed and whose
// call has sent it back may be kept: nothing else touches it then.
func (o *owner) reuse(f *flight) { o.flightSpares.keep(f, maxFlights) }

// maxFlights is the most flights kept for calls to take again.
const maxFlights = 16

// spares are values kept, zeroed, for the actor to take again rather
// than allocate.
type spares[T any] struct{ kept []*T }

// take is a kept value, or a new one when none is kept.
func (s *spares[T]) take() *T {
	n := len(s.kept)
	if n == 0 {
		return new(T)
	}
	x := s.kept[n-1]
	s.kept[n-1] = nil
	s.kept = s.kept[:n-1]
	return x
}

// keep zeroes x and keeps it, while fewer than most are kept.
func (s *spares[T]) keep(x *T, most int) {
	if len(s.kept) < most {
		var zero T
		*x = zero
		s.kept = append(s.kept, x)
	}
}

func (o *owner) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Stopped); ok {
		o.stop()
		return
	}
	o.Handle(c.Message())
}

// Handle runs one user message (see engine.Handler).
func (o *owner) Handle(msg any) {
	switch m := msg.(type) {
	case *ask:
		if o.stopped {
			m.Refuse()
			return
		}
		o.l.asked.Add(1)
		if len(o.over) > 0 && !m.wait && !m.look && m.n >= 1 && o.refuse(m) {
			return
		}
		if o.breaker.tripped {
			// Redis has failed every call of late: the FailMode answers
			// at once. The ask may send the breaker's probe, which takes
			// nothing and which nobody waits for.
			if slot, ok := o.l.claim(); ok {
				if o.breaker.probe(o.l.eng.Now()) {
					o.sendProbe(m.key, slot)
				} else {
					o.l.free(slot)
				}
			}
			m.answer(verdict{fallback: true, cause: ErrBreaker})
			return
		}
		if ln, ok := o.lines[m.key]; ok {
			ln.next = append(ln.next, m)
			ln.nextWaits = ln.nextWaits || m.wait
			o.offer(m.key, ln)
			o.pump()
			return
		}
		if len(o.ready) == 0 {
			if slot, ok := o.l.claim(); ok {
				// A call to spare and no key before it: sent at once.
				o.sendOne(m, slot)
				return
			}
		}
		ln := o.lineSpares.take()
		ln.next = append(ln.next, m)
		ln.nextWaits = m.wait
		o.lines[m.key] = ln
		o.offer(m.key, ln)
		o.pump()
	case *flight:
		if m.direct {
			o.landDirect(m)
			return
		}
		if !m.landed {
			o.land(m, nil)
		}
		o.reuse(m) // its call has ended, and it has landed
	case freed:
		o.pump()
	case late:
		now := o.l.eng.Now()
		o.late = true // every late call lands before any waiting batch goes
		for o.first != nil && o.first.deadline <= now && !o.stopped {
			// The call goes on, cut short through its ctx; what it
			// brings back is dropped.
			f := o.first
			f.cancel()
			o.land(f, errLate)
		}
		o.late = false
		o.l.armed.Store(false)
		o.pump() // once the breaker has counted every late call
		o.arm()
	case cut:
		o.cutAll()
	}
}

// sendOne sends m alone, in the call slot slot: no key is before it.
func (o *owner) sendOne(m *ask, slot int) {
	f := o.flightSpares.take()
	f.carry(m)
	ln := o.lineSpares.take()
	ln.out, ln.waitsOut = 1, m.wait
	o.lines[m.key] = ln
	o.launch(f, slot)
}

// cutAll cuts every call out short: the limiter is closing.
func (o *owner) cutAll() {
	for f := o.first; f != nil; f = f.next {
		f.cancel()
	}
}

// arm sets the late timer for the first flight out's deadline, unless it
// is set already (for that flight's, or an earlier one's) or none is out.
func (o *owner) arm() {
	if o.l.armed.Load() || o.first == nil || o.stopped {
		return
	}
	o.l.armed.Store(true)
	o.timer = o.l.eng.Clock().AfterFunc(time.Duration(o.first.deadline-o.l.eng.Now()), o.l.late)
}

// out adds f to the flights out, last.
func (o *owner) out(f *flight) {
	f.prev = o.last
	if o.last != nil {
		o.last.next = f
	} else {
		o.first = f
	}
	o.last = f
}

// back takes f off the flights out, if it is on.
func (o *owner) back(f *flight) {
	if f.prev == nil && o.first != f {
		return // never out: refused before it was sent
	}
	if f.prev != nil {
		f.prev.next = f.next
	} else {
		o.first = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else {
		o.last = f.prev
	}
	f.prev, f.next = nil, nil
}

// refuse answers m from a refusal Redis gave for its key, and reports
// whether it did; a refusal whose wait has passed is forgotten.
func (o *owner) refuse(m *ask) bool {
	until, ok := o.over[m.key]
	if !ok {
		return false
	}
	now := o.l.eng.Now()
	if now >= until-int64(time.Microsecond) { // a script rounds a wait up by less than that
		delete(o.over, m.key)
		return false
	}
	o.l.stats.remembered.Add(1)
	m.answer(verdict{wait: time.Duration(until - now)})
	return true
}

// maxOver is the most keys over remembers; past it, expired ones are swept
// at most once in maxOver refusals, and a refusal finding no room is not
// remembered.
const maxOver = 1 << 16

// remember notes that Redis refused a's request of one at a call sent at
// sent, with wait v.wait.
func (o *owner) remember(a *ask, v verdict, sent int64) {
	if a.wait || a.look || a.n != 1 || v.ok || v.wait <= time.Microsecond {
		return
	}
	until := sent + int64(min(v.wait, time.Duration(math.MaxInt64-sent)))
	if _, ok := o.over[a.key]; !ok && len(o.over) >= maxOver {
		if o.sweep > 0 {
			o.sweep--
			return
		}
		o.sweep = maxOver
		now := o.l.eng.Now()
		for k, u := range o.over {
			if u <= now {
				delete(o.over, k)
			}
		}
		if len(o.over) >= maxOver {
			return
		}
	}
	o.over[a.key] = until
	if c := &o.l.overs[o.l.cell(a.key)]; c.Load() < until {
		c.Store(until)
	}
}

// pump sends the ready batches, up to Config.MaxKeys keys a call, while
// a call slot is free. Keys that became ready while every call was out go
// together, so calls fill as load grows, and at low load no request waits
// for another's call.
func (o *owner) pump() {
	for len(o.ready) > 0 {
		slot, ok := o.l.claim()
		if !ok {
			// A caller freeing a slot from now on tells the actor; one
			// freed before is found by claiming again.
			o.l.starved.Store(true)
			if slot, ok = o.l.claim(); !ok {
				return
			}
		}
		n := min(len(o.ready), o.l.cfg.MaxKeys)
		f := o.flightSpares.take()
		f.parts = f.one[:]
		if n > 1 {
			f.parts = make([]part, n)
			if o.l.spread == perSlot {
				o.l.bySlot(o.ready[:n])
			}
		}
		for i, key := range o.ready[:n] {
			ln := o.lines[key]
			p := &f.parts[i]
			p.key, p.batch, p.waits = key, ln.next, ln.nextWaits
			ln.next = nil
			if most := o.l.cfg.MaxBatch; len(p.batch) > most {
				// The rest waits for this call to land, its Waits, if
				// any, counted as the batch's too.
				p.batch, ln.next = p.batch[:most], p.batch[most:]
			} else {
				ln.nextWaits = false
			}
			ln.ready = false
			ln.out++
			ln.waitsOut = ln.waitsOut || p.waits
		}
		o.ready = append(o.ready[:0], o.ready[n:]...)
		o.launch(f, slot)
	}
	if o.l.starved.Load() {
		o.l.starved.Store(false)
	}
}

// launch sends f to Redis off the actor in the call slot slot, taken by
// claim, unless the breaker is tripped and f is not its probe: then its
// batches are answered by the FailMode at once. A timer on the engine's
// clock lands f as failed once Config.Timeout has passed.
//
// Who makes the call: when f carries a request whose caller is waiting in
// l.now (see maker), and the client ends a call at its ctx's deadline
// (boundsCalls), that caller makes it on its own goroutine; it would wait
// that long for its answer anyway, and it saves the two goroutine
// switches of a call made elsewhere (about 7 µs a call on the loopback,
// a tenth of the round trip). The others in f are answered when it
// lands, or by the timer. Otherwise the call gets a goroutine of its
// own, so the timer answers every caller at Config.Timeout, whatever the
// client does with the deadline (go-redis ignores it unless its
// ContextTimeoutEnabled is set). The arguments are read here, on the
// actor, since a caller answered by the timer may reuse its ask while the
// call goes on.
func (o *owner) launch(f *flight, slot int) {
	f.now = o.l.eng.Now()
	f.slot = slot
	if o.breaker.tripped && !f.probe {
		o.l.flying.Add(1) // land takes it back
		o.land(f, ErrBreaker)
		return
	}
	if !o.l.enter() {
		o.l.flying.Add(1)
		o.land(f, errStopping)
		return
	}
	o.l.plan(f)
	o.l.stats.calls.Add(1)
	f.ctx, f.cancel = context.WithTimeout(context.Background(), o.l.cfg.Timeout)
	f.deadline = f.now + int64(o.l.cfg.Timeout)
	o.out(f)
	o.arm()
	o.l.flying.Add(1) // once the timer is set: a test seeing the call out may move the clock
	if a := maker(f); a != nil && o.l.self {
		a.hand(f)
		return
	}
	go o.l.call(f)
}

// maker is the ask whose caller makes f's call: the first one waiting in
// l.now, or nil if none is (a probe's look has nobody waiting).
func maker(f *flight) *ask {
	if f.probe {
		return nil
	}
	for i := range f.parts {
		for _, a := range f.parts[i].batch {
			if !a.wait {
				return a
			}
		}
	}
	return nil
}

// plan splits f's parts into script runs, by l.spread, and fills in each
// run's keys and arguments.
func (l *limiter) plan(f *flight) {
	n := len(f.parts)
	switch {
	case n == 1 || l.spread == oneRun:
		f.runs = f.run1[:]
		f.runs[0].from, f.runs[0].to = 0, n
	case l.spread == perRun:
		f.runs = make([]run, n)
		for i := range f.runs {
			f.runs[i].from, f.runs[i].to = i, i+1
		}
	default: // parts are in slot order (see bySlot): a run for each slot
		from := 0
		for i := 1; i <= n; i++ {
			if i == n || hashSlot(l.cfg.Prefix, f.parts[i].key) != hashSlot(l.cfg.Prefix, f.parts[from].key) {
				f.runs = append(f.runs, run{from: from, to: i})
				from = i
			}
		}
	}
	for i := range f.runs {
		r := &f.runs[i]
		if r.to-r.from == 1 {
			r.key1[0] = l.cfg.Prefix + f.parts[r.from].key
			r.keys = r.key1[:]
		} else {
			r.keys = make([]string, 0, r.to-r.from)
			for _, p := range f.parts[r.from:r.to] {
				r.keys = append(r.keys, l.cfg.Prefix+p.key)
			}
		}
		r.args = l.args(r, f.parts[r.from:r.to], f.now, f.slot)
		for _, p := range f.parts[r.from:r.to] {
			l.stats.sent.Add(int64(len(p.batch)))
		}
	}
}

// bySlot orders keys by the hash slot of their Redis keys, so the keys of
// one slot are next to each other.
func (l *limiter) bySlot(keys []string) {
	slices.SortStableFunc(keys, func(a, b string) int {
		return int(hashSlot(l.cfg.Prefix, a)) - int(hashSlot(l.cfg.Prefix, b))
	})
}

// boundsCalls says whether c ends every call at its ctx's deadline, as
// go-redis's Client and Ring do with ContextTimeoutEnabled, unless a
// ReadTimeout or WriteTimeout of -2 turns deadlines off on the wire. A
// ClusterClient does not: it looks up a command's routing with a ctx of
// its own, up to 5 s, on a cold cache. Others (a wrapper, a client without
// the option) may hold a call until their own timeouts, or for ever.
func boundsCalls(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	case *redis.Ring:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	}
	return false
}

// land answers a call's batches, by their outcome or, when failed is not
// nil, all by it (the call still going on may be writing the outcome),
// and sends what came meanwhile. The breaker counts the call once,
// however many keys it carried.
func (o *owner) land(f *flight, failed error) {
	if o.stopped {
		return // stop answered them
	}
	f.landed = true
	o.back(f)
	o.l.free(f.slot)
	o.l.flying.Add(-1)
	now := o.l.eng.Now()
	all := failed
	for i := 0; failed == nil && i < len(f.parts); i++ {
		failed = f.parts[i].err
	}
	sent := failed != ErrBreaker && failed != errStopping
	if sent && failed != nil {
		o.l.stats.failures.Add(1)
	}
	switch {
	case f.probe:
		if o.breaker.probed(sent && failed == nil) {
			o.l.closes.Add(1)
			o.hold(now)
		}
		o.steadied()
		if !o.late {
			o.pump()
		}
		return // its one ask is a look nobody waits for, and has no line
	case sent:
		o.count(failed == nil, now)
	}
	for i := range f.parts {
		p := &f.parts[i]
		err := all
		if err == nil {
			err = p.err
		}
		for j, a := range p.batch {
			var v verdict
			switch {
			case err != nil && o.l.closed.Load():
				v = verdict{closed: true} // Close cut the call short
			case err != nil:
				v = verdict{fallback: true, cause: err}
			default:
				v = p.out[j]
				v.landed = now
				o.remember(a, v, f.now)
			}
			if !a.answer(v) && !a.wait {
				// Its caller made the call and took its answer: nobody
				// reads a now. (Only a caller of l.now takes its own
				// answer; a waiting ask is never pooled.)
				o.l.reuse(a)
			}
		}
		ln := o.lines[p.key]
		ln.out--
		if p.waits {
			ln.waitsOut = false // no other call carried the key
		}
		if ln.out == 0 && len(ln.next) == 0 {
			o.drop(p.key, ln)
		} else {
			o.offer(p.key, ln)
		}
	}
	if !o.late {
		o.pump()
	}
}

// count has the breaker count a call that was sent, and whether it
// worked. A failed call's requests go to the local share, and one that
// closes the breaker ends its trip: FailLocal holds Redis to the share
// from either (see hold).
func (o *owner) count(worked bool, now int64) {
	if worked {
		if o.breaker.success() {
			o.l.closes.Add(1)
			o.hold(now)
		}
	} else {
		tripped := o.breaker.failure(now)
		o.hold(now)
		if tripped {
			o.l.trips.Add(1)
			o.tripped()
		}
	}
	o.steadied()
}

// steadied tells callers whether they may make calls of their own: the
// breaker is closed and counts no failed call, and no failed direct call
// is still to be counted. A caller whose call fails counts it in unheard
// before it clears steady, so reading unheard again after setting steady
// leaves steady false whichever comes first.
func (o *owner) steadied() {
	s := !o.breaker.tripped && o.breaker.failed == 0 && o.l.unheard.Load() == 0
	if o.l.steady.Load() == s {
		return
	}
	o.l.steady.Store(s)
	if s && o.l.unheard.Load() != 0 {
		o.l.steady.Store(false)
	}
}

// landDirect hears a call a caller made without the actor (see
// limiter.direct), once its caller has its answer: the breaker counts it,
// and a refusal of one is remembered. Then the flight is the pool's
// again, and what waited for a slot goes.
func (o *owner) landDirect(f *flight) {
	if !o.stopped {
		p := &f.parts[0]
		if p.err != nil {
			o.l.unheard.Add(-1) // counted below
		}
		o.count(p.err == nil, o.l.eng.Now())
		if p.err == nil {
			o.remember(&f.mine, p.out[0], f.now)
		}
		o.pump()
	}
	o.l.putDirect(f)
}

// sendProbe sends the breaker's probe: a look at what one request of key
// would face, which takes nothing. If it works, Redis is back.
func (o *owner) sendProbe(key string, slot int) {
	f := &flight{probe: true}
	f.carry(&ask{key: key, n: 1, look: true})
	o.launch(f, slot)
}

// tripped answers by the FailMode, at once, every ask waiting for a call:
// the breaker has just tripped.
func (o *owner) tripped() {
	for key, ln := range o.lines {
		for _, a := range ln.next {
			a.answer(verdict{fallback: true, cause: ErrBreaker})
		}
		ln.next, ln.nextWaits, ln.ready = nil, false, false
		if ln.out == 0 {
			o.drop(key, ln)
		}
	}
	o.ready = o.ready[:0]
}

// hold holds what Redis lets through to the local share as well, under
// FailLocal (see heldLocal). The actor calls it when a call fails, whose
// requests the local share answers, and when the breaker closes. The hold
// lasts while the breaker is tripped, then a recovery span from now. A
// Redis that fails now and then, never enough in a row to trip the
// breaker, is held too: it counts nothing the local share lets through.
func (o *owner) hold(now int64) {
	if o.l.cfg.FailMode != FailLocal {
		return
	}
	until := int64(math.MaxInt64)
	if !o.breaker.tripped {
		until = now + int64(o.l.cfg.recovery())
		if was := o.l.held.Load(); was != math.MaxInt64 && was > until {
			return // the clock went back: keep the later end
		}
	}
	o.l.held.Store(until)
}

// stop answers every ask it holds: the limiter is closed.
func (o *owner) stop() {
	o.stopped = true
	if o.l.armed.Load() {
		o.timer.Stop()
	}
	o.cutAll()
	for f := o.first; f != nil; f = f.next {
		for i := range f.parts {
			for _, a := range f.parts[i].batch {
				a.Refuse()
			}
		}
	}
	for _, ln := range o.lines {
		for _, a := range ln.next {
			a.Refuse()
		}
	}
	clear(o.lines)
	o.ready = nil
}

// noDeadline is the most a waiter without a deadline may wait for its slot,
// in microseconds: a century, which is never in practice.
const noDeadline = 100 * 365 * 24 * 3600 * 1e6

// call makes f's call on a goroutine of its own (see run), and sends the
// outcome back to the actor in f. It touches nothing of f once it has
// sent it back: the actor may take f for another call then.
func (l *limiter) call(f *flight) {
	l.run(f)
	l.ref.Send(f)
	l.calls.Done()
}

// run makes f's script runs (off the actor), one alone or several in one
// pipeline, and leaves the outcome in f. It touches only f's runs and its
// parts' out and err.
func (l *limiter) run(f *flight) {
	ctx, cancel := f.ctx, f.cancel
	defer cancel()
	if len(f.runs) == 1 {
		r := &f.runs[0]
		v, err := l.scriptOf(r).Run(ctx, l.cfg.Client, r.keys, r.args...).Result()
		read(f.parts[r.from:r.to], v, err)
	} else {
		pipe := l.cfg.Client.Pipeline()
		cmds := make([]*redis.Cmd, len(f.runs))
		for i := range f.runs {
			r := &f.runs[i]
			cmds[i] = l.scriptOf(r).EvalSha(ctx, pipe, r.keys, r.args...)
		}
		pipe.Exec(ctx)
		for i, c := range cmds {
			r := &f.runs[i]
			v, err := c.Result()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				// Redis lost its scripts (a restart, SCRIPT FLUSH): the
				// run did not happen, so making it now counts it once.
				v, err = l.scriptOf(r).Run(ctx, l.cfg.Client, r.keys, r.args...).Result()
			}
			read(f.parts[r.from:r.to], v, err)
		}
	}
}

// scriptOf is the script r runs: the form for several keys when it
// carries more than one.
func (l *limiter) scriptOf(r *run) *redis.Script {
	if r.to-r.from > 1 {
		return l.keys
	}
	return l.script
}

// args are the script's arguments for r, carrying parts, sent at now: the
// five every key shares, then for each key its requests, three numbers
// each, after their count when r carries several keys.
func (l *limiter) args(r *run, parts []part, now int64, slot int) []any {
	args := r.argv[:5]
	if len(parts) > 1 || len(parts[0].batch) > 1 {
		n := 5
		for i := range parts {
			n += 1 + 3*len(parts[i].batch)
		}
		args = make([]any, 5, n)
	}
	args[0], args[2], args[3], args[4] = l.idArgs[slot], l.a, l.b, l.keep
	if !l.once {
		args[0] = ""
	}
	r.name.n = len(strconv.AppendUint(append(append(r.name.b[:0], l.id...), '.'), l.seq.Add(1), 36))
	args[1] = &r.name
	for i := range parts {
		if len(parts) > 1 {
			args = append(args, len(parts[i].batch))
		}
		for _, a := range parts[i].batch {
			most := zero
			if a.wait {
				most = forever
				if a.deadline != 0 {
					most = max(0, float64(a.deadline-now)/1e3)
				}
			}
			n := one
			if a.n != 1 {
				n = a.n
			}
			look := zero
			if a.look {
				look = one
			}
			args = append(args, n, most, look)
		}
	}
	return args
}

// read takes a script run's answer for parts, or the error in its place:
// a bucket's, numbers, three per request, every key's in turn; a window's,
// a string per key (see parse), the keys' joined by slashes.
func read(parts []part, v any, err error) {
	var s string
	var ns []any
	if err == nil {
		switch v := v.(type) {
		case string:
			s = v
			if k := strings.Count(s, "/") + 1; len(parts) > 1 && k != len(parts) {
				err = fmt.Errorf("moonredis: answers for %d keys, want %d", k, len(parts))
			}
		case []any:
			want := 0
			for i := range parts {
				want += 3 * len(parts[i].batch)
			}
			if len(v) != want {
				err = fmt.Errorf("moonredis: %d numbers for %d requests", len(v), want/3)
			}
			ns = v
		default:
			err = fmt.Errorf("moonredis: unreadable answer of type %T", v)
		}
	}
	for i := range parts {
		p := &parts[i]
		if p.err = err; err != nil {
			continue
		}
		if ns != nil {
			n := 3 * len(p.batch)
			p.out, p.err = numbers(p.res[:0], ns[:n])
			ns = ns[n:]
		} else {
			one := s
			if len(parts) > 1 {
				one, s, _ = strings.Cut(s, "/")
			}
			p.out, p.err = parse(p.res[:0], one, len(p.batch))
		}
		if p.err != nil {
			// One key's answer unreadable: the run's are not to be trusted.
			for j := range parts {
				parts[j].err = p.err
			}
			return
		}
	}
}

// numbers reads a bucket's answer, three numbers per request (see parse
// for what they say), into out, or into a slice of its own when out has
// no room for them.
func numbers(out []verdict, ns []any) ([]verdict, error) {
	if cap(out) < len(ns)/3 {
		out = make([]verdict, 0, len(ns)/3)
	}
	for i := 0; i+2 < len(ns); i += 3 {
		ok, okOK := ns[i].(int64)
		w, wOK := ns[i+1].(int64)
		k, kOK := ns[i+2].(int64)
		if !okOK || !wOK || !kOK {
			return nil, fmt.Errorf("moonredis: unreadable answer %v", ns[i:i+3])
		}
		out = append(out, verdict{ok: ok == 1, wait: micros(w), left: float64(k) / 1000})
	}
	return out, nil
}

// Numbers the calls send often, boxed once.
var (
	zero    any = 0
	one     any = 1
	forever any = noDeadline
)

// parse reads a script's answer for n requests into out, or into a
// slice of its own when out has no room for them.
func parse(out []verdict, s string, n int) ([]verdict, error) {
	if cap(out) < n {
		out = make([]verdict, 0, n)
	}
	for s != "" {
		var one string
		one, s, _ = strings.Cut(s, ";")
		ok, rest, _ := strings.Cut(one, ",")
		wait, left, _ := strings.Cut(rest, ",")
		w, err1 := strconv.ParseInt(wait, 10, 64)
		k, err2 := strconv.ParseInt(left, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("moonredis: unreadable answer %q", one)
		}
		out = append(out, verdict{ok: ok == "1", wait: micros(w), left: float64(k) / 1000})
	}
	if len(out) != n {
		return nil, fmt.Errorf("moonredis: %d answers for %d requests", len(out), n)
	}
	return out, nil
}

// micros is w microseconds as a Duration, at most policy.Never.
func micros(w int64) time.Duration {
	if w >= int64(policy.Never/time.Microsecond) {
		return policy.Never
	}
	return time.Duration(max(w, 0)) * time.Microsecond
}

// deadlineOf lays ctx's deadline, a span from now on the real clock, on
// the engine's clock from now; 0 when ctx has none.
func deadlineOf(ctx context.Context, now int64) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	left := time.Until(d)
	if left > time.Duration(math.MaxInt64-now) {
		return 0
	}
	return now + int64(left)
}

// spreadOf is how a flight of several keys goes to Redis through c: one
// run for every key through a client of one server (a *redis.Client,
// failover clients included), one run per hash slot through a
// *redis.ClusterClient, and one run per key through any other (a
// *redis.Ring spreads keys over its shards by a hash of its own).
func spreadOf(c redis.UniversalClient) int {
	switch c.(type) {
	case *redis.Client:
		return oneRun
	case *redis.ClusterClient:
		return perSlot
	}
	return perRun
}

// poolSize is how many connections c keeps to a server: Config.MaxCalls
// is at most that, so no call waits for a connection. A client whose pool
// it cannot read counts as go-redis's default, ten per GOMAXPROCS.
func poolSize(c redis.UniversalClient) int {
	n := 0
	switch c := c.(type) {
	case *redis.Client:
		n = c.Options().PoolSize
	case *redis.ClusterClient:
		n = c.Options().PoolSize
	case *redis.Ring:
		n = c.Options().PoolSize
	}
	if n <= 0 {
		n = 10 * runtime.GOMAXPROCS(0)
	}
	return n
}

// hashSlot is the Redis Cluster hash slot of the key prefix+key: CRC16
// (XMODEM) of its hash tag, the part between its first '{' and the next
// '}' when that is not empty, or else of the whole key, modulo 16384.
func hashSlot(prefix, key string) uint16 {
	var buf [128]byte
	k := append(append(buf[:0], prefix...), key...)
	if i := bytes.IndexByte(k, '{'); i >= 0 {
		if j := bytes.IndexByte(k[i+1:], '}'); j > 0 {
			k = k[i+1 : i+1+j]
		}
	}
	var crc uint16
	for _, b := range k {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
