package policy

import "time"

// slots is a sliding period cut into a ring of equal slots, each holding
// what was counted in its stretch of time: the memory of a Breaker and of a
// Shedder. Counting goes into the newest slot; when time reaches a later
// slot, the ones that have left the period are emptied, so a count ages out
// a slot at a time rather than all at once. The ring is made once, by cut,
// and never allocates after that.
//
// Time only moves forward here. A clock that goes backwards is read as
// standing still (its counts go to the newest slot), so a step back can
// neither revive a slot that has aged out nor make one age out twice.
type slots[T any] struct {
	ring   []T   // made by cut
	width  int64 // nanoseconds per slot; zero until cut
	head   int64 // number of the newest slot: floorDiv(latest, width)
	latest int64 // the latest time given
	begun  bool  // whether head and latest have been set
}

// cut makes n empty slots that together span period (which must be
// positive), each rounded up to a whole number of nanoseconds.
func (s *slots[T]) cut(period time.Duration, n int) {
	s.ring = make([]T, n)
	s.width = int64(period) / int64(n)
	if int64(period)%int64(n) != 0 {
		s.width++
	}
}

// advance empties the slots that have left the period by now. It answers
// the time the ring stands at, now or the latest time given if the clock
// has gone backwards, and whether a later slot began, so that anything
// worked out from the slots must be worked out again.
func (s *slots[T]) advance(now int64) (at int64, turned bool) {
	if !s.begun {
		s.head, s.latest, s.begun = floorDiv(now, s.width), now, true
		return now, false
	}
	if now <= s.latest {
		return s.latest, false
	}
	s.latest = now
	h := floorDiv(now, s.width)
	if h <= s.head {
		return now, false
	}
	// gap < 0 means it overflowed, so the jump is vast: the whole ring has
	// left the period.
	if gap := h - s.head; gap < 0 || gap >= int64(len(s.ring)) {
		clear(s.ring)
	} else {
		// Counting the steps, not the slot numbers, so a head at the end
		// of the clock cannot wrap round and loop for ever.
		var empty T
		for i := int64(1); i <= gap; i++ {
			s.ring[s.place(s.head+i)] = empty
		}
	}
	s.head = h
	return now, true
}

// newest is the slot that counts what happens now.
func (s *slots[T]) newest() *T { return &s.ring[s.place(s.head)] }

// finished says whether ring[i] is a slot whose time is over, which is
// every slot but the newest.
func (s *slots[T]) finished(i int) bool { return i != s.place(s.head) }

// place is slot number n's index in the ring.
func (s *slots[T]) place(n int64) int {
	r := n % int64(len(s.ring))
	if r < 0 {
		r += int64(len(s.ring))
	}
	return int(r)
}

// floorDiv is a / b rounded down, for b > 0, so negative times fall into
// slots of their own rather than sharing slot 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
