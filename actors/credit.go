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
// request(n). A caller draws from it with Draw. When it is dry the caller
// asks the actor, which takes back what is left, answers exactly, and
// lends a fresh batch if nobody is waiting.
//
// The actor renews the lease before it runs dry. A Draw that leaves its
// stripe with under a quarter of what the actor last put there asks for a
// renewal. The actor then counts what was drawn and tops the stripes up,
// and takes nothing back. The caller does not wait for it: it sends the
// actor a message, and runs it at once only when the actor is idle. So
// callers go on drawing while the lease is renewed, and a caller meets a
// dry lease only when the bucket itself runs low.
//
// The actor never takes lent tokens out of its bucket: they stay inside,
// reserved, until it learns how many were drawn. So the tokens in the
// bucket, less those reserved, plus the credit never come to more than the
// burst, whatever the timing. The callers together never get more than the
// exact bucket would let through over any stretch of time. The price is
// under-admission: tokens drawn but not yet counted still take room in the
// bucket, so a bucket that fills up during a quiet spell holds up to one
// lease fewer than the exact one would (see SpawnBucketCredit for the
// figure measured).
//
// A window's credit is also bounded in time (see SpawnWindowCredit). It
// is drawn with DrawAt. Time is cut into spans of equal length, numbered
// from the actor's start, and a word per span holds that span's lease,
// tagged with its number. So the actor knows when every draw happened to
// within a span. The first draw in a span asks for a renewal when fewer
// than half the spans ahead are lent. The actor then counts the spans
// that are over and lends their words for the next ones, and leaves the
// current span alone. So a span boundary never finds the lease taken
// back.
//
// A nil *Credit draws nothing. The zero Credit is dry.
//
// A bucket's lease is split across a few stripes, each on its own cache
// line, and a caller draws from the stripe its goroutine's stack falls
// on, so callers on different processors rarely touch the same line. A
// caller whose stripe is dry tries the others before it asks the actor.
// The word a draw changes also counts the draws, so Drawn costs a caller
// nothing: no second atomic operation on the fast path.
type Credit struct {
	// Set once, before anyone draws.
	span   int64       // how long each stripe may be drawn with DrawAt; 0 for a bucket
	origin int64       // where span 0 begins
	ref    *engine.Ref // the lender, asked to renew; nil for a key's credit, which is never renewed
	_      [40]byte    // off the stripes' lines

	// A bucket's lease is in the first drawStripes, a window's spare in
	// the last.
	stripes [drawStripes + 1]stripe
	// spans are a window's lease, a word per span (see spanMask). They
	// share cache lines: callers draw from one span at a time.
	spans [spanRing]atomic.Uint64

	ahead    atomic.Int64  // the last span lent (a window's)
	renewing atomic.Bool   // a renewal is asked of the actor and not yet run
	drawn    atomic.Int64  // draws the actor has counted
	seq      atomic.Uint64 // odd while the actor moves draws from the stripes to drawn
	busy     atomic.Bool   // the actor is answering a message, the lease taken back until it is done
}

// stripe is one part of a lease: draws since the actor last wrote it
// << 32 | tokens lent and not drawn (see stripeMask).
type stripe struct {
	w atomic.Uint64
	_ [56]byte // a cache line of its own
}

// spanRing is how many spans a window lends ahead, a word for each. The
// more, the less often the actor renews them. Its renewal is the one
// thing callers wait on, and the goroutine running it may be preempted.
const spanRing = 64

// spareStripe is the stripe of a window's spare lease: tokens a caller
// may draw at any time, when its span is not lent or is spent. The actor
// counts them when it next renews, as a bucket's. It carries the callers
// through a renewal that comes late, and a spell when nobody drew,
// without asking the actor to answer exactly.
//
// A renewal comes late when the goroutine running it loses its processor:
// with more busy goroutines than processors it waits for another's time
// slice to end, 10 ms or more. A window of a million events a millisecond
// lends its spans for a quarter of a millisecond ahead, so only the spare
// can carry its callers that long. So the spare takes all the room beyond
// a whole lease of spans. A window near its quota lends spans alone.
const spareStripe = drawStripes

// fields are the draws and the tokens in w, the word of slot i: a span's
// or a stripe's.
func fields(i int, w uint64) (draws, tokens int64) {
	if i >= spanRing {
		return int64(w >> 32), int64(w & stripeMask)
	}
	return int64(w >> 16 & spanMask), int64(w & spanMask)
}

// The slots of a lease, as the actor numbers them: a window's spans
// first, then a bucket's stripes, the last of them a window's spare.
const (
	slots     = spanRing + drawStripes + 1
	spareSlot = slots - 1
)

// slot is the word of slot i (see slots).
func (c *Credit) slot(i int) *atomic.Uint64 {
	if i < spanRing {
		return &c.spans[i]
	}
	return &c.stripes[i-spanRing].w
}

// drawStripes is how many stripes any other lease is split into: enough
// that two processors' callers seldom meet, few enough that a small lease
// still gives each stripe some, and a Draw of a few tokens finds them in
// one stripe.
const drawStripes = 4

// renewLead is how many spans ahead of a draw a window's lease must reach
// for the draw not to ask for a renewal: half its ring. The rest of the
// lease covers the time the actor takes to renew.
const renewLead = spanRing / 2

// renewDraws is the fewest draws from a bucket's stripe that may ask for
// a renewal: a small lease is not worth renewing ahead, and its callers
// ask the actor once it is dry, as they would without credit.
const renewDraws = 16

// The fields of a stripe's word: draws << 32 | tokens. A bucket's lease
// and a window's spare are at most stripeMask tokens, and draws are fewer.
const (
	stripeMask = 1<<32 - 1
	stripeOne  = 1 << 32
)

// The fields of a span's word: tag << 32 | draws << 16 | tokens. The tag
// is the number of the span the word is lent for; a span's lease is at
// most 1,024 tokens.
const (
	spanMask = 1<<16 - 1
	spanOne  = 1 << 16
	tagOne   = 1 << 32
)

// stackSpot is a number picked by where the calling goroutine's stack is:
// it differs between goroutines and stays put for one (unless its stack
// moves), so callers that index stripes or slots by it seldom meet.
func stackSpot() int {
	var mark byte
	h := uintptr(unsafe.Pointer(&mark)) >> 12
	return int(h ^ h>>3)
}

// Draw takes n whole tokens if the credit holds them. It does not wait
// for the actor. A draw that leaves its stripe low asks the actor to
// renew the lease: it sends a message, and runs the renewal itself if the
// actor is idle, which takes a microsecond or less. Like any send it
// blocks only while the actor's mailbox is full.
func (c *Credit) Draw(n int64) bool {
	if c == nil || n < 1 {
		return false
	}
	home := stackSpot() & (drawStripes - 1)
	for k := range drawStripes {
		st := &c.stripes[(home+k)&(drawStripes-1)]
		for w := st.w.Load(); int64(w&stripeMask) >= n; w = st.w.Load() {
			if st.w.CompareAndSwap(w, w-uint64(n)+stripeOne) {
				if low(w - uint64(n) + stripeOne) {
					c.renew()
				}
				return true
			}
		}
	}
	return false
}

// low says whether a stripe whose word is w holds under a quarter of
// what the actor last put there (each draw a token or more).
func low(w uint64) bool {
	draws, tokens := w>>32, w&stripeMask
	return draws >= renewDraws && 3*tokens < draws
}

// DrawAt is Draw for a caller whose clock reads now: it draws from the
// word lent for the span that holds now, or else from the spare. It says
// no, so that the caller asks the actor, when both are dry. The first
// draw in a span asks the actor to renew the lease if fewer than
// renewLead spans are lent ahead, and so does a draw from the spare when
// its span is not lent, the spare runs low, or spareCount draws have
// been taken from it since the actor last counted them. It waits no more
// than Draw.
func (c *Credit) DrawAt(now, n int64) bool {
	if c == nil || n < 1 || c.span < 1 || now < c.origin {
		return false
	}
	k := (now - c.origin) / c.span
	st := &c.spans[k&(spanRing-1)]
	// The tag proves the word is lent for span k: the actor writes a
	// word's tag and its tokens with one store.
	var lent bool
	for {
		w := st.Load()
		// The tag holds the span's low 32 bits: a span past the last
		// lent is not lent, whatever an old word's tag says.
		if lent = uint32(w>>32) == uint32(k) && k <= c.ahead.Load(); !lent || int64(w&spanMask) < n {
			break
		}
		if st.CompareAndSwap(w, w-uint64(n)+spanOne) {
			if w&(spanMask<<16) == 0 && k+renewLead > c.ahead.Load() {
				c.renew()
			}
			return true
		}
	}
	sp := &c.stripes[spareStripe]
	for w := sp.w.Load(); int64(w&stripeMask) >= n; w = sp.w.Load() {
		if sp.w.CompareAndSwap(w, w-uint64(n)+stripeOne) {
			if w += stripeOne - uint64(n); !lent || low(w) || (w>>32)%spareCount == 0 {
				c.renew()
			}
			return true
		}
	}
	return false
}

// spareCount is how often a draw from a window's spare asks for a
// renewal: every spareCount-th since the actor last counted the spare.
// The spare's events are counted at the renewal, so while the actor keeps
// up, fewer than spareCount of them wait for a later one, however large
// the spare.
const spareCount = 1024

// renew asks the actor to renew the lease, unless a renewal is asked
// already. The caller runs the actor's renewal itself if the actor is
// idle; otherwise it leaves the message and goes on.
func (c *Credit) renew() {
	if c.ref != nil && !c.renewing.Load() && c.renewing.CompareAndSwap(false, true) {
		c.ref.Send(renewal)
	}
}

// renewMsg asks a lender to renew its lease. It wants no answer.
type renewMsg struct{}

// renewal is the one renewMsg every lender is sent.
var renewal = &renewMsg{}

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
	return c != nil && settled(&c.busy)
}

// settled spins while busy holds, settleTries looks at most, and reports
// whether it was let go: false at once if busy does not hold.
func settled(busy *atomic.Bool) bool {
	if !busy.Load() {
		return false
	}
	for range settleTries {
		if !busy.Load() {
			return true
		}
	}
	return false
}

// settleTries is how many times Settled looks before it gives up: a
// microsecond or two, longer than an actor's answer and short of parking.
const settleTries = 4096

// Drawn is how many Draws have succeeded, ever. It never blocks; it may
// spin for the moment the actor counts the draws.
func (c *Credit) Drawn() int64 {
	if c == nil {
		return 0
	}
	for {
		s := c.seq.Load()
		if s&1 == 0 {
			d := c.drawn.Load()
			for i := range slots {
				draws, _ := fields(i, c.slot(i).Load())
				d += draws
			}
			if c.seq.Load() == s {
				return d
			}
		}
		runtime.Gosched()
	}
}

// takeBack empties the credit and returns the tokens that were still in
// it, counting the draws made since the actor last wrote the stripes.
// The spans' tags stay.
func (c *Credit) takeBack() int64 {
	var each [slots]int64
	return c.takeBackEach(&each)
}

// takeBackEach is takeBack that also says how many were drawn from each
// stripe, for a lease bounded in time, whose stripes are its spans.
func (c *Credit) takeBackEach(drawn *[slots]int64) int64 {
	c.seq.Add(1)
	var left, all int64
	for i := range slots {
		keep := ^uint64(tagOne - 1) // a span's tag
		if i >= spanRing {
			keep = 0 // a stripe has none
		}
		draws, tokens := fields(i, c.slot(i).And(keep))
		drawn[i] = draws
		all += draws
		left += tokens
	}
	c.drawn.Add(all)
	c.seq.Add(1)
	return left
}

// lendAt lends n tokens, split evenly across a bucket's stripes, as a new
// lease.
func (c *Credit) lendAt(n int64) {
	for i := range drawStripes {
		st := &c.stripes[i]
		st.w.Store(uint64(stripeShare(n, i)))
	}
}

// stripeShare is stripe i's part of n tokens split evenly across a
// bucket's stripes, the first ones taking one more of what is left over.
func stripeShare(n int64, i int) int64 {
	part := n / drawStripes
	if int64(i) < n%drawStripes {
		part++
	}
	return part
}

// lendUpTo lends a lease of at most lease tokens and at most left, what
// the books hold, and returns how many it lent: none when that is under
// one.
func (c *Credit) lendUpTo(lease int64, left float64) int64 {
	// In floats first: a burst near MaxFloat64 holds more than an int64.
	n := int64(min(float64(lease), left))
	if n < 1 {
		return 0
	}
	c.lendAt(n)
	return n
}

// leaseOf is how many tokens a bucket of rate and burst lends at a time:
// a sixteenth of the burst, so the under-admission stays a small share of
// it, and at most 1,024 tokens or a millisecond of the rate, whichever is
// more, so that share is small in tokens too, or in time. A bucket whose
// lease would be under one token lends nothing: every call is asked of the
// actor, exactly as without credit. A window lends by its allowance alone
// (rate 0).
func leaseOf(rate, burst float64) int64 {
	most := max(1024, min(math.Floor(rate/1000), maxLease))
	return int64(min(math.Floor(burst/16), most))
}

// bucketLease is leaseOf for a bucket of rule r's numbers.
func bucketLease(r bucketRule) int64 { return leaseOf(r.rate, r.burst) }

// maxLease is the most a bucket's lease may hold: what its stripes'
// fields count, and more than a millisecond of any rate a machine serves.
const maxLease = drawStripes * stripeMask

// SpawnBucketCredit is SpawnBucket with credit: it also returns the Credit
// the actor lends to, which callers Draw from before they ask the actor (a
// nil Credit, and the bucket lends nothing, when the burst is under
// sixteen tokens).
//
// Allow without Wait drawn from credit is decided by one atomic operation.
// Everything the actor answers is exact: it takes back every lent token
// before it answers an Allow, a Left or a Tick, and it lends nothing while
// anybody is parked, so Wait, Left and the FIFO are exactly as
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
	return spawnLender(e, name, l, bucketLease, 0)
}

// SpawnWindowCredit is SpawnWindow with credit, as SpawnBucketCredit is
// SpawnBucket with it, for a window of at least 1,024 events. Time is cut
// into spans of a 256th of the window, and the actor lends up to 64 of
// them ahead, each with a sixteenth of the allowance (at most 1,024), as
// far as the window has room.
// Allow draws from the span its clock reading falls in with DrawAt, one
// atomic operation. A smaller window lends nothing and returns a nil
// Credit: its quota is counted exactly.
//
// The actor also lends a spare batch: all the room beyond a whole lease
// of spans, up to 4,294,967,295 events. A caller whose span is not lent,
// or is spent, draws from it, so callers go on drawing through a renewal
// that comes late. The actor counts those events when it next renews the
// lease: later than they happened, never earlier.
//
// The actor counts what was drawn in a span as happening at the end of
// that span, or when it takes the lease back if that is sooner: never
// before the draws happened. So each event leaves the window no sooner
// than the exact window would let it go, and over any stretch of time no
// more get through than the exact window allows. The price is that an
// event drawn from a span may stay counted up to a 256th of the window
// longer than it should, and one drawn from the spare until the actor
// next renews the lease or answers a caller (every 1,024th draw from the
// spare asks for a renewal, so while the actor keeps up fewer than 1,024
// wait longer), so Left, Delay and Wait read the window as if some events
// came that much later; TestWindowCreditNeverOverAdmits measures the
// events let through short of the exact window.
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
// above zero bounds each stripe's lease in time (see SpawnWindowCredit),
// and leaseFor is then the lease of one span.
func spawnLender[S any, R rule[S]](e *engine.Engine, name string, l *limiter[S, R], leaseFor func(R) int64, span int64) (*engine.Ref, *Credit, error) {
	lease := leaseFor(l.rule)
	if lease < 1 {
		ref, err := e.Spawn(name, l, nil)
		return ref, nil, err
	}
	b := &lender[S, R]{limiter: l, credit: &Credit{span: span, origin: e.Now()}, lease: lease, leaseFor: leaseFor}
	b.spans[spareSlot] = math.MaxInt64
	ref, err := e.Spawn(name, b, nil)
	if err != nil {
		return nil, nil, err
	}
	// Set before anyone has the Credit to draw from; the actor never
	// reads it.
	b.credit.ref = ref
	return ref, b.credit, nil
}

// lender is a bucket or window actor that lends to its Credit.
type lender[S any, R rule[S]] struct {
	*limiter[S, R]
	credit   *Credit
	leaseFor func(R) int64
	lease    int64 // a bucket's whole lease, or a window's for one span
	// put is what the actor last left in each stripe, for each span of a
	// window. What is lent, reserved in the books, is their sum.
	put [slots]int64
	// spans is the span each of a window's stripes is lent for. The
	// spare's is never over: its draws are counted when they are taken.
	spans   [slots]int64
	stopped bool
}

// Receive takes back the credit, so the books are exact while the message
// is handled, and lends afresh afterwards if nobody waits.
func (b *lender[S, R]) Receive(c actor.Context) { lending(c, b.limiter, b, &b.stopped) }

// Handle is Receive for a user message, which the engine hands over
// straight; it must not fall through to the limiter's own Handle, which
// knows nothing of the credit. The request is in hand (see inFlight) from
// before the credit is taken back. A renewal takes nothing back: it only
// counts what was drawn and lends more.
func (b *lender[S, R]) Handle(msg any) {
	if msg == any(renewal) {
		if !b.stopped {
			b.watch()
			b.lend()
		}
		b.credit.renewing.Store(false)
		return
	}
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

// lent is what is lent and not yet counted: reserved in the books.
func (b *lender[S, R]) lent() int64 {
	var n int64
	for _, p := range b.put {
		n += p
	}
	return n
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
	lent := b.lent()
	if lent == 0 {
		return
	}
	if b.credit.span > 0 {
		b.reclaimSpans()
		return
	}
	drawn := lent - b.credit.takeBack()
	b.put = [slots]int64{}
	if drawn <= 0 {
		return
	}
	b.seen(b.alarm.clock.Now())
	// The reserve covers it: the books held the lent tokens when they
	// were lent, and have only gained since.
	b.rule.take(&b.state, b.now, float64(drawn))
}

// reclaimSpans is reclaim for a lease bounded in time.
func (b *lender[S, R]) reclaimSpans() {
	var each [slots]int64
	b.credit.takeBackEach(&each)
	b.put = [slots]int64{}
	b.count(&each, &b.spans, b.alarm.clock.Now())
}

// count counts each[i] events drawn in span spans[i], at the end of that
// span or at now if that is sooner, the earliest spans first. Every draw
// of a span happened within it, so none is counted early.
func (b *lender[S, R]) count(each, spans *[slots]int64, now int64) {
	for {
		first := -1
		for i, n := range each {
			if n > 0 && (first < 0 || spans[i] < spans[first]) {
				first = i
			}
		}
		if first < 0 {
			return
		}
		b.countAt(min(now, b.spanEnd(spans[first])), each[first])
		each[first] = 0
	}
}

// countAt counts n events drawn from a window's lease as happening at at,
// or at the latest instant the books have seen if that is later.
func (b *lender[S, R]) countAt(at, n int64) {
	b.seen(at)
	// The reserve covers it, as for a bucket.
	if w, ok := any(&b.state).(*policy.Window); ok {
		w.TakeN(b.now, int(n)) // a window's take counts one event, whatever n
	} else {
		b.rule.take(&b.state, b.now, float64(n))
	}
}

// spanEnd is the instant span k ends, clamped at the largest int64.
func (b *lender[S, R]) spanEnd(k int64) int64 {
	c := b.credit
	if k >= math.MaxInt64/c.span-1 {
		return math.MaxInt64
	}
	end := (k + 1) * c.span
	if c.origin > 0 && end > math.MaxInt64-c.origin {
		return math.MaxInt64
	}
	return c.origin + end
}

// lend lends what the lease is short of, up to what the books hold,
// unless somebody is parked: they come first, and credit would let Allows
// overtake them. After a reclaim every stripe is empty and this lends a
// whole lease; on a renewal it tops the lease up.
func (b *lender[S, R]) lend() {
	if b.q.parked > 0 {
		return
	}
	if b.credit.span > 0 {
		b.lendSpans()
		return
	}
	b.lendStripes()
}

// room is what the books hold beyond what is lent: what may be lent more.
func (b *lender[S, R]) room() float64 {
	return b.rule.left(&b.state, b.now) - float64(b.lent())
}

// lendStripes tops each of a bucket's stripes up to its share of the
// lease. In the same atomic operation it counts the draws since it last
// wrote the stripe, and what they drew then leaves the bucket at the
// clock's time after, as reclaim's do.
func (b *lender[S, R]) lendStripes() {
	c := b.credit
	room := b.room()
	var drawn, draws int64
	c.seq.Add(1)
	for i := range drawStripes {
		share := stripeShare(b.lease, i)
		st := &c.stripes[i]
		for {
			w := st.w.Load()
			left := int64(w & stripeMask)
			give := max(int64(min(float64(share-left), room)), 0)
			if st.w.CompareAndSwap(w, uint64(left+give)) {
				draws += int64(w >> 32)
				drawn += b.put[spanRing+i] - left
				b.put[spanRing+i] = left + give
				room -= float64(give)
				break
			}
		}
	}
	c.drawn.Add(draws)
	c.seq.Add(1)
	if drawn > 0 {
		b.seen(b.alarm.clock.Now())
		// The reserve covers it, as in reclaim.
		b.rule.take(&b.state, b.now, float64(drawn))
	}
}

// lendSpans lends a window's stripes for the span that holds the clock's
// now and the ones after it, up to spanRing spans in all, and tops
// up the spare. A stripe lent for a span not yet over is left alone, so
// its callers never find it taken back. A stripe lent for a span that is
// over is counted and lent for a span ahead in one atomic operation. Its
// events are counted at the end of their span, the spare's at now, and
// the room they did not use comes back to be lent again.
func (b *lender[S, R]) lendSpans() {
	c := b.credit
	now := b.alarm.clock.Now()
	if now < c.origin {
		return
	}
	cur := (now - c.origin) / c.span
	room := b.room()
	// The spans counted, in the order met: the ring from the current
	// span on holds the oldest spans first.
	var counted [spanRing]struct{ span, events int64 }
	var m int
	var draws int64
	c.seq.Add(1)
	for j := range int64(spanRing) {
		k := cur + j
		i := k & (spanRing - 1)
		if b.put[i] > 0 && b.spans[i] >= cur {
			continue // lent for a span not yet over
		}
		if n := b.relend(int(i), uint64(uint32(k))<<32, false, b.lease, &room); n > 0 {
			draws += n
			counted[m].span, counted[m].events = b.spans[i], n
			m++
		}
		b.spans[i] = k
	}
	// The spare takes only room beyond a whole lease of spans, as much as
	// its word holds.
	room -= float64(spanRing * b.lease)
	if lendSpansPause != nil {
		lendSpansPause()
	}
	spared := b.relend(spareSlot, 0, true, stripeMask, &room)
	draws += spared
	c.drawn.Add(draws)
	c.seq.Add(1)
	c.ahead.Store(cur + spanRing - 1)
	// A span met out of order is counted later than its end: later, never
	// earlier, than its events. The spare's are counted at a reading of
	// the clock taken after the spare was taken back, so no later than
	// any of its draws.
	for _, s := range counted[:m] {
		b.countAt(min(now, b.spanEnd(s.span)), s.events)
	}
	if spared > 0 {
		b.countAt(max(b.alarm.clock.Now(), now), spared)
	}
}

// relend writes a window's stripe i afresh with one atomic operation: its
// tag, no draws, and up to most tokens. With keep, the tokens it holds
// stay and are topped up; otherwise they come back. It returns the draws
// it counted, each an event for the books. room is what the books may
// still lend: it gains what the stripe held and loses what it holds now
// and the events.
func (b *lender[S, R]) relend(i int, tag uint64, keep bool, most int64, room *float64) (draws int64) {
	st := b.credit.slot(i)
	for {
		w := st.Load()
		var left int64
		draws, left = fields(i, w)
		if !keep {
			left = 0
		}
		free := *room + float64(b.put[i]-draws-left)
		give := max(int64(min(float64(most-left), free)), 0)
		if st.CompareAndSwap(w, tag|uint64(left+give)) {
			*room = free - float64(give)
			b.put[i] = left + give
			return draws
		}
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

// lendSpansPause, when a test sets it, runs in lendSpans between its
// reading of the clock and taking the spare back: a stand-in for the
// goroutine that runs the renewal losing the processor there.
var lendSpansPause func()
