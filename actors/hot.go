package actors

import (
	"fmt"
	"hash/maphash"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/engine"
)

// Hot is the few keys of a keyed bucket whose actor lends them credit, as
// a Bucket's actor lends its one bucket's (see Credit): the keys that make
// up a large share of the calls the actor answers. A caller draws a hot
// key's token with one atomic operation, after a look through a handful of
// hashes, instead of a round trip to the actor.
//
// The actor reads a key as hot once it has counted hotAsks asks for it
// within hotSpan (the ask that makes a key is not counted), discounting
// the other keys it saw meanwhile (Misra and Gries's frequent items, over
// hotCandidates counters): a key asked for over 32,000 times a second, in
// more than about a ninth of the calls reaching the actor, is found within
// a millisecond, and neither a stream of distinct keys nor a key asked for
// at a more ordinary pace ever is. It keeps at most hotMax keys. It lets
// one go when its sweep finds the key's bucket full again (about
// burst/rate after the key went quiet) with nothing drawn since the sweep
// last looked; or, when another key turns hot with no place free, if the
// key drew nothing from what it was last lent.
//
// A nil *Hot draws nothing. Build one with SpawnKeyedBucketCredit.
type Hot struct {
	set     atomic.Pointer[hotSet]
	seed    maphash.Seed
	retired atomic.Int64  // draws from credit no longer lent to
	changes atomic.Uint64 // odd while the actor changes the set (see Drawn)
}

// hotSet is one published set of hot keys; it is never changed once
// published.
type hotSet struct{ keys []hotKey }

type hotKey struct {
	hash   uint64
	name   string
	credit *Credit
}

const (
	hotMax        = 4  // hot keys per actor
	hotCandidates = 8  // counters of the frequent-items count
	hotAsks       = 32 // the count that makes a key hot
	hotSpan       = int64(time.Millisecond)
)

// Draw takes n whole tokens of key's credit if key is hot and its credit
// holds them. hash is key's hash under the seed the actor was given. It
// never blocks.
func (h *Hot) Draw(hash uint64, key string, n int64) bool {
	if h == nil {
		return false
	}
	s := h.set.Load()
	if s == nil {
		return false
	}
	for i := range s.keys {
		if k := &s.keys[i]; k.hash == hash && k.name == key {
			return k.credit.Draw(n)
		}
	}
	return false
}

// Drawn is how many Draws have succeeded, ever, over every key. It never
// blocks; it may spin for the moment the actor changes the set.
func (h *Hot) Drawn() int64 {
	if h == nil {
		return 0
	}
	for {
		c := h.changes.Load()
		if c&1 == 0 {
			d := h.retired.Load()
			if s := h.set.Load(); s != nil {
				for i := range s.keys {
					d += s.keys[i].credit.Drawn()
				}
			}
			if h.changes.Load() == c {
				return d
			}
		}
		runtime.Gosched()
	}
}

// SpawnKeyedBucketCredit is SpawnKeyedBucket with credit for its hot keys:
// it also returns the Hot that callers Draw from before they ask the actor
// (a nil Hot, and the actor lends nothing, when the burst is under sixteen
// tokens). seed is the seed callers hash keys with; it is how the actor
// names its hot keys to them. With the zero Seed, which no caller can hash
// with, the actor lends nothing and returns a nil Hot.
//
// A hot key's credit works as SpawnBucketCredit's does for its bucket: a
// lease of a sixteenth of the burst, and at most 1,024 tokens or a
// millisecond of the rate, whichever is more (see leaseOf), taken back
// before the actor answers anything about that key, and not lent while
// anybody waits on it; so Wait, Left, Delay and each key's line are
// exact, and no key ever lets through more than its exact bucket would
// over any stretch of time. Under-admission is as SpawnBucketCredit's,
// per hot key: at most a lease per quiet spell of that key
// (TestKeyedCreditNeverOverAdmits measures it). Keys that are not hot are
// answered exactly, by the actor.
func SpawnKeyedBucketCredit(e *engine.Engine, name string, rate, burst float64, seed maphash.Seed) (*engine.Ref, *Hot, error) {
	if e == nil {
		return nil, nil, errNoEngine
	}
	r := newBucketRule(rate, burst)
	k := newKeyed(e, r, seed)
	var hot *Hot
	if lease := keyLease(r); lease >= 1 && seed != (maphash.Seed{}) {
		hot = &Hot{seed: seed}
		k.lend = &keyLender{hot: hot, lease: lease}
	}
	ref, err := e.Spawn(name, k, nil)
	if err != nil {
		return nil, nil, err
	}
	return ref, hot, nil
}

// keyLease is how many tokens a hot key of rule r is lent at a time: as a
// bucket of its numbers lends (bucketLease). A rule that is not a
// bucket's lends nothing: 0.
func keyLease(r any) int64 {
	if b, ok := r.(bucketRule); ok {
		return bucketLease(b)
	}
	return 0
}

// keyLender is what a keyed bucket's actor keeps to lend to its hot keys.
type keyLender struct {
	hot   *Hot
	lease int64 // tokens a hot key is lent at a time; 0 lends nothing
	slots []hotSlot
	count [hotCandidates]struct {
		i     int32 // a key's entry
		n     int32 // 0 for a free counter
		since int64 // when the count began
	}
}

// hotSlot is one hot key: its entry, its credit, and what is lent to it.
type hotSlot struct {
	i      int32
	hash   uint64 // of its name, under the callers' seed
	credit *Credit
	lent   int64
	drew   bool // drew since the sweep last passed it
}

// frequent counts an ask at now for entry i the actor has answered, and
// reports whether i has now been asked for often enough to be hot.
func (l *keyLender) frequent(i int32, now int64) bool {
	free := -1
	for j := range l.count {
		c := &l.count[j]
		switch {
		case c.n > 0 && c.i == i:
			if now-c.since > hotSpan {
				c.n, c.since = 0, now // too slow to be hot: count afresh
			}
			c.n++
			if c.n >= hotAsks {
				c.n = 0
				return true
			}
			return false
		case c.n == 0 && free < 0:
			free = j
		}
	}
	if free >= 0 {
		l.count[free].i, l.count[free].n, l.count[free].since = i, 1, now
		return false
	}
	for j := range l.count {
		l.count[j].n--
	}
	return false
}

// forgetCounts drops the counts: entries have moved (compact).
func (l *keyLender) forgetCounts() {
	for j := range l.count {
		l.count[j].n = 0
	}
}

// forgetEntry drops entry i's count: its key is forgotten, and the entry
// may go to another.
func (l *keyLender) forgetEntry(i int32) {
	for j := range l.count {
		if l.count[j].i == i {
			l.count[j].n = 0
		}
	}
}

// reclaim takes back what is left of hot key i's credit, so that its
// books are exact while the actor answers for it, and returns how many
// tokens were drawn from it. What was drawn leaves the bucket at the
// clock's time now, no earlier than any draw (see the unkeyed lender's
// reclaim), and the key goes to the back of the taking order, as for any
// take.
func (k *keyed[S, R]) reclaim(i int32) (drawn int64) {
	e := k.keys.at(i)
	if e.hot == 0 {
		return 0
	}
	s := &k.lend.slots[e.hot-1]
	if s.lent == 0 {
		return 0
	}
	drawn = s.lent - s.credit.takeBack()
	s.lent = 0
	if drawn <= 0 {
		return 0
	}
	s.drew = true
	k.seen(k.alarm.clock.Now())
	// The reserve covers it: the books held the lent tokens when they
	// were lent, and have only gained since.
	k.rule.take(&e.state, k.now, float64(drawn))
	k.touch(i, k.now)
	return drawn
}

// lendTo lends hot key i a lease of what its bucket holds, unless callers
// wait on it: they come first, and credit would let Allows overtake them.
func (k *keyed[S, R]) lendTo(i int32) {
	e := k.keys.at(i)
	if e.hot == 0 || e.line >= 0 {
		return
	}
	s := &k.lend.slots[e.hot-1]
	if s.lent != 0 {
		return
	}
	s.lent = s.credit.lendUpTo(k.lend.lease, k.rule.left(&e.state, k.now))
}

// reclaimAll takes back every hot key's credit; lendAll lends to each
// again.
func (k *keyed[S, R]) reclaimAll() {
	if k.lend != nil {
		for _, s := range k.lend.slots {
			k.reclaim(s.i)
		}
	}
}

func (k *keyed[S, R]) lendAll() {
	if k.lend != nil {
		for _, s := range k.lend.slots {
			k.lendTo(s.i)
		}
	}
}

// promote makes key i hot. If hotMax keys are hot already, it takes
// their credit back and lets go of one that drew nothing from it (lent
// nothing, or nothing drawn since it was last lent to): a key gone quiet,
// or one its bucket keeps empty, which the sweep would not let go until
// the bucket is full again; the others are lent to again. If all drew, i
// waits for a place.
func (k *keyed[S, R]) promote(i int32) {
	l := k.lend
	if len(l.slots) >= hotMax {
		idle := int32(-1)
		for _, s := range l.slots {
			if k.reclaim(s.i) == 0 && idle < 0 {
				idle = s.i
			}
		}
		if idle >= 0 {
			k.demote(idle)
		}
		k.lendAll()
		if len(l.slots) >= hotMax {
			return
		}
	}
	e := k.keys.at(i)
	l.slots = append(l.slots, hotSlot{i: i, credit: new(Credit), hash: maphash.String(l.hot.seed, e.name)})
	e.hot = uint8(len(l.slots))
	k.publishHot(0)
}

// demote takes back hot key i's credit and makes it an ordinary key.
func (k *keyed[S, R]) demote(i int32) {
	k.reclaim(i)
	l := k.lend
	j := int(k.keys.at(i).hot) - 1
	gone := l.slots[j].credit
	last := len(l.slots) - 1
	if j != last {
		l.slots[j] = l.slots[last]
		k.keys.at(l.slots[j].i).hot = uint8(j + 1)
	}
	l.slots = l.slots[:last]
	k.keys.at(i).hot = 0
	k.publishHot(gone.Drawn())
}

// cool is the sweep's look at hot key i, found idle by its books: it
// takes back the credit and reports true, lending again, if the key drew
// from it since the sweep last looked, and puts off the next look by the
// sweep's slack; otherwise it demotes the key and reports false, for it to
// be forgotten as any other.
func (k *keyed[S, R]) cool(i int32) bool {
	s := &k.lend.slots[k.keys.at(i).hot-1]
	k.reclaim(i)
	if s.drew {
		s.drew = false
		e := k.keys.at(i)
		e.due = max(e.due, later(k.now, k.slack))
		if k.newest != i {
			k.unlink(i)
			k.link(i)
		}
		k.lendTo(i)
		return true
	}
	k.demote(i)
	return false
}

// publishHot shows callers the hot keys as they are now; retired is what
// was drawn from a credit just let go, for Hot.Drawn to keep counting.
func (k *keyed[S, R]) publishHot(retired int64) {
	l := k.lend
	keys := make([]hotKey, len(l.slots))
	for j, s := range l.slots {
		keys[j] = hotKey{hash: s.hash, name: k.keys.at(s.i).name, credit: s.credit}
	}
	h := l.hot
	h.changes.Add(1)
	h.retired.Add(retired)
	if len(keys) == 0 {
		h.set.Store(nil)
	} else {
		h.set.Store(&hotSet{keys: keys})
	}
	h.changes.Add(1)
}

// checkHot reports the first way the hot keys and their entries disagree:
// each slot's entry names it, no other entry does, and callers see the
// same keys.
func (k *keyed[S, R]) checkHot() error {
	if k.lend == nil {
		return nil
	}
	marked := 0
	for i := int32(0); i < k.keys.len(); i++ {
		if k.keys.at(i).hot != 0 {
			marked++
		}
	}
	if marked != len(k.lend.slots) {
		return fmt.Errorf("%d entries marked hot, %d hot keys", marked, len(k.lend.slots))
	}
	set := k.lend.hot.set.Load()
	for j, s := range k.lend.slots {
		if s.i < 0 || s.i >= k.keys.len() || k.keys.at(s.i).hot != uint8(j+1) {
			return fmt.Errorf("hot key %d: its entry %d does not name it", j, s.i)
		}
		if set == nil || len(set.keys) != len(k.lend.slots) || set.keys[j].name != k.keys.at(s.i).name || set.keys[j].credit != s.credit {
			return fmt.Errorf("hot key %d (%q): callers see another", j, k.keys.at(s.i).name)
		}
	}
	return nil
}
