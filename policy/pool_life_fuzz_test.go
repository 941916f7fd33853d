package policy

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// lifeBooks is what a FuzzPoolLifecycle run knows of its pool from
// outside: each resource on the books and where it is, and the makes
// granted and not yet answered.
type lifeBooks struct {
	t     *testing.T
	p     *Pool[int]
	where map[int]string // "idle", "lent" (to a caller) or "checking" (lent by Due)
	makes int            // Take's Makes not yet Made or Unmade
	fills int            // Fill's Makes not yet filled or Unmade
	next  int
}

// leave takes items off the books, each of which must be idle.
func (b *lifeBooks) leave(step int, what string, items []int) {
	for _, it := range items {
		if b.where[it] != "idle" {
			b.t.Fatalf("step %d: %s handed back %d, which is %q", step, what, it, b.where[it])
		}
		delete(b.where, it)
	}
}

// pick is one of the items at where, chosen by arg; ok false if none.
func (b *lifeBooks) pick(where string, arg byte) (int, bool) {
	var list []int
	for it, w := range b.where {
		if w == where {
			list = append(list, it)
		}
	}
	if len(list) == 0 {
		return 0, false
	}
	slices.Sort(list)
	return list[int(arg)%len(list)], true
}

func (b *lifeBooks) count(where string) int {
	n := 0
	for _, w := range b.where {
		if w == where {
			n++
		}
	}
	return n
}

// check asserts what holds after any call.
func (b *lifeBooks) check(step int) {
	p := b.p
	l := p.Limits()
	if p.Live() != p.Idle()+p.Busy() || p.Reserved() != b.makes+b.fills {
		b.t.Fatalf("step %d: live %d idle %d busy %d reserved %d; makes %d fills %d", step, p.Live(), p.Idle(), p.Busy(), p.Reserved(), b.makes, b.fills)
	}
	if p.Idle() != b.count("idle") || p.Busy()-p.Reserved() != b.count("lent")+b.count("checking") {
		b.t.Fatalf("step %d: pool idle %d lent %d; the books %v", step, p.Idle(), p.Busy()-p.Reserved(), b.where)
	}
	if l.Idle > 0 && p.Idle() > l.Idle {
		b.t.Fatalf("step %d: idle %d over %d", step, p.Idle(), l.Idle)
	}
	if l.Size > 0 && p.Live() > l.Size && p.Idle() > 0 {
		b.t.Fatalf("step %d: %d idle while %d live are over Size %d", step, p.Idle(), p.Live(), l.Size)
	}
	if p.Outdated() < 0 || p.Outdated() > b.count("lent")+b.count("checking") {
		b.t.Fatalf("step %d: outdated %d", step, p.Outdated())
	}
}

// FuzzPoolLifecycle drives what SetLimits, Reset, LifeJitter, Fill, Due and
// Checked brought, among Take, Made, Unmade, Give, Drop and Evict, with a
// ward and the clock moving, and checks what must hold in any order: no
// resource lent to two holders or lent while being checked, every resource
// leaving the books exactly once and only from where it may (idle, for
// Stale, Evict, SetLimits and Reset), the counts adding up, Idle within
// its limit, nothing idle while a shrink leaves more live than Size, and,
// once everything is handed back and the pool closed, nothing left.
func FuzzPoolLifecycle(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 0, 1, 0, 3, 0x80, 6, 0x09, 3, 0x80, 7, 0, 8, 0, 9, 0, 12, 40, 10, 0, 11, 1, 5, 0})
	f.Add([]byte{8, 0, 9, 0, 8, 0, 9, 0, 12, 20, 10, 0, 0, 0, 11, 0, 6, 1, 7, 0, 11, 1, 12, 250, 5, 0})
	f.Add([]byte{0, 0, 0, 0, 1, 0, 1, 0, 6, 0x01, 3, 0, 3, 0, 0, 0, 6, 0x24, 0, 0, 1, 0, 2, 0})
	f.Add([]byte{0, 0, 1, 0, 3, 0, 12, 20, 10, 0, 4, 2, 3, 1, 0, 0, 11, 1}) // a stray Drop and Give of one under check
	f.Fuzz(func(t *testing.T, ops []byte) {
		rng := rand.New(rand.NewPCG(1, 2))
		p := NewPool[int](Limits{Size: 4, Idle: 3, Keep: 5 * time.Second, Life: 20 * time.Second, LifeJitter: 5 * time.Second, MinIdle: 2},
			Ward{Draw: rng.Float64, Bucket: Rate{PerSecond: 2, Burst: 2}})
		b := &lifeBooks{t: t, p: p, where: map[int]string{}}
		now := int64(time.Hour)
		for i := 0; i+1 < len(ops); i += 2 {
			step, arg := i/2, ops[i+1]
			switch ops[i] % 13 {
			case 0:
				switch got := p.Take(now); got.Verdict {
				case Ready:
					if b.where[got.Item] != "idle" {
						t.Fatalf("step %d: lent %d, which is %q", step, got.Item, b.where[got.Item])
					}
					b.where[got.Item] = "lent"
				case Stale:
					b.leave(step, "Stale", []int{got.Item})
				case Make:
					b.makes++
				}
			case 1:
				if b.makes > 0 {
					b.makes--
					b.next++
					p.Made(b.next, now)
					b.where[b.next] = "lent"
				}
			case 2:
				if b.makes > 0 {
					b.makes--
					p.Unmade(now)
				}
			case 3:
				if it, ok := b.pick("checking", arg); ok && arg&1 == 1 {
					// A stray Give of one under check: its last holder's
					// second Put. It changes nothing.
					if !p.Give(it, now) {
						t.Fatalf("step %d: Give of %d under check refused: the caller would close it", step, it)
					}
				} else if it, ok := b.pick("lent", arg); ok {
					if p.Give(it, now) {
						b.where[it] = "idle"
					} else {
						delete(b.where, it)
					}
				}
			case 4:
				// Broken in a caller's hands, found dead idle, or dropped by
				// mistake while a check holds it (which changes nothing).
				w := [...]string{"lent", "idle", "checking"}[arg%3]
				if it, ok := b.pick(w, arg/3); ok {
					p.Drop(it)
					if w != "checking" {
						delete(b.where, it)
					}
				}
			case 5:
				b.leave(step, "Evict", p.Evict(now))
			case 6:
				l := Limits{Size: int(arg % 6), Idle: int(arg>>3) % 5, Keep: 5 * time.Second, Life: 20 * time.Second, MinIdle: int(arg>>6) % 3}
				b.leave(step, "SetLimits", p.SetLimits(l, nil))
			case 7:
				b.leave(step, "Reset", p.Reset(nil))
			case 8:
				if p.Fill(now, b.fills).Verdict == Make {
					b.fills++
				}
			case 9:
				if b.fills > 0 {
					b.fills--
					b.next++
					if p.Give(b.next, now) {
						b.where[b.next] = "idle"
					}
				}
			case 10:
				if it, ok := p.Due(now, time.Second); ok {
					if b.where[it] != "idle" {
						t.Fatalf("step %d: Due lent %d, which is %q", step, it, b.where[it])
					}
					b.where[it] = "checking"
				}
			case 11:
				if it, ok := b.pick("checking", arg); ok {
					if p.Checked(it, arg&1 == 1, now) {
						b.where[it] = "idle"
					} else {
						delete(b.where, it)
					}
				}
			case 12:
				now += int64(arg) * int64(100*time.Millisecond)
			}
			b.check(step)
		}
		// Everything home, then Close: nothing may be left.
		for it, w := range b.where {
			switch w {
			case "lent":
				if !p.Give(it, now) {
					delete(b.where, it)
				} else {
					b.where[it] = "idle"
				}
			case "checking":
				if !p.Checked(it, true, now) {
					delete(b.where, it)
				} else {
					b.where[it] = "idle"
				}
			}
		}
		for ; b.makes+b.fills > 0; b.makes-- {
			p.Unmade(now)
		}
		b.fills = 0
		b.leave(-1, "Close", p.Close())
		if len(b.where) != 0 || p.Live() != 0 {
			t.Fatalf("after Close: %v on the books, live %d", b.where, p.Live())
		}
	})
}
