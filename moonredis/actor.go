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
}

// done is a call's outcome, sent back to the actor by the goroutine that
// made it.
type done struct {
	key   string
	batch []*ask
	out   []verdict
	err   error
}

// limiter is what Bucket and Window share: the actor that batches, the
// calls, the counts.
type limiter struct {
	eng    *engine.Engine
	ref    *engine.Ref
	cfg    Config
	script *redis.Script
	a, b   float64      // the script's ARGV[3] and ARGV[4]
	keep   int64        // how long a batch's answer is kept, in ms
	once   bool         // keep answers so a retried batch counts once; off only in a test
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
	l.keep = max(int64(3*l.cfg.Timeout/time.Millisecond), 1000)
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

// ask sends one request to the actor and returns its answer; with ctx not
// nil it gives up when ctx is done (ok false).
func (l *limiter) ask(ctx context.Context, a *ask) (verdict, bool) {
	if l.closed.Load() {
		return verdict{closed: true}, true
	}
	a.reply = make(chan verdict, 1)
	l.ref.Send(a)
	if ctx == nil {
		return <-a.reply, true
	}
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
		o.launch(m.key, &line{}, []*ask{m})
	case *done:
		o.land(m)
	}
}

// launch sends batch for key to Redis on a goroutine of its own, unless
// the breaker refuses: then the batch is answered by the FailMode at once.
// While the breaker refuses anything, one call at a time goes to Redis, so
// a Redis that hangs costs one caller the timeout, not every caller.
func (o *owner) launch(key string, ln *line, batch []*ask) {
	now := o.l.eng.Now()
	if (o.flying > 0 && o.breaker.Reject(now) > 0) || !o.breaker.Allow(now) {
		for _, a := range batch {
			a.answer(verdict{fallback: true, cause: ErrBreaker})
		}
		if len(ln.next) == 0 {
			delete(o.lines, key)
			return
		}
		batch, ln.next = o.take(ln)
		o.launch(key, ln, batch)
		return
	}
	ln.flying = batch
	o.lines[key] = ln
	o.flying++
	o.l.calls.Add(1)
	go o.l.call(key, batch, now)
}

// take cuts the next batch from ln's waiting asks.
func (o *owner) take(ln *line) (batch, rest []*ask) {
	if len(ln.next) <= o.l.cfg.MaxBatch {
		return ln.next, nil
	}
	return ln.next[:o.l.cfg.MaxBatch], ln.next[o.l.cfg.MaxBatch:]
}

// land answers a call's batch and sends the asks that came meanwhile.
func (o *owner) land(m *done) {
	if o.stopped {
		return // stop answered them
	}
	o.flying--
	now := o.l.eng.Now()
	if m.err != nil {
		o.breaker.Failure(now)
	} else {
		o.breaker.Success(now)
	}
	for i, a := range m.batch {
		if m.err != nil {
			a.answer(verdict{fallback: true, cause: m.err})
		} else {
			a.answer(m.out[i])
		}
	}
	ln := o.lines[m.key]
	ln.flying = nil
	if len(ln.next) == 0 {
		delete(o.lines, m.key)
		return
	}
	var batch []*ask
	batch, ln.next = o.take(ln)
	o.launch(m.key, ln, batch)
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

// call runs the script for batch (off the actor) and sends the outcome
// back to it.
func (l *limiter) call(key string, batch []*ask, now int64) {
	defer l.calls.Done()
	id := strconv.FormatUint(rand.Uint64()|1<<63, 16) // 16 hex digits
	tag := l.cfg.Prefix + "{" + key + "}"
	args := make([]any, 4, 4+3*len(batch))
	args[0], args[2], args[3] = "", l.a, l.b
	changes := false
	for _, a := range batch {
		most := 0.0
		if a.wait {
			most = noDeadline
			if a.deadline != 0 {
				most = max(0, float64(a.deadline-now)/1e3)
			}
		}
		look := 0
		if a.look {
			look = 1
		} else {
			changes = true
		}
		args = append(args, a.n, most, look)
	}
	args[1] = 0
	if changes && l.once {
		args[1] = l.keep
	}
	ctx, cancel := context.WithTimeout(l.base, l.cfg.Timeout)
	s, err := l.script.Run(ctx, l.cfg.Client, []string{tag, tag + ":r:" + id}, args...).Text()
	cancel()
	l.stats.calls.Add(1)
	l.stats.sent.Add(int64(len(batch)))
	var out []verdict
	if err == nil {
		out, err = parse(s, len(batch))
	}
	if err != nil {
		l.stats.failures.Add(1)
	}
	l.ref.Send(&done{key: key, batch: batch, out: out, err: err})
}

// parse reads a script's answer for n requests.
func parse(s string, n int) ([]verdict, error) {
	out := make([]verdict, 0, n)
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
