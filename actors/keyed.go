package actors

import (
	"errors"
	"hash/maphash"
	"math"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
)

// How much forgetting each message does. A call forgets up to sweepPerCall
// idle keys, so keys are forgotten at least as fast as calls can add them;
// a Tick forgets up to sweepPerTick and asks again at once if more are due,
// so a million idle keys go in slices without holding the actor long.
const (
	sweepPerCall = 2
	sweepPerTick = 4096
)

// SpawnKeyedBucket starts one actor on e under name (a fresh name when
// empty) holding a token bucket per Allow.Key — one per API key, say — each
// as SpawnBucket's: rate tokens a second up to burst, full when its key is
// first seen. Keys are independent: each has its own bucket and its own
// line of parked callers, and is answered exactly as SpawnBucket's actor
// answers. Left for a key never seen (or forgotten) is the burst.
//
// Memory follows the keys in use, not the keys ever seen: a key is forgotten
// once its bucket is full again and nobody waits on it, since a full bucket
// is what a new key gets anyway. Keys are kept in the order they last took
// tokens; each call forgets the oldest if they are full, and a Tick asked of
// e's clock does so when calls stop, so a million keys that came once are
// gone within about burst/rate (plus an eighth, to batch the Ticks) after
// their last call. A rate <= 0 never refills, so such a bucket is never
// forgotten once it has given tokens: forgetting would hand its burst back.
func SpawnKeyedBucket(e *engine.Engine, name string, rate, burst float64) (*engine.Ref, error) {
	if e == nil {
		return nil, errNoEngine
	}
	return spawnKeyed(e, name, newBucketRule(rate, burst))
}

// SpawnKeyedWindow starts one actor on e under name (a fresh name when
// empty) holding a sliding window per Allow.Key, each as SpawnWindow's:
// allow events in any stretch window long. A key is forgotten once its
// window is empty and nobody waits on it, within about window and an eighth
// of its last counted event; otherwise it answers as SpawnKeyedBucket's
// actor does. Left for a key never seen (or forgotten) is allow.
func SpawnKeyedWindow(e *engine.Engine, name string, allow int, window time.Duration) (*engine.Ref, error) {
	if e == nil {
		return nil, errNoEngine
	}
	return spawnKeyed(e, name, windowRule{allow: allow, window: window})
}

func spawnKeyed[S any, R rule[S]](e *engine.Engine, name string, r R) (*engine.Ref, error) {
	return e.Spawn(name, newKeyed(e, r, maphash.MakeSeed()), nil)
}

// newKeyed is a keyed actor of r's limit on e, lending nothing, hashing
// names with seed, or a fresh seed if it is the zero Seed (which
// maphash refuses).
func newKeyed[S any, R rule[S]](e *engine.Engine, r R, seed maphash.Seed) *keyed[S, R] {
	if seed == (maphash.Seed{}) {
		seed = maphash.MakeSeed()
	}
	k := &keyed[S, R]{
		rule:   r,
		free:   -1,
		oldest: -1,
		newest: -1,
		slack:  r.span() / 8,
		now:    e.Now(),
	}
	k.index.init(seed, 0)
	k.alarm.clock = e.Clock()
	k.q.init()
	return k
}

// keyCount asks a keyed actor how many keys it holds, and how many entries
// its slice has room for: a test hook.
type keyCount struct{ reply chan [2]int }

func (m *keyCount) Refuse() { m.reply <- [2]int{-1, -1} }

// hotPlaces asks a keyed actor whether its hot keys and their entries
// agree (see checkHot): a test hook.
type hotPlaces struct{ reply chan error }

func (m *hotPlaces) Refuse() { m.reply <- errors.New("refused") }

// keyed is the actor of a keyed limiter. Its keys live by value on a
// shelf (chunks never copied once full), reused through a free list and
// found through index (see keyIndex), and are linked in the order they
// last took (oldest first), which is the order they are forgotten in.
type keyed[S any, R rule[S]] struct {
	rule           R
	index          keyIndex
	keys           shelf[entry[S]]
	free           int32         // first free entry, chained through next; -1 when none
	oldest, newest int32         // ends of the taking order; -1 when no keys
	q              queue[*Allow] // the lines of keys with parked callers
	wakes          []int32       // lines by the instant their head can be granted: a min-heap
	alarm          alarm
	slack          time.Duration // how late forgetting may be, to batch Ticks
	now            int64         // latest Now seen, for a Withdraw, which carries none
	spare          S             // a new key's state before it is kept: a local would escape
	lend           *keyLender    // credit for hot keys; nil when it lends none
	inFlight
}

// entry is one key's limit.
type entry[S any] struct {
	name       string
	state      S
	due        int64 // when state is full (empty) again if nothing more is taken
	prev, next int32 // the taking order; next also chains free entries
	same       int32 // the next entry whose name has the same hash; -1 when none
	line       int32 // its parked callers in q, -1 when none
	hot        uint8 // its place among the hot keys plus one; 0 when not hot
}

// Bind gives the alarm the actor's Ref; the engine calls it at Spawn.
func (k *keyed[S, R]) Bind(r *engine.Ref) { k.alarm.bind(r) }

func (k *keyed[S, R]) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		return
	}
	k.Handle(c.Message())
}

// Handle runs one message; the engine calls it straight for user messages
// (see engine.Handler), and Receive for the rest. A request it does not
// serve, or whose handling panics, is refused (see inFlight).
func (k *keyed[S, R]) Handle(msg any) {
	defer k.unanswered()
	k.hold(msg)
	switch m := msg.(type) {
	case *Allow:
		k.allow(m)
	case *Withdraw:
		k.withdraw(m.Allow)
	case Withdraw:
		k.withdraw(m.Allow)
	case *Tick:
		k.tick(m)
	case *Left:
		k.seen(m.Now)
		var p Permit
		if i, ok := k.find(m.Key, k.index.hash(m.Key)); ok {
			k.reclaim(i)
			defer k.lendTo(i)
			e := k.keys.at(i)
			var ahead float64
			var parked int
			if e.line >= 0 {
				ahead, parked = k.q.lines[e.line].ahead, int(k.q.lines[e.line].n)
			}
			p = Permit{Left: k.rule.left(&e.state, m.Now), After: k.rule.wait(&e.state, m.Now, ahead, 1), Parked: parked}
		} else {
			k.spare = k.rule.fresh(m.Now)
			p = Permit{Left: k.rule.left(&k.spare, m.Now), After: k.rule.wait(&k.spare, m.Now, 0, 1)}
		}
		reply(m.Reply, p)
		k.answered()
	case *Retune:
		k.retune(m)
		k.answered()
	case *keyCount:
		m.reply <- [2]int{k.index.n, int(k.keys.len())}
		k.answered()
	case *hotPlaces:
		m.reply <- k.checkHot()
		k.answered()
	case *actor.Stopped:
		k.alarm.stop()
		k.q.drain((*Allow).Refuse)
		if k.lend != nil {
			for len(k.lend.slots) > 0 {
				k.demote(k.lend.slots[0].i)
			}
		}
	}
}

func (k *keyed[S, R]) seen(now int64) { k.now = max(k.now, now) }

// retune applies m to every key, as the unkeyed limiter's retune does to
// its one: whom the old numbers owe is served first, then each key's state
// takes the new numbers, and each line is served again by them. New keys
// are made with the new numbers. It costs O(keys), which a retune, rare,
// can afford.
func (k *keyed[S, R]) retune(m *Retune) {
	k.seen(m.Now)
	k.reclaimAll()
	defer k.lendAll()
	now := k.now
	for len(k.wakes) > 0 && k.q.lines[k.wakes[0]].at <= now {
		k.serve(k.wakes[0])
	}
	k.spare = k.rule.fresh(now)
	next := k.rule.retune(&k.spare, now, m).(R)
	for i := k.oldest; i >= 0; i = k.keys.at(i).next {
		e := k.keys.at(i)
		k.rule.retune(&e.state, now, m)
		// Not forgotten before it is full (empty) under the new numbers,
		// nor before the old due: a window retuned to allow nothing says
		// it is quiet at once, but its events must outlive a later raise.
		e.due = max(e.due, later(now, next.quiet(&e.state, now)))
	}
	k.rule = next
	k.slack = next.span() / 8
	if k.lend != nil {
		k.lend.lease = keyLease(next)
	}
	for _, li := range slices.Clone(k.wakes) {
		k.q.lines[li].at = math.MaxInt64 // the new numbers' to find
		k.serve(li)
	}
	k.arm(now)
	reply(m.Reply, Permit{OK: true})
}

func (k *keyed[S, R]) allow(m *Allow) {
	// m is the caller's again once answered: read it first.
	now, key := m.Now, m.Key
	k.seen(now)
	h := k.index.hash(key)
	i, ok := k.find(key, h)
	if !ok {
		// Only a caller that takes (or waits) makes a key: one refused
		// at once leaves nothing behind.
		k.spare = k.rule.fresh(now)
		v := decide(k.rule, &k.spare, 0, 0, m)
		if v == answered {
			k.answered()
			k.sweep(now, sweepPerCall)
			return
		}
		i = k.add(key, h, k.spare, now)
		if v == granted {
			k.answered()
			k.touch(i, now)
		} else {
			k.park(i, m)
		}
	} else {
		k.reclaim(i)
		if li := k.keys.at(i).line; li >= 0 {
			k.serve(li) // as the unkeyed limiter does: a Tick may be late
		}
		e := k.keys.at(i)
		var waiting int32
		var ahead float64
		if e.line >= 0 {
			waiting, ahead = k.q.lines[e.line].n, k.q.lines[e.line].ahead
		}
		switch decide(k.rule, &e.state, waiting, ahead, m) {
		case granted:
			k.answered()
			k.touch(i, now)
		case parks:
			k.park(i, m)
		default:
			k.answered()
		}
		if k.lend != nil {
			if k.keys.at(i).hot == 0 && k.lend.lease >= 1 && k.lend.frequent(i, now) {
				k.promote(i)
			}
			k.lendTo(i)
		}
	}
	k.sweep(now, sweepPerCall)
	k.arm(k.now)
}

func (k *keyed[S, R]) withdraw(req *Allow) {
	li, ok := k.q.withdraw(req)
	if !ok {
		return
	}
	req.answer(Permit{Err: ErrCancelled})
	k.serve(li) // its head may have changed, or its line emptied
	k.arm(k.now)
}

func (k *keyed[S, R]) tick(m *Tick) {
	k.seen(m.Now)
	now := k.now
	k.alarm.fired(m)
	for len(k.wakes) > 0 && k.q.lines[k.wakes[0]].at <= now {
		k.serve(k.wakes[0])
	}
	if k.sweep(now, sweepPerTick) {
		k.alarm.set(now, now, false) // more are due: come back at once
	}
	k.arm(now)
}

// arm keeps the alarm at the earliest of the next head to grant and the
// next key to forget (late by the slack, so one Tick forgets a batch).
func (k *keyed[S, R]) arm(now int64) {
	at := int64(math.MaxInt64)
	if len(k.wakes) > 0 {
		at = k.q.lines[k.wakes[0]].at
	}
	if o := k.oldest; o >= 0 && k.keys.at(o).line < 0 {
		at = min(at, later(k.keys.at(o).due, k.slack))
	}
	k.alarm.set(now, at, false)
}

// add makes a key of name, whose hash is h, holding s, newest in the taking
// order, and returns it.
func (k *keyed[S, R]) add(name string, h uint64, s S, now int64) int32 {
	i := k.free
	if i >= 0 {
		k.free = k.keys.at(i).next
	} else {
		i = k.keys.push()
	}
	*k.keys.at(i) = entry[S]{name: name, state: s, due: now, prev: -1, next: -1, line: -1}
	k.link(i)
	k.note(i, h)
	return i
}

// touch notes that key i took at now: it goes to the back of the order and
// its due moves to when it will be full (empty) again.
func (k *keyed[S, R]) touch(i int32, now int64) {
	e := k.keys.at(i)
	e.due = max(e.due, later(now, k.rule.quiet(&e.state, now)))
	if k.newest != i {
		k.unlink(i)
		k.link(i)
	}
}

func (k *keyed[S, R]) link(i int32) {
	e := k.keys.at(i)
	e.prev, e.next = k.newest, -1
	if k.newest >= 0 {
		k.keys.at(k.newest).next = i
	} else {
		k.oldest = i
	}
	k.newest = i
}

func (k *keyed[S, R]) unlink(i int32) {
	e := k.keys.at(i)
	if e.prev >= 0 {
		k.keys.at(e.prev).next = e.next
	} else {
		k.oldest = e.next
	}
	if e.next >= 0 {
		k.keys.at(e.next).prev = e.prev
	} else {
		k.newest = e.prev
	}
}

// sweep forgets up to limit keys from the front of the order that are full
// (empty) at now with nobody waiting, and reports whether it stopped with
// more of them due. A key that is not idle yet stops it: the keys behind it
// took later, and each is certainly idle by its last take plus the span.
func (k *keyed[S, R]) sweep(now int64, limit int) bool {
	for range limit {
		o := k.oldest
		if !k.idle(o, now) {
			break
		}
		if k.keys.at(o).hot != 0 && k.cool(o) {
			continue // drew from its credit since: taken, and to the back
		}
		k.forget(o)
	}
	if n := int(k.keys.len()); n >= 1024 && k.index.n < n/4 {
		k.compact()
	}
	return k.idle(k.oldest, now)
}

// idle is whether key i exists, is full (empty) at now and has nobody
// waiting: whether it may be forgotten.
func (k *keyed[S, R]) idle(i int32, now int64) bool {
	return i >= 0 && k.keys.at(i).line < 0 && k.keys.at(i).due <= now
}

func (k *keyed[S, R]) forget(i int32) {
	if k.lend != nil {
		k.lend.forgetEntry(i)
	}
	k.unlink(i)
	k.unnote(i)
	*k.keys.at(i) = entry[S]{next: k.free, line: -1} // lets the name and state go
	k.free = i
}

// compact rebuilds the keys and the index once three quarters of the slice
// is free, since neither a slice nor a map ever shrinks by itself: memory
// follows the keys in use, not the most there ever were. It is paid for by
// the forgetting that made the room, so sweeping stays O(1) amortized.
func (k *keyed[S, R]) compact() {
	var keys shelf[entry[S]]
	for i := k.oldest; i >= 0; i = k.keys.at(i).next {
		e := *k.keys.at(i)
		j := keys.push()
		e.prev, e.next = j-1, j+1
		if e.line >= 0 {
			k.q.lines[e.line].key = j
		}
		if e.hot != 0 {
			k.lend.slots[e.hot-1].i = j
		}
		*keys.at(j) = e
	}
	k.oldest, k.newest, k.free = -1, -1, -1
	if n := keys.len(); n > 0 {
		keys.at(n - 1).next = -1
		k.oldest, k.newest = 0, n-1
	}
	k.keys = keys
	k.index.init(k.index.seed, int(keys.len()))
	for j := range keys.len() {
		k.note(j, k.index.hash(keys.at(j).name))
	}
	if k.lend != nil {
		k.lend.forgetCounts()
	}
}

// park puts m in key i's line, making the line if it is the first.
func (k *keyed[S, R]) park(i int32, m *Allow) {
	li := k.keys.at(i).line
	if li < 0 {
		li = k.q.newLine(i)
		k.keys.at(i).line = li
	}
	k.q.park(li, m, k.rule.cost(m.N))
	// In the line's custody: it is answered from there.
	k.answered()
	if k.q.lines[li].n == 1 { // a new head: schedule it
		k.serve(li)
	}
}

// serve grants whom it can in line li by the latest instant seen (as the
// unkeyed limiter's serve), then either drops the line, if it emptied, or
// files it in the wake heap at its head's instant.
func (k *keyed[S, R]) serve(li int32) {
	i := k.q.lines[li].key
	n, _ := serve(k.rule, &k.keys.at(i).state, &k.q, li, k.now)
	if n > 0 {
		k.touch(i, k.now)
	}
	ln := &k.q.lines[li]
	if ln.n == 0 {
		if ln.heap >= 0 {
			k.wakeRemove(ln.heap)
		}
		k.q.dropLine(li)
		k.keys.at(i).line = -1
		return
	}
	if ln.heap < 0 { // serve kept the head's instant in ln.at
		ln.heap = int32(len(k.wakes))
		k.wakes = append(k.wakes, li)
		k.wakeUp(ln.heap)
	} else if !k.wakeDown(ln.heap) {
		k.wakeUp(ln.heap)
	}
}

// The wake heap, written out to keep each line's position in it current.

func (k *keyed[S, R]) wakeLess(a, b int32) bool {
	return k.q.lines[k.wakes[a]].at < k.q.lines[k.wakes[b]].at
}

func (k *keyed[S, R]) wakeSwap(a, b int32) {
	k.wakes[a], k.wakes[b] = k.wakes[b], k.wakes[a]
	k.q.lines[k.wakes[a]].heap = a
	k.q.lines[k.wakes[b]].heap = b
}

func (k *keyed[S, R]) wakeUp(j int32) {
	for j > 0 {
		p := (j - 1) / 2
		if !k.wakeLess(j, p) {
			return
		}
		k.wakeSwap(j, p)
		j = p
	}
}

func (k *keyed[S, R]) wakeDown(j int32) bool {
	start, n := j, int32(len(k.wakes))
	for {
		c := 2*j + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && k.wakeLess(r, c) {
			c = r
		}
		if !k.wakeLess(c, j) {
			break
		}
		k.wakeSwap(j, c)
		j = c
	}
	return j > start
}

func (k *keyed[S, R]) wakeRemove(j int32) {
	last := int32(len(k.wakes) - 1)
	k.q.lines[k.wakes[j]].heap = -1
	if j != last {
		k.wakes[j] = k.wakes[last]
		k.q.lines[k.wakes[j]].heap = j
	}
	k.wakes = k.wakes[:last]
	if j != last && !k.wakeDown(j) {
		k.wakeUp(j)
	}
}
