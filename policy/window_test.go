package policy

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// The calls a window table makes; see step. None of them may change the
// window unless it counts an event.
type (
	windowStep = step[*Window]

	// windowTake is Take(at), which must answer want.
	windowTake struct {
		at   int64
		want bool
	}
	// windowLeft is Left(at), which must answer want.
	windowLeft struct {
		at   int64
		want int
	}
	// windowNext is Next(at), which must answer want.
	windowNext struct {
		at   int64
		want time.Duration
	}
)

func (s windowTake) run(t *testing.T, w *Window, where string) {
	t.Helper()
	before := *w
	got := w.Take(s.at)
	if !got && !sameWindow(before, *w) {
		t.Errorf("%s: refused Take(%d) changed the window", where, s.at)
	}
	if got != s.want {
		t.Errorf("%s: Take(%d) = %v, want %v", where, s.at, got, s.want)
	}
}

func (s windowLeft) run(t *testing.T, w *Window, where string) {
	t.Helper()
	readWindow(t, w, where, "Left", s.at, w.Left, s.want)
}

func (s windowNext) run(t *testing.T, w *Window, where string) {
	t.Helper()
	readWindow(t, w, where, "Next", s.at, w.Next, s.want)
}

// readWindow checks a call that only reads: read(at) must answer want and
// leave w as it was.
func readWindow[A comparable](t *testing.T, w *Window, where, call string, at int64, read func(int64) A, want A) {
	t.Helper()
	before := *w
	got := read(at)
	if !sameWindow(before, *w) {
		t.Errorf("%s: %s(%d) changed the window", where, call, at)
	}
	if got != want {
		t.Errorf("%s: %s(%d) = %v, want %v", where, call, at, got, want)
	}
}

// sameWindow compares two windows field by field, the ring by identity.
func sameWindow(a, b Window) bool {
	return a.allow == b.allow && a.window == b.window && a.head == b.head && a.n == b.n &&
		a.stamps == b.stamps && a.base == b.base && a.last == b.last &&
		len(a.ring) == len(b.ring) && (len(a.ring) == 0 || &a.ring[0] == &b.ring[0])
}

func TestWindow(t *testing.T) {
	s := int64(time.Second)
	t0 := 1000 * s
	play(t, "3 per 10s", NewWindow(3, 10*time.Second), []windowStep{
		windowLeft{t0, 3},
		windowNext{t0, 0},
		windowTake{t0, true},
		windowTake{t0 + 4*s, true},
		windowTake{t0 + 9*s, true},
		windowTake{t0 + 9*s, false}, // three in the last ten seconds
		windowLeft{t0 + 9*s, 0},
		windowNext{t0 + 9*s, time.Second}, // the first falls out at t0+10s
		windowTake{t0 + 10*s - 1, false},  // a nanosecond short of it
		windowTake{t0 + 10*s, true},       // now − t = window: out
		windowLeft{t0 + 10*s, 0},
		windowNext{t0 + 10*s, 4 * time.Second},
		windowLeft{t0 + 14*s, 1},
		windowLeft{t0 + 19*s, 2},
		windowLeft{t0 + 20*s, 3}, // everything out
		windowNext{t0 + 20*s, 0},
		windowTake{t0 + 20*s, true},
		windowLeft{t0 + 20*s, 2},
	})
}

// A window slides: a quota of two per ten seconds never lets three through
// in any ten-second stretch, even across the boundary a fixed window
// would reset at.
func TestWindowSlides(t *testing.T) {
	play(t, "2 per 10ns", NewWindow(2, 10), []windowStep{
		windowTake{0, true},
		windowTake{9, true},
		windowTake{10, true}, // 0 is out
		windowTake{11, false},
		windowNext{11, 8}, // 9 falls out at 19
		windowTake{18, false},
		windowTake{19, true},
		windowTake{20, true}, // 10 is out
		windowTake{20, false},
	})
}

// A clock that goes back is read as standing at the latest counted event,
// so the events it counts are stamped then and count for longer.
func TestWindowClockBackwards(t *testing.T) {
	play(t, "2 per 10ns", NewWindow(2, 10), []windowStep{
		windowTake{100, true},
		windowTake{50, true}, // read as 100
		windowTake{60, false},
		windowLeft{50, 0},
		windowNext{50, 60}, // both fall out at 110
		windowNext{105, 5},
		windowTake{109, false},
		windowTake{110, true},
		windowTake{0, true}, // read as 110
		windowTake{0, false},
		windowLeft{119, 0},
		windowLeft{120, 2},
	})
}

// Nothing is allowed when allow <= 0, and nothing is refused when the
// window <= 0, since every event is out the moment it happens.
func TestWindowBadInput(t *testing.T) {
	for _, allow := range []int{0, -1, math.MinInt} {
		for _, window := range []time.Duration{time.Second, 0, -time.Second} {
			play(t, "allow <= 0", NewWindow(allow, window), []windowStep{
				windowTake{0, false},
				windowTake{1 << 62, false},
				windowLeft{0, 0},
				windowNext{0, Never},
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
		play(t, "window <= 0", w, []windowStep{
			windowLeft{3, 2},
			windowNext{3, 0},
		})
	}
	var zero Window
	play(t, "zero Window", &zero, []windowStep{
		windowTake{0, false},
		windowLeft{0, 0},
		windowNext{0, Never},
	})
}

// Instants at the ends of the clock neither overflow nor wrap.
func TestWindowClockEnds(t *testing.T) {
	const end = math.MaxInt64
	play(t, "at the end", NewWindow(1, time.Hour), []windowStep{
		windowTake{end - 10, true},
		windowTake{end, false},
		windowNext{end - 10, Never}, // it falls out after the clock ends
	})
	play(t, "across the whole clock", NewWindow(1, time.Hour), []windowStep{
		windowTake{math.MinInt64, true},
		windowNext{math.MinInt64, time.Hour},
		windowTake{end, true},
		windowNext{math.MinInt64, Never}, // read as end: an hour after it
		windowLeft{math.MinInt64, 0},
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

// TestWindowTakeNIsNTakes: TakeN(now, n) answers and counts as n Takes at
// now would, all or nothing, under a seeded random stream of instants
// (some before the last, which the window reads as standing still) and
// sizes (some above the room left, some above allow, some <= 0).
func TestWindowTakeNIsNTakes(t *testing.T) {
	for _, allow := range []int{1, 7, 64} {
		bulk := NewWindow(allow, 100)
		single := NewWindow(allow, 100)
		rng := rand.New(rand.NewPCG(uint64(allow), 9))
		now := int64(0)
		for step := range 5000 {
			now += rng.Int64N(30) - 5
			n := rng.IntN(allow+3) - 1
			want := n <= 0 || single.Left(now) >= n
			if want {
				for range max(n, 0) {
					if !single.Take(now) {
						t.Fatalf("allow %d step %d: Take refused with room left", allow, step)
					}
				}
			}
			if got := bulk.TakeN(now, n); got != want {
				t.Fatalf("allow %d step %d: TakeN(%d, %d) = %v, %d Takes say %v", allow, step, now, n, got, n, want)
			}
			if a, b := bulk.Left(now), single.Left(now); a != b {
				t.Fatalf("allow %d step %d: Left %d after TakeN, %d after Takes", allow, step, a, b)
			}
			if a, b := bulk.Next(now), single.Next(now); a != b {
				t.Fatalf("allow %d step %d: Next %v after TakeN, %v after Takes", allow, step, a, b)
			}
		}
	}
}

// TestWindowTakeNOneStamp: events counted at one instant share one stamp,
// so a TakeN of thousands, or many TakeNs at one instant, cost the ring a
// single stamp. They leave the window together, and Next reads the stamp
// of the event whose leaving opens room.
func TestWindowTakeNOneStamp(t *testing.T) {
	const allow = 1 << 20
	w := NewWindow(allow, 100)
	for range 3 {
		if !w.TakeN(10, 1000) {
			t.Fatal("TakeN(10, 1000) refused")
		}
	}
	if !w.TakeN(20, allow-3000) {
		t.Fatal("TakeN(20, the rest) refused")
	}
	if len(w.ring) > 8 {
		t.Fatalf("two instants' events took %d stamps of ring, want at most 8", len(w.ring))
	}
	steps := []struct {
		now  int64
		left int
		next time.Duration
	}{
		{20, 0, 90},      // full: room opens when the events of 10 leave, at 110
		{109, 0, 1},      // a moment before
		{110, 3000, 0},   // all 3,000 of instant 10 left together
		{119, 3000, 0},   // those of 20 are still in
		{120, allow, 0},  // and now they too have left
		{1000, allow, 0}, // nothing comes back
	}
	for i, s := range steps {
		if got := w.Left(s.now); got != s.left {
			t.Errorf("step %d: Left(%d) = %d, want %d", i, s.now, got, s.left)
		}
		if got := w.Next(s.now); got != s.next {
			t.Errorf("step %d: Next(%d) = %v, want %v", i, s.now, got, s.next)
		}
	}
}

// BenchmarkWindowTakeN: a window's actor counts a span of lent events
// with one TakeN; it costs what one Take does, whatever n.
func BenchmarkWindowTakeN(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			w := NewWindow(1_000_000, 1_000_000)
			now := int64(0)
			for b.Loop() {
				now += 4000
				w.TakeN(now, n)
			}
		})
	}
}
