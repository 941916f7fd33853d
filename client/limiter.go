package client

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// ErrExceedsDeadline says a limiter's Wait would end after ctx's deadline,
// so it returned at once instead of sleeping towards a certain failure. The
// *WaitError that carries it says how long the wait would have been.
var ErrExceedsDeadline = actors.ErrDeadline

// WaitError is returned at once by a call whose wait would end after ctx's
// deadline, or never: a limiter's Wait, a pool's Get held by its ward, a
// Retry's next sleep. A bucket that earns nothing and holds too little
// never ends a wait, nor does a quota of nothing. It unwraps to
// ErrExceedsDeadline. Wait is what a Retry-After header should say.
type WaitError struct {
	Wait time.Duration // the wait the caller faced; policy.Never if none would end
	By   string        // what holds the caller back, as "the bucket"; may be ""
}

// Error says what holds the caller back and for how long, to three
// significant digits: "a wait of 2s for the bucket would pass the deadline".
func (e *WaitError) Error() string { return waitText(e.Wait, e.By) }

// Unwrap returns ErrExceedsDeadline.
func (e *WaitError) Unwrap() error { return ErrExceedsDeadline }

// Decision is a limiter's whole answer to one request, decided in one turn
// of its actor: whether it was allowed, how long until it would be if not,
// and what is left. It is what a server needs for a 429 and its headers.
// Asking twice instead (Allow, then Delay) can straddle other callers and
// disagree: a Delay of 0 right after a refusal, say. The zero Decision is a
// refusal whose wait is not known; RetryAfter reads it as 1.
type Decision struct {
	// OK is whether the request was allowed: its tokens taken, or its
	// event counted.
	OK bool
	// Wait is, for a refusal, how long until a caller asking the same would
	// be allowed, behind the callers already waiting in line: always more
	// than 0, and policy.Never when that would never be (more than the
	// burst, a quota of nothing) or the limiter is closed. It is 0 when OK.
	Wait time.Duration
	// Left is how many whole tokens (or events) a caller that does not wait
	// could still have now, for a remaining-count header: 0 while callers
	// wait in line, since they come first.
	Left int
	// Closed is whether the refusal came from a closed limiter, or one whose
	// engine shut down, rather than from the caller's quota. Its Wait is
	// policy.Never. A server going away answers 503, not 429.
	Closed bool
}

// MaxRetryAfter is the most Decision.RetryAfter says, in seconds: a day. A
// longer wait, one that never ends and a closed limiter all say it, rather
// than a number no client can use.
const MaxRetryAfter = 24 * 60 * 60

// RetryAfter is the wait in whole seconds, rounded up, for a Retry-After
// header: 0 when OK; for a refusal at least 1, since a client told 0 would
// come straight back, and at most MaxRetryAfter.
func (d Decision) RetryAfter() int {
	if d.OK {
		return 0
	}
	if d.Wait > (MaxRetryAfter-1)*time.Second {
		return MaxRetryAfter
	}
	return max(1, int((d.Wait+time.Second-1)/time.Second))
}

// Bucket is a token bucket on an engine: rate tokens a second accrue up to
// burst, and each call takes what it costs, one for Allow and Wait. It lets
// a burst through after a quiet spell and then holds callers to the rate,
// which is what an API facing people wants.
//
// Allow answers now and never blocks; Wait blocks in line, first come first
// served, until the tokens are there. Most servers want Try: Allow's answer
// with, in the same turn, the wait for a Retry-After header and what is
// left. The tokens live in one actor, so a Bucket is safe for concurrent
// use, and the bucket itself is the actors' (see actors.SpawnBucket); this
// is its blocking face. Build one with NewBucket; the zero Bucket is not
// usable.
type Bucket struct {
	l      limiter
	nums   bucketNumbers
	credit *actors.Credit // tokens the actor lent ahead of time; nil for a small burst
}

// NewBucket starts a token bucket on eng, full, so the first burst goes
// through at once. rate and burst are read as policy.NewBucket reads them:
// a burst <= 0 is a second's worth (at least one), and a rate <= 0 passes
// the first burst and then nothing, ever. It returns an error if eng is nil
// or refuses the actor (shut down).
func NewBucket(eng *Engine, rate, burst float64) (*Bucket, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewBucket: nil engine")
	}
	ref, credit, err := actors.SpawnBucketCredit(eng, "", rate, burst)
	if err != nil {
		return nil, fmt.Errorf("moonpool: NewBucket: %w", err)
	}
	if !(rate > 0) {
		rate = 0
	}
	// A full bucket holds its burst: reading it back keeps the rules for
	// odd bursts in policy alone.
	burst = policy.NewBucket(rate, burst, 0).Tokens(0)
	b := &Bucket{l: limiter{eng: eng, ref: ref, by: "the bucket"}, credit: credit}
	b.nums.rate.Store(rate)
	b.nums.burst.Store(burst)
	return b, nil
}

// Allow is whether a token is there now, taking it if so. It never blocks.
// Callers parked in Wait come first: while any wait, Allow says no, so a
// stream of Allows cannot starve a caller in line. After Close it says no.
//
// Most Allows cost one atomic operation. The bucket's actor lends a batch
// of tokens ahead of time (a sixteenth of the burst, for a burst of
// sixteen or more, and at most 1,024 or a millisecond of the rate,
// whichever is more), and Allow draws from it. An Allow that leaves the
// batch low has the actor top it up, without waiting for it. Only when
// the batch is spent does Allow ask the actor, which takes back what is
// left and answers exactly. This never lets more through than the exact
// bucket would over any stretch of time. It can let fewer through, by at
// most one batch after a quiet spell: measured, up to 3.9% fewer for a
// burst of 64 under a trickle, quiet, flood pattern, and under 0.4% for
// bursts of 1,000 or more (see actors.SpawnBucketCredit).
func (b *Bucket) Allow() bool { return b.AllowN(1) }

// AllowN is Allow for n tokens. An n <= 0 asks for nothing and gets it,
// even while callers wait, since it takes nothing from them (as
// x/time/rate's AllowN); only after Close is it refused. An n above the
// burst, or NaN, is never allowed. A whole n is drawn from the lent batch
// when it holds that many.
func (b *Bucket) AllowN(n float64) bool {
	// No burst check: the credit never holds more than the burst (a retune
	// takes it back and lends by the new one), so a Draw of more fails.
	// The bound keeps the conversion to int64 defined.
	if b.credit != nil && n >= 1 && n <= 1<<32 && n == math.Trunc(n) && !b.l.closed.Load() && b.credit.Draw(int64(n)) {
		return true // counted by the credit itself: see Stats
	}
	return b.l.allow("", n)
}

// Try is Allow with the whole answer (see Decision), from one turn of the
// bucket's actor: for a refusal, the wait for a Retry-After header, never 0;
// and the tokens left. It never blocks. After Close, or once the engine
// shut down, it is refused with Closed set and a Wait of policy.Never. It
// is TryN(1).
func (b *Bucket) Try() Decision { return b.l.try("", 1) }

// TryN is Try for n tokens, answering as AllowN does.
func (b *Bucket) TryN(n float64) Decision { return b.l.try("", n) }

// Wait blocks until a token is taken for the caller, in line behind those
// already waiting, or ctx is done. It is WaitN(ctx, 1).
func (b *Bucket) Wait(ctx context.Context) error { return b.WaitN(ctx, 1) }

// WaitN blocks until n tokens are taken for the caller, in line behind
// those already waiting. It never sleeps towards a failure it can foresee:
//   - n above the burst (or NaN) can never be granted: ErrExceedsBurst, at
//     once.
//   - a wait that would end after ctx's deadline, or never: a *WaitError
//     (ErrExceedsDeadline) at once, saying how long the wait would be.
//   - ctx done while waiting: its place in line is withdrawn and the error
//     matches ctx.Err() under errors.Is. If the tokens were granted in the
//     same instant, WaitN returns nil instead: they were taken, and a
//     caller told otherwise would have spent them for nothing.
//   - the bucket closed: ErrClosed.
//
// ctx's deadline is a span from now on the real clock, or on the engine's
// clock when that clock has an Until method (see engine.Clock). WaitN
// lays it on the engine's clock from the engine's Now, so under a virtual
// clock it still means "this much longer".
func (b *Bucket) WaitN(ctx context.Context, n float64) error {
	if burst := b.nums.burst.Load(); !(n <= burst) {
		b.l.counts.refused.Add(1)
		return fmt.Errorf("%w: %v tokens, burst %v", ErrExceedsBurst, n, burst)
	}
	return b.l.wait(ctx, "", n)
}

// Delay is how long a caller wanting one token would wait now, behind the
// callers already parked in Wait: 0 if it is there, policy.Never if it
// never will be. It takes nothing. After Close it is policy.Never. For a
// Retry-After header use Try instead: a Delay asked after a refusal is a
// second question, and others may have been answered in between.
func (b *Bucket) Delay() time.Duration {
	p, ok := b.l.left("")
	if !ok {
		return policy.Never
	}
	return p.After
}

// Tokens is how many tokens the bucket holds now, for a caller that
// reports its own headroom. After Close it is 0.
func (b *Bucket) Tokens() float64 {
	p, _ := b.l.left("")
	return p.Left
}

// Close stops the bucket's actor, waiting within ctx. Callers in Wait are
// answered ErrClosed; afterwards Allow says no and Wait returns ErrClosed.
// A second Close does nothing and returns nil, as does a Close after the
// engine shut down.
func (b *Bucket) Close(ctx context.Context) error { return b.l.close(ctx) }

// Window is a sliding-window quota on an engine: at most allow events in
// any stretch of time window long. "A thousand a day" is a window, not a
// rate: a bucket would let a client spend the day's allowance in a minute
// and then more.
//
// Allow answers now; Wait blocks in line until the oldest counted event
// leaves the window. It is safe for concurrent use. Build one with
// NewWindow; the zero Window is not usable.
type Window struct {
	l      limiter
	nums   windowNumbers
	credit *actors.Credit // events the actor lent ahead of time; nil for an allowance under 1,024
}

// NewWindow starts a sliding-window quota on eng, empty. An allow <= 0 is
// a quota of nothing; a window <= 0 forgets each event at once and so
// refuses nothing (as policy.NewWindow reads them). It returns an error if
// eng is nil or refuses the actor.
func NewWindow(eng *Engine, allow int, window time.Duration) (*Window, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewWindow: nil engine")
	}
	ref, credit, err := actors.SpawnWindowCredit(eng, "", allow, window)
	if err != nil {
		return nil, fmt.Errorf("moonpool: NewWindow: %w", err)
	}
	w := &Window{l: limiter{eng: eng, ref: ref, by: "the window"}, credit: credit}
	w.nums.allow.Store(int64(allow))
	w.nums.window = window
	return w, nil
}

// Allow is whether an event fits the quota now, counting it if so. It
// never blocks, and says no while callers wait in line, or after Close.
//
// For an allowance of 1,024 or more, most Allows cost a clock reading and
// one atomic operation. The window's actor lends up to 64 spans ahead,
// each a 256th of the window with a sixteenth of the allowance (at most
// 1,024), as far as the window has room. Allow draws from the span it is
// in. Once half the lease is behind, the first Allow of a span has the
// actor lend the spans ahead, without waiting for it. A spare batch, the
// room beyond the spans, carries callers through a span the actor has not
// lent yet, and through a renewal that comes late. The actor counts a
// lent event at the end of its span at the latest, or a spare one when it
// next renews (every 1,024th spare draw asks it to), never before it
// happened. So the window never lets more through than the exact one
// would over any stretch of time. It can let fewer through: an event
// counted late leaves the window late, by up to a 256th of the window
// while the actor keeps up, and fewer than 1,024 spare events by more
// (see actors.SpawnWindowCredit). A smaller allowance is counted exactly. A
// caller that finds the lease taken back while the actor answers someone
// else spins a moment, without yielding (see actors.Credit.Settled), and
// draws from the next lease rather than queue on the actor behind them.
func (w *Window) Allow() bool {
	now := w.l.eng.Now() // one reading, for the draw and, if it misses, the actor
	if w.credit != nil && !w.l.closed.Load() {
		if w.credit.DrawAt(now, 1) {
			return true // counted by the credit itself: see Stats
		}
		if w.credit.Settled() { // the actor was lending afresh: draw from that
			now = w.l.eng.Now()
			if w.credit.DrawAt(now, 1) {
				return true
			}
		}
	}
	p, _ := w.l.askAt(now, "", 1)
	return p.OK
}

// Try is Allow with the whole answer (see Decision), from one turn of the
// window's actor, as Bucket.Try.
func (w *Window) Try() Decision { return w.l.try("", 1) }

// Wait blocks until an event is counted for the caller, in line behind
// those already waiting, or ctx is done. It answers as Bucket.WaitN does,
// with one difference: behind other waiters the window can only estimate
// the wait from below, so a *WaitError comes at once only when the deadline
// certainly cannot be met; otherwise the caller waits, and ctx ends it.
func (w *Window) Wait(ctx context.Context) error { return w.l.wait(ctx, "", 1) }

// Left is how many more events the quota would count now. After Close it
// is 0.
func (w *Window) Left() int {
	p, _ := w.l.left("")
	return int(p.Left)
}

// Delay is how long a caller would wait now for room: 0 if there is room,
// policy.Never for a quota of nothing or after Close. With nobody parked in
// Wait it is exact: when the oldest counted event leaves the window. Behind
// parked callers it is the window's estimate from below, as for Wait. For
// a Retry-After header use Try, as for Bucket.Delay.
func (w *Window) Delay() time.Duration {
	p, ok := w.l.left("")
	if !ok {
		return policy.Never
	}
	return p.After
}

// Close stops the window's actor, as Bucket.Close does.
func (w *Window) Close(ctx context.Context) error { return w.l.close(ctx) }

// limiter is the blocking face shared by every bucket and window, keyed or
// not: it stamps requests with the engine's Now, sends them to the actor
// that owns their key and turns the Permit into a bool or an error.
type limiter struct {
	eng *engine.Engine
	ref *engine.Ref // the actor of a limiter that is not keyed
	// shards are a keyed limiter's actors; each key belongs to one of
	// them, picked by its hash under seed (see spawnShards).
	shards []*engine.Ref
	seed   maphash.Seed
	by     string // what holds a caller in Wait, for a *WaitError: "the bucket"
	closed atomic.Bool
	counts counts
	// Requests and reply channels are kept for reuse, so Allow and Wait
	// allocate nothing. Each limiter keeps its own, not the process: a
	// limiter made in a testing/synctest bubble then only uses channels
	// made in that bubble, as the runtime demands. The pad keeps the
	// pools, read on every call, off the cache line of counts, written on
	// every call.
	_     [64]byte
	reqs  sync.Pool // *actors.Allow with a reply channel, for Wait
	slots sync.Pool // *allowSlot, for an Allow that does not wait
	chans sync.Pool // chan actors.Permit, for the other requests
}

// to is the actor that owns key.
func (l *limiter) to(key string) *engine.Ref {
	if l.shards == nil {
		return l.ref
	}
	return l.shards[l.shard(l.hash(key))]
}

// hash is key's hash under the limiter's seed, and shard the index of the
// actor that owns the key of hash h.
func (l *limiter) hash(key string) uint64 { return maphash.String(l.seed, key) }
func (l *limiter) shard(h uint64) int     { return int(h & uint64(len(l.shards)-1)) }

// actors are the limiter's actors: its one, or its shards.
func (l *limiter) actors() []*engine.Ref {
	if l.shards == nil {
		return []*engine.Ref{l.ref}
	}
	return l.shards
}

// allowSlot is an Allow request with a Reply slot, for an Allow that does
// not wait: cheaper than a channel, and never withdrawn, so one always
// goes back to l.slots once its answer is read.
type allowSlot struct {
	req  actors.Allow
	slot engine.Reply[actors.Permit]
}

// request is a ready Allow for key and n at now, with a reply channel
// (room for one). It goes back to l.reqs only once its answer has been
// read, since the protocol hands a request back to its caller with the
// answer; never after a Withdraw, which may still be queued behind the
// answer and names the request.
func (l *limiter) request(now int64, key string, n float64, wait bool, deadline int64) *actors.Allow {
	req, _ := l.reqs.Get().(*actors.Allow)
	if req == nil {
		req = &actors.Allow{Reply: make(chan actors.Permit, 1)}
	}
	*req = actors.Allow{Now: now, Key: key, N: n, Wait: wait, Deadline: deadline, Reply: req.Reply}
	return req
}

// done hands an answered request back for reuse.
func (l *limiter) done(req *actors.Allow) {
	req.Key = "" // let the string go
	l.reqs.Put(req)
}

// reply is an empty reply channel with room for one. Hand it back with
// replied once its one answer is read.
func (l *limiter) reply() chan actors.Permit {
	ch, _ := l.chans.Get().(chan actors.Permit)
	if ch == nil {
		ch = make(chan actors.Permit, 1)
	}
	return ch
}

// replied hands back a reply channel whose answer has been read.
func (l *limiter) replied(ch chan actors.Permit) { l.chans.Put(ch) }

func (l *limiter) allow(key string, n float64) bool {
	p, _ := l.ask(key, n)
	return p.OK
}

// try is allow with the whole answer.
func (l *limiter) try(key string, n float64) Decision {
	p, open := l.ask(key, n)
	switch {
	case !open:
		return Decision{Wait: policy.Never, Closed: true}
	case p.OK:
		return Decision{OK: true, Left: whole(p.Left)}
	}
	// The actor never refuses with a wait of 0; the floor keeps the
	// promise even so.
	return Decision{Wait: max(p.After, 1), Left: whole(p.Left)}
}

// ask sends an Allow that does not wait and returns its answer, and false
// once the limiter is closed or its engine shut down.
func (l *limiter) ask(key string, n float64) (actors.Permit, bool) {
	return l.askAt(l.eng.Now(), key, n)
}

// askAt is ask for a caller that has read the clock already.
func (l *limiter) askAt(now int64, key string, n float64) (actors.Permit, bool) {
	return l.askRef(l.to(key), now, key, n)
}

// askRef is askAt for a caller that knows key's actor, ref.
func (l *limiter) askRef(ref *engine.Ref, now int64, key string, n float64) (actors.Permit, bool) {
	if l.closed.Load() {
		return actors.Permit{}, false
	}
	a, _ := l.slots.Get().(*allowSlot)
	if a == nil {
		a = new(allowSlot)
	}
	a.req = actors.Allow{Now: now, Key: key, N: n, Slot: &a.slot}
	a.slot.Ask(ref, &a.req)
	a.slot.Await(ref, nil)
	p := a.slot.Take()
	a.req.Key = "" // let the string go
	l.slots.Put(a)
	l.counts.count(p)
	return p, p.Err == nil
}

// whole is x rounded down to an int, 0 for NaN or less, and at most the
// largest int.
func whole(x float64) int {
	switch {
	case !(x > 0):
		return 0
	case x >= math.MaxInt:
		return math.MaxInt
	}
	return int(x)
}

func (l *limiter) wait(ctx context.Context, key string, n float64) error {
	if ctx.Err() != nil {
		return ctxError(ctx, "wait")
	}
	if l.closed.Load() {
		return ErrClosed
	}
	now := l.eng.Now()
	deadline := deadlineOf(ctx, l.eng.Clock(), now)
	if deadline != 0 && deadline < now {
		// Done in all but name: ctx.Err is a moment away.
		return fmt.Errorf("moonpool: wait: %w", context.DeadlineExceeded)
	}
	req := l.request(now, key, n, true, deadline)
	ref := l.to(key)
	ref.Send(req)
	select {
	case p := <-req.Reply:
		l.done(req)
		l.counts.count(p)
		return l.permitErr(p)
	case <-ctx.Done():
		ref.Send(actors.Withdraw{Allow: req})
		p := <-req.Reply // exactly one answer: the grant or the withdrawal
		// req stays out of the pool: the Withdraw may still be queued.
		l.counts.count(p)
		if p.OK {
			return nil
		}
		if errors.Is(p.Err, actors.ErrCancelled) {
			return ctxError(ctx, "wait")
		}
		return l.permitErr(p)
	}
}

// left asks how much is left for key now; false after Close.
func (l *limiter) left(key string) (actors.Permit, bool) {
	if l.closed.Load() {
		return actors.Permit{}, false
	}
	reply := l.reply()
	l.to(key).Send(&actors.Left{Now: l.eng.Now(), Key: key, Reply: reply})
	p := <-reply
	l.replied(reply)
	if p.Err != nil {
		return actors.Permit{}, false
	}
	return p, true
}

// close stops the limiter's actors, one after another, each within ctx;
// it returns the first error.
func (l *limiter) close(ctx context.Context) error {
	if l.shards == nil {
		return stopActor(ctx, l.ref, &l.closed)
	}
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	var first error
	for _, ref := range l.shards {
		if err := ref.Stop(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// stopActor stops ref's actor once; later calls, and a call after the
// engine shut down (which stopped it already), return nil. It stops the
// actor through its Ref, never by name, so it cannot reach another actor.
func stopActor(ctx context.Context, ref *engine.Ref, closed *atomic.Bool) error {
	if !closed.CompareAndSwap(false, true) {
		return nil
	}
	return ref.Stop(ctx)
}

// permitErr turns a Wait's answer into the client's error.
func (l *limiter) permitErr(p actors.Permit) error {
	switch {
	case p.OK:
		return nil
	case errors.Is(p.Err, actors.ErrDeadline):
		return &WaitError{Wait: p.After, By: l.by}
	case errors.Is(p.Err, actors.ErrStopped):
		return ErrClosed
	case p.Err != nil:
		return fmt.Errorf("moonpool: wait: %w", p.Err)
	}
	return errors.New("moonpool: wait: refused without a reason")
}
