package actors

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/moonpool-go/moonpool/engine"
)

func enter(ref *engine.Ref) Permit {
	m := &Enter{Reply: make(chan Permit, 1)}
	ref.Send(m)
	return <-m.Reply
}

func TestGateSteps(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnGate(r.e, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		leaves int     // Leaves sent first
		ok     bool    // then an Enter
		inside int     // its Held
		room   float64 // its Left, and then Left's
	}{
		{0, true, 1, 1},
		{0, true, 2, 0},
		{0, false, 2, 0}, // full: refused at once, never queued
		{1, true, 2, 0},
		{3, true, 1, 1}, // two real Leaves and one too many, which changes nothing
		{0, true, 2, 0}, // so only two are let in, not three
		{0, false, 2, 0},
	}
	for i, s := range steps {
		for range s.leaves {
			ref.Send(&Leave{})
		}
		p := enter(ref)
		if p.OK != s.ok || p.Held != s.inside || p.Left != s.room || p.After != 0 || p.Err != nil {
			t.Fatalf("step %d: Enter = %+v, want OK %v with %v inside and room for %v", i, p, s.ok, s.inside, s.room)
		}
		if got := left(ref, "", 0); got != s.room {
			t.Fatalf("step %d: Left = %v, want %v", i, got, s.room)
		}
	}
}

func TestGateNoLimit(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnGate(r.e, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if p := enter(ref); !p.OK || p.Held != i+1 || !math.IsInf(p.Left, 1) {
			t.Fatalf("enter %d: %+v", i, p)
		}
	}
	ref.Send(Leave{})
	if got := left(ref, "", 0); !math.IsInf(got, 1) {
		t.Fatalf("Left with no limit = %v, want +Inf", got)
	}
	if _, err := SpawnGate(nil, "", 1); err == nil {
		t.Fatal("SpawnGate(nil engine): no error")
	}
	// A limiter's request sent to a gate is refused, not left hanging.
	a := &Allow{N: 1, Reply: make(chan Permit, 1)}
	ref.Send(a)
	if p := answer(a); !errors.Is(p.Err, ErrStopped) {
		t.Fatalf("Allow to a gate: %+v", p)
	}
}

// TestGateHammer: 64 goroutines entering and leaving as fast as they can
// never have more than the limit inside, by the gate's count or by their
// own, and when they are done the gate is empty.
func TestGateHammer(t *testing.T) {
	const limit, callers, rounds = 5, 64, 300
	r := newHarness(t)
	ref, err := SpawnGate(r.e, "", limit)
	if err != nil {
		t.Fatal(err)
	}
	var inside, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			m := &Enter{Reply: make(chan Permit, 1)}
			for range rounds {
				ref.Send(m)
				p := <-m.Reply
				if !p.OK {
					continue
				}
				if p.Held > limit {
					t.Errorf("gate says %v inside, limit %d", p.Held, limit)
				}
				n := inside.Add(1)
				for {
					old := most.Load()
					if n <= old || most.CompareAndSwap(old, n) {
						break
					}
				}
				admitted.Add(1)
				inside.Add(-1)
				ref.Send(&Leave{})
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Fatalf("%d inside at once, limit %d", m, limit)
	}
	if admitted.Load() == 0 {
		t.Fatal("nobody got in")
	}
	if got := left(ref, "", 0); got != limit {
		t.Fatalf("room left after everyone left = %v, want %d", got, limit)
	}
}
