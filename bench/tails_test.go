package main

import (
	"strings"
	"testing"
)

// TestTailTargets: alone, the hot path's p99 may be at most its peer's;
// beside the CPU-burning neighbour, at most twice it. A Window at 1.5×
// x/time/rate's p99 misses the first and meets the second.
func TestTailTargets(t *testing.T) {
	side := func(name string, ours bool, p99 float64) measured {
		return measured{side: name, ours: ours, ns: 10, p99: p99}
	}
	results := []result{{
		row: row{suite: "Rate", name: "Window Allow"},
		levels: []level{
			{callers: 1, sides: []measured{side("moonpool", true, 150), side("x/time/rate", false, 100)}},
			{callers: 8, sides: []measured{side("moonpool", true, 50), side("x/time/rate", false, 100)}},
		},
	}}
	for _, c := range []struct {
		noise bool
		words string
		met   bool
	}{
		{false, "Rate: Window.Allow p99 at most x/time/rate's at every level", false},
		{true, "Rate: Window.Allow p99 at most 2× x/time/rate's at every level beside a CPU-burning neighbour", true},
	} {
		var found *check
		for _, ch := range targets(results, c.noise) {
			if strings.HasPrefix(ch.target, "Rate: Window.Allow p99") {
				found = &ch
			}
		}
		if found == nil {
			t.Fatalf("noise %v: no Window p99 target", c.noise)
		}
		if found.target != c.words || found.met != c.met || !found.known {
			t.Errorf("noise %v: %+v; want %q, met %v", c.noise, *found, c.words, c.met)
		}
		if found.measured != "1: 1.50×, 8: 0.50×" {
			t.Errorf("noise %v: measured %q", c.noise, found.measured)
		}
	}
}
