package policy

import (
	"math"
	"time"
)

// shedSlots is how many slots a Shedder's window is counted in, a tenth of
// the window each, in a fixed ring that never allocates.
const shedSlots = 10

// The Shedder's defaults, both Kratos BBR's: a CPU threshold of 80% and a
// ten-second window.
const (
	shedHot    = 0.8
	shedWindow = 10 * time.Second
)

// Shedder stops lending while the process is hot and has more calls in
// flight than it has recently shown it can finish. It protects the process,
// not the backend, so in a pool's Ward it refuses (Shed) even when an idle
// resource is there: lending it would only add to the calls that cannot be
// finished in time.
//
// The rule is Kratos BBR's. The owner reports heat, a number such as the
// share of CPU in use from 0 to 1. The shedder measures completions (in a
// pool, every Give or Drop of a lent resource, with how long it was held)
// in a sliding window of ten slots, and from the finished slots takes the
// most completions in one slot and the least average holding time. By
// Little's law (in flight = throughput × time in system) their product is
// how many calls the process has shown it can carry at once:
//
//	limit = ceil(maxPass / slot × minHeld), at least 1
//
// A call is refused when heat >= hot and more than limit are in flight.
// Taking the least holding time rather than the average follows CoDel: the
// best the system did recently is what it can do, and a standing queue is
// what raises everything above it.
//
// A cold shedder never refuses, and neither does one with no completion in
// its finished slots: refusing without evidence would latch shut, since
// nothing lent means nothing finished and so never any evidence. A heat
// reading older than the window no longer counts, so an owner that stops
// reporting does not leave the shedder hot for good. NaN heat is cold.
//
// In a pool's Ward the pool builds a shedder of its own from Ward.Shedder
// and does the reporting of completions; the owner reports heat through
// Pool.Heat. The zero Shedder is ready to use with the defaults,
// DefaultShedder's. A Shedder is not safe for concurrent use.
type Shedder struct {
	hot    float64
	window time.Duration
	slots  slots[pass]

	heat   float64
	heatAt int64 // when heat was reported
	heated bool  // whether heat has been reported

	// The limit only changes when a slot finishes, since the current slot
	// is left out of it; so it is worked out once per slot.
	limit  int
	proven bool // whether limit rests on evidence
	known  bool // whether limit and proven are worked out for this slot
}

// pass is one slot's completions: how many, and their holding times summed.
type pass struct{ count, held int64 }

// NewShedder returns a shedder that has measured nothing, refusing when the
// reported heat is at least hot, over a sliding window.
//
// A hot of zero or less (or NaN) is Kratos BBR's 0.8; a window of zero or
// less is its ten seconds. The window is counted in ten slots and rounded up
// to a whole number of nanoseconds per slot.
func NewShedder(hot float64, window time.Duration) *Shedder {
	s := &Shedder{}
	s.set(hot, window)
	return s
}

// set applies NewShedder's knobs and their clamps.
func (s *Shedder) set(hot float64, window time.Duration) {
	if math.IsNaN(hot) || hot <= 0 {
		hot = shedHot
	}
	if window <= 0 {
		window = shedWindow
	}
	s.hot, s.window = hot, window
	s.slots.cut(window, shedSlots)
}

// Heat reports how hot the process is now. The last report counts until the
// window has passed since it.
func (s *Shedder) Heat(heat float64, now int64) {
	s.heat, s.heatAt, s.heated = heat, s.advance(now), true
}

// Allow says whether a call may start now with inflight calls already in
// flight: false when the process is hot and inflight is above Limit.
func (s *Shedder) Allow(now int64, inflight int) bool {
	if !s.hotAt(s.advance(now)) {
		return true
	}
	limit, ok := s.capacity()
	return !ok || inflight <= limit
}

// Done counts a call that finished now after being held for held. A
// negative held is read as zero.
func (s *Shedder) Done(now int64, held time.Duration) {
	s.advance(now)
	p := s.slots.newest()
	p.count++
	if h := int64(max(held, 0)); p.held > math.MaxInt64-h {
		p.held = math.MaxInt64
	} else {
		p.held += h
	}
}

// Limit is how many calls in flight the shedder has seen the process carry,
// by the rule in the type's comment; ok is false when the finished slots
// hold no completion, so there is no evidence and nothing is refused.
func (s *Shedder) Limit(now int64) (limit int, ok bool) {
	s.advance(now)
	return s.capacity()
}

// Hot says whether the last heat reported is at or over the threshold and
// still fresh.
func (s *Shedder) Hot(now int64) bool {
	return s.hotAt(s.advance(now))
}

func (s *Shedder) hotAt(now int64) bool {
	return s.heated && s.heat >= s.hot && elapsed(now, s.heatAt) < s.window
}

// capacity is Little's law over the finished slots.
func (s *Shedder) capacity() (int, bool) {
	if !s.known {
		s.limit, s.proven = s.little()
		s.known = true
	}
	return s.limit, s.proven
}

// little works the limit out from the slots.
func (s *Shedder) little() (int, bool) {
	var most int64
	least := math.Inf(1)
	for i := range s.slots.ring {
		p := &s.slots.ring[i]
		if !s.slots.finished(i) || p.count == 0 {
			continue
		}
		most = max(most, p.count)
		least = min(least, float64(p.held)/float64(p.count))
	}
	if most == 0 {
		return 0, false
	}
	carry := math.Ceil(float64(most) * least / float64(s.slots.width))
	if carry >= math.MaxInt32 {
		return math.MaxInt32, true
	}
	return max(int(carry), 1), true
}

// advance empties the slots that have left the window by now (see slots),
// and answers now, or the latest time given when the clock has gone
// backwards: that is read as standing still.
func (s *Shedder) advance(now int64) int64 {
	if s.slots.width == 0 { // the zero Shedder
		s.set(0, 0)
	}
	at, turned := s.slots.advance(now)
	if turned {
		s.known = false
	}
	return at
}
