package policy

import (
	"math"
	"testing"
	"time"
)

// TestSlots steps a ring of four one-second slots through the instants
// its owners rely on: each step adds to the newest slot at its time, then
// checks the time the ring stands at, whether a slot turned, and the total
// the ring still holds.
func TestSlots(t *testing.T) {
	sec := func(s int64) int64 { return s * int64(time.Second) }
	type step struct {
		at     int64
		add    int
		stands int64 // the time advance answers
		turned bool
		held   int // the sum over the ring after adding
	}
	tests := []struct {
		name   string
		period time.Duration // of the ring's four slots
		steps  []step
	}{
		{"counts age out a slot at a time", 4 * time.Second, []step{
			{at: sec(0), add: 1, stands: sec(0), held: 1},
			{at: sec(1), add: 2, stands: sec(1), turned: true, held: 3},
			{at: sec(3) + 999, add: 0, stands: sec(3) + 999, turned: true, held: 3},
			{at: sec(4), add: 0, stands: sec(4), turned: true, held: 2}, // sec(0)'s slot is out
			{at: sec(5), add: 0, stands: sec(5), turned: true, held: 0},
		}},
		{"within a slot nothing turns", 4 * time.Second, []step{
			{at: sec(7), add: 1, stands: sec(7), held: 1},
			{at: sec(7) + 1, add: 1, stands: sec(7) + 1, held: 2},
			{at: sec(8) - 1, add: 1, stands: sec(8) - 1, held: 3},
		}},
		{"a clock that goes back stands still", 4 * time.Second, []step{
			{at: sec(10), add: 1, stands: sec(10), held: 1},
			{at: sec(2), add: 1, stands: sec(10), held: 2}, // counted at sec(10)
			{at: sec(13), add: 0, stands: sec(13), turned: true, held: 2},
			{at: sec(12), add: 0, stands: sec(13), held: 2}, // not aged twice
			{at: sec(14), add: 0, stands: sec(14), turned: true, held: 0},
		}},
		{"a jump past the period empties it all", 4 * time.Second, []step{
			{at: sec(0), add: 1, stands: sec(0), held: 1},
			{at: sec(1), add: 1, stands: sec(1), turned: true, held: 2},
			{at: sec(100), add: 1, stands: sec(100), turned: true, held: 1},
		}},
		{"negative times have slots of their own", 4 * time.Second, []step{
			{at: -1, add: 1, stands: -1, held: 1},
			{at: 0, add: 1, stands: 0, turned: true, held: 2},
		}},
		{"the ends of time neither panic nor wrap", 4 * time.Second, []step{
			{at: math.MinInt64, add: 1, stands: math.MinInt64, held: 1},
			{at: math.MaxInt64, add: 1, stands: math.MaxInt64, turned: true, held: 1},
			{at: math.MinInt64, add: 1, stands: math.MaxInt64, held: 2},
		}},
		{"with one-nanosecond slots the jump across all time overflows, and is vast", 4, []step{
			{at: math.MinInt64, add: 1, stands: math.MinInt64, held: 1},
			{at: math.MinInt64 + 3, add: 1, stands: math.MinInt64 + 3, turned: true, held: 2},
			{at: math.MaxInt64, add: 1, stands: math.MaxInt64, turned: true, held: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s slots[int]
			s.cut(tt.period, 4)
			for n, st := range tt.steps {
				at, turned := s.advance(st.at)
				*s.newest() += st.add
				held := 0
				for _, c := range s.ring {
					held += c
				}
				if at != st.stands || turned != st.turned || held != st.held {
					t.Fatalf("step %d: at %d: stands at %d, turned %v, holds %d; want %d, %v, %d",
						n, st.at, at, turned, held, st.stands, st.turned, st.held)
				}
			}
		})
	}
}

// TestSlotsCut: the period is shared out in whole nanoseconds, rounded up
// so the slots never cover less than the period.
func TestSlotsCut(t *testing.T) {
	for _, tt := range []struct {
		period time.Duration
		n      int
		width  int64
	}{
		{2 * time.Minute, 24, int64(5 * time.Second)},
		{10 * time.Second, 10, int64(time.Second)},
		{25, 24, 2},
		{1, 10, 1},
	} {
		var s slots[pass]
		s.cut(tt.period, tt.n)
		if s.width != tt.width || len(s.ring) != tt.n {
			t.Errorf("cut(%v, %d): width %d, %d slots; want %d, %d", tt.period, tt.n, s.width, len(s.ring), tt.width, tt.n)
		}
	}
}

// TestSlotsEndOfClock: slots of a nanosecond reach the last instant the
// clock can give, and the breaker and the shedder built on them answer
// there rather than loop for ever.
func TestSlotsEndOfClock(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var s slots[int]
		s.cut(4*time.Nanosecond, 4)
		s.advance(math.MaxInt64 - 2)
		*s.newest() = 7
		if at, turned := s.advance(math.MaxInt64); at != math.MaxInt64 || !turned {
			t.Errorf("advance(MaxInt64) = %d, %v; want MaxInt64, true", at, turned)
		}
		b := NewBreaker(2, 10*time.Nanosecond)
		b.Allow(math.MaxInt64 - 5)
		b.Failure(math.MaxInt64 - 5)
		b.Allow(math.MaxInt64)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the slots never reached the end of the clock")
	}
}
