package moonredis

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/redis/go-redis/v9"
)

// LeaseStats are a Bucket's lease counts since it started, in this
// process (see Config.Lease). All are 0 with leases off.
type LeaseStats struct {
	Calls    int64 // lease calls sent to Redis: takes, renewals and give-backs
	Failures int64 // lease calls that failed or timed out
	Leases   int64 // lease calls that granted tokens
	Leased   int64 // tokens those calls granted
	Returned int64 // tokens taken back unspent, at a lease's end or at Close
	Given    int64 // tokens Redis took back: Returned less those whose give-back failed or has not been sent yet
	Draws    int64 // requests let through from a lease, without a call
	Refused  int64 // requests refused after Redis granted a lease less than it asked, without a call
	Held     int64 // tokens held now, unspent
}

// leases is a Bucket's leased credit: for each key this process asks
// often, tokens taken from Redis ahead of time and spent here with atomic
// draws. A key's state is a keyLease. The calls to Redis run on
// goroutines of their own, one at a time per key. A caller that finds a
// lease dry waits for the call in flight, if any, at most a Timeout.
type leases struct {
	eng     *engine.Engine
	rdb     redis.UniversalClient
	prefix  string
	timeout time.Duration
	period  int64 // Config.Lease, in nanoseconds
	above   int64 // requests of a key in one period, sent one by one, that start its lease
	most    int64 // the largest lease: the burst in whole tokens
	// The lease script's ARGV[3], [4], [5] and [9] (see leaseBody).
	perToken, burst float64
	keep, span      int64
	id              string // names this lessee in Redis
	seq             atomic.Uint64
	tripped         func() bool // the breaker in front of Redis is tripped: no lease call
	ref             *engine.Ref // an actor that holds nothing, so that the engine's Shutdown closes the leases

	keys    sync.Map     // string to *keyLease
	count   atomic.Int64 // leases in keys
	sweepAt atomic.Int64 // sweep keys when count passes it
	floor   int64        // the least sweepAt: keys a bucket keeps without a sweep

	// mu orders each calls.Add before close's calls.Wait, or keeps it from
	// happening.
	mu     sync.Mutex
	closed bool
	shut   atomic.Bool // Close has begun: a caller that waited for a call draws nothing
	calls  sync.WaitGroup
	flying atomic.Int64 // calls in flight: a test hook

	sent, failures, leased, leases, returned, given, extra, refused atomic.Int64
}

// keyLease is one key's credit. The draw path reads w, end, low and busy,
// and changes only w; the rest belongs to the manager, under mu.
type keyLease struct {
	// w is the credit: a generation in the top bits and the tokens held
	// below. Taking the credit back bumps the generation, so a draw that
	// read the word before cannot land after.
	w    atomic.Uint64
	end  atomic.Int64 // no draw at or after it, on the engine's clock
	low  atomic.Int64 // a draw leaving this many tokens or fewer starts the renewal
	busy atomic.Bool  // a call for the key is in flight
	// sig is the call in flight's: callers that found the credit dry
	// wait for it.
	sig atomic.Pointer[callSig]

	over   atomic.Int64 // a dry credit refuses until then, and no call goes before it
	next   atomic.Int64 // no call before it: a failed call backs off
	landed atomic.Int64 // when the last grant landed; 0 before the first
	from   atomic.Int64 // the window hits counts in
	hits   atomic.Int64 // requests sent one by one since from
	seen   atomic.Int64 // a request found the credit dry

	mu    sync.Mutex
	key   string
	dead  bool  // swept from keys: no more calls
	base  int64 // tokens held just after the last grant landed
	back  int64 // tokens taken back since the last grant landed
	ask   int64 // the last call's target: its ask plus what was held
	owed  int64 // tokens taken back, to give back with the next call
	armed bool  // the end timer is set and has not fired
	timer engine.Timer
}

// callSig tells the callers waiting for a lease call that it has landed
// (done), or that it has taken Config.Timeout on the engine's clock
// (late): they stop waiting then, and go to Redis alone.
type callSig struct {
	done, late chan struct{}
	timer      engine.Timer
}

// The fields of keyLease.w: tokens in the low 40 bits (at most about 1.1e12,
// which caps a lease), a generation above.
const (
	creditBits = 40
	creditMask = 1<<creditBits - 1
	creditGen  = 1 << creditBits
)

// growth is how many times the requests seen a lease may be: demand
// measured over a short span is noisy, and a lease too large is held from
// the other processes until it ends. It is also how fast a lease grows
// with demand from one call to the next.
const growth = 8

func newLeases(eng *engine.Engine, cfg Config, perToken, burst float64, tripped func() bool) (*leases, error) {
	ls := &leases{
		eng: eng, rdb: cfg.Client, prefix: cfg.Prefix, timeout: cfg.Timeout,
		period:  int64(cfg.Lease),
		above:   int64(min(max(2, math.Ceil(cfg.LeaseAbove*cfg.Lease.Seconds())), 1e18)),
		most:    max(1, min(int64(burst), creditMask)),
		id:      "l" + strconv.FormatUint(rand.Uint64(), 36),
		tripped: tripped,
	}
	ls.perToken, ls.burst = perToken, burst
	ls.keep, ls.span = 2*cfg.Timeout.Milliseconds(), cfg.Lease.Microseconds()
	ls.floor = 1024
	ls.sweepAt.Store(ls.floor)
	ref, err := eng.Spawn("", keeper{}, ls.close)
	if err != nil {
		return nil, err
	}
	ls.ref = ref
	return ls, nil
}

// keeper is the leases' actor: it receives nothing. The engine runs its
// shutdown, which gives back every lease, when it shuts down.
type keeper struct{}

func (keeper) Receive(actor.Context) {}

// stop closes the leases through their actor, within ctx.
func (ls *leases) stop(ctx context.Context) error {
	ls.shut.Store(true)
	return ls.ref.Stop(ctx)
}

// entry is key's lease, made if it has none.
func (ls *leases) entry(key string) *keyLease {
	if v, ok := ls.keys.Load(key); ok {
		return v.(*keyLease)
	}
	e := &keyLease{key: key}
	e.low.Store(-1)
	v, loaded := ls.keys.LoadOrStore(key, e)
	if !loaded && ls.count.Add(1) > ls.sweepAt.Load() {
		ls.sweep()
	}
	return v.(*keyLease)
}

// take draws n whole tokens of key from its lease. It reports false when
// the lease cannot answer: the request goes to Redis alone. It starts the
// lease's renewal when the draw leaves it low, and its first lease when
// the key's requests sent one by one pass the threshold.
func (ls *leases) take(key string, n uint64) (client.Decision, bool) {
	e := ls.entry(key)
	now := ls.eng.Now()
	if d, ok := ls.drawn(e, now, n); ok {
		return d, true
	}
	e.seen.Store(now)
	if over := e.over.Load(); now < over {
		e.hits.Add(1) // demand all the same
		ls.refused.Add(1)
		return client.Decision{Wait: time.Duration(over - now)}, true
	}
	if e.busy.Load() {
		e.hits.Add(1) // demand the next lease should cover
	} else {
		// A key is quiet when few requests came within a Lease, no grant
		// landed within one, and no refusal's wait ended within one: a
		// key refused for a while was asked all the while.
		if e.hit(now, ls.period) <= ls.above && now-e.landed.Load() >= ls.period && now-e.over.Load() >= ls.period {
			return client.Decision{}, false // a quiet key
		}
		ls.renew(e, now)
	}
	return ls.await(e, n)
}

// awaits is how many lease calls in a row a caller that finds the credit
// dry waits for before it goes to Redis alone: each call lands a grant
// that others may drain first, or a refusal.
const awaits = 3

// await is take for a caller that found e's credit dry: it waits for the
// call in flight, or sends the next one (a key whose callers find it dry
// is hot), at most Config.Timeout on the engine's clock from the call's
// start, and draws again, and it answers with the refusal a call left.
// A call that landed before the caller came to wait is drawn from, or
// its refusal taken, the same way. When no call may go, the request goes
// to Redis alone.
func (ls *leases) await(e *keyLease, n uint64) (client.Decision, bool) {
	for range awaits {
		sig := e.sig.Load()
		if sig == nil || !e.busy.Load() {
			// The last call landed, maybe before this caller came to
			// wait for it: draw from its grant, or take its refusal.
			// If others drained it first, ask again at once rather
			// than go to Redis alone.
			now := ls.eng.Now()
			if d, ok := ls.left(e, now, n); ok {
				return d, true
			}
			ls.renew(e, now)
			if sig = e.sig.Load(); sig == nil || !e.busy.Load() {
				break
			}
		}
		select {
		case <-sig.done:
		case <-sig.late:
			return client.Decision{}, false
		}
		if ls.shut.Load() {
			return client.Decision{Wait: client.Never, Closed: true}, true
		}
		if d, ok := ls.left(e, ls.eng.Now(), n); ok {
			return d, true
		}
	}
	return client.Decision{}, false
}

// left is the answer a landed call leaves for n of e at now: a draw from
// its grant, or the refusal it left while its wait runs. It is false
// when it leaves neither.
func (ls *leases) left(e *keyLease, now int64, n uint64) (client.Decision, bool) {
	if d, ok := ls.drawn(e, now, n); ok {
		return d, true
	}
	if over := e.over.Load(); now < over {
		ls.refused.Add(1)
		return client.Decision{Wait: time.Duration(over - now)}, true
	}
	return client.Decision{}, false
}

// draw is take for a caller that will wait otherwise: it takes from the
// lease only, and starts no call but a renewal.
func (ls *leases) draw(key string, n uint64) bool {
	v, ok := ls.keys.Load(key)
	if !ok {
		return false
	}
	_, ok = ls.drawn(v.(*keyLease), ls.eng.Now(), n)
	return ok
}

// drawn takes n tokens from e's credit at now, before its end, if it
// holds them, and starts the renewal when that leaves it low. It draws
// nothing once Close has begun. It never blocks.
func (ls *leases) drawn(e *keyLease, now int64, n uint64) (client.Decision, bool) {
	if ls.shut.Load() {
		return client.Decision{}, false
	}
	for {
		w := e.w.Load()
		left := w & creditMask
		if left < n || now >= e.end.Load() {
			return client.Decision{}, false
		}
		if e.w.CompareAndSwap(w, w-n) {
			if n != 1 {
				ls.extra.Add(int64(n - 1))
			}
			if int64(left-n) <= e.low.Load() && !e.busy.Load() {
				ls.renew(e, now)
			}
			return client.Decision{OK: true, Left: int(left - n)}, true
		}
	}
}

// hit counts a request sent one by one in the window of one period that
// holds now, and returns the window's count.
func (e *keyLease) hit(now, period int64) int64 {
	from := e.from.Load()
	if now-from >= period && e.from.CompareAndSwap(from, now) {
		e.hits.Store(1)
		return 1
	}
	return e.hits.Add(1)
}

// renew sends a call for e's next lease, unless one is in flight, the
// last refusal's wait has not passed, or a failed call's back-off.
func (ls *leases) renew(e *keyLease, now int64) {
	if now < e.over.Load() || now < e.next.Load() || (ls.tripped != nil && ls.tripped()) || !e.busy.CompareAndSwap(false, true) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead {
		e.busy.Store(false)
		return
	}
	held := int64(e.w.Load() & creditMask)
	// Demand: tokens drawn, and requests that found the credit dry or
	// were refused, since the last grant landed (or since the window
	// began, before the first), over at least a growth-th of a period.
	// So a lease is at most growth times what was asked meanwhile.
	since := e.landed.Load()
	drawn := e.base - held - e.back + e.hits.Load()
	if since == 0 {
		since, drawn = e.from.Load(), e.hits.Load()
	}
	span := max(now-since, ls.period/growth, 1)
	target := int64(math.Ceil(float64(max(drawn, 1)) * float64(ls.period) / float64(span)))
	target = min(target, ls.most)
	if target <= held {
		// What is held covers a period of demand: renew at a lower mark.
		e.low.Store(target / 4)
		e.busy.Store(false)
		return
	}
	if !ls.launch(e, target-held, held, now) {
		e.busy.Store(false)
	}
	e.ask = target
}

// launch sends a call for e, under e.mu with e.busy set: ask tokens more
// for a lessee holding held, giving back what e owes. It reports false
// when the manager is closed.
func (ls *leases) launch(e *keyLease, ask, held, now int64) bool {
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		return false
	}
	ls.calls.Add(1)
	ls.mu.Unlock()
	give := e.owed
	e.owed = 0
	sig := &callSig{done: make(chan struct{}), late: make(chan struct{})}
	sig.timer = ls.eng.Clock().AfterFunc(ls.timeout, func() { close(sig.late) })
	e.sig.Store(sig)
	ls.flying.Add(1)
	ls.sent.Add(1)
	go ls.call(e, ask, held, give, now)
	return true
}

// call runs the lease script for e and lands its answer.
func (ls *leases) call(e *keyLease, ask, held, give, sent int64) {
	defer ls.calls.Done()
	ctx, cancel := context.WithTimeout(context.Background(), ls.timeout)
	s, err := leaseScript.Run(ctx, ls.rdb, []string{ls.prefix + e.key}, ls.argv(ask, held, give)...).Text()
	cancel()
	var g grant
	if err == nil {
		g, err = parseGrant(s)
	}
	ls.land(e, g, err, ask, give, sent)
}

// land takes a call's answer for e: the grant joins e's credit, to be
// drawn until sent + Config.Lease (once Close has begun, it is owed to
// Redis instead, and close gives it back), and a grant short of the ask leaves
// the wait Redis gave before the next call. A failed call grants
// nothing, and the key goes one request at a time for a Timeout; tokens
// it gave back may be lost to the fleet (fewer let through, never more).
func (ls *leases) land(e *keyLease, g grant, err error, ask, give, sent int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer ls.flying.Add(-1)
	sig := e.sig.Load()
	sig.timer.Stop()
	defer close(sig.done) // after busy is cleared and the grant is in
	now := ls.eng.Now()
	if err != nil {
		ls.failures.Add(1)
		e.next.Store(now + int64(ls.timeout))
		e.busy.Store(false)
		return
	}
	ls.given.Add(give)
	if g.tokens < ask && g.wait > 0 {
		// Counted from the sending, no later than Redis ran it: the
		// wait ends no later than Redis said.
		e.over.Store(sent + g.wait*int64(time.Microsecond))
	}
	if g.tokens > 0 && ls.shut.Load() {
		// Close has begun: the grant is never drawn. close gives back
		// what is owed once this call is done.
		ls.leases.Add(1)
		ls.leased.Add(g.tokens)
		ls.returned.Add(g.tokens)
		e.owed += g.tokens
	} else if g.tokens > 0 {
		ls.leases.Add(1)
		ls.leased.Add(g.tokens)
		end := sent + ls.period
		e.end.Store(end) // before the tokens: a draw that sees them sees this end
		held := int64(e.w.Add(uint64(g.tokens)) & creditMask)
		e.base, e.back = held, 0
		e.low.Store(e.ask / 4)
		e.landed.Store(now)
		e.from.Store(now)
		e.hits.Store(0)
		if now >= end {
			ls.takeBack(e) // too late to spend
		} else if !e.armed {
			e.armed = true
			e.timer = ls.eng.Clock().AfterFunc(time.Duration(end-now), func() { ls.expire(e) })
		}
	}
	e.busy.Store(false)
	if e.owed > 0 && e.busy.CompareAndSwap(false, true) && !ls.launch(e, 0, 0, now) {
		e.busy.Store(false)
	}
}

// expire ends e's lease once its end has passed, giving back what is
// left; a renewal that moved the end sets the timer again.
func (ls *leases) expire(e *keyLease) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.armed = false
	ls.mu.Lock()
	closed := ls.closed
	ls.mu.Unlock()
	if closed {
		return
	}
	now := ls.eng.Now()
	if end := e.end.Load(); now < end {
		e.armed = true
		e.timer = ls.eng.Clock().AfterFunc(time.Duration(end-now), func() { ls.expire(e) })
		return
	}
	ls.takeBack(e)
	if e.owed > 0 && e.busy.CompareAndSwap(false, true) && !ls.launch(e, 0, 0, now) {
		e.busy.Store(false)
	}
}

// takeBack zeroes e's credit, under e.mu, and owes Redis what it held:
// nothing is drawn from it after.
func (ls *leases) takeBack(e *keyLease) {
	w := e.w.Load()
	for !e.w.CompareAndSwap(w, (w&^creditMask)+creditGen) {
		w = e.w.Load()
	}
	left := int64(w & creditMask)
	e.owed += left
	e.back += left
	e.low.Store(-1)
	ls.returned.Add(left)
}

// sweep drops the leases of keys that hold nothing and have been quiet
// for two periods, so a bucket of many keys keeps few.
func (ls *leases) sweep() {
	now := ls.eng.Now()
	ls.keys.Range(func(k, v any) bool {
		e := v.(*keyLease)
		if e.busy.Load() || e.w.Load()&creditMask != 0 || now-e.seen.Load() < 2*ls.period || now-e.landed.Load() < 2*ls.period {
			return true
		}
		e.mu.Lock()
		if !e.busy.Load() && e.owed == 0 && !e.armed && e.w.Load()&creditMask == 0 {
			e.dead = true
			ls.keys.Delete(k)
			ls.count.Add(-1)
		}
		e.mu.Unlock()
		return true
	})
	ls.sweepAt.Store(max(2*ls.count.Load(), ls.floor))
}

// close waits for the calls in flight, then takes back every lease's
// credit and gives it back to Redis in one pipeline, all within ctx. No
// call starts after it begins. When ctx ends first, a goroutine gives
// back once the calls in flight have landed (each ends within a Timeout),
// within a Timeout of its own.
func (ls *leases) close(ctx context.Context) error {
	ls.shut.Store(true)
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		return nil
	}
	ls.closed = true
	ls.mu.Unlock()
	ended := make(chan struct{})
	go func() { ls.calls.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-ctx.Done():
		go func() {
			<-ended
			ctx, cancel := context.WithTimeout(context.Background(), ls.timeout)
			defer cancel()
			ls.giveBack(ctx)
		}()
		return ctx.Err()
	}
	return ls.giveBack(ctx)
}

// giveBack takes back every lease's credit and gives it back to Redis,
// with what is owed, in one pipeline within ctx.
func (ls *leases) giveBack(ctx context.Context) error {
	type back struct {
		keys []string
		args []any
		give int64
		cmd  *redis.Cmd
	}
	var backs []back
	ls.keys.Range(func(_, v any) bool {
		e := v.(*keyLease)
		e.mu.Lock()
		if e.armed {
			e.timer.Stop()
			e.armed = false
		}
		ls.takeBack(e)
		if e.owed > 0 {
			backs = append(backs, back{keys: []string{ls.prefix + e.key}, args: ls.argv(0, 0, e.owed), give: e.owed})
			e.owed = 0
		}
		e.mu.Unlock()
		return true
	})
	if len(backs) == 0 {
		return nil
	}
	pipe := ls.rdb.Pipeline()
	for i := range backs {
		b := &backs[i]
		b.cmd = leaseScript.EvalSha(ctx, pipe, b.keys, b.args...)
	}
	ls.sent.Add(int64(len(backs)))
	pipe.Exec(ctx)
	var errs []error
	for _, b := range backs {
		_, err := b.cmd.Text()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// Redis lost its scripts: the call did not run, so running
			// it now gives back once.
			_, err = leaseScript.Run(ctx, ls.rdb, b.keys, b.args...).Text()
		}
		if err != nil {
			ls.failures.Add(1)
			errs = append(errs, err)
			continue
		}
		ls.given.Add(b.give)
	}
	return errors.Join(errs...)
}

// argv are the lease script's arguments for a call asking ask, from a
// lessee holding held, giving back give. Each call has a name of its own.
func (ls *leases) argv(ask, held, give int64) []any {
	name := ls.id + "." + strconv.FormatUint(ls.seq.Add(1), 36)
	return []any{ls.id, name, ls.perToken, ls.burst, ls.keep, ask, held, give, ls.span}
}

// stats reads the counts.
func (ls *leases) stats() LeaseStats {
	var held int64
	ls.keys.Range(func(_, v any) bool {
		held += int64(v.(*keyLease).w.Load() & creditMask)
		return true
	})
	s := LeaseStats{
		Calls: ls.sent.Load(), Failures: ls.failures.Load(), Leases: ls.leases.Load(), Leased: ls.leased.Load(),
		Returned: ls.returned.Load(), Given: ls.given.Load(), Refused: ls.refused.Load(), Held: held,
	}
	s.Draws = max(0, s.Leased-s.Returned-held-ls.extra.Load())
	return s
}
