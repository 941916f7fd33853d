package moonredis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
}

// Refuse answers an ask that reached a stopped actor.
func (a *ask) Refuse() { a.answer(verdict{closed: true}) }

// answer sends a's one answer; the channel has room for it, and a second
// answer (none is sent, but a stopped actor may race a late call) is
// dropped rather than blocking the actor.
func (a *ask) answer(v verdict) {
	select {
	case a.reply <- v:
	default:
	}
}

// verdict is the answer to an ask.
type verdict struct {
	ok       bool
	wait     time.Duration // a grant: until its slot; a refusal: until it would pass; a look: what one would wait
	left     float64
	fallback bool  // Redis did not answer: the caller applies the FailMode
	cause    error // why, with fallback
	closed   bool
	// run, when not nil, is no answer yet: it hands the caller the call
	// for its batch to make on its own goroutine, after which the answer
	// comes as for the others.
	run *flight
}

// flight is one call to Redis: a key's batch, sent at now, and once made,
// its outcome, which goes back to the actor in the same struct.
type flight struct {
	key   string
	batch []*ask
	now   int64
	out   []verdict
	err   error
	one   [1]*ask    // batch's array when it holds one ask, the usual case
	res   [1]verdict // out's, likewise
}

// limiter is what Bucket and Window share: the actor that batches, the
// calls, the counts.
type limiter struct {
	eng    *engine.Engine
	ref    *engine.Ref
	cfg    Config
	script *redis.Script
	a, b   float64 // the script's ARGV[3] and ARGV[4]
	id     string  // names the limiter in Redis, so a batch sent twice counts once
	seq    atomic.Uint64
	once   bool         // name batches so one sent twice counts once; off only in a test
	queued atomic.Int64 // asks that waited for a call in flight: a test hook

	closed atomic.Bool
	base   context.Context
	cancel context.CancelFunc
	calls  sync.WaitGroup
	stats  counts
}

// counts are a limiter's running counts (see Stats).
type counts struct {
	calls, sent, admitted, refused, fallbacks, failures atomic.Int64
}

// Stats are a limiter's counts since it started, in this process.
type Stats struct {
	Calls     int64 // script calls sent to Redis (each answers a batch)
	Sent      int64 // requests those calls carried, looks included
	Admitted  int64 // requests let through by Redis
	Refused   int64 // requests Redis refused
	Fallbacks int64 // requests answered by the FailMode
	Failures  int64 // calls that failed or timed out
}

func (c *counts) read() Stats {
	return Stats{
		Calls: c.calls.Load(), Sent: c.sent.Load(), Admitted: c.admitted.Load(), Refused: c.refused.Load(),
		Fallbacks: c.fallbacks.Load(), Failures: c.failures.Load(),
	}
}

// start spawns l's actor on eng.
func (l *limiter) start(eng *engine.Engine) error {
	if eng == nil {
		return errors.New("moonredis: nil engine")
	}
	l.eng = eng
	l.once = true
	l.id = strconv.FormatUint(rand.Uint64(), 36)
	l.base, l.cancel = context.WithCancel(context.Background())
	o := &owner{l: l, lines: make(map[string]*line), breaker: policy.NewBreaker(2, l.cfg.BreakerPeriod)}
	ref, err := eng.Spawn("", o, l.shutdown)
	if err != nil {
		l.cancel()
		return err
	}
	l.ref = ref
	return nil
}

// shutdown runs when the actor is stopped, by Close or the engine's
// Shutdown: calls in flight are cut short and waited for within ctx, so no
// goroutine outlives the limiter.
func (l *limiter) shutdown(ctx context.Context) error {
	l.closed.Store(true)
	l.cancel()
	ended := make(chan struct{})
	go func() { l.calls.Wait(); close(ended) }()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// asks holds asks that cannot be given up on, with their channels, for
// reuse: each gets exactly one answer (after, for a batch's first, the
// call to make), read before it goes back.
var asks = sync.Pool{New: func() any { return &ask{reply: make(chan verdict, 1)} }}

// now sends a request that cannot be given up on to the actor and returns
// its answer, making the call for its batch when handed it.
func (l *limiter) now(key string, n float64, look bool) verdict {
	if l.closed.Load() {
		return verdict{closed: true}
	}
	a := asks.Get().(*ask)
	a.key, a.n, a.look, a.wait, a.deadline = key, n, look, false, 0
	l.ref.Send(a)
	v := <-a.reply
	if v.run != nil {
		l.call(v.run)
		v = <-a.reply
	}
	a.key = "" // let the string go
	asks.Put(a)
	return v
}

// await sends a waiting request to the actor and returns its answer, or
// false when ctx is done first. Its call is made on a goroutine of its
// own, so that giving up leaves no batch behind.
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

// owner is the actor: for each key with a call in flight, the asks that
// came since, to go in its next call.
type owner struct {
	l       *limiter
	lines   map[string]*line
	breaker *policy.Breaker
	flying  int // calls in flight, all keys
	stopped bool
}

type line struct {
	flying []*ask // in the call in flight
	next   []*ask // for the next call
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
		if ln, ok := o.lines[m.key]; ok {
			ln.next = append(ln.next, m)
			o.l.queued.Add(1)
			return
		}
		f := &flight{key: m.key}
		f.one[0] = m
		f.batch = f.one[:]
		o.launch(&line{}, f)
	case *flight:
		o.land(m)
	}
}

// launch sends batch for key to Redis off the actor, unless the breaker
// refuses: then the batch is answered by the FailMode at once. The call is
// made by the goroutine of the batch's first caller, which waits for its
// answer anyway, when that caller cannot give up (an Allow, not a Wait);
// otherwise by a goroutine of its own. Either way, one goroutine per batch
// in flight, and the actor never waits on Redis.
// While the breaker refuses anything, one call at a time goes to Redis, so
// a Redis that hangs costs one caller the timeout, not every caller.
func (o *owner) launch(ln *line, f *flight) {
	now := o.l.eng.Now()
	if (o.flying > 0 && o.breaker.Reject(now) > 0) || !o.breaker.Allow(now) {
		for _, a := range f.batch {
			a.answer(verdict{fallback: true, cause: ErrBreaker})
		}
		if len(ln.next) == 0 {
			delete(o.lines, f.key)
			return
		}
		o.launch(ln, o.take(f.key, ln))
		return
	}
	ln.flying = f.batch
	o.lines[f.key] = ln
	o.flying++
	o.l.calls.Add(1)
	f.now = now
	if f.batch[0].wait {
		go o.l.call(f)
		return
	}
	f.batch[0].answer(verdict{run: f})
}

// take cuts the next batch for key from ln's waiting asks.
func (o *owner) take(key string, ln *line) *flight {
	f := &flight{key: key, batch: ln.next}
	ln.next = nil
	if most := o.l.cfg.MaxBatch; len(f.batch) > most {
		f.batch, ln.next = f.batch[:most], f.batch[most:]
	}
	return f
}

// land answers a call's batch and sends the asks that came meanwhile.
func (o *owner) land(f *flight) {
	if o.stopped {
		return // stop answered them
	}
	o.flying--
	now := o.l.eng.Now()
	if f.err != nil {
		o.breaker.Failure(now)
	} else {
		o.breaker.Success(now)
	}
	for i, a := range f.batch {
		if f.err != nil {
			a.answer(verdict{fallback: true, cause: f.err})
		} else {
			a.answer(f.out[i])
		}
	}
	ln := o.lines[f.key]
	ln.flying = nil
	if len(ln.next) == 0 {
		delete(o.lines, f.key)
		return
	}
	o.launch(ln, o.take(f.key, ln))
}

// stop answers every ask it holds: the limiter is closed.
func (o *owner) stop() {
	o.stopped = true
	for _, ln := range o.lines {
		for _, a := range ln.flying {
			a.Refuse()
		}
		for _, a := range ln.next {
			a.Refuse()
		}
	}
	clear(o.lines)
}

// noDeadline is the most a waiter without a deadline may wait for its slot,
// in microseconds: a century, which is never in practice.
const noDeadline = 100 * 365 * 24 * 3600 * 1e6

// call runs the script for f's batch (off the actor) and sends the
// outcome back to it in f.
func (l *limiter) call(f *flight) {
	defer l.calls.Done()
	args := make([]any, 4, 4+3*len(f.batch))
	args[0], args[2], args[3] = l.id, l.a, l.b
	if !l.once {
		args[0] = ""
	}
	args[1] = l.id + "." + strconv.FormatUint(l.seq.Add(1), 36)
	for _, a := range f.batch {
		most := zero
		if a.wait {
			most = forever
			if a.deadline != 0 {
				most = max(0, float64(a.deadline-f.now)/1e3)
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
	ctx, cancel := context.WithTimeout(l.base, l.cfg.Timeout)
	s, err := l.script.Run(ctx, l.cfg.Client, []string{l.cfg.Prefix + f.key}, args...).Text()
	cancel()
	l.stats.calls.Add(1)
	l.stats.sent.Add(int64(len(f.batch)))
	if err == nil {
		out := f.res[:0]
		if len(f.batch) > 1 {
			out = make([]verdict, 0, len(f.batch))
		}
		f.out, err = parse(out, s, len(f.batch))
	}
	if err != nil {
		l.stats.failures.Add(1)
	}
	f.err = err
	l.ref.Send(f)
}

// Numbers the calls send often, boxed once.
var (
	zero    any = 0
	one     any = 1
	forever any = noDeadline
)

// parse reads a script's answer for n requests into out.
func parse(out []verdict, s string, n int) ([]verdict, error) {
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
