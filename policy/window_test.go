package policy

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// windowStep is one call on a window at a fixed instant, and its answer.
type windowStep struct {
	op   string // "take", "left" or "next"
	at   int64
	want any // bool for take, int for left, time.Duration for next
}

// runWindow plays steps against w, naming the failing step.
func runWindow(t *testing.T, name string, w *Window, steps []windowStep) {
	t.Helper()
	for i, s := range steps {
		var got any
		switch s.op {
		case "take":
			before := *w
			ok := w.Take(s.at)
			if !ok && !sameWindow(before, *w) {
				t.Errorf("%s: step %d: refused Take(%d) changed the window", name, i, s.at)
			}
			got = ok
		case "left":
			before := *w
			got = w.Left(s.at)
			if !sameWindow(before, *w) {
				t.Errorf("%s: step %d: Left(%d) changed the window", name, i, s.at)
			}
		case "next":
			before := *w
			got = w.Next(s.at)
			if !sameWindow(before, *w) {
				t.Errorf("%s: step %d: Next(%d) changed the window", name, i, s.at)
			}
		}
		if got != s.want {
			t.Errorf("%s: step %d: %s(%d) = %v, want %v", name, i, s.op, s.at, got, s.want)
		}
	}
}

// sameWindow compares two windows field by field, the ring by identity.
func sameWindow(a, b Window) bool {
	return a.allow == b.allow && a.window == b.window && a.head == b.head && a.n == b.n &&
		a.last == b.last && len(a.ring) == len(b.ring) && (len(a.ring) == 0 || &a.ring[0] == &b.ring[0])
}

func TestWindow(t *testing.T) {
	s := int64(time.Second)
	t0 := 1000 * s
	runWindow(t, "3 per 10s", NewWindow(3, 10*time.Second), []windowStep{
		{"left", t0, 3},
		{"next", t0, time.Duration(0)},
		{"take", t0, true},
		{"take", t0 + 4*s, true},
		{"take", t0 + 9*s, true},
		{"take", t0 + 9*s, false}, // three in the last ten seconds
		{"left", t0 + 9*s, 0},
		{"next", t0 + 9*s, time.Second}, // the first falls out at t0+10s
		{"take", t0 + 10*s - 1, false},  // a nanosecond short of it
		{"take", t0 + 10*s, true},       // now − t = window: out
		{"left", t0 + 10*s, 0},
		{"next", t0 + 10*s, 4 * time.Second},
		{"left", t0 + 14*s, 1},
		{"left", t0 + 19*s, 2},
		{"left", t0 + 20*s, 3}, // everything out
		{"next", t0 + 20*s, time.Duration(0)},
		{"take", t0 + 20*s, true},
		{"left", t0 + 20*s, 2},
	})
}

// A window slides: a quota of two per ten seconds never lets three through
// in any ten-second stretch, even across the boundary a fixed window
// would reset at.
func TestWindowSlides(t *testing.T) {
	runWindow(t, "2 per 10ns", NewWindow(2, 10), []windowStep{
		{"take", 0, true},
		{"take", 9, true},
		{"take", 10, true}, // 0 is out
		{"take", 11, false},
		{"next", 11, time.Duration(8)}, // 9 falls out at 19
		{"take", 18, false},
		{"take", 19, true},
		{"take", 20, true}, // 10 is out
		{"take", 20, false},
	})
}

// A clock that goes back is read as standing at the latest counted event,
// so the events it counts are stamped then and count for longer.
func TestWindowClockBackwards(t *testing.T) {
	runWindow(t, "2 per 10ns", NewWindow(2, 10), []windowStep{
		{"take", 100, true},
		{"take", 50, true}, // read as 100
		{"take", 60, false},
		{"left", 50, 0},
		{"next", 50, time.Duration(60)}, // both fall out at 110
		{"next", 105, time.Duration(5)},
		{"take", 109, false},
		{"take", 110, true},
		{"take", 0, true}, // read as 110
		{"take", 0, false},
		{"left", 119, 0},
		{"left", 120, 2},
	})
}

// Nothing is allowed when allow <= 0, and nothing is refused when the
// window <= 0, since every event is out the moment it happens.
func TestWindowBadInput(t *testing.T) {
	for _, allow := range []int{0, -1, math.MinInt} {
		for _, window := range []time.Duration{time.Second, 0, -time.Second} {
			runWindow(t, "allow <= 0", NewWindow(allow, window), []windowStep{
				{"take", 0, false},
				{"take", 1 << 62, false},
				{"left", 0, 0},
				{"next", 0, Never},
			})
		}
	}
	for _, window := range []time.Duration{0, -1, math.MinInt64} {
		w := NewWindow(2, window)
		for i := range 1000 {
			if !w.Take(int64(i % 7)) {
				t.Fatalf("window %v: step %d: Take refused", window, i)
			}
		}
		runWindow(t, "window <= 0", w, []windowStep{
			{"left", 3, 2},
			{"next", 3, time.Duration(0)},
		})
	}
	var zero Window
	runWindow(t, "zero Window", &zero, []windowStep{
		{"take", 0, false},
		{"left", 0, 0},
		{"next", 0, Never},
	})
}

// Instants at the ends of the clock neither overflow nor wrap.
func TestWindowClockEnds(t *testing.T) {
	const end = math.MaxInt64
	runWindow(t, "at the end", NewWindow(1, time.Hour), []windowStep{
		{"take", end - 10, true},
		{"take", end, false},
		{"next", end - 10, Never}, // it falls out after the clock ends
	})
	runWindow(t, "across the whole clock", NewWindow(1, time.Hour), []windowStep{
		{"take", math.MinInt64, true},
		{"next", math.MinInt64, time.Hour},
		{"take", end, true},
		{"next", math.MinInt64, Never}, // read as end: an hour after it
		{"left", math.MinInt64, 0},
	})
}

// The ring holds what was counted, not what might be: a quota of MaxInt
// costs a few stamps' worth of memory after a few events.
func TestWindowRingFollowsEvents(t *testing.T) {
	w := NewWindow(math.MaxInt, time.Hour)
	for i := range 5 {
		if !w.Take(int64(i)) {
			t.Fatalf("step %d: Take refused", i)
		}
	}
	if len(w.ring) > 8 {
		t.Errorf("after 5 events the ring holds %d stamps, want at most 8", len(w.ring))
	}
	if got := w.Left(5); got != math.MaxInt-5 {
		t.Errorf("Left = %d, want MaxInt-5", got)
	}
	w = NewWindow(3, time.Hour)
	for i := range 10 {
		w.Take(int64(i))
	}
	if len(w.ring) != 3 {
		t.Errorf("allow 3: the ring holds %d stamps, want 3", len(w.ring))
	}
}

// windowModel is the brute-force window: every counted stamp in a list.
type windowModel struct {
	allow  int
	window int64
	stamps []int64
}

func (m *windowModel) clock(now int64) int64 {
	if len(m.stamps) > 0 {
		return max(now, m.stamps[len(m.stamps)-1])
	}
	return now
}

// counted is how many stamps count at t, and the oldest of them.
func (m *windowModel) counted(t int64) (int, int64) {
	n, oldest := 0, int64(0)
	for _, s := range m.stamps {
		if uint64(t-s) < uint64(m.window) {
			if n == 0 {
				oldest = s
			}
			n++
		}
	}
	return n, oldest
}

func (m *windowModel) take(now int64) bool {
	if m.allow <= 0 {
		return false
	}
	if m.window <= 0 {
		return true
	}
	t := m.clock(now)
	if n, _ := m.counted(t); n >= m.allow {
		return false
	}
	m.stamps = append(m.stamps, t)
	return true
}

func (m *windowModel) left(now int64) int {
	if m.allow <= 0 {
		return 0
	}
	if m.window <= 0 {
		return m.allow
	}
	n, _ := m.counted(m.clock(now))
	return m.allow - n
}

func (m *windowModel) next(now int64) time.Duration {
	if m.allow <= 0 {
		return Never
	}
	if m.window <= 0 {
		return 0
	}
	n, oldest := m.counted(m.clock(now))
	if n < m.allow {
		return 0
	}
	// oldest + window − now, in integers that cannot overflow; Never when
	// that moment is past the end of the clock, or too far to say.
	end := new(big.Int).SetInt64(oldest)
	end.Add(end, big.NewInt(m.window))
	if !end.IsInt64() {
		return Never
	}
	end.Sub(end, big.NewInt(now))
	if !end.IsInt64() {
		return Never
	}
	return time.Duration(end.Int64())
}

// checkWindow plays one call against both the window and the model.
func checkWindow(t *testing.T, w *Window, m *windowModel, step int, op byte, now int64) {
	t.Helper()
	switch op % 3 {
	case 0:
		if got, want := w.Take(now), m.take(now); got != want {
			t.Fatalf("step %d: Take(%d) = %v, model says %v", step, now, got, want)
		}
	case 1:
		if got, want := w.Left(now), m.left(now); got != want {
			t.Fatalf("step %d: Left(%d) = %v, model says %v", step, now, got, want)
		}
	case 2:
		if got, want := w.Next(now), m.next(now); got != want {
			t.Fatalf("step %d: Next(%d) = %v, model says %v", step, now, got, want)
		}
	}
}

// checkStretches is the quota itself, over every counted stamp: no stretch
// window long holds more than allow.
func checkStretches(t *testing.T, m *windowModel) {
	t.Helper()
	if m.allow <= 0 || m.window <= 0 {
		return
	}
	for i, s := range m.stamps {
		n := 0
		for _, u := range m.stamps[i:] {
			if uint64(u-s) < uint64(m.window) {
				n++
			}
		}
		if n > m.allow {
			t.Fatalf("%d events in the window from %d, allow %d", n, s, m.allow)
		}
	}
}

// The window answers as the brute-force list does, through growth of its
// ring while it wraps, long quiet gaps and clocks that step back.
func TestWindowMatchesModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		allow := 1 + r.IntN(40)
		window := int64(1 + r.IntN(100))
		w, m := NewWindow(allow, time.Duration(window)), &windowModel{allow: allow, window: window}
		now := int64(r.IntN(1000)) - 500
		for step := range 2000 {
			switch k := r.IntN(20); {
			case k == 0:
				now -= int64(r.IntN(50)) // back
			case k == 1:
				now += 10 * window // quiet: everything falls out
			case k < 10:
				now += int64(r.IntN(3))
			}
			checkWindow(t, w, m, step, byte(r.IntN(3)), now)
		}
		checkStretches(t, m)
	}
}
