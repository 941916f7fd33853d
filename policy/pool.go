package policy

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"
)

// Limits are the numbers a pool holds itself to.
//
// A zero field means no limit (or, for LifeJitter, none), so the zero Limits
// bounds nothing. A negative field is read as zero, as database/sql reads a
// maximum of open connections or a lifetime of zero or less: there is no
// other sensible meaning for it.
type Limits struct {
	Size int           // most live at once: idle, lent and being made; 0 is no limit
	Idle int           // most sitting idle; 0 is no limit
	Keep time.Duration // how long an idle one may sit before it is retired; Forever is no limit
	Life time.Duration // how long one may live at all, however busy; Forever is no limit
	// LifeJitter shortens each resource's Life by its own share of this
	// span, drawn once when it is made, so that resources made together
	// (a pool's first burst, a warm-up) are not retired together and
	// replaced in one storm. A resource lives between Life-LifeJitter and
	// Life; a LifeJitter past Life is read as Life. 0 is no jitter. The
	// draws come from the Ward's Draw (a spread that repeats from pool to
	// pool without one). A client.Pool ignores Draw: it draws from its own
	// source, seeded by its PoolConfig.Seed.
	LifeJitter time.Duration
	// MinIdle is how many the pool keeps idle, made in the background
	// (see Pool.Fill) whenever fewer are idle, within Size and Idle; Keep
	// retires none of these last MinIdle (Life does). 0 is none: the pool
	// makes only for a caller. A client.Pool makes them itself, through
	// its Ward.
	MinIdle int
}

// DefaultLimits is the preset: ten live, ten of them allowed to sit idle,
// retired after thirty minutes idle and never by age.
//
// Ten is HikariCP's default maximumPoolSize. database/sql has no such
// default: it allows any number of open connections and keeps at most two
// idle (SetMaxOpenConns, defaultMaxIdleConns = 2). Idle equal to Size
// follows HikariCP, whose minimumIdle defaults to maximumPoolSize: a pool
// that grew under load keeps what it made instead of closing it the moment
// the load passes, and Keep retires what then sits unused.
var DefaultLimits = Limits{Size: 10, Idle: 10, Keep: 30 * time.Minute, Life: Forever}

// clamp reads the negative fields as "no limit".
func (l Limits) clamp() Limits {
	l.Size = max(l.Size, 0)
	l.Idle = max(l.Idle, 0)
	l.Keep = max(l.Keep, Forever)
	l.Life = max(l.Life, Forever)
	l.LifeJitter = max(l.LifeJitter, 0)
	l.MinIdle = max(l.MinIdle, 0)
	if l.Idle > 0 {
		l.MinIdle = min(l.MinIdle, l.Idle)
	}
	return l
}

// Verdict is what Take tells the caller to do. Each one is an instruction:
// the pool never opens, closes or waits itself.
type Verdict uint8

// The six verdicts.
const (
	Ready Verdict = iota // an idle resource: use it, then Give it back
	Stale                // an idle resource too old to use, already off the books: close it and Take again
	Make                 // there is room, and it is reserved: open one, then Made (or Unmade if that fails)
	Wait                 // every resource is in use: queue the caller
	Later                // a make is held back by the ward: try again after Taken.After; Taken.Why says which part
	Shed                 // refused: the pool is closed, or the ward's breaker or shedder says no; Taken.Why says which
)

var verdictNames = [...]string{"Ready", "Stale", "Make", "Wait", "Later", "Shed"}

// String gives the verdict's name, "Ready" to "Shed", or "Verdict(n)" for a
// number that is none of them.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Taken is Take's answer: a Verdict, the resource for Ready and Stale, for
// Later how long until a make may be tried, and for Shed and Later why.
type Taken[T any] struct {
	Verdict Verdict
	Item    T             // for Ready and Stale
	After   time.Duration // for Later: how long until a make may be tried; always above zero
	Why     Reason        // for Shed and Later, never NoReason; NoReason for the others
}

// Pool is the bookkeeping of holding a limited number of things: how many
// are live, which are idle, which are lent and since when each was made,
// which have sat or lived long enough to be let go, and whether the ward
// lets another be made.
//
// It does not open, close or wait: the caller does all three, told what to
// do by Take's verdict. A resource is recognised on its way back by identity
// (T is comparable), which is how its birth survives a loan: a pool that
// stamped a returned resource as new would never retire one by Life.
//
// Time is nanoseconds from the caller's clock. A clock that goes backwards is
// read as standing still: the pool uses the latest time it has been given,
// so no resource gets younger and none is retired early.
//
// Under any sequence of calls Live() <= Size (when Size > 0), Idle() stays
// within the idle limit, Live() == Idle() + Busy(), and no resource is lent
// to two holders at once. The zero Pool has no limits and no ward; NewPool
// makes any other. A Pool is not safe for concurrent use: it has one owner.
type Pool[T comparable] struct {
	limits Limits
	ward   warden // this pool's own, built from the Ward it was given

	books map[T]int  // every registered resource → its index in recs
	recs  []entry[T] // the records, reused through free
	free  []int      // indices of vacant records
	idle  []int      // indices of idle records, the most recently returned last

	lent     int // registered and lent out
	reserved int // room reserved by Make and not yet filled
	closed   bool

	gen      uint64 // the generation: Reset starts a new one
	outdated int    // of lent, how many are of an earlier generation
	shrunk   bool   // SetLimits left more live than Size allows
	odd      bool   // closed, shrunk or outdated > 0: Give must look closer
	births   uint64 // resources registered so far, for the draws without Draw

	now   int64 // the latest time given
	timed bool  // whether now has been set

	// The backoff's run. While failures > 0 the backend is suspect: no make
	// before hold, and after it one at a time (the one in flight is the
	// probe), which is why no more state is needed: whether a probe is out
	// is whether anything is reserved.
	failures int           // failed makes in a row, ended by a make that worked
	last     time.Duration // the hold the last failure was given
	hold     int64         // while failures > 0, no make before this instant

	// The fleet's view, from SetFleet. With FleetOpen, the zero view, make
	// asks nothing more of it.
	fleet      FleetView
	fleetGrant bool    // FleetHeld with Probe: one make may go as the fleet's probe
	fleetProbe bool    // that make is in flight; it is the only one while held
	rampEnd    int64   // FleetRamp: when the ramp has run its Span
	rampNext   float64 // FleetRamp: the curve's makes per replica that must pass before the next make
}

// entry is what the pool remembers of a registered resource.
type entry[T comparable] struct {
	item  T
	birth int64         // when it was made
	at    int64         // when it was last returned (idle) or lent (lent)
	seen  int64         // when it was last known good: made, returned or checked
	cut   time.Duration // how much shorter than Life its life is, drawn at birth
	gen   uint64        // the generation it was made in
	lent  bool
	// checking says it is lent to the owner by Due, not to a caller.
	checking bool
}

// NewPool returns an empty pool holding itself to limits, with ward in front
// of its backend. Negative limits are read as no limit (see Limits). The
// pool builds its own state from ward (a bucket, breaker and shedder of its
// own), so the same Ward may be given to any number of pools.
func NewPool[T comparable](limits Limits, ward Ward) *Pool[T] {
	return &Pool[T]{limits: limits.clamp(), ward: ward.build(), books: make(map[T]int)}
}

// Take answers whether the caller gets a resource, and if not what to do.
//
// In order: a closed pool answers Shed; the ward's shedder may refuse (Shed)
// even with an idle resource there; an idle resource is lent (Ready), or
// handed back as Stale if it sat past Keep or lived past Life; a full pool
// answers Wait; then the breaker may refuse the make (Shed), the backoff hold
// it back after a failure (Later), or, its hold over, while a probe is in
// flight (Later), and the bucket space it out (Later, nothing reserved); and
// only then is room reserved and the answer Make. Every Shed and Later
// carries its Reason. A fleet's view (see SetFleet) holds makes back
// before the breaker is asked, and its ramp spaces them before the bucket.
//
// While a probe is in flight, Later's After is the ceiling of the backoff's
// current hold: the earliest a caller could usefully ask again is when the
// probe's outcome is known, which no one can tell in advance, and an owner
// that queues callers asks again whenever a make is resolved anyway. After
// is only the fallback, for a probe whose outcome is slow in coming.
//
// The most recently returned resource is lent first. A warm connection is
// likelier to still be good, and lending the newest lets the oldest sit past
// Keep and be evicted, which is how a pool shrinks again after a burst; a
// queue would keep every one just warm enough never to be retired.
//
// Stale is handed back rather than skipped so the caller closes it: a pool
// that dropped it silently would leak whatever it holds whenever Evict had
// not run first.
func (p *Pool[T]) Take(now int64) Taken[T] {
	now = p.clock(now)
	if p.closed {
		return Taken[T]{Verdict: Shed, Why: ReasonClosed}
	}
	if s := p.ward.shedder; s != nil && !s.Allow(now, p.lent) {
		return Taken[T]{Verdict: Shed, Why: ReasonShedder}
	}
	if n := len(p.idle); n > 0 {
		i := p.idle[n-1]
		p.idle = p.idle[:n-1]
		e := &p.recs[i]
		if p.stale(e, now, n) {
			item := e.item
			p.forget(i)
			return Taken[T]{Verdict: Stale, Item: item}
		}
		e.lent, e.at = true, now
		p.lent++
		return Taken[T]{Verdict: Ready, Item: e.item}
	}
	if p.full() {
		return Taken[T]{Verdict: Wait}
	}
	return p.make(now)
}

// make runs the ward's checks on a make the limits allow, reserving room
// when they all pass.
func (p *Pool[T]) make(now int64) Taken[T] {
	if p.fleet.State == FleetHeld {
		return p.heldMake(now)
	}
	w := &p.ward
	if b := w.breaker; b != nil && !b.admits(now) {
		b.Allow(now) // counts the refusal as a request, as the SRE book does
		return Taken[T]{Verdict: Shed, Why: ReasonBreaker}
	}
	if p.failures > 0 && w.holds() {
		if now < p.hold {
			return Taken[T]{Verdict: Later, After: elapsed(p.hold, now), Why: ReasonBackoff}
		}
		if p.reserved > 0 {
			return Taken[T]{Verdict: Later, After: w.backoff.Ceiling(p.failures), Why: ReasonProbe}
		}
	}
	ramp := p.fleet.State == FleetRamp && now < p.rampEnd
	if ramp {
		if wait := p.rampWait(now); wait > 0 {
			return Taken[T]{Verdict: Later, After: wait, Why: ReasonRamp}
		}
	}
	if b := w.bucket; b != nil && !b.Take(now, 1) {
		return Taken[T]{Verdict: Later, After: b.Next(now, 1), Why: ReasonBucket}
	}
	if b := w.breaker; b != nil {
		b.Allow(now) // admits: admits said so, and nothing has changed since
	}
	if ramp {
		p.rampTake(now)
	}
	p.reserved++
	return Taken[T]{Verdict: Make}
}

// Made registers a resource made after Take said Make, as lent and born now,
// and tells the ward the make worked: the breaker counts a success and any
// backoff run ends, probe and all.
//
// Made with nothing reserved registers the resource only if there is room
// and the pool is open, and is otherwise ignored; the ward hears nothing,
// since no make the pool asked for is answered. Made of a resource already on
// the books changes nothing: it is counted already, and the room stays
// reserved until Unmade (or a Give or Drop of an unknown resource) frees it.
func (p *Pool[T]) Made(item T, now int64) {
	now = p.clock(now)
	if _, ok := p.books[item]; ok {
		return
	}
	if p.reserved > 0 {
		p.reserved--
		p.worked(now)
	} else if p.closed || p.full() {
		return
	}
	i := p.register(item, now)
	p.recs[i].lent = true
	p.lent++
}

// Unmade says the resource Take reserved room for could not be made, so the
// room is free again; without it a factory that failed once would shrink the
// pool for good. The ward hears of the failure: the breaker counts it and
// the backoff holds makes back from now, for longer than the hold before (a
// failed probe ends this way). Unmade with nothing reserved changes nothing.
func (p *Pool[T]) Unmade(now int64) {
	now = p.clock(now)
	if p.reserved == 0 {
		return
	}
	p.reserved--
	p.fleetProbe = false // while it is out, the fleet's probe is the one make in flight
	if b := p.ward.breaker; b != nil {
		b.Failure(now)
	}
	p.failures++
	if w := &p.ward; w.holds() {
		var d time.Duration
		if w.draw != nil {
			d = w.backoff.Delay(p.failures, w.draw(), p.last)
		} else {
			d = w.backoff.Ceiling(p.failures)
		}
		d = max(d, 0)
		p.last = d
		p.hold = after(now, d)
	}
}

// Fill answers whether the owner should make one more resource in the
// background, to keep MinIdle idle, given filling such makes already in
// flight: Make with room reserved, to be answered like any Make, the made
// resource handed in with Give so that it is registered idle; Later or
// Shed when the ward holds the make back or refuses it, exactly as for a
// caller, so a warm-up during an outage is spaced and held like callers'
// makes; and Wait when there is nothing to do: enough idle or being made,
// no room under Size, no MinIdle, or the pool closed. The shedder is not
// asked: it weighs callers, and no caller is waiting for this.
func (p *Pool[T]) Fill(now int64, filling int) Taken[T] {
	now = p.clock(now)
	if p.closed || len(p.idle)+max(filling, 0) >= p.limits.MinIdle || p.full() {
		return Taken[T]{Verdict: Wait}
	}
	return p.make(now)
}

// Release frees the room a Make reserved without anything being tried: the
// caller that was told Make gave up (its context ended) before opening. The
// ward hears nothing, because the backend was never asked; Unmade is for a
// make that failed. A probe released this way leaves the backend as suspect
// as before, and the next Take after the hold sends another; a fleet's
// probe released this way lets the next make go in its place. Release
// with nothing reserved changes nothing.
func (p *Pool[T]) Release() {
	if p.reserved > 0 {
		p.reserved--
		p.untried()
	}
}

// worked ends a backoff run and tells the breaker a make succeeded. A
// fleet probe in flight was that make.
func (p *Pool[T]) worked(now int64) {
	if b := p.ward.breaker; b != nil {
		b.Success(now)
	}
	p.failures, p.last = 0, 0
	p.fleetProbe = false
}

// Give hands a resource back, keeping the birth it was lent with. true means
// the pool kept it; false means it did not and the caller closes it.
//
// It answers false when Idle is already full, when the resource has lived
// past Life (lending it again would only hand it back as Stale), and when
// the pool is closed. A resource already idle answers true and changes
// nothing: it is in the pool, and telling the caller to close it would close
// what the pool may lend; the same goes for one lent to the owner by Due
// to be checked, which comes back through Checked. A resource the pool does
// not know fills the room a Make reserved, born now, as if Made had been
// called (the ward hears the make worked); when no room is reserved it is
// refused (false) and never counted, which is where the original library
// let Live drift upwards.
func (p *Pool[T]) Give(item T, now int64) bool {
	now = p.clock(now)
	i, ok := p.books[item]
	if !ok {
		if p.reserved == 0 {
			return false
		}
		p.reserved--
		p.worked(now)
		if p.closed || p.idleFull() || p.full() {
			return false
		}
		p.idle = append(p.idle, p.register(item, now))
		return true
	}
	if e := &p.recs[i]; !e.lent || e.checking {
		return true // in the pool, idle or under check: the pool's to close
	}
	return p.giveBack(i, now)
}

// giveBack takes back the lent resource of record i, keeping it idle if it
// may be kept.
func (p *Pool[T]) giveBack(i int, now int64) bool {
	e := &p.recs[i]
	p.lent--
	if s := p.ward.shedder; s != nil {
		s.Done(now, elapsed(now, e.at))
	}
	if p.odd && p.refused(e) || p.idleFull() || p.tooOld(e, now) {
		p.forget(i)
		return false
	}
	e.lent, e.at, e.seen = false, now, now
	p.idle = append(p.idle, i)
	return true
}

// refused says whether a lent resource coming home must leave the books
// for a reason only Close, Reset or a shrinking SetLimits brings (odd says
// one may have): the pool is closed, the resource is of an earlier
// generation, or it is surplus over Size. Keeping these off the common
// path keeps Give as cheap as it was before they existed.
func (p *Pool[T]) refused(e *entry[T]) bool {
	old := e.gen != p.gen
	if old {
		p.outdated--
	}
	over := p.full()
	if !over {
		p.shrunk = false
	}
	p.odd = p.closed || p.shrunk || p.outdated > 0
	return old || p.closed || over
}

// Sat is how long item, if it is on the books, had gone unused and
// unchecked when it was last lent or is now idle: from when it was last
// known good (made, returned or Checked) to now. An owner checks one that
// sat long before lending it. ok is false for a resource not on the books.
func (p *Pool[T]) Sat(item T, now int64) (d time.Duration, ok bool) {
	i, known := p.books[item]
	if !known {
		return 0, false
	}
	e := &p.recs[i]
	if e.lent {
		return elapsed(e.at, e.seen), true // lent at e.at
	}
	return elapsed(p.reading(now), e.seen), true
}

// Due lends the owner the idle resource that has gone unused and unchecked
// longest, if that is every or longer, to be checked (a keep-alive): until
// Checked it is off the idle list and counted as lent, so Take cannot lend
// it meanwhile, and it is not a caller's (see Lent). ok is false when none
// is due, or every is 0 or less.
//
// It lends one at a time, and the owner asks again after each check: a
// sweep that took every due resource out at once would leave callers
// waiting on resources that sit unchecked behind a slow check.
func (p *Pool[T]) Due(now int64, every time.Duration) (item T, ok bool) {
	now = p.clock(now)
	if every <= 0 {
		return item, false
	}
	k := -1
	for j, i := range p.idle {
		e := &p.recs[i]
		due := elapsed(now, e.seen) >= every && !p.stale(e, now, len(p.idle))
		if due && (k < 0 || e.seen < p.recs[p.idle[k]].seen) {
			k = j
		}
	}
	if k < 0 {
		return item, false
	}
	i := p.idle[k]
	p.idle = slices.Delete(p.idle, k, k+1)
	e := &p.recs[i]
	e.lent, e.checking = true, true
	p.lent++
	return e.item, true
}

// Checked takes back a resource Due lent, with the check's outcome. A good
// one goes back among the idle where its idle time puts it (a check is not
// a use: Keep still retires it, and it is not lent before resources used
// more recently); it answers true. A bad one leaves the books, as does a
// good one the pool may not keep now (closed, Reset, over the limits, or
// stale), and it answers false: the caller closes it. Checked of anything
// Due did not lend changes nothing and answers false.
func (p *Pool[T]) Checked(item T, ok bool, now int64) bool {
	now = p.clock(now)
	i, known := p.books[item]
	if !known || !p.recs[i].checking {
		return false
	}
	e := &p.recs[i]
	p.lent--
	e.lent, e.checking = false, false
	if e.gen != p.gen {
		p.outdated--
		ok = false
	}
	if !ok || p.closed || p.idleFull() || p.full() || p.stale(e, now, len(p.idle)+1) {
		p.forget(i)
		return false
	}
	e.seen = now
	k, _ := slices.BinarySearchFunc(p.idle, e.at, func(j int, at int64) int { return cmp.Compare(p.recs[j].at, at) })
	p.idle = slices.Insert(p.idle, k, i)
	return true
}

// Drop says a resource is not coming back, because it broke: it leaves the
// books and frees its place. Without it a broken connection would hold a
// slot for ever and the pool would stop making new ones.
//
// Dropping an idle resource takes it out of the pool (an idle connection the
// caller found dead). Dropping one Due lent to be checked changes nothing:
// the check holds it and hands it back through Checked, which is where a
// dead one leaves the books. Dropping one the pool does not know frees the
// room a Make reserved, if any: the resource asked for broke before it was
// registered. The ward does not count that as a failed make (nor as one that
// worked: a probe dropped this way frees the way for the next). Drop takes no
// time; the shedder's completion is stamped with the latest time the pool
// has been given.
func (p *Pool[T]) Drop(item T) {
	i, ok := p.books[item]
	if !ok {
		if p.reserved > 0 {
			p.reserved--
			p.untried()
		}
		return
	}
	e := &p.recs[i]
	if e.checking {
		return // the check has it, and hands it back through Checked
	}
	if e.lent {
		p.lent--
		if e.gen != p.gen {
			p.outdated--
		}
		if s := p.ward.shedder; s != nil {
			s.Done(p.now, elapsed(p.now, e.at))
		}
	} else {
		for k, j := range p.idle {
			if j == i {
				p.idle = append(p.idle[:k], p.idle[k+1:]...)
				break
			}
		}
	}
	p.forget(i)
}

// Evict removes every idle resource that has sat for Keep or lived for Life
// and hands them back for the caller to close. The owner calls it on a
// timer, at Deadline; Take hands a stale one back as well, so nothing is lost
// when the timer has not run. It answers nil when there is none.
func (p *Pool[T]) Evict(now int64) []T {
	return p.EvictInto(now, nil)
}

// EvictInto is Evict appending to dst, for an owner that reuses one buffer
// on every tick. The resources still idle keep their order.
//
// Keep retires none of the last MinIdle idle, as HikariCP's idleTimeout and
// pgxpool's MaxConnIdleTime spare minimumIdle and MinIdleConns: retiring a
// warm resource only for the pool to open another in its place would churn
// the backend every Keep. Life still retires them.
func (p *Pool[T]) EvictInto(now int64, dst []T) []T {
	now = p.clock(now)
	spare := len(p.idle) - p.limits.MinIdle // how many Keep may retire
	if p.limits.MinIdle > 0 && p.limits.Life != Forever {
		for _, i := range p.idle {
			if p.tooOld(&p.recs[i], now) {
				spare-- // Life takes these whatever MinIdle says
			}
		}
	}
	kept := p.idle[:0]
	for _, i := range p.idle { // the longest idle first
		e := &p.recs[i]
		old := p.tooOld(e, now)
		if old || spare > 0 && p.pastKeep(e, now) {
			if !old {
				spare--
			}
			dst = append(dst, e.item)
			p.forget(i)
			continue
		}
		kept = append(kept, i)
	}
	p.idle = kept
	return dst
}

// Deadline is the earliest instant at which an idle resource becomes stale,
// by Keep (only while more than MinIdle are idle) or by Life: when the
// owner should next call Evict, instead of polling. ok is false when no
// idle resource can become stale as things stand (none idle, neither Keep
// nor Life set, or only Keep and no more than MinIdle idle). An instant
// already past means Evict has work now.
func (p *Pool[T]) Deadline() (at int64, ok bool) {
	if len(p.idle) == 0 || p.limits.Keep == Forever && p.limits.Life == Forever {
		return 0, false
	}
	keep := len(p.idle) > p.limits.MinIdle
	if !keep && p.limits.Life == Forever {
		return 0, false
	}
	at = math.MaxInt64
	for _, i := range p.idle {
		at = min(at, p.due(&p.recs[i], keep))
	}
	return at, true
}

// DeadlineOf is the instant at which item, if it is idle, becomes stale: an
// O(1) look-up for an owner that has just given item back and wants to know
// whether its timer must move earlier, without the scan Deadline makes. ok
// is false when item is not idle or can never become stale.
func (p *Pool[T]) DeadlineOf(item T) (at int64, ok bool) {
	i, known := p.books[item]
	keep := p.limits.Keep != Forever && len(p.idle) > p.limits.MinIdle
	if !known || p.recs[i].lent || !keep && p.limits.Life == Forever {
		return 0, false
	}
	return p.due(&p.recs[i], keep), true
}

// due is when an idle record becomes stale, by Keep (if keep: more are
// idle than MinIdle) or by Life.
func (p *Pool[T]) due(e *entry[T], keep bool) int64 {
	at := int64(math.MaxInt64)
	if keep && p.limits.Keep != Forever {
		at = min(at, after(e.at, p.limits.Keep))
	}
	if p.limits.Life != Forever {
		at = min(at, after(e.birth, p.life(e)))
	}
	return at
}

// SetLimits holds the pool to limits from now on, read as NewPool reads
// them, and appends to dst the idle resources that are now surplus, oldest
// first, for the caller to close: those beyond the new Idle, and those
// beyond the new Size while more are live than it allows. Lent resources
// beyond Size are not taken back; each is refused by Give as it comes home,
// so the pool shrinks as fast as its borrowers let it and no resource is
// lent twice. A larger Size takes effect at once: Take makes again. A
// changed Keep or Life applies to the resources already held, judged from
// their own return and birth; the owner asks Deadline again.
func (p *Pool[T]) SetLimits(limits Limits, dst []T) []T {
	p.limits = limits.clamp()
	k := 0 // the longest idle go first: they are the ones Take would lend last
	for k < len(p.idle) && (p.idleOver(k) || p.limits.Size > 0 && p.Live()-k > p.limits.Size) {
		i := p.idle[k]
		dst = append(dst, p.recs[i].item)
		p.forget(i)
		k++
	}
	p.idle = append(p.idle[:0], p.idle[k:]...)
	p.shrunk = p.limits.Size > 0 && p.Live() > p.limits.Size
	p.odd = p.odd || p.shrunk
	return dst
}

// Reset starts a new generation, for a backend whose every connection is
// suspect (a failover, rotated credentials): it appends every idle resource
// to dst for the caller to close, and from now on Give refuses every
// resource lent before the call, so each leaves the books as it comes home.
// Resources registered from now on, by Made or Give, are of the new
// generation, including those of makes already in flight: a make's
// outcome is not tied to the Take that reserved its room (an owner that
// wants those refused compares Gen, as the pool actor does). Room, lent
// counts and the ward are unchanged. On a closed pool it changes nothing
// but the generation.
func (p *Pool[T]) Reset(dst []T) []T {
	p.gen++
	for _, i := range p.idle {
		dst = append(dst, p.recs[i].item)
		p.forget(i)
	}
	p.idle = p.idle[:0]
	p.outdated = p.lent
	p.odd = p.odd || p.outdated > 0
	return dst
}

// Gen is the pool's generation: 0, and one more at each Reset. An owner
// that must not lend what a make begun before a Reset opens notes Gen when
// Take answers Make and compares it when the make is done.
func (p *Pool[T]) Gen() uint64 { return p.gen }

// Outdated is how many lent resources are of a generation before the last
// Reset: each is refused by Give when it comes home.
func (p *Pool[T]) Outdated() int { return p.outdated }

// Limits are the limits the pool holds itself to now, with negative fields
// read as no limit.
func (p *Pool[T]) Limits() Limits { return p.limits }

// Close shuts the pool: it hands back every idle resource for the caller to
// close (nil when there is none), and from then on Take answers Shed and
// Give answers false. Lent resources are their borrowers' to return; each
// comes back through Give or Drop and leaves the books then. Closing twice
// is harmless.
func (p *Pool[T]) Close() []T {
	p.closed, p.odd = true, true
	var out []T
	for _, i := range p.idle {
		out = append(out, p.recs[i].item)
		p.forget(i)
	}
	p.idle = p.idle[:0]
	return out
}

// Heat reports how hot the process is, a number such as the share of CPU in
// use from 0 to 1, to the ward's shedder; without a shedder it does nothing.
// See Shedder.
func (p *Pool[T]) Heat(heat float64, now int64) {
	now = p.clock(now)
	if s := p.ward.shedder; s != nil {
		s.Heat(heat, now)
	}
}

// Live is how many resources exist right now: idle, lent, and being made.
func (p *Pool[T]) Live() int { return len(p.idle) + p.lent + p.reserved }

// Idle is how many are sitting idle.
func (p *Pool[T]) Idle() int { return len(p.idle) }

// Busy is how many are lent out or being made.
func (p *Pool[T]) Busy() int { return p.lent + p.reserved }

// Reserved is how many makes are in flight: room reserved by Make and not
// yet filled by Made, Unmade, or a Give or Drop of an unknown resource.
func (p *Pool[T]) Reserved() int { return p.reserved }

// Lent says whether item is registered and lent out to a caller now; one
// Due lent to the owner to be checked is not. With Reserved it lets a
// caller tell a Give refused as misuse (a resource never lent, no room
// reserved) from one refused because the pool is full.
func (p *Pool[T]) Lent(item T) bool {
	_, ok := p.lentTo(item)
	return ok
}

// lentTo is item's record if it is lent out to a caller now (see Lent).
func (p *Pool[T]) lentTo(item T) (i int, ok bool) {
	i, ok = p.books[item]
	return i, ok && p.recs[i].lent && !p.recs[i].checking
}

// Holds says whether item is on the books, idle or lent. An owner asks it
// before Made to refuse a resource it already holds: Made of one changes
// nothing, so the room reserved for the make would stay taken.
func (p *Pool[T]) Holds(item T) bool {
	_, ok := p.books[item]
	return ok
}

// Closed says whether Close has been called.
func (p *Pool[T]) Closed() bool { return p.closed }

// Refusal is the fraction of makes the ward's breaker refuses at now, from
// 0 up to its cap: what an owner reports as the breaker's state. It is 0
// without a breaker.
func (p *Pool[T]) Refusal(now int64) float64 {
	if b := p.ward.breaker; b != nil {
		return b.Reject(p.reading(now))
	}
	return 0
}

// Held says whether the ward's backoff holds makes back at now, and until
// when: ok is false when it does not (no backoff, no failure since the last
// make that worked, or the hold over). A make may be tried at until, though
// only one while the backend is suspect (see Probing).
func (p *Pool[T]) Held(now int64) (until int64, ok bool) {
	if !p.ward.holds() || p.failures == 0 || p.reading(now) >= p.hold {
		return 0, false
	}
	return p.hold, true
}

// Probing says whether a make is in flight while the backend is suspect:
// after a failed make, before one works. Once the hold is over, every other
// make waits for this one's outcome (Later, ReasonProbe). It is false
// without a backoff.
func (p *Pool[T]) Probing() bool {
	return p.ward.holds() && p.failures > 0 && p.reserved > 0
}

// reading is what clock would make of now, changing nothing: for the
// questions that do not move the pool's time.
func (p *Pool[T]) reading(now int64) int64 {
	if p.timed && now < p.now {
		return p.now
	}
	return now
}

// clock reads a clock that went backwards as standing still.
func (p *Pool[T]) clock(now int64) int64 {
	if p.timed && now < p.now {
		return p.now
	}
	p.now, p.timed = now, true
	return now
}

// full says whether no more may be live.
func (p *Pool[T]) full() bool { return p.limits.Size > 0 && p.Live() >= p.limits.Size }

// idleFull says whether no more may sit idle.
func (p *Pool[T]) idleFull() bool { return p.limits.Idle > 0 && len(p.idle) >= p.limits.Idle }

// idleOver says whether more sit idle than may, once the first gone have
// left.
func (p *Pool[T]) idleOver(gone int) bool {
	return p.limits.Idle > 0 && len(p.idle)-gone > p.limits.Idle
}

// stale says whether an idle resource, one of idle sitting idle, has sat
// for Keep while more than MinIdle are idle, or lived for Life.
func (p *Pool[T]) stale(e *entry[T], now int64, idle int) bool {
	return p.pastKeep(e, now) && idle > p.limits.MinIdle || p.tooOld(e, now)
}

// pastKeep says whether an idle resource has sat for Keep.
func (p *Pool[T]) pastKeep(e *entry[T], now int64) bool {
	return p.limits.Keep != Forever && elapsed(now, e.at) >= p.limits.Keep
}

// tooOld says whether a resource has lived for Life.
func (p *Pool[T]) tooOld(e *entry[T], now int64) bool {
	return p.limits.Life != Forever && elapsed(now, e.birth) >= p.life(e)
}

// life is how long a resource may live: Life, less its own cut.
func (p *Pool[T]) life(e *entry[T]) time.Duration {
	return p.limits.Life - min(e.cut, p.limits.Life)
}

// cut draws a new resource's share of LifeJitter. Without a Draw the
// shares follow the golden ratio's sequence, which covers the span evenly
// for any number of births: deterministic, still a spread.
func (p *Pool[T]) cut() time.Duration {
	span := p.limits.LifeJitter
	if p.limits.Life != Forever {
		span = min(span, p.limits.Life)
	}
	if span <= 0 {
		return 0
	}
	var u float64
	if p.ward.draw != nil {
		u = p.ward.draw()
	} else {
		p.births++
		_, u = math.Modf(float64(p.births) * 0.6180339887498949)
	}
	return time.Duration(min(max(u, 0), 1) * float64(span))
}

// register puts a new resource on the books, idle and born now, reusing a
// vacant record when there is one.
func (p *Pool[T]) register(item T, now int64) int {
	if p.books == nil {
		p.books = make(map[T]int)
	}
	var i int
	if n := len(p.free); n > 0 {
		i = p.free[n-1]
		p.free = p.free[:n-1]
	} else {
		i = len(p.recs)
		p.recs = append(p.recs, entry[T]{})
	}
	p.recs[i] = entry[T]{item: item, birth: now, at: now, seen: now, cut: p.cut(), gen: p.gen}
	p.books[item] = i
	return i
}

// forget takes a resource off the books; its record is vacant for reuse.
func (p *Pool[T]) forget(i int) {
	delete(p.books, p.recs[i].item)
	p.recs[i] = entry[T]{}
	p.free = append(p.free, i)
}

// elapsed is now − then, zero when then is later, and saturating rather
// than overflowing when the two are further apart than an int64 holds.
func elapsed(now, then int64) time.Duration {
	if now <= then {
		return 0
	}
	if d := now - then; d > 0 {
		return time.Duration(d)
	}
	return time.Duration(math.MaxInt64)
}

// after is t + d for d >= 0, saturating at the largest instant.
func after(t int64, d time.Duration) int64 {
	if t > 0 && int64(d) > math.MaxInt64-t {
		return math.MaxInt64
	}
	return t + int64(d)
}
