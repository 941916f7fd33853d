package client

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/policy"
)

// atomicFloat is a float64 read and written atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) Load() float64   { return math.Float64frombits(f.bits.Load()) }
func (f *atomicFloat) Store(x float64) { f.bits.Store(math.Float64bits(x)) }

// bucketNumbers are a bucket's rate and burst, kept on the callers' side
// so that Limit, Burst, Quota and the burst check of AllowN never ask the
// actor; a retune changes them once the actor has.
type bucketNumbers struct {
	tune  sync.Mutex  // one retune at a time, so SetLimit and SetBurst do not undo each other
	rate  atomicFloat // tokens a second, as the bucket reads it
	burst atomicFloat // most it holds, as the bucket reads it
}

// set sends l's actor rate and burst, read as NewBucket reads them, and
// keeps them once they are in force. The caller holds n.tune.
func (n *bucketNumbers) set(l *limiter, rate, burst float64) error {
	if !(rate > 0) {
		rate = 0
	}
	burst = policy.NewBucket(rate, burst, 0).Tokens(0)
	if err := l.retune(&actors.Retune{Rate: rate, Burst: burst}); err != nil {
		return err
	}
	n.rate.Store(rate)
	n.burst.Store(burst)
	return nil
}

func (n *bucketNumbers) setLimit(l *limiter, rate float64) error {
	n.tune.Lock()
	defer n.tune.Unlock()
	return n.set(l, rate, n.burst.Load())
}

func (n *bucketNumbers) setBurst(l *limiter, burst float64) error {
	n.tune.Lock()
	defer n.tune.Unlock()
	return n.set(l, n.rate.Load(), burst)
}

// quota is the bucket as a quota: the burst in whole requests and the time
// it takes to fill from empty, 0 when it never does.
func (n *bucketNumbers) quota() (q int, w time.Duration) {
	rate, burst := n.rate.Load(), n.burst.Load()
	q = whole(burst)
	if rate > 0 {
		w = time.Duration(math.Min(burst/rate*float64(time.Second), float64(policy.Never)))
		w = max(w, 1)
	}
	return q, w
}

// windowNumbers are a window's quota, kept on the callers' side.
type windowNumbers struct {
	tune   sync.Mutex
	allow  atomic.Int64
	window time.Duration // fixed
}

func (n *windowNumbers) setAllow(l *limiter, allow int) error {
	n.tune.Lock()
	defer n.tune.Unlock()
	if err := l.retune(&actors.Retune{Allow: allow}); err != nil {
		return err
	}
	n.allow.Store(int64(allow))
	return nil
}

func (n *windowNumbers) quota() (q int, w time.Duration) {
	return int(max(n.allow.Load(), 0)), max(n.window, 0)
}

// SetLimit changes the bucket's rate to rate tokens a second, keeping what
// it holds: the tokens earned so far count at the old rate, and the new
// rate applies from the engine's Now on, as x/time/rate's SetLimit. Tokens
// lent ahead of time to Allow (see Allow) are taken back first, so the
// bucket never lets through more than the retuned bucket would. Callers in
// Wait keep their places and are served at the new rate. A rate <= 0 (or
// NaN) earns nothing more. The burst stays as it is.
//
// SetLimit blocks for one round trip to the bucket's actor; when it
// returns the new rate is in force. After Close it returns ErrClosed.
func (b *Bucket) SetLimit(rate float64) error { return b.nums.setLimit(&b.l, rate) }

// SetBurst changes the most the bucket holds, keeping what it holds up to
// the new burst: a lower burst cuts the tokens to it at once; a higher one
// fills on at the rate. burst is read as NewBucket reads it (<= 0 is a
// second's worth of the current rate, at least one). Callers in Wait for
// more than the new burst are answered with a *WaitError of policy.Never,
// since their wait can never end; AllowN and WaitN refuse such n from then
// on. The batch Allow draws from follows the new burst, but a bucket made
// with a burst under sixteen, which lends nothing, still lends nothing when
// raised: its Allows keep asking the actor. It blocks as SetLimit does;
// after Close it returns ErrClosed.
func (b *Bucket) SetBurst(burst float64) error { return b.nums.setBurst(&b.l, burst) }

// Limit is the bucket's rate, tokens a second, as it reads it now. It
// never blocks.
func (b *Bucket) Limit() float64 { return b.nums.rate.Load() }

// Burst is the most the bucket holds now. It never blocks.
func (b *Bucket) Burst() float64 { return b.nums.burst.Load() }

// Quota is the bucket stated as a quota, for a RateLimit-Policy header: q
// is the burst in whole requests, rounded down, and w the time it takes
// to fill from empty (0 for a bucket that earns nothing: a quota that
// never comes back). It follows SetLimit and SetBurst, and never blocks.
func (b *Bucket) Quota() (q int, w time.Duration) { return b.nums.quota() }

// SetLimit changes every key's rate at once, as Bucket.SetLimit does the
// one bucket's: what each key holds is kept, keys not seen yet start full
// under the new numbers. It costs the actor a pass over the keys it holds.
func (k *KeyedBucket) SetLimit(rate float64) error { return k.nums.setLimit(&k.l, rate) }

// SetBurst changes every key's burst at once, as Bucket.SetBurst.
func (k *KeyedBucket) SetBurst(burst float64) error { return k.nums.setBurst(&k.l, burst) }

// Limit is each key's rate now, as Bucket.Limit.
func (k *KeyedBucket) Limit() float64 { return k.nums.rate.Load() }

// Burst is each key's burst now, as Bucket.Burst.
func (k *KeyedBucket) Burst() float64 { return k.nums.burst.Load() }

// Quota is each key's quota now, as Bucket.Quota: what moonhttp.Limit
// reads for its RateLimit-Policy field.
func (k *KeyedBucket) Quota() (q int, w time.Duration) { return k.nums.quota() }

// SetAllow changes how many events the window allows, keeping the events
// it has counted: lowered below them, it refuses until enough have left
// the window; raised, it has room at once. An allow <= 0 is a quota of
// nothing. Callers in Wait keep their places. It blocks for one round trip
// to the window's actor; after Close it returns ErrClosed.
func (w *Window) SetAllow(allow int) error { return w.nums.setAllow(&w.l, allow) }

// Quota is the window's quota, allow events in any stretch w long, as
// SetAllow left it (w is 0 for a window that forgets at once). It never
// blocks.
func (w *Window) Quota() (q int, window time.Duration) { return w.nums.quota() }

// SetAllow changes every key's allow at once, as Window.SetAllow does the
// one window's.
func (k *KeyedWindow) SetAllow(allow int) error { return k.nums.setAllow(&k.l, allow) }

// Quota is each key's quota now, as Window.Quota.
func (k *KeyedWindow) Quota() (q int, window time.Duration) { return k.nums.quota() }

// retune sends m to each of the limiter's actors, all stamped with one
// reading of the clock, and waits for their answers.
func (l *limiter) retune(m *actors.Retune) error {
	if l.closed.Load() {
		return ErrClosed
	}
	m.Now = l.eng.Now()
	refs := l.actors()
	ms := make([]actors.Retune, len(refs))
	for i, ref := range refs {
		ms[i] = *m
		ms[i].Reply = make(chan actors.Permit, 1)
		ref.Send(&ms[i])
	}
	var err error
	for i := range ms {
		if p := <-ms[i].Reply; p.Err != nil {
			err = ErrClosed
		}
	}
	return err
}

// Reservation is tokens a Bucket's Reserve took, which Cancel can give
// back. The zero Reservation holds nothing.
type Reservation struct {
	b      *Bucket
	ticket uint64
	d      Decision
	done   atomic.Bool
}

// Reserve is TryN(n) whose tokens, if granted, can be given back with
// Cancel: for work that may turn out not to need them (a request that
// fails validation before it costs the backend anything). It never blocks,
// and never lends: it always asks the bucket's actor. Unlike x/time/rate's
// Reserve it does not promise tokens from the future: a refusal says, in
// Decision().Wait, how long until they would be there, and takes nothing.
// After Close it is refused as Try is.
func (b *Bucket) Reserve(n float64) *Reservation {
	r := &Reservation{b: b}
	if b.l.closed.Load() {
		r.d = Decision{Wait: policy.Never, Closed: true}
		return r
	}
	reply := b.l.reply()
	b.l.ref.Send(&actors.Reserve{Now: b.l.eng.Now(), N: n, Reply: reply})
	p := <-reply
	b.l.replied(reply)
	b.l.counts.count(p)
	switch {
	case p.Err != nil: // the actor stopped: closed, or its engine shut down
		r.d = Decision{Wait: policy.Never, Closed: true}
	case p.OK:
		r.d = Decision{OK: true, Left: whole(p.Left)}
		r.ticket = p.Ticket
	default:
		r.d = Decision{Wait: max(p.After, 1), Left: whole(p.Left)}
	}
	return r
}

// OK is whether the tokens were taken.
func (r *Reservation) OK() bool { return r != nil && r.d.OK }

// Decision is the bucket's whole answer to the Reserve, as TryN's.
func (r *Reservation) Decision() Decision {
	if r == nil {
		return Decision{}
	}
	return r.d
}

// Cancel gives the reservation's tokens back and says how many: as many as
// the bucket would hold now had the Reserve never been made, which is all
// of them unless the bucket filled up meanwhile. A bucket at its burst
// holds no more, so the tokens it would have earned past the burst
// without the reservation are gone either way; giving all n back then
// would let through more than the rate allows (x/time/rate gave back too
// many in golang/go#69419). Cancel blocks for one round trip to the
// bucket's actor. A second Cancel, a Cancel of a refused reservation,
// and one after Close give back nothing; so does one of a reservation
// among more than actors.MaxReservations outstanding, once it is the
// oldest. Callers in Wait are served from what is given back.
func (r *Reservation) Cancel() float64 {
	if r == nil || r.ticket == 0 || !r.done.CompareAndSwap(false, true) || r.b.l.closed.Load() {
		return 0
	}
	l := &r.b.l
	reply := l.reply()
	l.ref.Send(&actors.Unreserve{Now: l.eng.Now(), Ticket: r.ticket, Reply: reply})
	p := <-reply
	l.replied(reply)
	if p.Err != nil {
		return 0
	}
	return p.Left
}

// LimiterStats is a snapshot of a limiter's counts since it was made.
// The zero LimiterStats counts nothing.
type LimiterStats struct {
	// Allowed counts requests allowed: Allows, Trys and Reserves granted,
	// and Waits that returned nil.
	Allowed int64
	// Refused counts requests refused: Allows, Trys and Reserves refused,
	// and Waits turned away (their deadline, a request above the burst)
	// or whose ctx ended in line. A Wait whose ctx was done before it
	// asked is not counted, nor is a request after Close.
	Refused int64
	// Waited counts the Waits of Allowed that waited in line first.
	Waited int64
	// WaitTime is the total time the Waits of Waited spent in line, on the
	// engine's clock: from each call to the instant its tokens were there.
	WaitTime time.Duration
}

// counts is a limiter's tally: one atomic add per outcome that asked the
// actor, and no clock read (the actor says how long a Wait was in line).
// An Allow drawn from a bucket's credit adds nothing here: the credit
// counts its draws in the word it changes anyway.
type counts struct {
	allowed, refused, waited, waitNs atomic.Int64
}

// count tallies one answer.
func (c *counts) count(p actors.Permit) {
	switch {
	case p.OK:
		c.allowed.Add(1)
		if p.Waited > 0 {
			c.waited.Add(1)
			c.waitNs.Add(int64(p.Waited))
		}
	case errors.Is(p.Err, actors.ErrStopped):
	default:
		c.refused.Add(1)
	}
}

func (c *counts) snapshot() LimiterStats {
	return LimiterStats{
		Allowed:  c.allowed.Load(),
		Refused:  c.refused.Load(),
		Waited:   c.waited.Load(),
		WaitTime: time.Duration(c.waitNs.Load()),
	}
}

// Stats is a snapshot of the bucket's counts (see LimiterStats). It never
// blocks: the counts are kept on the callers' side, so it asks nothing of
// the actor.
func (b *Bucket) Stats() LimiterStats {
	s := b.l.counts.snapshot()
	s.Allowed += b.credit.Drawn()
	return s
}

// Stats is a snapshot of the window's counts, as Bucket.Stats.
func (w *Window) Stats() LimiterStats {
	s := w.l.counts.snapshot()
	s.Allowed += w.credit.Drawn()
	return s
}

// Stats is a snapshot of the counts over all keys, as Bucket.Stats.
func (k *KeyedBucket) Stats() LimiterStats {
	s := k.l.counts.snapshot()
	s.Allowed += k.drawn()
	return s
}

// drawn is how many Allows were drawn from the hot keys' lent tokens.
func (k *KeyedBucket) drawn() int64 {
	var d int64
	for _, h := range k.hot {
		d += h.Drawn()
	}
	return d
}

// Stats is a snapshot of the counts over all keys, as Bucket.Stats.
func (k *KeyedWindow) Stats() LimiterStats { return k.l.counts.snapshot() }
