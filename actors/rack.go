package actors

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/moonpool-go/moonpool/policy"
)

// Rack is where a pool actor lays out idle resources for its callers to
// take without asking it: credit, as the bucket lends tokens (see Credit),
// with resources for tokens. A Get that finds one on the rack takes it
// with one atomic swap, and a Put of a resource taken from the rack lays
// it back with one compare-and-swap; neither sends the actor a message.
// Everything else goes to the actor: a Get that finds the rack
// bare, a Put of a resource the actor lent itself, and every Put and Get
// while a caller waits in the actor's line.
//
// Each goroutine has a home slot on the rack (see Home). Its Put lays the
// resource there and its next Get takes it back from there. So callers on
// two processors touch two slots, not a shared one, and each takes back
// its own resource, warm in its processor's cache.
//
// The actor still owns every resource. Its books count a resource on the
// rack, or taken from it, as lent (to the rack); a resource becomes the
// rack's when the actor lends it to a caller while nobody waits, up to
// Limits.Idle less MinIdle (which the books keep) and never more than
// rackMost. Before it parks a caller it shuts the rack to Puts (they come
// to it instead) and takes back what lies there. So a resource never sits
// on the rack while a caller waits for one, and a caller never overtakes
// one that waits.
// Reset, SetLimits, Close and stopping revoke the rack: what lies there
// goes home, and every resource taken from it comes home through the
// actor when it is put back, where the books judge it as they judge any
// other.
//
// Each resource the rack has lent carries a record whose state says where
// it is: at home in the books, on the rack, out with a caller who took it
// from the rack, or gone (revoked). Only the goroutine that holds a
// resource moves its record between "on the rack" and "out", so a Put of
// a resource already put back finds it on the rack, not out, and goes to
// the actor, which refuses it (ErrNotLent) as it refuses any double Put.
//
// Keep and Life hold for what lies on the rack as for the idle in the
// books, to the same timer's lateness: a Put reads the clock (as a stamped
// Give does), goes to the actor with a resource past its Life, and notes
// when the resource came back; the actor's timer takes back each resource
// lying on the rack at its deadline for the books to evict. A Get reads no
// clock: between a deadline and the timer's firing it may take what the
// timer is about to retire, as a Get that the actor answers unstamped may.
//
// A nil *Rack holds nothing. The zero Rack is open and bare, with nowhere
// to send a revoked resource: build one with SpawnPoolRack.
type Rack[T comparable] struct {
	shut  atomic.Uint32 // rackLine | rackOff; zero while the rack is open
	stamp atomic.Bool   // Puts read the clock: the pool has a Keep or a Life
	index atomic.Pointer[map[T]*racked[T]]
	clock func() int64
	back  func(T) // hands a revoked resource home, through the actor
	_     [40]byte
	slots [rackSlots]rackSlot[T]
}

// racked is the record of one resource the rack has lent.
type racked[T comparable] struct {
	item  T
	dies  int64 // when its Life ends (math.MaxInt64: never); set before it is first laid out
	state atomic.Uint32
	at    atomic.Int64 // when it was last laid on the rack; its idle time counts from here
	// At least a cache line long, for a small T: a Get and a Put each
	// write state, and two records' states on one line would make callers
	// using two different resources on two processors wait for each other.
	_ [40]byte
}

// rackSlot is one place on the rack, on a cache line of its own, with the
// number of Gets it has served.
type rackSlot[T comparable] struct {
	r     atomic.Pointer[racked[T]]
	takes atomic.Int64
	_     [48]byte
}

// rackSlots is how many slots a rack has: four for each resource it may
// lend. Each goroutine's home is one of them, so with the rack at most a
// quarter full a Put mostly finds its home free, and two callers seldom
// share a home.
const (
	rackBits  = 6
	rackSlots = 1 << rackBits
)

// rackMost is how many resources the rack lends at most: callers on two
// processors find one without meeting, and a pool grown for a burst keeps
// the rest in its books, where MRU order lets Keep retire them.
const rackMost = rackSlots / 4

// rackKept is how many records the rack keeps before it forgets those of
// resources at home, so the map a Put looks in stays small.
const rackKept = 4 * rackMost

// The bits of Rack.shut.
const (
	rackLine uint32 = 1 << iota // a caller waits in the actor's line
	rackOff                     // the pool lends nothing through the rack (closed, or its settings rule it out)
)

// The states of a racked record.
const (
	rackHome uint32 = iota // in the books: idle, or lent by the actor itself
	rackIn                 // on the rack, or on its way there
	rackOut                // taken from the rack by a caller
	rackGone               // revoked: the actor no longer counts it the rack's
)

// Home is the calling goroutine's slot on a rack, for Take and Give. It
// is picked by where the caller's stack is, so it mostly stays put for
// one goroutine and differs between most. It never blocks. A Put lays its
// resource at home and a Get takes it back from there, so a goroutine
// that keeps to itself mostly touches one slot and one record. Home reads
// the frame it is inlined in: a Get and a Put that call it from small
// frames of one layout mostly find one slot when one function calls both.
// The home is a hint, never a promise: it moves when the goroutine's
// stack is copied as it grows, and differs where the frames do (a Get of
// a T too large for registers has a larger frame than its Put). A
// resource away from home is found by a look round the rack.
func Home() int {
	var mark byte
	return homeOf(uintptr(unsafe.Pointer(&mark)))
}

// homeOf is the slot of a stack address. Stacks are at least 2 KiB and
// keep their alignment as they grow, so the bits above 11 tell goroutines
// apart. The multiply (by 2⁶⁴ over the golden ratio) spreads stacks that
// lie side by side round the rack: sixteen of them in a row, each of up
// to 16 KiB, land on sixteen slots.
func homeOf(sp uintptr) int {
	return int(uint64(sp>>11) * 0x9E3779B97F4A7C15 >> (64 - rackBits))
}

// Take takes a resource off the rack, and reports false if it found none
// or the rack is shut: the caller then asks the actor. It looks in slot
// home first (see Home; any int names a slot), then up round the rest of
// the rack. It waits for nothing, except that a revoked resource it comes
// across is handed home first (back: a round trip to the actor, and the
// pool's Close if the books will not keep it).
func (r *Rack[T]) Take(home int) (item T, ok bool) {
	if r == nil || r.shut.Load() != 0 {
		return item, false
	}
	h := home & (rackSlots - 1)
	for i := range rackSlots {
		s := &r.slots[(h+i)&(rackSlots-1)]
		if s.r.Load() == nil {
			continue
		}
		x := s.r.Swap(nil)
		if x == nil {
			continue
		}
		if x.state.CompareAndSwap(rackIn, rackOut) {
			if r.shut.Load() != 0 {
				// Shut since this Take looked: a caller waits, and what
				// was put back is its. Home through the actor.
				r.back(x.item)
				return item, false
			}
			s.takes.Add(1)
			return x.item, true
		}
		r.back(x.item) // revoked while it lay here
	}
	return item, false
}

// Give lays item back on the rack, in slot home (see Home), if the caller
// took it from there, and reports whether it did; false sends the caller
// to the actor, which takes it back (or refuses a resource not lent). An
// older resource it finds at home moves up to the next free slot, so the
// newest is taken first. Give waits for nothing, except to hand a
// resource home through the actor: one it finds revoked, as Take does;
// an older one it moved when no slot is free; and one it laid on a rack
// shut meanwhile.
func (r *Rack[T]) Give(item T, home int) bool {
	if r == nil || r.shut.Load() != 0 {
		return false
	}
	index := r.index.Load()
	if index == nil {
		return false
	}
	x := (*index)[item]
	if x == nil || !x.state.CompareAndSwap(rackOut, rackIn) {
		return false
	}
	if r.stamp.Load() {
		now := r.clock()
		if x.dies <= now { // past its Life: the actor retires it
			if x.state.CompareAndSwap(rackIn, rackOut) {
				return false
			}
			r.back(item)
			return true
		}
		x.at.Store(now)
	}
	h := home & (rackSlots - 1)
	s := &r.slots[h]
	if s.r.CompareAndSwap(nil, x) {
		r.settle(s, x)
		return true
	}
	y := s.r.Swap(x)
	r.settle(s, x)
	if y == nil {
		return true
	}
	for i := 1; i < rackSlots; i++ {
		u := &r.slots[(h+i)&(rackSlots-1)]
		if u.r.Load() == nil && u.r.CompareAndSwap(nil, y) {
			r.settle(u, y)
			return true
		}
	}
	r.back(y.item) // no room, as a rack lends at most rackMost: home through the actor
	return true
}

// settle checks s, just given x, against the actor. The actor shuts the
// rack and then takes back what lies there; a Put lays a resource there
// and then looks at the rack. Whichever came second sees the other: a Put
// the actor missed takes back what it finds in s and hands it home. A
// revoke marks every record gone and then sweeps: one that marked x
// before it lay here and swept before that finds nothing, so the Put,
// seeing x gone, hands it home itself.
func (r *Rack[T]) settle(s *rackSlot[T], x *racked[T]) {
	if r.shut.Load() != 0 || x.state.Load() == rackGone {
		if y := s.r.Swap(nil); y != nil {
			r.back(y.item)
		}
	}
}

// takes is how many Gets the rack has served.
func (r *Rack[T]) takes() int64 {
	var n int64
	for i := range r.slots {
		n += r.slots[i].takes.Load()
	}
	return n
}

// rackAllowed says whether a pool with these settings may lend through
// its rack: not when each Take must be judged by the actor, for a check
// before lending or by the shedder, which counts what is lent.
func rackAllowed(check bool, ward policy.Ward) bool {
	return !check && !ward.Shedder.On()
}

// The actor's side of the rack. Only the pool actor calls these.

// rackCap is how many resources the rack may have at once, on it or out
// from it: within Limits.Idle less MinIdle, which the books keep
// themselves.
func (b *books[T]) rackCap() int {
	l := b.pool.Limits()
	n := rackMost
	if l.Idle > 0 {
		n = min(n, l.Idle-l.MinIdle)
	}
	return n
}

// rackOut makes item, just lent to a caller, the rack's: its Put lays it
// on the rack, and the next Get takes it from there. So the rack holds
// what callers have used lately, as many as use the pool at once (up to
// rackCap), and the books keep the rest in MRU order, for Keep to retire
// what a pool grown for a burst no longer needs. The rack opens again here
// once its line has emptied.
func (b *books[T]) rackOut(item T, now int64) {
	r := b.rack
	if r == nil || b.q.parked > 0 || b.racked >= b.rackCap() {
		return
	}
	if r.shut.Load() == rackLine {
		r.shut.Store(0)
	}
	if r.shut.Load() != 0 {
		return
	}
	x := b.pop[item]
	if x == nil {
		x = &racked[T]{item: item, dies: b.pool.Dies(item)}
		b.publish(x)
	}
	x.state.Store(rackOut)
	b.racked++
	if !b.ageless {
		now = b.stamped(now)
		at := x.dies
		if keep := b.pool.Limits().Keep; keep != policy.Forever {
			at = min(at, later(now, keep)) // put back from now on, idle from then
		}
		b.arm(now, at)
	}
}

// publish adds x to the records callers look Puts up in. The map callers
// read is never changed: a new one replaces it, without the records of
// resources no longer on the books, and once it has grown to rackKept
// without any record of a resource at home (it gets a new one if it is
// laid out again).
func (b *books[T]) publish(x *racked[T]) {
	next := make(map[T]*racked[T], len(b.pop)+1)
	for item, y := range b.pop {
		if y.state.Load() != rackHome || len(b.pop) < rackKept && b.pool.Holds(item) {
			next[item] = y
		}
	}
	next[x.item] = x
	b.pop = next
	b.rack.index.Store(&next)
}

// sweep takes back everything on the rack into the books, the longest
// idle first, as the books order their idle. (Without Keep a Put notes no
// time, and they go home in the rack's order.)
func (b *books[T]) sweep(now int64) {
	var all [rackSlots]*racked[T]
	n := 0
	for i := range b.rack.slots {
		if x := b.rack.slots[i].r.Swap(nil); x != nil {
			all[n] = x
			n++
		}
	}
	swept := all[:n]
	slices.SortStableFunc(swept, func(x, y *racked[T]) int { return cmp.Compare(x.at.Load(), y.at.Load()) })
	for _, x := range swept {
		b.unrack(x, now, false)
	}
}

// unrack takes x, off the rack, back into the books, idle since it was
// laid there, or retired if the books will not keep it: counted as
// evicted if due (its time is up), else as any Give the books refuse.
func (b *books[T]) unrack(x *racked[T], now int64, due bool) {
	b.homed(x)
	closed, outdated := b.pool.Closed(), b.pool.Outdated()
	var kept, lent bool
	if at := x.at.Load(); at != 0 && !b.ageless {
		kept, lent = b.pool.GiveLentSince(x.item, at, now)
	} else {
		kept, lent = b.pool.GiveLent(x.item, now) // Puts read no clock: home as returned now
	}
	if lent && !kept {
		if due && !closed && b.pool.Outdated() == outdated {
			b.stats.Evicted++
		} else {
			b.unkept(closed, outdated)
		}
		b.retireItem(x.item)
	}
}

// homed notes that x, if the rack still counts it, is home again.
func (b *books[T]) homed(x *racked[T]) {
	if b.pop[x.item] == x {
		if s := x.state.Swap(rackHome); s == rackIn || s == rackOut {
			b.racked--
		}
	}
}

// line shuts the rack to Puts for a caller about to wait, and takes back
// what lies on it: in this order, so that a Put racing with it either
// sees the rack shut or has laid its resource where the sweep finds it.
func (b *books[T]) line(now int64) {
	if b.rack == nil || b.racked == 0 && b.rack.shut.Load()&rackLine != 0 {
		return
	}
	b.rack.shut.Or(rackLine)
	b.sweep(now)
}

// revoke takes the rack back whole: what lies there goes home, and every
// resource out with a caller comes home through the actor when it is put
// back. off leaves the rack shut for good (Close, stopping) or until the
// settings allow it again.
func (b *books[T]) revoke(now int64, off bool) {
	r := b.rack
	if r == nil {
		return
	}
	if off {
		r.shut.Or(rackOff)
	}
	for _, x := range b.pop {
		x.state.Store(rackGone)
	}
	b.pop, b.racked = nil, 0
	r.index.Store(nil)
	b.sweep(now)
}

// rackArm arms the timer for the first instant something laid out on the
// rack, or to be laid there, may pass its Keep or Life.
func (b *books[T]) rackArm(now int64) {
	if b.racked == 0 || b.ageless {
		return
	}
	keep := b.pool.Limits().Keep
	at := int64(math.MaxInt64)
	out := false
	for _, x := range b.pop {
		switch x.state.Load() {
		case rackIn:
			at = min(at, x.dies)
			if keep != policy.Forever {
				at = min(at, later(x.at.Load(), keep))
			}
		case rackOut:
			at = min(at, x.dies)
			out = true
		}
	}
	if out && keep != policy.Forever {
		at = min(at, later(now, keep)) // a Put from now on is idle from then
	}
	b.arm(now, at)
}

// rackDue takes back into the books, at the timer, what has sat on the
// rack past its Keep or lived past its Life, for the books to evict.
func (b *books[T]) rackDue(now int64) {
	if b.racked == 0 || b.ageless {
		return
	}
	keep := b.pool.Limits().Keep
	for i := range b.rack.slots {
		s := &b.rack.slots[i]
		x := s.r.Load()
		if x == nil {
			continue
		}
		due := x.dies
		if keep != policy.Forever {
			due = min(due, later(x.at.Load(), keep))
		}
		if due <= now && s.r.CompareAndSwap(x, nil) {
			b.unrack(x, now, true)
		}
	}
	// One out with a caller past its Life must not lie on the rack when it
	// comes back: revoked, it comes home through the actor, whose books
	// retire it.
	for _, x := range b.pop {
		if x.dies <= now && x.state.CompareAndSwap(rackOut, rackGone) {
			b.racked--
			b.forget(x.item)
		}
	}
	b.rackArm(now)
}

// forget drops item's record from those callers look Puts up in.
func (b *books[T]) forget(item T) {
	next := make(map[T]*racked[T], len(b.pop))
	for k, y := range b.pop {
		if k != item {
			next[k] = y
		}
	}
	b.pop = next
	b.rack.index.Store(&next)
}

// trim keeps the idle on the rack and in the books, with extra more about
// to come home, within Limits.Idle: the books judge Idle by their own idle
// alone, so a resource the actor takes back from a caller while the rack
// has some out could push the sum past it. What lies on the rack goes
// home, where the books hold it to Idle, and then records of what is out
// are revoked, to come home through the actor (not lay themselves on the
// rack) and be judged there.
func (b *books[T]) trim(now int64, extra int) {
	idle := b.pool.Limits().Idle
	over := func() bool { return b.racked > 0 && b.pool.Idle()+b.racked+extra > idle }
	if b.rack == nil || idle == 0 || !over() {
		return
	}
	for i := 0; i < rackSlots && over(); i++ {
		s := &b.rack.slots[i]
		if x := s.r.Load(); x != nil && s.r.CompareAndSwap(x, nil) {
			b.unrack(x, now, false)
		}
	}
	for item, x := range b.pop {
		if !over() {
			return
		}
		if x.state.CompareAndSwap(rackOut, rackGone) {
			b.racked--
			b.forget(item)
		}
	}
}

// onRack is how many resources lie on the rack, for Stats.
func (b *books[T]) onRack() int {
	n := 0
	for _, x := range b.pop {
		if x.state.Load() == rackIn {
			n++
		}
	}
	return n
}

// rackLimits opens or shuts the rack for limits: it lends only what is
// idle beyond MinIdle within Idle, and Puts read the clock only for Keep
// or Life.
func (b *books[T]) rackLimits(l policy.Limits) {
	r := b.rack
	if r == nil {
		return
	}
	r.stamp.Store(l.Keep != policy.Forever || l.Life != policy.Forever)
	if b.rackOK && (l.Idle == 0 || l.Idle > l.MinIdle) {
		r.shut.And(^rackOff)
	} else {
		r.shut.Or(rackOff)
	}
}
