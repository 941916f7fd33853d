package actors

import (
	"testing"
	"unsafe"
)

// rackOf is a Rack lending items, each taken from it and out with a
// caller. What it hands home goes to back, in order.
func rackOf(back *[]int, items ...int) *Rack[int] {
	r := &Rack[int]{back: func(it int) { *back = append(*back, it) }}
	index := make(map[int]*racked[int], len(items))
	for _, it := range items {
		x := &racked[int]{item: it}
		x.state.Store(rackOut)
		index[it] = x
	}
	r.index.Store(&index)
	return r
}

// lay puts item's record in slot i, as a Put of another goroutine would.
func lay(r *Rack[int], i, item int) {
	x := (*r.index.Load())[item]
	x.state.Store(rackIn)
	r.slots[i&(rackSlots-1)].r.Store(x)
}

// rackHolds lists the item in each slot, -1 where a slot is bare.
func rackHolds(r *Rack[int]) [rackSlots]int {
	var held [rackSlots]int
	for i := range r.slots {
		held[i] = -1
		if x := r.slots[i].r.Load(); x != nil {
			held[i] = x.item
		}
	}
	return held
}

// TestRackPutGetOwnSlot: a goroutine whose home is hemmed in by other
// goroutines' resources, above it and below, puts one back and takes back
// that one, from its home: every other slot holds what it held.
func TestRackPutGetOwnSlot(t *testing.T) {
	for _, h := range []int{0, 7, rackSlots - 3, rackSlots - 1} {
		var back []int
		r := rackOf(&back, 1, 3, 4, 5, 6, 7, 8)
		for k, item := range []int{3, 4, 5, 6, 7} {
			lay(r, h+1+k, item)
		}
		lay(r, h-1, 8)
		before := rackHolds(r)
		for round := range 3 {
			if !r.Give(1, h) {
				t.Fatalf("home %d, round %d: the rack refused a resource taken from it", h, round)
			}
			if got, ok := r.Take(h); !ok || got != 1 {
				t.Fatalf("home %d, round %d: Take = %d, %v; want the resource just put back, 1", h, round, got, ok)
			}
			if after := rackHolds(r); after != before {
				t.Fatalf("home %d, round %d: the rack went from\n%v to\n%v; want only the home slot touched", h, round, before, after)
			}
		}
		if len(back) != 0 {
			t.Fatalf("home %d: handed %v home", h, back)
		}
	}
}

// TestRackPutMovesOlderUp: a Put that finds another resource at home lays
// its own there and moves the other up to the first free slot, where the
// next Get that looks round finds it; a Get takes the newest first, and
// a Get of any number finds the home it names, wrapped round the rack.
func TestRackPutMovesOlderUp(t *testing.T) {
	var back []int
	r := rackOf(&back, 1, 2, 3, 9)
	h := rackSlots - 2
	lay(r, h+1, 3) // the slot above home is taken
	lay(r, h-1, 9) // and so is the one below
	if !r.Give(1, h) || !r.Give(2, h+rackSlots) {
		t.Fatal("the rack refused a resource taken from it")
	}
	held := rackHolds(r)
	if held[h] != 2 || held[(h+2)&(rackSlots-1)] != 1 {
		t.Fatalf("home holds %d and two up holds %d; want 2 and 1", held[h], held[(h+2)&(rackSlots-1)])
	}
	for i, want := range []int{2, 3, 1, 9} {
		if got, ok := r.Take(h - rackSlots); !ok || got != want {
			t.Fatalf("Take %d = %d, %v; want %d", i, got, ok, want)
		}
	}
	if got, ok := r.Take(h); ok {
		t.Fatalf("took %d from a bare rack", got)
	}
	if len(back) != 0 {
		t.Fatalf("handed %v home", back)
	}
}

// TestRackFullHandsHome: a Put onto a rack with no free slot (more
// records than a pool ever lends to its rack) lays its own at home and
// hands the one it found there home, through the actor: nothing is lost.
func TestRackFullHandsHome(t *testing.T) {
	var back []int
	items := make([]int, rackSlots+1)
	for i := range items {
		items[i] = i + 100
	}
	r := rackOf(&back, items...)
	for i := range rackSlots {
		lay(r, i, 100+i)
	}
	if !r.Give(100+rackSlots, 5) {
		t.Fatal("the rack refused a resource taken from it")
	}
	if len(back) != 1 || back[0] != 105 {
		t.Fatalf("handed %v home; want [105], the one that lay at home", back)
	}
	if got, ok := r.Take(5); !ok || got != 100+rackSlots {
		t.Fatalf("Take = %d, %v; want %d", got, ok, 100+rackSlots)
	}
}

// TestRackHomeSpreadsStacks: goroutines whose stacks lie side by side, as
// the runtime hands them out, get homes of their own: sixteen of them with
// stacks of 2 KiB (where goroutines start) up to 16 KiB, eight with stacks
// of 32 KiB. Every frame in the top 2 KiB of a stack has one home, so a
// Get and a Put called from one function share it.
func TestRackHomeSpreadsStacks(t *testing.T) {
	for _, c := range []struct {
		size       uintptr
		goroutines uintptr
	}{{2 << 10, 16}, {4 << 10, 16}, {8 << 10, 16}, {16 << 10, 16}, {32 << 10, 8}} {
		for base := uintptr(0xc000000000); base < 0xc000000000+4096*c.size; base += 37 * c.size {
			var seen [rackSlots]int
			for g := range c.goroutines {
				top := base + (g+1)*c.size
				h := homeOf(top - 1)
				if other := homeOf(top - 2048); other != h {
					t.Fatalf("stack %#x of %d bytes: two frames in its top 2 KiB have homes %d and %d", top-c.size, c.size, h, other)
				}
				if seen[h] != 0 {
					t.Fatalf("stacks of %d bytes from %#x: goroutines %d and %d share home %d", c.size, base, seen[h]-1, g, h)
				}
				seen[h] = int(g) + 1
			}
		}
	}
}

// TestRackRecordOwnLine: a resource's record, written by every Get and Put
// of it, is at least a cache line long, so the words two records' callers
// write never lie on one line; so is a slot, and a gate's stripe.
func TestRackRecordOwnLine(t *testing.T) {
	if n := unsafe.Sizeof(racked[*int]{}); n < 64 {
		t.Fatalf("a record of a pointer resource is %d bytes, under a cache line", n)
	}
	if n := unsafe.Sizeof(rackSlot[*int]{}); n < 64 {
		t.Fatalf("a rack slot is %d bytes, under a cache line", n)
	}
	if n := unsafe.Sizeof(roomStripe{}); n < 64 {
		t.Fatalf("a gate's stripe is %d bytes, under a cache line", n)
	}
}
