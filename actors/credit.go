package actors

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// Credit is tokens a bucket actor has lent its callers ahead of time, so
// that an Allow costs one atomic operation instead of a round trip: the
// credit-based flow control of TCP's window and Reactive Streams'
// request(n). A caller draws from it with Draw; when it is dry the caller
// asks the actor, which takes back what is left, answers exactly, and
// lends a fresh batch if nobody is waiting.
//
// The actor never takes lent tokens out of its bucket: they stay inside,
// reserved, until it takes the credit back and learns how many were drawn.
// So the tokens in the bucket, less those reserved, plus the credit never
// come to more than the burst, whatever the timing, and the callers
// together never get more than the exact bucket would let through over any
// stretch of time. The price is under-admission: tokens drawn but not yet
// accounted for still take room in the bucket, so a bucket that fills up
// during a quiet spell holds up to one lease fewer than the exact one
// would (see SpawnBucketCredit for the figure measured).
//
// A window's credit is also bounded in time (see SpawnWindowCredit). It
// is drawn with DrawAt, and each stripe holds the part of the lease for
// one short span: the first stripe for the span after the lease was lent,
// the next for the span after that. So the actor knows when every draw
// happened to within a span, and a caller asks it for a fresh lease once
// every few spans, not every one.
//
// A nil *Credit draws nothing. The zero Credit is dry.
//
// A lease is split across a few stripes, each on its own cache line, and
// a caller draws from the stripe its goroutine's stack falls on, so callers
// on different processors rarely touch the same line; a caller whose
// stripe is dry tries the others before it asks the actor. The word a draw
// changes also counts the draws, so Drawn costs a caller nothing: no
// second atomic operation on the fast path.
type Credit struct {
	stripes [creditStripes]stripe
	from    atomic.Int64  // the instant the lease was lent; DrawAt's draws are at or after it
	span    int64         // how long each stripe may be drawn with DrawAt; set once, before the first lease
	drawn   atomic.Int64  // draws the actor has taken back
	seq     atomic.Uint64 // odd while the actor takes the credit back
	busy    atomic.Bool   // the actor is answering a message, the lease taken back until it is done
}

// stripe is one part of a lease: the lease's number << 32 | draws since it
// was lent << 16 | tokens lent and not drawn. The number changes with every
// lease, so a draw that read one lease's from cannot land in the next.
type stripe struct {
	w atomic.Uint64
	_ [56]byte // a cache line of its own
}

// creditStripes is how many stripes a lease bounded in time is split
// into, a stripe per span, so a caller asks its actor once every sixteen
// spans: the actor's answer then takes a small share of its time, and a
// goroutine descheduled while it runs the actor seldom leaves the others
// with a lease run out.
const creditStripes = 16

// drawStripes is how many stripes any other lease is split into: enough
// that two processors' callers seldom meet, few enough that a small lease
// still gives each stripe some, and a Draw of a few tokens finds them in
// one stripe.
const drawStripes = 4

// parts is how many of the stripes a lease is split into.
func (c *Credit) parts() int {
	if c.span > 0 {
		return creditStripes
	}
	return drawStripes
}

// The fields of a stripe's word; a lease is at most maxLease tokens, so
// tokens and draws each fit in 16 bits.
const (
	creditMask = 1<<16 - 1
	drawOne    = 1 << 16
	leaseOne   = 1 << 32
)

// stackSpot is a number picked by where the calling goroutine's stack is:
// it differs between goroutines and stays put for one (unless its stack
// moves), so callers that index stripes or slots by it seldom meet.
func stackSpot() int {
	var mark byte
	h := uintptr(unsafe.Pointer(&mark)) >> 12
	return int(h ^ h>>3)
}

// Draw takes n whole tokens if the credit holds them. It never blocks.
func (c *Credit) Draw(n int64) bool {
	if c == nil || n < 1 {
		return false
	}
	parts := c.parts()
	home := stackSpot() & (parts - 1)
	for k := range parts {
		st := &c.stripes[(home+k)&(parts-1)]
		for w := st.w.Load(); int64(w&creditMask) >= n; w = st.w.Load() {
			if st.w.CompareAndSwap(w, w-uint64(n)+drawOne) {
				return true
			}
		}
	}
	return false
}

// DrawAt is Draw for a caller whose clock reads now: it draws from the
// stripe whose span holds now, and says no, so that the caller asks the
// actor, when that stripe is dry or no span of the lease holds now. It
// never blocks.
func (c *Credit) DrawAt(now, n int64) bool {
	if c == nil || n < 1 || c.span < 1 {
		return false
	}
	for {
		from := c.from.Load()
		if now < from {
			return false
		}
		k := (now - from) / c.span
		if k >= creditStripes {
			return false
		}
		st := &c.stripes[k]
		w := st.w.Load()
		if int64(w&creditMask) < n {
			return false
		}
		// from is stored before a lease's words and the lease is taken
		// back before the next from: a from unchanged across the load of
		// w, and a CAS on that w, prove w is of the lease lent at from.
		if c.from.Load() != from {
			continue
		}
		if st.w.CompareAndSwap(w, w-uint64(n)+drawOne) {
			return true
		}
	}
}

// Settled waits a short bounded while for the actor to finish the
// message it is answering, if it is answering one, and reports whether it
// did: the lease it took back to answer is lent again then, if anything
// is, and a caller that found the credit dry meanwhile can draw again
// rather than queue on the actor behind it. It reports false at once when
// the actor is idle.
//
// It spins and never yields the processor: a yield beside goroutines that
// never block (a busy neighbour) gives the processor away for a whole time
// slice, far longer than an answer takes. So an actor whose goroutine was
// descheduled is not waited for: the caller asks it, and parks.
func (c *Credit) Settled() bool {
	if c == nil || !c.busy.Load() {
		return false
	}
	for range settleTries {
		if !c.busy.Load() {
			return true
		}
	}
	return false
}

// settleTries is how many times Settled looks before it gives up: a
// microsecond or two, longer than an actor's answer and short of parking.
const settleTries = 4096

// Drawn is how many Draws have succeeded, ever. It never blocks; it may
// spin for the moment the actor takes the credit back.
func (c *Credit) Drawn() int64 {
	if c == nil {
		return 0
	}
	for {
		s := c.seq.Load()
		if s&1 == 0 {
			d := c.drawn.Load()
			for i := range c.stripes {
				d += int64(c.stripes[i].w.Load() >> 16 & creditMask)
			}
			if c.seq.Load() == s {
				return d
			}
		}
		runtime.Gosched()
	}
}

// takeBack empties the credit and returns the tokens that were still in
// it, counting the draws made since the last lend. The leases' numbers
// stay, for the next lease to count on from.
func (c *Credit) takeBack() int64 {
	var each [creditStripes]int64
	return c.takeBackEach(&each)
}

// takeBackEach is takeBack that also says how many were drawn from each
// stripe, for a lease bounded in time, whose stripes are its spans.
func (c *Credit) takeBackEach(drawn *[creditStripes]int64) int64 {
	c.seq.Add(1)
	var left, all int64
	for i := range c.stripes {
		w := c.stripes[i].w.And(^uint64(leaseOne - 1))
		drawn[i] = int64(w >> 16 & creditMask)
		all += drawn[i]
		left += int64(w & creditMask)
	}
	c.drawn.Add(all)
	c.seq.Add(1)
	return left
}

// lendAt lends n tokens from the instant from, split evenly across the
// lease's parts: the spans one after another, for a lease bounded in
// time. The other stripes get none, and count the lease all the same.
func (c *Credit) lendAt(from, n int64) {
	c.from.Store(from)
	parts := c.parts()
	for i := range c.stripes {
		var part int64
		if i < parts {
			part = n / int64(parts)
			if int64(i) < n%int64(parts) {
				part++
			}
		}
		st := &c.stripes[i]
		st.w.Store(st.w.Load()&^(leaseOne-1) + leaseOne + uint64(part))
	}
}

// lendUpTo lends, from the instant from, a lease of at most lease tokens
// and at most left, what the books hold, and returns how many it lent:
// none when that is under one.
func (c *Credit) lendUpTo(from, lease int64, left float64) int64 {
	// In floats first: a burst near MaxFloat64 holds more than an int64.
	n := int64(min(float64(lease), left))
	if n < 1 {
		return 0
	}
	c.lendAt(from, n)
	return n
}

// leaseOf is how many tokens a bucket of rate and burst lends at a time:
// a sixteenth of the burst, so the under-admission stays a small share of
// it, and at most 1,024 tokens or a millisecond of the rate, whichever is
// more, so that share is small in tokens too, or in time: a bucket that
// lets millions through a second would otherwise run a lease dry every
// few hundred microseconds, and each time some callers find it dry and
// queue on the actor (the tail of its Allow). A bucket whose lease would be
// under one token lends nothing: every call is asked of the actor, exactly
// as without credit. A window lends by its allowance alone (rate 0).
func leaseOf(rate, burst float64) int64 {
	most := max(1024, min(math.Floor(rate/1000), maxLease))
	return int64(min(math.Floor(burst/16), most))
}

// maxLease is the most a lease may hold: what a stripe's 16-bit fields
// count.
const maxLease = creditMask

// SpawnBucketCredit is SpawnBucket with credit: it also returns the Credit
// the actor lends to, which callers Draw from before they ask the actor (a
// nil Credit, and the bucket lends nothing, when the burst is under
// sixteen tokens).
//
// Allow without Wait drawn from credit is decided by one atomic operation;
// everything the actor answers is exact, since it takes back every lent
// token before it answers an Allow, a Left or a Tick, and it lends nothing
// while anybody is parked, so Wait, Left and the FIFO are exactly as
// SpawnBucket's. The one difference is under-admission after quiet spells,
// at most one lease (a sixteenth of the burst, and at most 1,024 tokens or
// a millisecond of the rate, whichever is more; see leaseOf) per
// quiet spell. TestCreditNeverOverAdmits measured, at 1,000 tokens a
// second, how many fewer calls went through than through the exact
// bucket: 3.7% and 3.9% for bursts of 16 and 64 under a trickle, a quiet
// spell and a flood, over and over (0.33% and 0.03% for bursts of 1,000
// and 10,000); up to 1.1% at a steady 1.5 times the rate, from the bucket
// full at the start; and none under repeated bursts or random traffic.
func SpawnBucketCredit(e *engine.Engine, name string, rate, burst float64) (*engine.Ref, *Credit, error) {
	if e == nil {
		return nil, nil, errNoEngine
	}
	r := newBucketRule(rate, burst)
	l := newLimiter(e, r, *policy.NewBucket(r.rate, r.burst, e.Now()))
	return spawnLender(e, name, l, func(r bucketRule) int64 { return leaseOf(r.rate, r.burst) }, 0)
}

// SpawnWindowCredit is SpawnWindow with credit, as SpawnBucketCredit is
// SpawnBucket with it, for a window of at least 1,024 events. It lends
// sixteen spans of a 256th of the window at a time, one after another, and
// for each span a sixteenth of the allowance (at most 1,024). Allow draws
// from the span its clock reading falls in with DrawAt, one atomic
// operation. A smaller window lends nothing and returns a nil Credit: its
// quota is counted exactly.
//
// The actor counts what was drawn in a span as happening at the end of
// that span, or when it takes the lease back if that is sooner: never
// before the draws happened. So each event leaves the window no sooner
// than the exact window would let it go, and over any stretch of time no
// more get through than the exact window allows. The price is that an
// event drawn from a lease may stay counted up to a 256th of the window
// longer than it should, so Left, Delay and Wait read the window as if
// some events came that much later; TestWindowCreditNeverOverAdmits
// measures the events let through short of the exact window.
func SpawnWindowCredit(e *engine.Engine, name string, allow int, window time.Duration) (*engine.Ref, *Credit, error) {
	if e == nil {
		return nil, nil, errNoEngine
	}
	r := windowRule{allow: allow, window: window}
	l := newLimiter(e, r, r.fresh(e.Now()))
	span := int64(window / windowSpans)
	leaseFor := func(r windowRule) int64 {
		if r.allow < 1024 || span < 1 { // small quotas are counted exactly
			return 0
		}
		return leaseOf(0, float64(r.allow))
	}
	return spawnLender(e, name, l, leaseFor, span)
}

// windowSpans is how many of a lease's spans make a window.
const windowSpans = 256

// spawnLender spawns l as a lender of leases of leaseFor(its rule), or as a
// plain limiter with a nil Credit when the lease is under a token. A span
// above zero bounds each lease in time (see SpawnWindowCredit).
func spawnLender[S any, R rule[S]](e *engine.Engine, name string, l *limiter[S, R], leaseFor func(R) int64, span int64) (*engine.Ref, *Credit, error) {
	lease := leaseFor(l.rule)
	if lease < 1 {
		ref, err := e.Spawn(name, l, nil)
		return ref, nil, err
	}
	b := &lender[S, R]{limiter: l, credit: &Credit{span: span}, lease: lease, leaseFor: leaseFor}
	ref, err := e.Spawn(name, b, nil)
	if err != nil {
		return nil, nil, err
	}
	return ref, b.credit, nil
}

// lender is a bucket or window actor that lends to its Credit.
type lender[S any, R rule[S]] struct {
	*limiter[S, R]
	credit   *Credit
	leaseFor func(R) int64
	lease    int64
	lent     int64 // lent and not yet taken back: reserved in the books
	from     int64 // when the lease was lent
	stopped  bool
}

// Receive takes back the credit, so the books are exact while the message
// is handled, and lends afresh afterwards if nobody waits.
func (b *lender[S, R]) Receive(c actor.Context) { lending(c, b.limiter, b, &b.stopped) }

// Handle is Receive for a user message, which the engine hands over
// straight; it must not fall through to the limiter's own Handle, which
// knows nothing of the credit. The request is in hand (see inFlight) from
// before the credit is taken back.
func (b *lender[S, R]) Handle(msg any) {
	defer b.unanswered()
	b.hold(msg)
	b.credit.busy.Store(true)
	defer b.credit.busy.Store(false) // after the lend below (see Settled)
	b.reclaim()
	b.limiter.handle(msg)
	if _, ok := msg.(*Retune); ok {
		// A lease follows the numbers; lending nothing stays so, since
		// callers hold no Credit to draw from.
		b.lease = max(b.leaseFor(b.rule), 1)
	}
	if !b.stopped {
		b.lend()
	}
}

// lending runs one message of an actor that lends: it takes the lease back
// first, so inner answers from exact books, and lends afresh after, until
// the actor stops.
func lending(c actor.Context, inner actor.Actor, l interface {
	reclaim()
	lend()
}, stopped *bool) {
	l.reclaim()
	inner.Receive(c)
	switch c.Message().(type) {
	case *actor.Stopping, *actor.Stopped:
		*stopped = true
	}
	if !*stopped {
		l.lend()
	}
}

// reclaim takes back what is left of the credit. What was drawn leaves
// the bucket at the clock's time now, no earlier than any draw: taken at
// an earlier instant, the tokens would free room in a full bucket that it
// then refills, which is letting through more than the bucket allows.
//
// A window's events are counted no earlier either: at the end of the span
// they were drawn in, or at now if that is sooner. An event counted later
// than it happened leaves the window later, which only ever refuses more.
// Its room is reserved as the bucket's tokens are: nothing else takes
// from the window while a lease is out, and room only grows with time.
func (b *lender[S, R]) reclaim() {
	b.watch() // lent tokens are still inside: the most it held
	if b.lent == 0 {
		return
	}
	if b.credit.span > 0 {
		b.reclaimSpans()
		return
	}
	drawn := b.lent - b.credit.takeBack()
	b.lent = 0
	if drawn <= 0 {
		return
	}
	b.seen(b.alarm.clock.Now())
	// The reserve covers it: the books held the lent tokens when they
	// were lent, and have only gained since.
	b.rule.take(&b.state, b.now, float64(drawn))
}

// reclaimSpans is reclaim for a lease bounded in time: what was drawn in
// each span is counted at the end of that span, or now if that is sooner.
// Every draw of a span happened within it, so none is counted early.
func (b *lender[S, R]) reclaimSpans() {
	var each [creditStripes]int64
	b.credit.takeBackEach(&each)
	b.lent = 0
	now := b.alarm.clock.Now()
	for k, drawn := range each {
		if drawn <= 0 {
			continue
		}
		b.seen(min(now, b.from+int64(k+1)*b.credit.span))
		// The reserve covers it, as for a bucket.
		if w, ok := any(&b.state).(*policy.Window); ok {
			w.TakeN(b.now, int(drawn)) // a window's take counts one event, whatever n
		} else {
			b.rule.take(&b.state, b.now, float64(drawn))
		}
	}
}

// lend lends up to a lease of what the books hold, unless somebody is
// parked: they come first, and credit would let Allows overtake them.
//
// A lease bounded in time starts when it is lent, on the clock read now:
// the latest instant the books have seen is a caller's reading, which may
// be older by however long that caller waited for the actor, and a lease
// dated then would be born with part of its span gone, or all of it, so
// that the next callers come to the actor too, with readings older still.
// The room is what the books hold at their instant, which a window only
// gains on by the later one.
func (b *lender[S, R]) lend() {
	if b.q.parked > 0 {
		return
	}
	from := b.now
	if b.credit.span > 0 {
		from = max(from, b.alarm.clock.Now())
	}
	lease := b.lease
	if b.credit.span > 0 {
		lease *= creditStripes // a lease for each span
	}
	if n := b.credit.lendUpTo(from, lease, b.rule.left(&b.state, b.now)); n > 0 {
		b.lent, b.from = n, from
	}
}

// Room is room in a gate that its actor has lent its callers ahead of
// time, so Enter and Leave each cost one atomic operation. The lease is
// split across a few stripes, each on its own cache line, as a Credit's
// is: a caller enters and leaves through the stripe its goroutine's stack
// falls on, so callers on two processors seldom write the same line. One
// word per stripe holds how much was lent to it and how much of that is
// free. Enter takes from the free, Leave gives back while some of the lent
// is taken, and a caller whose stripe cannot serve it tries the others.
// Everything else (a dry lease, a Leave of someone who entered through
// the actor) is asked of the actor, which takes the lease back first. The
// actor counts all lent room as held, so the gate's limit holds exactly,
// and since it takes the lease back before every answer it gives, a
// refusal or a Left is exact too. Room taken in one stripe may be given
// back in another: the actor only counts how much is taken in all.
//
// A nil *Room holds nothing.
type Room struct {
	stripes [roomStripes]roomStripe
}

// roomStripe is one part of a gate's lease: lent<<32 | free.
type roomStripe struct {
	w atomic.Uint64
	_ [56]byte // a cache line of its own
}

// Enter takes a unit of room if some is free. It never blocks.
func (r *Room) Enter() bool {
	if r == nil {
		return false
	}
	home := stackSpot()
	for k := range roomStripes {
		st := &r.stripes[(home+k)&(roomStripes-1)]
		for w := st.w.Load(); w&roomMask != 0; w = st.w.Load() {
			if st.w.CompareAndSwap(w, w-1) {
				return true
			}
		}
	}
	return false
}

// Leave gives a unit back if some of the lent room is taken, and reports
// whether it did; if not, the caller tells the actor.
func (r *Room) Leave() bool {
	if r == nil {
		return false
	}
	home := stackSpot()
	for k := range roomStripes {
		st := &r.stripes[(home+k)&(roomStripes-1)]
		for w := st.w.Load(); w&roomMask < w>>32; w = st.w.Load() {
			if st.w.CompareAndSwap(w, w+1) {
				return true
			}
		}
	}
	return false
}

const roomMask = 1<<32 - 1

// roomStripes is how many stripes a gate's lease is split into: more than
// a bucket's Credit, since each Enter and each Leave writes one.
const roomStripes = 8

// SpawnGateCredit is SpawnGate with lent room: it also returns the Room
// callers Enter and Leave through before they ask the actor. Enter
// answers as SpawnGate's does, and never lets more than limit in; Left is
// exact. A gate with a limit under sixteen lends nothing and returns a nil
// Room.
func SpawnGateCredit(e *engine.Engine, name string, limit int) (*engine.Ref, *Room, error) {
	if e == nil {
		return nil, nil, errNoEngine
	}
	g := &gateActor{gate: *policy.NewGate(limit), limit: limit}
	lease := int64(64)
	if limit > 0 {
		lease = min(lease, int64(limit/16))
	}
	if lease < 1 {
		ref, err := e.Spawn(name, g, nil)
		return ref, nil, err
	}
	r := &roomLender{gateActor: g, room: new(Room), lease: int(lease)}
	ref, err := e.Spawn(name, r, nil)
	if err != nil {
		return nil, nil, err
	}
	return ref, r.room, nil
}

// roomLender is a gate actor that lends room.
type roomLender struct {
	*gateActor
	room    *Room
	lease   int
	lent    int // room lent, counted as held by the gate
	stopped bool
}

// Receive takes the lease back, so the gate is exact while the message is
// handled, and lends afresh afterwards.
func (r *roomLender) Receive(c actor.Context) { lending(c, r.gateActor, r, &r.stopped) }

// Handle is Receive for a user message, as lender's Handle is.
func (r *roomLender) Handle(msg any) {
	defer r.unanswered()
	r.hold(msg)
	r.reclaim()
	r.gateActor.handle(msg)
	if !r.stopped {
		r.lend()
	}
}

// reclaim takes the lease back: the room still free leaves the gate's
// count, and what was taken stays counted, as held by those inside.
func (r *roomLender) reclaim() {
	if r.lent == 0 {
		return
	}
	free := 0
	for i := range r.room.stripes {
		free += int(r.room.stripes[i].w.Swap(0) & roomMask)
	}
	r.lent = 0
	for range free {
		r.gate.Leave()
	}
}

// lend lends up to a lease of the room the gate has, split evenly across
// the stripes.
func (r *roomLender) lend() {
	n := 0
	for n < r.lease && r.gate.Enter() {
		n++
	}
	r.lent = n
	for i := range r.room.stripes {
		part := uint64(n / roomStripes)
		if i < n%roomStripes {
			part++
		}
		r.room.stripes[i].w.Store(part<<32 | part)
	}
}
