package policy

import (
	"math/rand/v2"
	"time"
)

// kneeSim is a dependency with a concurrency knee in front of an adaptive
// gate, on simulated time. The dependency works on at most knee calls at
// full speed: past it, every call slows to knee/n of it (processor
// sharing), or with fifo the first knee calls go at full speed and the
// rest wait their turn. Either way latency is flat up to the knee and
// grows with the queue beyond. Callers arrive at rate a second, each with a deadline; the gate
// lets them in up to its limit, puts the rest in a line as long as the
// limit, and refuses at once a caller whose expected wait and one latency
// would pass its deadline, as the adaptive gate's actor does.
type kneeSim struct {
	a    *Adaptive
	now  int64
	step int64 // ns a step
	rnd  *rand.Rand

	knee     func(t time.Duration) float64 // calls at full speed
	base     func(t time.Duration) float64 // a call's latency below the knee, ns
	rate     func(t time.Duration) float64 // arrivals a second
	deadline int64                         // each caller's, after it arrives
	healthy  bool                          // drop the line's deadline check
	fifo     bool                          // knee workers take calls in turn, rather than share
	jitter   float64                       // each call's work is off by up to this share, either way
	tell     bool                          // callers who find no room tell the limit their deadline

	start   int64
	due     float64 // ns until the next arrival
	inside  []simCall
	line    []simCall
	good    int // finished within the deadline
	late    int // finished past it
	refused int
	arrived int
}

// simCall is one call: its work left, in ns at full speed, and its times.
type simCall struct {
	left           float64
	arrived, admit int64
	deadline       int64
}

// newKneeSim is a simulation of c's gate at a constant knee, latency and
// rate, stepping by a fiftieth of the latency.
func newKneeSim(c AdaptiveConfig, knee float64, base time.Duration, rate float64) *kneeSim {
	const t0 = int64(1_000_000_000)
	return &kneeSim{
		a:        NewAdaptive(c, t0),
		now:      t0,
		start:    t0,
		step:     int64(base) / 50,
		rnd:      rand.New(rand.NewPCG(1, 2)),
		knee:     func(time.Duration) float64 { return knee },
		base:     func(time.Duration) float64 { return float64(base) },
		rate:     func(time.Duration) float64 { return rate },
		deadline: int64(10 * base),
	}
}

// elapsed is the simulated time since the start.
func (s *kneeSim) elapsed() time.Duration { return time.Duration(s.now - s.start) }

// run steps the simulation for d, calling each (if not nil) after every
// step.
func (s *kneeSim) run(d time.Duration, each func()) {
	end := s.now + int64(d)
	for s.now < end {
		s.tick()
		if each != nil {
			each()
		}
	}
}

// tick moves the simulation one step.
func (s *kneeSim) tick() {
	s.now += s.step
	t := s.elapsed()
	// Work done in the step: each call at knee/n of full speed past the
	// knee, relative to the latency at the base.
	if n := float64(len(s.inside)); n > 0 {
		speed := min(1, s.knee(t)/n)
		if s.fifo {
			speed = 1
		}
		work := float64(s.step) * speed * 1e7 / s.base(t) // in ns of a 10 ms call
		kept := s.inside[:0]
		var n, sum int64
		for k, c := range s.inside {
			if !s.fifo || float64(k) < s.knee(t) {
				c.left -= work
			}
			if c.left > 0 {
				kept = append(kept, c)
				continue
			}
			n++
			sum += s.now - c.admit
			if s.now <= c.deadline {
				s.good++
			} else {
				s.late++
			}
		}
		s.inside = kept
		s.a.Sample(n, time.Duration(sum))
	}
	s.a.InFlight(len(s.inside))
	s.a.Update(s.now)
	// The line: callers past their deadline leave; the rest go in while
	// there is room.
	kept := s.line[:0]
	for _, c := range s.line {
		if s.now > c.deadline {
			s.refused++
			continue
		}
		kept = append(kept, c)
	}
	s.line = kept
	for len(s.line) > 0 && len(s.inside) < s.a.Limit() {
		c := s.line[0]
		s.line = s.line[1:]
		s.admit(c)
	}
	for len(s.line) > s.a.Limit() { // the line follows the limit
		s.line = s.line[:len(s.line)-1]
		s.refused++
	}
	// Arrivals, with exponential gaps.
	s.due -= float64(s.step)
	for s.due <= 0 {
		s.arrive()
		s.due += s.rnd.ExpFloat64() * 1e9 / s.rate(t)
	}
}

// arrive lets a caller in, puts it in line, or refuses it.
func (s *kneeSim) arrive() {
	s.arrived++
	c := simCall{arrived: s.now, deadline: s.now + s.deadline, left: 1e7 * (1 + s.jitter*(2*s.rnd.Float64()-1))}
	if len(s.inside) < s.a.Limit() && len(s.line) == 0 {
		s.admit(c)
		return
	}
	if s.tell {
		s.a.Deadline(time.Duration(s.deadline))
	}
	s.a.Full()
	if len(s.line) >= s.a.Limit() {
		s.refused++
		return
	}
	if rtt := float64(s.a.Latency()); rtt > 0 && !s.healthy {
		wait := rtt * float64(len(s.line)+1) / float64(s.a.Limit())
		if float64(s.deadline) < wait+rtt {
			s.refused++
			return
		}
	}
	s.line = append(s.line, c)
}

func (s *kneeSim) admit(c simCall) {
	c.admit = s.now
	s.inside = append(s.inside, c)
}

// capacity is how many calls a second the dependency finishes at most.
func capacity(knee float64, base time.Duration) float64 { return knee * 1e9 / float64(base) }
