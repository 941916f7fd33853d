package actors

import (
	"errors"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// errNoEngine answers a Spawn given no engine to run on.
var errNoEngine = errors.New("moonpool: no engine")

// SpawnBucket starts a token-bucket actor on e under name (a fresh name when
// empty): rate tokens a second accrue up to burst, and the bucket is full at
// e's Now, so the first burst goes through. rate and burst are read as
// policy.NewBucket reads them: a burst <= 0 is a second's worth, a rate <= 0
// passes the first burst and then nothing.
//
// It answers Allow (N tokens), Withdraw, Left (tokens held) and Tick. An
// Allow without Wait is answered at once: OK, or After, how long until its
// tokens would be there; either way with Left, the tokens a caller that
// does not wait could still take, so one answer serves a Retry-After and a
// remaining-count header alike. An Allow of N <= 0 asks for nothing and is
// granted, even while callers are parked. An Allow with Wait is granted at
// once if nobody is parked and the tokens are there; otherwise it is parked
// in FIFO order and granted when its turn comes and its tokens are there —
// unless the wait would end after its Deadline, or can never end (N more
// than the burst, a bucket that earns nothing), when it is answered at once
// with ErrDeadline and After set to that wait. A caller without Wait does
// not overtake parked ones either: while anybody is parked it is refused,
// with After counted from the back of the line, so a steady trickle of
// small requests cannot starve a large one that waits.
//
// Parked callers are woken by a Tick the actor asks e's clock for at the
// exact instant the first in line can be granted; nothing polls. The Tick
// carries the clock's reading when it fired, and each parked caller whose
// turn came by then is granted as of its own instant, so a late timer costs
// nothing but the lateness of the answer: the tokens that accrued meanwhile
// are neither lost to the burst's cap nor pushed later, and the next timer
// is set from the true time. Any Allow stamped after the head's instant
// serves the line first too. A reply channel without room loses its answer
// rather than stall the actor. When the actor stops, parked callers are
// answered ErrStopped.
func SpawnBucket(e *engine.Engine, name string, rate, burst float64) (*engine.Ref, error) {
	if e == nil {
		return nil, errNoEngine
	}
	r := newBucketRule(rate, burst)
	return spawnLimiter(e, name, r, *policy.NewBucket(r.rate, r.burst, e.Now()))
}

// SpawnWindow starts a sliding-window actor on e under name (a fresh name
// when empty): at most allow events in any stretch of time window long, read
// as policy.NewWindow reads them (allow <= 0 refuses everything, window <= 0
// refuses nothing). It answers as SpawnBucket's actor does, except that an
// Allow is one event whatever its N, and Left is the events left.
//
// The window keeps its stamps to itself, so the wait it reports to a caller
// behind others in line is a lower bound once the first slot to open is
// spoken for: it assumes each further allow callers need one more window. A
// Deadline is therefore refused at once only when it certainly cannot be
// met; a caller parked on a low estimate is answered when its turn comes or
// when it withdraws.
func SpawnWindow(e *engine.Engine, name string, allow int, window time.Duration) (*engine.Ref, error) {
	if e == nil {
		return nil, errNoEngine
	}
	r := windowRule{allow: allow, window: window}
	return spawnLimiter(e, name, r, r.fresh(e.Now()))
}

func spawnLimiter[S any, R rule[S]](e *engine.Engine, name string, r R, s S) (*engine.Ref, error) {
	return e.Spawn(name, newLimiter(e, r, s), nil)
}

func newLimiter[S any, R rule[S]](e *engine.Engine, r R, s S) *limiter[S, R] {
	l := &limiter[S, R]{rule: r, state: s, now: e.Now()}
	l.alarm.clock = e.Clock()
	l.q.init()
	l.q.newLine(-1)
	return l
}

// limiter is the actor of one bucket or one window: the policy state, the
// line of parked callers, and one alarm.
type limiter[S any, R rule[S]] struct {
	rule  R
	state S
	q     queue[*Allow] // one line, number 0
	alarm alarm
	now   int64 // latest Now seen, for a Withdraw, which carries none
	resv  reservations
	inFlight
}

// Bind gives the alarm the actor's Ref; the engine calls it at Spawn.
func (l *limiter[S, R]) Bind(r *engine.Ref) { l.alarm.bind(r) }

func (l *limiter[S, R]) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		return
	}
	l.Handle(c.Message())
}

// Handle runs one message; the engine calls it straight for user messages
// (see engine.Handler), and Receive for the rest. A request it does not
// serve, or whose handling panics, is refused (see inFlight).
func (l *limiter[S, R]) Handle(msg any) {
	defer l.unanswered()
	l.hold(msg)
	l.handle(msg)
}

func (l *limiter[S, R]) handle(msg any) {
	l.watch()
	switch m := msg.(type) {
	case *Allow:
		l.seen(m.Now)
		ln := &l.q.lines[0]
		if ln.n > 0 {
			// Grant whom the time in m allows first, in case their Tick
			// is late: a newcomer is then refused with a wait that is
			// really ahead, never 0.
			l.serve()
		}
		v := decide(l.rule, &l.state, ln.n, ln.ahead, m)
		if v == parks {
			l.q.park(0, m, l.rule.cost(m.N))
		}
		l.answered()
		if v == parks && l.q.lines[0].n == 1 { // a new head: ask for its wake-up
			l.serve()
		}
	case *Withdraw:
		l.withdraw(m.Allow)
	case Withdraw:
		l.withdraw(m.Allow)
	case *Tick:
		l.tick(m)
	case *Left:
		l.seen(m.Now)
		ln := &l.q.lines[0]
		reply(m.Reply, Permit{
			Left:   l.rule.left(&l.state, m.Now),
			After:  l.rule.wait(&l.state, m.Now, ln.ahead, 1),
			Parked: int(ln.n),
		})
		l.answered()
	case *Retune:
		l.retune(m)
		l.answered()
	case *Reserve:
		l.reserve(m)
		l.answered()
	case *Unreserve:
		l.cancel(m)
		l.answered()
	case *actor.Stopped:
		l.alarm.stop()
		l.q.drain((*Allow).Refuse)
	}
}

func (l *limiter[S, R]) seen(now int64) { l.now = max(l.now, now) }

func (l *limiter[S, R]) withdraw(req *Allow) {
	if _, ok := l.q.withdraw(req); ok {
		req.answer(Permit{Err: ErrCancelled})
		l.serve() // the head may have changed
	}
}

func (l *limiter[S, R]) tick(m *Tick) {
	l.seen(m.Now)
	l.alarm.fired(m)
	l.serve()
}

// serve grants whom it can by the latest instant seen, and keeps the alarm
// at the head's instant. The latest, not the message's: a request stamped
// a moment before another already handled must not move the books back.
func (l *limiter[S, R]) serve() {
	_, d := serve(l.rule, &l.state, &l.q, 0, l.now)
	l.alarm.set(l.now, later(l.now, d), true)
}

// verdict is what decide did with an Allow.
type verdict uint8

const (
	granted  verdict = iota // answered OK, and taken
	answered                // answered, nothing taken: a refusal, or a request for nothing
	parks                   // the caller is to be parked; not answered yet
)

// decide answers m against state s, whose line holds waiting callers costing
// ahead in all, or says it is to be parked. Every answer carries Left, what
// a caller that does not wait could still have at once.
func decide[S any, R rule[S]](r R, s *S, waiting int32, ahead float64, m *Allow) verdict {
	if r.cost(m.N) == 0 {
		// A bucket's N <= 0 asks for nothing: granted even with callers
		// parked, since it takes nothing from them (as x/time/rate's
		// AllowN(0)).
		m.answer(Permit{OK: true, Left: spare(r, s, m.Now, waiting)})
		return answered
	}
	if waiting == 0 && r.take(s, m.Now, m.N) {
		m.answer(Permit{OK: true, Left: r.left(s, m.Now)})
		return granted
	}
	wait := r.wait(s, m.Now, ahead, m.N)
	switch {
	case !m.Wait:
		m.answer(Permit{After: wait, Left: spare(r, s, m.Now, waiting)})
		return answered
	case wait == policy.Never || (m.Deadline != 0 && later(m.Now, wait) > m.Deadline):
		m.answer(Permit{After: wait, Err: ErrDeadline})
		return answered
	}
	return parks
}

// spare is what a caller that does not wait could have at now: the tokens
// or events left, or nothing while callers are parked, since they come
// first.
func spare[S any, R rule[S]](r R, s *S, now int64, waiting int32) float64 {
	if waiting > 0 {
		return 0
	}
	return r.left(s, now)
}

// serve grants the callers at the head of line li in order, each at the
// instant its tokens were there, up to now. It reports how many it granted
// and how long from now until the head can be, Never when the line is
// empty, and keeps that instant as the line's at. A head that can never be
// granted is answered ErrDeadline (parking refuses those, so this is only a
// guard).
//
// Granting at the head's own instant rather than at now is what keeps a
// late timer from costing anything: the policy sees each grant when it was
// due, so tokens that accrued while the timer was late are not lost to the
// burst's cap, and a window's slots reopen on schedule rather than a
// lateness later each round. Only the answer is late, as a sleeper woken
// late by x/time/rate's Wait is.
func serve[S any, R rule[S]](r R, s *S, q *queue[*Allow], li int32, now int64) (int, time.Duration) {
	n := 0
	t := min(q.lines[li].at, now) // the head's instant, if it has passed
	for {
		req, ok := q.front(li)
		if !ok {
			return n, policy.Never
		}
		if req.Deadline != 0 && now > req.Deadline {
			// Its turn came after its deadline (a window's wait behind
			// others is only estimated from below): refuse rather than
			// spend a grant on a caller whose ctx has ended.
			q.pop(li)
			req.answer(Permit{Err: ErrDeadline})
			continue
		}
		if !r.take(s, t, req.N) {
			d := r.next(s, t, req.N)
			if d >= policy.Never {
				q.pop(li)
				req.answer(Permit{After: policy.Never, Err: ErrDeadline})
				continue
			}
			due := later(t, d)
			if d > 0 && due <= now {
				t = due // it was there by now: grant it as of then
				continue
			}
			// After now, even should a rule say "now" and refuse: the
			// caller's wake-up is never due already.
			due = max(due, later(now, 1))
			q.lines[li].at = due
			return n, time.Duration(due - now)
		}
		q.pop(li)
		req.answer(Permit{OK: true, Waited: time.Duration(max(t-req.Now, 0))})
		n++
	}
}

// reply answers without blocking: a channel without room (a caller's
// misuse) loses its answer rather than stall the actor and all behind it.
func reply(ch chan Permit, p Permit) {
	select {
	case ch <- p:
	default:
	}
}

// later is now+d, clamped at the largest int64 (read as never) instead of
// wrapping into the past.
func later(now int64, d time.Duration) int64 {
	if d >= policy.Never || (d > 0 && now > math.MaxInt64-int64(d)) {
		return math.MaxInt64
	}
	return now + int64(d)
}

// rule adapts the policy type a limiter actor owns, S, held by value so
// that a keyed actor keeps a million of them in one slice.
type rule[S any] interface {
	// fresh is a new state at now: a full bucket, an empty window.
	fresh(now int64) S
	take(s *S, now int64, n float64) bool
	// next is how long until a take of n would succeed.
	next(s *S, now int64, n float64) time.Duration
	// wait is how long until a caller wanting n gets it, with callers
	// costing ahead in all parked before it.
	wait(s *S, now int64, ahead, n float64) time.Duration
	// cost is what a caller wanting n adds to the line's ahead.
	cost(n float64) float64
	left(s *S, now int64) float64
	// quiet is, after a successful take at now, how long until s is full
	// (empty) again if nothing more is taken.
	quiet(s *S, now int64) time.Duration
	// span is the longest quiet can be.
	span() time.Duration
	// top is the most s can hold: a bucket's burst; 0 for a window, which
	// gives nothing back.
	top() float64
	// give puts n back into s at now, up to top.
	give(s *S, now int64, n float64)
	// retune applies m to s at now and returns the rule of the new numbers (an R).
	retune(s *S, now int64, m *Retune) any
}

// bucketRule is the rule of a policy.Bucket, with the rate and burst as
// NewBucket settled them.
type bucketRule struct {
	rate, burst float64
	full        policy.Bucket // what a new key gets
}

func newBucketRule(rate, burst float64) bucketRule {
	if !(rate > 0) {
		rate = 0
	}
	// A full bucket with the earliest reference time is full at every
	// instant and takes its reference time from its first Take, so a new
	// key is a copy of it: no allocation, where NewBucket's result escapes.
	full := *policy.NewBucket(rate, burst, math.MinInt64)
	// What a fresh bucket holds is the burst as NewBucket read it: the
	// rules for odd bursts live in one place.
	return bucketRule{rate: rate, burst: full.Tokens(math.MinInt64), full: full}
}

func (r bucketRule) fresh(int64) policy.Bucket { return r.full }

func (bucketRule) take(b *policy.Bucket, now int64, n float64) bool { return b.Take(now, n) }

func (bucketRule) next(b *policy.Bucket, now int64, n float64) time.Duration { return b.Next(now, n) }

func (r bucketRule) wait(b *policy.Bucket, now int64, ahead, n float64) time.Duration {
	if !(n <= r.burst) { // more than it ever holds, or NaN
		return policy.Never
	}
	need := ahead + max(n, 0)
	if need <= r.burst {
		return b.Next(now, need)
	}
	if r.rate == 0 {
		return policy.Never
	}
	// More than the bucket holds: those ahead take their tokens as they
	// come, so the caller's turn is when the whole deficit has been earned.
	// At least a nanosecond: a caller behind others is never told "now",
	// even by a bucket of infinite rate, which earns any deficit at once.
	w := math.Ceil((need - b.Tokens(now)) / r.rate * 1e9)
	if !(w < float64(policy.Never)) {
		return policy.Never
	}
	return max(time.Duration(w), 1)
}

func (bucketRule) cost(n float64) float64 { return max(n, 0) }

func (bucketRule) left(b *policy.Bucket, now int64) float64 { return b.Tokens(now) }

func (r bucketRule) quiet(b *policy.Bucket, now int64) time.Duration { return b.Next(now, r.burst) }

func (r bucketRule) span() time.Duration {
	s := r.burst / r.rate * 1e9 // +Inf for a rate of 0
	if !(s < float64(policy.Never)) {
		return policy.Never
	}
	return time.Duration(s)
}

func (r bucketRule) top() float64 { return r.burst }

func (bucketRule) give(b *policy.Bucket, now int64, n float64) { b.Put(now, n) }

func (bucketRule) retune(b *policy.Bucket, now int64, m *Retune) any {
	r := newBucketRule(m.Rate, m.Burst)
	b.Retune(now, r.rate, r.burst)
	return r
}

// windowRule is the rule of a policy.Window.
type windowRule struct {
	allow  int
	window time.Duration
}

func (r windowRule) fresh(int64) policy.Window { return *policy.NewWindow(r.allow, r.window) }

func (windowRule) take(w *policy.Window, now int64, _ float64) bool { return w.Take(now) }

func (windowRule) next(w *policy.Window, now int64, _ float64) time.Duration { return w.Next(now) }

// wait is exact for the first caller to need a slot that is not open yet;
// behind it the window's stamps are out of sight, so it assumes each further
// allow callers need one more window: a lower bound.
func (r windowRule) wait(w *policy.Window, now int64, ahead, _ float64) time.Duration {
	if r.allow <= 0 {
		return policy.Never
	}
	open := w.Left(now)
	if r.window <= 0 || ahead < float64(open) {
		return 0
	}
	var first time.Duration
	if open == 0 {
		first = w.Next(now)
	}
	laps := math.Floor((ahead - float64(open)) / float64(r.allow))
	total := float64(first) + laps*float64(r.window)
	if !(total < float64(policy.Never)) {
		return policy.Never
	}
	return time.Duration(total)
}

func (windowRule) cost(float64) float64 { return 1 }

func (windowRule) left(w *policy.Window, now int64) float64 { return float64(w.Left(now)) }

// quiet is the window itself: the event just counted is the newest, and the
// window is empty once it has left.
func (r windowRule) quiet(*policy.Window, int64) time.Duration { return r.span() }

func (r windowRule) span() time.Duration {
	if r.allow <= 0 {
		return 0
	}
	return max(r.window, 0)
}

func (windowRule) top() float64 { return 0 }

func (windowRule) give(*policy.Window, int64, float64) {}

func (r windowRule) retune(w *policy.Window, _ int64, m *Retune) any {
	w.SetAllow(m.Allow)
	r.allow = m.Allow
	return r
}

// alarm is an actor's one timer on the engine's clock. It sends the actor a
// Tick stamped with the clock's reading when the timer fires, not with the
// instant it was asked for: real timers fire late, and a Tick that claimed
// the earlier instant would have the actor grant and schedule from a time
// already past, losing each timer's lateness for good (a bucket of
// 2,000/s then granted under half that on a busy machine).
type alarm struct {
	self  *engine.Ref // the actor itself; set by bind
	clock engine.Clock
	timer engine.Timer
	at    int64
	tick  *Tick // what the pending timer will send
	off   bool
}

// bind learns the actor's Ref, before anyone can reach the actor. A Tick
// goes through the Ref, not protoactor's PID: a timer that fires as the
// actor stops then reaches a mailbox that drops it. Through the PID it
// would become a dead letter, logged, with a goroutine that outlives
// Shutdown.
func (a *alarm) bind(r *engine.Ref) { a.self = r }

// set asks for a Tick at at, as seen from now or the clock's reading,
// whichever is later; at math.MaxInt64 is never.
// exact replaces a pending timer for any other instant; otherwise one due
// no later is kept, since an early Tick only looks and asks again.
func (a *alarm) set(now, at int64, exact bool) {
	if a.timer != nil {
		if a.at == at || (!exact && a.at <= at) {
			return
		}
		a.timer.Stop()
		a.timer, a.tick = nil, nil
	}
	if at == math.MaxInt64 || a.off || a.self == nil {
		return
	}
	// Counted from the clock's reading if it is past now: an actor that
	// reads a Tick late would otherwise set the next one late by as much.
	now = max(now, a.clock.Now())
	var d time.Duration
	if at > now {
		d = time.Duration(min(uint64(at-now), uint64(policy.Never)))
	}
	t := &Tick{}
	self, clock := a.self, a.clock
	a.at, a.tick = at, t
	a.timer = a.clock.AfterFunc(d, func() {
		// The actor reads t only once it has received it, so this write
		// is the Tick's, not a race; a stopped timer never writes.
		t.Now = clock.Now()
		self.Fire(t)
	})
}

// fired notes that the pending timer has sent t, if t is its Tick.
func (a *alarm) fired(t *Tick) {
	if t == a.tick {
		a.timer, a.tick = nil, nil
	}
}

// stop stops the timer for good.
func (a *alarm) stop() {
	a.off = true
	if a.timer != nil {
		a.timer.Stop()
		a.timer, a.tick = nil, nil
	}
}
