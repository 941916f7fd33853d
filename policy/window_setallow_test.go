package policy

import (
	"testing"
	"time"
)

// TestWindowSetAllow: a window keeps its counted events across SetAllow;
// lowered below them it refuses until enough have left, raised it counts
// on at once.
func TestWindowSetAllow(t *testing.T) {
	const s = int64(time.Second)
	w := NewWindow(4, time.Second)
	for i := range int64(4) {
		w.Take(i * s / 10) // stamps at 0, .1, .2, .3
	}
	w.SetAllow(2)
	if got := w.Left(s / 2); got != 0 {
		t.Errorf("lowered to 2 under 4 events: Left = %d, want 0", got)
	}
	// Room for one when all but one of the four have left: the stamp at .2
	// leaves at 1.2s.
	if got := w.Next(s / 2); got != 700*time.Millisecond {
		t.Errorf("Next = %v, want 700ms", got)
	}
	if w.Take(s + s/10 + 1) {
		t.Error("Take at 1.1s+1ns, with .2 and .3 still in, allowed")
	}
	if !w.Take(s + 2*s/10) {
		t.Error("Take at 1.2s refused")
	}
	w.SetAllow(10)
	if got := w.Left(s + 2*s/10); got != 8 {
		t.Errorf("raised to 10 with 2 in: Left = %d, want 8", got)
	}
	for i := range 8 {
		if !w.Take(s + 2*s/10) {
			t.Fatalf("Take %d after raising refused", i)
		}
	}
	if w.Take(s + 2*s/10) {
		t.Error("an 11th Take allowed")
	}
	w.SetAllow(0)
	if w.Take(10*s) || w.Left(10*s) != 0 || w.Next(10*s) != Never {
		t.Error("allow 0 did not refuse everything")
	}
}
