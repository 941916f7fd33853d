package actors

import (
	"testing"
	"unsafe"
)

// rackOf is a Rack lending items, each taken from it and out with a
// caller.
func rackOf(items ...int) *Rack[int] {
	r := new(Rack[int])
	index := make(map[int]*racked[int], len(items))
	for _, it := range items {
		x := &racked[int]{item: it}
		x.state.Store(rackOut)
		index[it] = x
	}
	r.index.Store(&index)
	return r
}

// TestRackTakesOwnSlotsFirst: a goroutine that puts two resources back
// lays them in its home slot and the one above, and its Gets take them
// back newest first, before a resource another goroutine laid just below
// its home: it reads and writes its own slots, not its neighbour's.
func TestRackTakesOwnSlotsFirst(t *testing.T) {
	r := rackOf(1, 2, 9)
	var took [4]int
	var oks [4]bool
	var gave bool
	done := make(chan struct{})
	go func() { // a goroutine of its own: a small stack that does not move
		defer close(done)
		below := &r.slots[(home()-1)&(rackSlots-1)]
		neighbour := (*r.index.Load())[9]
		neighbour.state.Store(rackIn)
		below.r.Store(neighbour) // laid by a goroutine whose home is below
		gave = r.Give(1) && r.Give(2)
		for i := range took {
			took[i], oks[i] = r.Take()
		}
	}()
	<-done
	if !gave {
		t.Fatal("a resource taken from the rack was not laid back on it")
	}
	for i, want := range []int{2, 1, 9} {
		if !oks[i] || took[i] != want {
			t.Fatalf("Take %d = %d, %v; want %d", i, took[i], oks[i], want)
		}
	}
	if oks[3] {
		t.Fatal("took from a bare rack")
	}
}

// TestRackRecordOwnLine: a resource's record, written by every Get and Put
// of it, is at least a cache line long, so the words two records' callers
// write never lie on one line; so is a gate's stripe.
func TestRackRecordOwnLine(t *testing.T) {
	if n := unsafe.Sizeof(racked[*int]{}); n < 64 {
		t.Fatalf("a record of a pointer resource is %d bytes, under a cache line", n)
	}
	if n := unsafe.Sizeof(roomStripe{}); n < 64 {
		t.Fatalf("a gate's stripe is %d bytes, under a cache line", n)
	}
}
