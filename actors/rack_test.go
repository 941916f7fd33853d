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

// TestRackTakesHomeSlotFirst: a goroutine that puts two resources back
// lays the first in its home slot, and its next Get takes that one, from
// the slot no goroutine with another home writes, before anything in the
// slots round it.
func TestRackTakesHomeSlotFirst(t *testing.T) {
	r := rackOf(1, 2)
	var took [3]int
	var oks [3]bool
	var gave bool
	done := make(chan struct{})
	go func() { // a goroutine of its own: a small stack that does not move
		defer close(done)
		gave = r.Give(1) && r.Give(2)
		for i := range took {
			took[i], oks[i] = r.Take()
		}
	}()
	<-done
	if !gave {
		t.Fatal("a resource taken from the rack was not laid back on it")
	}
	if !oks[0] || took[0] != 1 {
		t.Fatalf("Take = %d, %v; want 1, the resource in the home slot", took[0], oks[0])
	}
	if !oks[1] || took[1] != 2 {
		t.Fatalf("second Take = %d, %v; want 2", took[1], oks[1])
	}
	if oks[2] {
		t.Fatal("took from a bare rack")
	}
}

// TestRackRecordOwnLine: a resource's record, written by every Get and Put
// of it, fills a cache line, so two resources in use on two processors
// never share one.
func TestRackRecordOwnLine(t *testing.T) {
	if n := unsafe.Sizeof(racked[*int]{}); n < 64 {
		t.Fatalf("a record of a pointer resource is %d bytes, under a cache line", n)
	}
	if n := unsafe.Sizeof(roomStripe{}); n < 64 {
		t.Fatalf("a gate's stripe is %d bytes, under a cache line", n)
	}
}
