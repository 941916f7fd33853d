package policy

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// poolModel is the pool's semantics written the plainest way: slices and
// linear scans, no reuse, no indices. The fuzz test checks the Pool answers
// exactly what it answers, call for call.
type poolModel struct {
	size, idleMax int
	keep, life    int64 // nanoseconds; 0 is no limit
	idle          []modelRes
	lent          []modelRes
	reserved      int
	closed        bool
	now           int64
	timed         bool
}

// modelRes is a resource the poolModel knows: its birth and when it was returned.
type modelRes struct {
	item         int
	birth, since int64
}

func newModel(l Limits) *poolModel {
	m := &poolModel{size: l.Size, idleMax: l.Idle, keep: int64(l.Keep), life: int64(l.Life)}
	m.size, m.idleMax = max(m.size, 0), max(m.idleMax, 0)
	m.keep, m.life = max(m.keep, 0), max(m.life, 0)
	return m
}

func (m *poolModel) clock(now int64) int64 {
	if m.timed && now < m.now {
		return m.now
	}
	m.now, m.timed = now, true
	return now
}

// reached says whether span has passed from then to now, in exact
// arithmetic: then + span overflowing means it never can.
func reached(now, then, span int64) bool {
	if span == 0 {
		return false
	}
	if then > math.MaxInt64-span {
		return false
	}
	return now >= then+span
}

func (m *poolModel) stale(h modelRes, now int64) bool {
	return reached(now, h.since, m.keep) || reached(now, h.birth, m.life)
}

func (m *poolModel) live() int { return len(m.idle) + len(m.lent) + m.reserved }

func (m *poolModel) find(list []modelRes, item int) int {
	return slices.IndexFunc(list, func(h modelRes) bool { return h.item == item })
}

func (m *poolModel) take(now int64) Taken[int] {
	now = m.clock(now)
	if m.closed {
		return Taken[int]{Verdict: Shed, Why: ReasonClosed}
	}
	if n := len(m.idle); n > 0 {
		h := m.idle[n-1]
		m.idle = m.idle[:n-1]
		if m.stale(h, now) {
			return Taken[int]{Verdict: Stale, Item: h.item}
		}
		m.lent = append(m.lent, h)
		return Taken[int]{Verdict: Ready, Item: h.item}
	}
	if m.size > 0 && m.live() >= m.size {
		return Taken[int]{Verdict: Wait}
	}
	m.reserved++
	return Taken[int]{Verdict: Make}
}

func (m *poolModel) made(item int, now int64) {
	now = m.clock(now)
	if m.find(m.idle, item) >= 0 || m.find(m.lent, item) >= 0 {
		return
	}
	if m.reserved > 0 {
		m.reserved--
	} else if m.closed || m.size > 0 && m.live() >= m.size {
		return
	}
	m.lent = append(m.lent, modelRes{item: item, birth: now})
}

// unmade reads the clock even when nothing is reserved, as the pool does:
// every time given to the pool counts as its latest.
func (m *poolModel) unmade(now int64) {
	m.clock(now)
	if m.reserved > 0 {
		m.reserved--
	}
}

func (m *poolModel) give(item int, now int64) bool {
	now = m.clock(now)
	if m.find(m.idle, item) >= 0 {
		return true
	}
	idleFull := m.idleMax > 0 && len(m.idle) >= m.idleMax
	if k := m.find(m.lent, item); k >= 0 {
		h := m.lent[k]
		m.lent = slices.Delete(m.lent, k, k+1)
		if m.closed || idleFull || reached(now, h.birth, m.life) {
			return false
		}
		h.since = now
		m.idle = append(m.idle, h)
		return true
	}
	if m.reserved == 0 {
		return false
	}
	m.reserved--
	if m.closed || idleFull {
		return false
	}
	m.idle = append(m.idle, modelRes{item: item, birth: now, since: now})
	return true
}

func (m *poolModel) drop(item int) {
	if k := m.find(m.lent, item); k >= 0 {
		m.lent = slices.Delete(m.lent, k, k+1)
	} else if k := m.find(m.idle, item); k >= 0 {
		m.idle = slices.Delete(m.idle, k, k+1)
	} else if m.reserved > 0 {
		m.reserved--
	}
}

func (m *poolModel) evict(now int64) []int {
	now = m.clock(now)
	var out []int
	var kept []modelRes
	for _, h := range m.idle {
		if m.stale(h, now) {
			out = append(out, h.item)
		} else {
			kept = append(kept, h)
		}
	}
	m.idle = kept
	return out
}

// heat has nothing to do without a shedder but read the clock.
func (m *poolModel) heat(now int64) { m.clock(now) }

func (m *poolModel) close() []int {
	m.closed = true
	var out []int
	for _, h := range m.idle {
		out = append(out, h.item)
	}
	m.idle = nil
	return out
}

// ledger watches a pool from outside, knowing nothing of its insides: which
// resources are on its books and which are lent. It fails the test when a
// resource is lent while lent, enters the books twice or leaves them twice,
// or when the counts stop adding up.
type ledger struct {
	t     *testing.T
	name  string
	p     *Pool[int]
	size  int
	idle  int
	books map[int]bool // on the books; true while lent
}

func newLedger(t *testing.T, name string, p *Pool[int], l Limits) *ledger {
	return &ledger{t: t, name: name, p: p, size: l.Size, idle: l.Idle, books: map[int]bool{}}
}

func (g *ledger) enter(step int, item int, lent bool) {
	if _, ok := g.books[item]; ok {
		g.t.Fatalf("%s step %d: %d entered the books twice", g.name, step, item)
	}
	g.books[item] = lent
}

func (g *ledger) leave(step int, item int, what string) {
	if _, ok := g.books[item]; !ok {
		g.t.Fatalf("%s step %d: %s handed back %d, which is not on the books", g.name, step, what, item)
	}
	delete(g.books, item)
}

// take records what Take answered.
func (g *ledger) take(step int, got Taken[int]) {
	switch got.Verdict {
	case Ready:
		lent, ok := g.books[got.Item]
		if !ok || lent {
			g.t.Fatalf("%s step %d: Ready %d, which is lent=%v on the books=%v", g.name, step, got.Item, lent, ok)
		}
		g.books[got.Item] = true
	case Stale:
		if g.books[got.Item] {
			g.t.Fatalf("%s step %d: Stale %d, which is lent", g.name, step, got.Item)
		}
		g.leave(step, got.Item, "Stale")
	}
}

// made records a Made: the resource entered if the pool now lends it.
func (g *ledger) made(step int, item int, before bool) {
	if !before && g.p.Lent(item) {
		g.enter(step, item, true)
	}
}

// give records a Give of item, which was or was not on the books before.
func (g *ledger) give(step int, item int, kept bool) {
	lent, on := g.books[item]
	switch {
	case on && lent && kept:
		g.books[item] = false
	case on && lent:
		g.leave(step, item, "Give")
	case on && !kept:
		g.t.Fatalf("%s step %d: Give of idle %d answered false", g.name, step, item)
	case !on && kept:
		g.enter(step, item, false)
	}
}

func (g *ledger) drop(step int, item int) {
	if _, on := g.books[item]; on {
		g.leave(step, item, "Drop")
	}
}

func (g *ledger) out(step int, items []int, what string) {
	for _, it := range items {
		if g.books[it] {
			g.t.Fatalf("%s step %d: %s handed back %d, which is lent", g.name, step, what, it)
		}
		g.leave(step, it, what)
	}
}

// check asserts the invariants that hold under any sequence of calls.
func (g *ledger) check(step int) {
	p := g.p
	if g.size > 0 && p.Live() > g.size {
		g.t.Fatalf("%s step %d: Live %d > Size %d", g.name, step, p.Live(), g.size)
	}
	if g.idle > 0 && p.Idle() > g.idle {
		g.t.Fatalf("%s step %d: Idle %d > %d", g.name, step, p.Idle(), g.idle)
	}
	if p.Live() != p.Idle()+p.Busy() {
		g.t.Fatalf("%s step %d: Live %d != Idle %d + Busy %d", g.name, step, p.Live(), p.Idle(), p.Busy())
	}
	if p.Idle() < 0 || p.Busy() < 0 || p.Reserved() < 0 || p.Reserved() > p.Busy() {
		g.t.Fatalf("%s step %d: counts out of range: idle %d busy %d reserved %d", g.name, step, p.Idle(), p.Busy(), p.Reserved())
	}
	lent := 0
	for item, l := range g.books {
		if l != p.Lent(item) {
			g.t.Fatalf("%s step %d: Lent(%d) = %v, the ledger says %v", g.name, step, item, p.Lent(item), l)
		}
		if l {
			lent++
		}
	}
	if len(g.books) != p.Live()-p.Reserved() || lent != p.Busy()-p.Reserved() {
		g.t.Fatalf("%s step %d: %d on the books (%d lent), pool has live %d busy %d reserved %d",
			g.name, step, len(g.books), lent, p.Live(), p.Busy(), p.Reserved())
	}
}

// driven is one pool under test with its ledger.
type driven struct {
	p *Pool[int]
	g *ledger
}

// pickItem chooses the item an operation names: mostly one of a few, so
// items come back, and with the top bit set one the ledger says is lent,
// so proper Gives and Drops happen too.
func pickItem(arg byte, g *ledger) int {
	if arg&0x80 != 0 {
		lent := []int{}
		for it, l := range g.books {
			if l {
				lent = append(lent, it)
			}
		}
		if len(lent) > 0 {
			slices.Sort(lent)
			return lent[int(arg&0x7f)%len(lent)]
		}
	}
	return int(arg%12) + 1
}

// FuzzPool drives random call sequences (Take, Made, Unmade, Give, Drop,
// Evict, Close, time steps forwards and back, far jumps, unknown items)
// against three pools at once:
//   - one with Ward{}, whose every answer must equal the poolModel's, which has
//     no ward at all: so Ward{} behaves exactly as no ward;
//   - one whose ward parts are all present but inert (a zero Backoff, a
//     bucket too deep to empty, a shedder whose threshold no heat reaches,
//     a Draw), whose
//     answers must equal the first's;
//   - one with a live ward (breaker, bucket, backoff, shedder), whose
//     answers may differ but which must keep every invariant.
//
// For each, a ledger outside the pool checks Live <= Size, Idle within its
// limit, Live == Idle + Busy, nothing lent to two holders, every resource
// leaving the books exactly once, and at the end that closing and handing
// everything back leaves nothing live.
func FuzzPool(f *testing.F) {
	f.Add([]byte{3, 2, 2, 4}, []byte{0, 0, 1, 1, 0, 0, 1, 2, 3, 0x80, 3, 0x80, 0, 0, 6, 3, 0, 0, 5, 0, 7, 0})
	f.Add([]byte{0, 0, 0, 0}, []byte{0, 0, 1, 1, 0, 0, 1, 1, 3, 1, 3, 1, 4, 1, 3, 5, 2, 0, 2, 0})
	f.Add([]byte{2, 1, 1, 3}, []byte{0, 0, 0, 0, 0, 0, 1, 4, 1, 5, 3, 0x80, 3, 0x80, 6, 1, 0, 0, 6, 1, 5, 0, 0, 0})
	f.Add([]byte{6, 6, 7, 7}, []byte{0, 0, 2, 0, 0, 0, 1, 9, 6, 0xfe, 3, 9, 6, 2, 0, 0, 8, 1, 0, 0, 8, 2, 0, 0})
	f.Add([]byte{4, 3, 3, 0}, []byte{0, 0, 0, 0, 4, 3, 3, 3, 1, 3, 1, 3, 4, 0x80, 7, 0, 3, 0x80, 0, 0, 1, 6, 2, 0})
	f.Add([]byte{1, 2, 4, 5}, []byte{0, 0, 1, 2, 3, 2, 3, 2, 0, 0, 0, 0, 6, 5, 0, 0, 6, 130, 0, 0, 5, 0, 8, 0, 5, 0})
	f.Add([]byte{5, 0, 2, 6}, []byte{0, 0, 0, 0, 0, 0, 2, 0, 2, 0, 0, 0, 1, 1, 1, 2, 3, 0x81, 4, 0x80, 6, 3, 0, 0, 6, 3, 0, 0})
	// An Unmade, or a heat report, at the far future is a time
	// given like any other, so an Evict back at the far past reads as
	// standing still there and retires what sat since time 0.
	f.Add([]byte("A020"), []byte{0, 0, 3, 1, 8, 2, 2, 0, 8, 0, 5, 0})
	f.Add([]byte("A020"), []byte{0, 0, 3, 1, 8, 2, 7, 1, 8, 0, 5, 0})
	f.Fuzz(func(t *testing.T, knobs []byte, ops []byte) {
		if len(knobs) < 4 {
			return
		}
		// Size and Idle from -1 to 5, Keep and Life from -1 to 6 seconds:
		// negatives are the clamp, zero is no limit.
		l := Limits{
			Size: int(knobs[0]%7) - 1,
			Idle: int(knobs[1]%7) - 1,
			Keep: time.Duration(int(knobs[2]%8)-1) * time.Second,
			Life: time.Duration(int(knobs[3]%8)-1) * time.Second,
		}
		clamped := Limits{Size: max(l.Size, 0), Idle: max(l.Idle, 0)}
		m := newModel(l)

		draws := 0.0
		inert := Ward{
			Backoff: Backoff{},
			Bucket:  Rate{PerSecond: 1e12, Burst: 1e12},
			Shedder: Overload{Hot: 2, Window: time.Second}, // hotter than any heat reported
			Draw:    func() float64 { draws += 0.3; return math.Mod(draws, 1) },
		}
		active := Ward{
			Breaker: Throttle{K: 2, Period: 10 * time.Second},
			Bucket:  Rate{PerSecond: 2, Burst: 3},
			Backoff: Backoff{Base: time.Second, Factor: 2, Cap: 8 * time.Second, Jitter: Equal},
			Shedder: Overload{Hot: 0.5, Window: 5 * time.Second},
			Draw:    func() float64 { return 0.5 },
		}
		pools := []*driven{}
		for _, w := range []struct {
			name string
			ward Ward
		}{{"Ward{}", Ward{}}, {"inert ward", inert}, {"live ward", active}} {
			p := NewPool[int](l, w.ward)
			pools = append(pools, &driven{p: p, g: newLedger(t, w.name, p, clamped)})
		}

		now := int64(0)
		for s := 0; s+1 < len(ops) && s < 2000; s += 2 {
			op, arg := ops[s]%9, ops[s+1]
			step := s / 2
			switch op {
			case 0: // Take
				want := m.take(now)
				for k, d := range pools {
					got := d.p.Take(now)
					d.g.take(step, got)
					if k < 2 && got != want {
						t.Fatalf("%s step %d: Take(%d) = %+v, poolModel says %+v", d.g.name, step, now, got, want)
					}
					if k == 2 && got.Verdict == Later && got.After <= 0 {
						t.Fatalf("%s step %d: Later with After %v", d.g.name, step, got.After)
					}
				}
			case 1: // Made
				item := pickItem(arg, pools[0].g)
				m.made(item, now)
				for _, d := range pools {
					before := d.p.Lent(item)
					d.p.Made(item, now)
					d.g.made(step, item, before)
				}
			case 2: // Unmade
				m.unmade(now)
				for _, d := range pools {
					d.p.Unmade(now)
				}
			case 3: // Give
				item := pickItem(arg, pools[0].g)
				want := m.give(item, now)
				for k, d := range pools {
					got := d.p.Give(item, now)
					d.g.give(step, item, got)
					if k < 2 && got != want {
						t.Fatalf("%s step %d: Give(%d, %d) = %v, poolModel says %v", d.g.name, step, item, now, got, want)
					}
				}
			case 4: // Drop
				item := pickItem(arg, pools[0].g)
				m.drop(item)
				for _, d := range pools {
					d.p.Drop(item)
					d.g.drop(step, item)
				}
			case 5: // Evict
				want := m.evict(now)
				for k, d := range pools {
					got := d.p.Evict(now)
					d.g.out(step, got, "Evict")
					if k < 2 && !slices.Equal(got, want) {
						t.Fatalf("%s step %d: Evict(%d) = %v, poolModel says %v", d.g.name, step, now, got, want)
					}
				}
			case 6: // time moves, a signed number of half-seconds, never wrapping round
				now = addClamped(now, int64(int8(arg))*int64(time.Second/2))
			case 7: // Close, now and then; otherwise a heat report
				if arg%8 == 0 {
					want := m.close()
					for k, d := range pools {
						got := d.p.Close()
						d.g.out(step, got, "Close")
						if k < 2 && !slices.Equal(got, want) {
							t.Fatalf("%s step %d: Close() = %v, poolModel says %v", d.g.name, step, got, want)
						}
					}
				} else {
					m.heat(now)
					for _, d := range pools {
						d.p.Heat(float64(arg%4)/3, now)
					}
				}
			case 8: // a far jump of the clock
				now = [...]int64{math.MinInt64, -1, math.MaxInt64 - 1, math.MaxInt64}[arg%4]
			}
			for _, d := range pools {
				d.g.check(step)
			}
			for _, d := range pools[:2] {
				if d.p.Live() != m.live() || d.p.Idle() != len(m.idle) || d.p.Reserved() != m.reserved {
					t.Fatalf("%s step %d: live %d idle %d reserved %d, poolModel says %d %d %d", d.g.name, step,
						d.p.Live(), d.p.Idle(), d.p.Reserved(), m.live(), len(m.idle), m.reserved)
				}
			}
		}

		// Shutting down loses nothing: Close hands back the idle, every
		// lent one handed back is refused (so closed), every reservation
		// released, and then nothing is live.
		for _, d := range pools {
			end := fmt.Sprintf("%s at the end", d.g.name)
			d.g.out(-1, d.p.Close(), "Close")
			lent := []int{}
			for it, l := range d.g.books {
				if l {
					lent = append(lent, it)
				}
			}
			for _, it := range lent {
				if d.p.Give(it, now) {
					t.Fatalf("%s: Give(%d) after Close kept it", end, it)
				}
				d.g.give(-1, it, false)
			}
			for d.p.Reserved() > 0 {
				d.p.Unmade(now)
			}
			d.g.check(-1)
			if d.p.Live() != 0 || len(d.g.books) != 0 {
				t.Fatalf("%s: Live %d with %d on the books", end, d.p.Live(), len(d.g.books))
			}
			if got := d.p.Take(now); got.Verdict != Shed {
				t.Fatalf("%s: Take after Close = %v, want Shed", end, got.Verdict)
			}
		}
	})
}
