package policy

import (
	"math"
	"testing"
)

// gateStep is one call on a gate and what it should answer, with the count
// held after it.
type gateStep struct {
	op   string // "enter" or "leave"
	want bool   // Enter's answer; unused for leave
	held int
}

func runGate(t *testing.T, name string, g *Gate, steps []gateStep) {
	t.Helper()
	for i, s := range steps {
		switch s.op {
		case "enter":
			if got := g.Enter(); got != s.want {
				t.Errorf("%s: step %d: Enter() = %v, want %v", name, i, got, s.want)
			}
		case "leave":
			g.Leave()
		}
		if got := g.Held(); got != s.held {
			t.Errorf("%s: step %d: Held() = %d after %s, want %d", name, i, got, s.op, s.held)
		}
	}
}

func TestGate(t *testing.T) {
	runGate(t, "limit 2", NewGate(2), []gateStep{
		{"enter", true, 1},
		{"enter", true, 2},
		{"enter", false, 2}, // full: answer, don't queue
		{"leave", false, 1},
		{"enter", true, 2},
		{"leave", false, 1},
		{"leave", false, 0},
		{"leave", false, 0}, // an unmatched Leave takes nothing below zero
		{"leave", false, 0},
		{"enter", true, 1}, // ...and lets no extra caller in later
		{"enter", true, 2},
		{"enter", false, 2},
	})
}

// A limit <= 0 is no limit, as in the zero Gate.
func TestGateNoLimit(t *testing.T) {
	for _, g := range []*Gate{NewGate(0), NewGate(-1), NewGate(math.MinInt), new(Gate)} {
		for i := range 10000 {
			if !g.Enter() {
				t.Fatalf("limit %d: step %d: Enter refused", g.limit, i)
			}
		}
		if g.Held() != 10000 {
			t.Errorf("limit %d: Held() = %d, want 10000", g.limit, g.Held())
		}
	}
}

// Even without a limit the count stops short of wrapping to negative.
func TestGateSaturates(t *testing.T) {
	g := &Gate{held: math.MaxInt - 1}
	runGate(t, "no limit, nearly full int", g, []gateStep{
		{"enter", true, math.MaxInt},
		{"enter", false, math.MaxInt},
		{"leave", false, math.MaxInt - 1},
	})
}
