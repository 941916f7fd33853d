package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// gateEngine is an engine on a virtual clock, shut down with the test.
func gateEngine(t *testing.T) *engine.Engine {
	t.Helper()
	eng := engine.New(engine.WithClock(vclock.NewVirtual()))
	t.Cleanup(func() {
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return eng
}

// TestGateNeverPastLimit: many goroutines entering and leaving at once are
// never more than the limit inside, the gate fills to exactly the limit,
// and it is empty once they are done.
func TestGateNeverPastLimit(t *testing.T) {
	const limit, goroutines, rounds = 5, 64, 200
	g, err := client.NewGate(gateEngine(t), limit)
	if err != nil {
		t.Fatal(err)
	}
	var inside, most, entered, refused atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if !g.Enter() {
					refused.Add(1)
					continue
				}
				entered.Add(1)
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				inside.Add(-1)
				g.Leave()
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Fatalf("%d inside at once, limit %d", m, limit)
	}
	if entered.Load()+refused.Load() != goroutines*rounds || entered.Load() == 0 {
		t.Fatalf("entered %d, refused %d of %d", entered.Load(), refused.Load(), goroutines*rounds)
	}
	if h := g.Held(); h != 0 {
		t.Fatalf("Held = %d after every Enter was matched by a Leave", h)
	}
	for i := range limit {
		if !g.Enter() {
			t.Fatalf("step %d: Enter refused below the limit", i)
		}
	}
	if g.Enter() {
		t.Fatal("Enter allowed past the limit")
	}
	if h := g.Held(); h != limit {
		t.Fatalf("Held = %d, want %d", h, limit)
	}
}

// TestGateLeaveNeverBelowZero: a Leave with nobody inside changes nothing,
// so it cannot let an extra caller in later.
func TestGateLeaveNeverBelowZero(t *testing.T) {
	g, err := client.NewGate(gateEngine(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		op   string
		ok   bool
		held int
	}{
		{"leave", false, 0},
		{"leave", false, 0},
		{"enter", true, 1},
		{"enter", true, 2},
		{"enter", false, 2}, // the unmatched Leaves bought no room
		{"leave", false, 1},
		{"leave", false, 0},
		{"leave", false, 0},
		{"enter", true, 1},
	}
	for i, s := range steps {
		switch s.op {
		case "enter":
			if got := g.Enter(); got != s.ok {
				t.Fatalf("step %d: Enter = %v, want %v", i, got, s.ok)
			}
		case "leave":
			g.Leave()
		}
		if got := g.Held(); got != s.held {
			t.Fatalf("step %d: Held after %s = %d, want %d", i, s.op, got, s.held)
		}
	}
}

// TestGateNoLimit: a limit <= 0 only counts; Close shuts the gate.
func TestGateNoLimit(t *testing.T) {
	g, err := client.NewGate(gateEngine(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if !g.Enter() {
			t.Fatalf("Enter %d refused with no limit", i)
		}
	}
	if h := g.Held(); h != 1000 {
		t.Fatalf("Held = %d, want 1000", h)
	}
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Leave() // after Close: nothing, and no panic
	if g.Enter() || g.Held() != 0 {
		t.Fatal("a closed gate still lets callers in")
	}
	if err := g.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// TestGateAllocs: Enter and Leave allocate nothing.
func TestGateAllocs(t *testing.T) {
	g, err := client.NewGate(gateEngine(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(1000, func() {
		if g.Enter() {
			g.Leave()
		}
	}); a != 0 {
		t.Fatalf("Enter+Leave: %v allocs, want 0", a)
	}
}
