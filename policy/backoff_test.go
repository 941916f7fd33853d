package policy

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestBackoffCeiling(t *testing.T) {
	const ms = time.Millisecond
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name  string
		b     Backoff
		retry int
		want  time.Duration
	}{
		{"preset, retry -1", DefaultBackoff, -1, 0},
		{"preset, retry 0", DefaultBackoff, 0, 0},
		{"preset, retry 1 is Base", DefaultBackoff, 1, 100 * ms},
		{"preset, retry 2", DefaultBackoff, 2, 200 * ms},
		{"preset, retry 3", DefaultBackoff, 3, 400 * ms},
		{"preset, retry 4", DefaultBackoff, 4, 800 * ms},
		{"preset, retry 5 reaches Cap", DefaultBackoff, 5, time.Second},
		{"preset, retry 1000", DefaultBackoff, 1000, time.Second},
		{"preset, retry MaxInt", DefaultBackoff, math.MaxInt, time.Second},
		{"factor 1.5", Backoff{Base: 100 * ms, Factor: 1.5, Cap: time.Minute}, 3, 225 * ms},
		{"factor 3, retry 5", Backoff{Base: time.Millisecond, Factor: 3}, 5, 81 * ms},
		{"no cap, retry 31", Backoff{Base: time.Second, Factor: 2}, 31, (1 << 30) * time.Second},
		{"no cap saturates at Never", Backoff{Base: time.Second, Factor: 2}, 64, Never},
		{"no cap, retry MaxInt", Backoff{Base: time.Second, Factor: 2}, math.MaxInt, Never},
		{"factor barely above 1, retry MaxInt", Backoff{Base: time.Second, Factor: 1 + 1e-15, Cap: time.Hour}, math.MaxInt, time.Hour},
		{"factor barely above 1, no cap", Backoff{Base: time.Second, Factor: 1 + 1e-15}, math.MaxInt, Never},
		{"factor 1 stays at Base", Backoff{Base: time.Second, Factor: 1, Cap: time.Hour}, 50, time.Second},
		{"factor below 1 read as 1", Backoff{Base: time.Second, Factor: 0.5, Cap: time.Hour}, 50, time.Second},
		{"factor 0 read as 1", Backoff{Base: time.Second}, 7, time.Second},
		{"negative factor read as 1", Backoff{Base: time.Second, Factor: -2}, 7, time.Second},
		{"NaN factor read as 1", Backoff{Base: time.Second, Factor: nan, Cap: time.Hour}, 9, time.Second},
		{"+Inf factor, retry 1", Backoff{Base: time.Second, Factor: inf, Cap: time.Hour}, 1, time.Second},
		{"+Inf factor, retry 2 jumps to Cap", Backoff{Base: time.Second, Factor: inf, Cap: time.Hour}, 2, time.Hour},
		{"+Inf factor, no cap", Backoff{Base: time.Second, Factor: inf}, 2, Never},
		{"Cap below Base wins", Backoff{Base: 2 * time.Second, Factor: 2, Cap: time.Second}, 1, time.Second},
		{"negative Cap is no cap", Backoff{Base: time.Second, Factor: 10, Cap: -1}, 4, 1000 * time.Second},
		{"zero Base", Backoff{Factor: 2, Cap: time.Second}, 5, 0},
		{"negative Base", Backoff{Base: -time.Second, Factor: 2, Cap: time.Second}, 5, 0},
		{"Base of Never", Backoff{Base: Never, Factor: 2}, 3, Never},
		{"zero Backoff", Backoff{}, 1, 0},
		{"rounds to the nearest nanosecond", Backoff{Base: 400, Factor: 1.15}, 2, 460}, // 1.15 × 400 is 459.99999999999994 in floats
	}
	for _, c := range cases {
		if got := c.b.Ceiling(c.retry); got != c.want {
			t.Errorf("%s: Ceiling(%d) = %v, want %v", c.name, c.retry, got, c.want)
		}
	}
}

// A ceiling never shrinks from one retry to the next, and never leaves
// [0, Cap] (or [0, Never] with no cap), whatever the knobs.
func TestBackoffCeilingGrowsAndSaturates(t *testing.T) {
	const ms = time.Millisecond
	for _, f := range []float64{0, 0.5, 1, 1.0001, 1.5, 2, 3, 10, 1e300, math.Inf(1), math.NaN()} {
		for _, capacity := range []time.Duration{0, time.Second, time.Hour, Never} {
			b := Backoff{Base: 3 * ms, Factor: f, Cap: capacity}
			limit := Never
			if capacity > 0 {
				limit = capacity
			}
			prev := time.Duration(0)
			for _, retry := range []int{1, 2, 3, 10, 62, 63, 64, 65, 1000, 1 << 40, math.MaxInt - 1, math.MaxInt} {
				got := b.Ceiling(retry)
				if got < prev || got > limit || got < 0 {
					t.Fatalf("factor %v cap %v: Ceiling(%d) = %v after %v, want in [%v, %v]", f, capacity, retry, got, prev, prev, limit)
				}
				prev = got
			}
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	const ms = time.Millisecond
	jit := func(j Jitter) Backoff { b := DefaultBackoff; b.Jitter = j; return b }
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name     string
		b        Backoff
		retry    int
		random   float64
		previous time.Duration
		want     time.Duration
	}{
		{"Rigid is the ceiling", jit(Rigid), 2, 0.5, 0, 200 * ms},
		{"Rigid ignores the draw", jit(Rigid), 3, 0.99, 0, 400 * ms},
		{"Full is draw × ceiling", jit(Full), 2, 0.5, 0, 100 * ms},
		{"Full at draw 0", jit(Full), 2, 0, 0, 0},
		{"Full at the cap", jit(Full), 9, 0.25, 0, 250 * ms},
		{"Equal is half plus draw × half", jit(Equal), 2, 0.5, 0, 150 * ms},
		{"Equal at draw 0 is half", jit(Equal), 3, 0, 0, 200 * ms},
		{"Decorrelated, no previous reads as Base", jit(Decorrelated), 1, 0.5, 0, 200 * ms},
		{"Decorrelated grows from previous", jit(Decorrelated), 2, 0.5, 200 * ms, 350 * ms},
		{"Decorrelated is capped", jit(Decorrelated), 3, 0.5, 500 * ms, 550 * ms},
		{"Decorrelated ignores the retry number", jit(Decorrelated), 40, 0.5, 200 * ms, 350 * ms},
		{"Decorrelated, negative previous reads as Base", jit(Decorrelated), 1, 0.5, -time.Hour, 200 * ms},
		{"Decorrelated, 3×previous below Base is Base", jit(Decorrelated), 2, 0.9, time.Nanosecond, 100 * ms},
		{"Decorrelated, huge previous does not overflow", jit(Decorrelated), 2, 0.5, Never / 2, 550 * ms},
		{"Decorrelated, previous of Never", jit(Decorrelated), 2, 0.5, Never, 550 * ms},
		{"Decorrelated, Cap below Base is Cap", Backoff{Base: time.Second, Cap: 10 * ms, Jitter: Decorrelated}, 1, 0.5, 0, 10 * ms},
		{"Decorrelated, no cap", Backoff{Base: time.Second, Jitter: Decorrelated}, 1, 0.5, 10 * time.Second, 15500 * ms},
		{"draw below 0 reads as 0", jit(Full), 2, -3, 0, 0},
		{"NaN draw reads as 0", jit(Full), 2, nan, 0, 0},
		{"-Inf draw reads as 0", jit(Equal), 2, -inf, 0, 100 * ms},
		{"draw of 1 reads as just below 1", jit(Full), 2, 1, 0, 200*ms - 1},
		{"draw of 7 reads as just below 1", jit(Full), 2, 7, 0, 200*ms - 1},
		{"+Inf draw reads as just below 1", jit(Full), 2, inf, 0, 200*ms - 1},
		{"retry 0 waits nothing", jit(Rigid), 0, 0.5, 0, 0},
		{"retry 0 waits nothing, Decorrelated too", jit(Decorrelated), 0, 0.5, 500 * ms, 0},
		{"negative retry waits nothing", jit(Equal), -5, 0.5, 0, 0},
		{"unknown jitter reads as Full", jit(Jitter(9)), 2, 0.5, 0, 100 * ms},
		{"Full under no cap near Never", Backoff{Base: time.Second, Factor: 2, Jitter: Full}, 1000, 0.999999, 0, 9223362813482738688},
		{"Equal under no cap at Never", Backoff{Base: time.Second, Factor: 2, Jitter: Equal}, 1000, inf, 0, Never - 512},
	}
	for _, c := range cases {
		if got := c.b.Delay(c.retry, c.random, c.previous); got != c.want {
			t.Errorf("%s: Delay(%d, %v, %v) = %v (%d), want %v", c.name, c.retry, c.random, c.previous, got, int64(got), c.want)
		}
	}
}

func TestBackoffMore(t *testing.T) {
	cases := []struct {
		attempts, made int
		want           bool
	}{
		{3, -1, false}, // a count gone wrong gets nothing
		{3, 0, true},   // nothing made yet: the first attempt
		{3, 1, true},
		{3, 2, true},
		{3, 3, false}, // three attempts is two retries
		{3, 4, false},
		{1, 0, true},
		{1, 1, false},
		{0, 0, false}, // no attempts, not even the first
		{-2, 0, false},
		{math.MaxInt, math.MaxInt - 1, true},
		{math.MaxInt, math.MaxInt, false},
	}
	for _, c := range cases {
		b := Backoff{Attempts: c.attempts}
		if got := b.More(c.made); got != c.want {
			t.Errorf("Attempts %d: More(%d) = %v, want %v", c.attempts, c.made, got, c.want)
		}
	}
}

func TestBackoffSchedule(t *testing.T) {
	const ms = time.Millisecond
	with := func(j Jitter, attempts int) Backoff {
		b := DefaultBackoff
		b.Jitter, b.Attempts = j, attempts
		return b
	}
	cases := []struct {
		name    string
		b       Backoff
		randoms []float64
		want    []time.Duration
	}{
		{"preset: two retries", DefaultBackoff, []float64{0.5, 0.25}, []time.Duration{50 * ms, 50 * ms}},
		{"Rigid climbs to the cap", with(Rigid, 7), nil, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"missing draws are 0", with(Full, 4), []float64{0.5}, []time.Duration{50 * ms, 0, 0}},
		{"missing draws are 0, Equal keeps its floor", with(Equal, 4), []float64{0.5}, []time.Duration{75 * ms, 100 * ms, 200 * ms}},
		{"extra draws are unused", with(Full, 2), []float64{0.5, 0.9, 0.9}, []time.Duration{50 * ms}},
		{"Decorrelated is fed each previous", with(Decorrelated, 5), []float64{0.5, 0.5, 0.5, 0}, []time.Duration{200 * ms, 350 * ms, 550 * ms, 100 * ms}},
		{"one attempt, no retries", with(Full, 1), []float64{0.5}, nil},
		{"no attempts", with(Full, 0), nil, nil},
		{"negative attempts", with(Full, -3), nil, nil},
	}
	for _, c := range cases {
		if got := c.b.Schedule(c.randoms); !slices.Equal(got, c.want) {
			t.Errorf("%s: Schedule(%v) = %v, want %v", c.name, c.randoms, got, c.want)
		}
	}
}

// A policy with more attempts than anyone could list is cut to 1024 delays
// rather than asking for memory that is not there.
func TestBackoffScheduleIsBounded(t *testing.T) {
	const ms = time.Millisecond
	b := Backoff{Base: ms, Factor: 2, Cap: time.Second, Attempts: math.MaxInt, Jitter: Rigid}
	got := b.Schedule(nil)
	if len(got) != 1024 {
		t.Fatalf("len(Schedule) = %d, want 1024", len(got))
	}
	if got[0] != ms || got[1023] != time.Second {
		t.Errorf("Schedule = [%v ... %v], want [1ms ... 1s]", got[0], got[1023])
	}
}

// The schedule is the same Delay calls a retry loop makes, step by step.
func TestBackoffScheduleIsDelay(t *testing.T) {
	const ms = time.Millisecond
	draws := []float64{0.9, 0.1, 0.7, 0.3, 0.5}
	for _, j := range []Jitter{Rigid, Full, Equal, Decorrelated} {
		b := Backoff{Base: 10 * ms, Factor: 3, Cap: 2 * time.Second, Attempts: 6, Jitter: j}
		got := b.Schedule(draws)
		var prev time.Duration
		for retry := 1; b.More(retry); retry++ {
			prev = b.Delay(retry, draws[retry-1], prev)
			if got[retry-1] != prev {
				t.Errorf("%v: Schedule()[%d] = %v, Delay(%d) = %v", j, retry-1, got[retry-1], retry, prev)
			}
		}
	}
}

func TestJitterString(t *testing.T) {
	cases := map[Jitter]string{Rigid: "Rigid", Full: "Full", Equal: "Equal", Decorrelated: "Decorrelated", Jitter(7): "Jitter(7)"}
	for j, want := range cases {
		if got := j.String(); got != want {
			t.Errorf("Jitter(%d).String() = %q, want %q", uint8(j), got, want)
		}
	}
}

// FuzzBackoff holds every Backoff, whatever its knobs, to its bounds: a
// ceiling in [0, Cap] that never shrinks with the retry, and a delay within
// the range its jitter promises.
func FuzzBackoff(f *testing.F) {
	const ms = time.Millisecond
	f.Add(int64(100*ms), 2.0, int64(time.Second), 3, uint8(1), 0.5, int64(0))
	f.Add(int64(time.Second), 1.5, int64(0), math.MaxInt, uint8(2), 1.0, int64(-1))
	f.Add(int64(-5), math.NaN(), int64(-7), -1, uint8(3), math.Inf(-1), int64(Never))
	f.Add(int64(Never), math.Inf(1), int64(1), 64, uint8(3), 0.999, int64(Never/2))
	f.Add(int64(1), 0.3, int64(Never), 1<<40, uint8(9), math.NaN(), int64(5))
	f.Fuzz(func(t *testing.T, base int64, factor float64, capacity int64, retry int, jitter uint8, random float64, previous int64) {
		b := Backoff{Base: time.Duration(base), Factor: factor, Cap: time.Duration(capacity), Jitter: Jitter(jitter)}
		limit := Never
		if capacity > 0 {
			limit = time.Duration(capacity)
		}
		c := b.Ceiling(retry)
		if c < 0 || c > limit {
			t.Fatalf("Ceiling(%d) = %v, want in [0, %v]", retry, c, limit)
		}
		if retry < math.MaxInt {
			if next := b.Ceiling(retry + 1); next < c {
				t.Fatalf("Ceiling(%d) = %v < Ceiling(%d) = %v", retry+1, next, retry, c)
			}
		}
		d := b.Delay(retry, random, time.Duration(previous))
		switch {
		case retry < 1:
			if d != 0 {
				t.Fatalf("Delay(%d) = %v, want 0", retry, d)
			}
		case b.Jitter == Decorrelated:
			if d < 0 || d > limit {
				t.Fatalf("Delay = %v, want in [0, %v]", d, limit)
			}
			if base > 0 && d < min(time.Duration(base), limit) {
				t.Fatalf("Delay = %v, below its floor min(Base, Cap)", d)
			}
		case b.Jitter == Equal:
			if d < c/2 || d > c {
				t.Fatalf("Delay = %v, want in [%v, %v]", d, c/2, c)
			}
		default:
			if d < 0 || d > c {
				t.Fatalf("Delay = %v, want in [0, %v]", d, c)
			}
		}
	})
}

func BenchmarkBackoffDelay(b *testing.B) {
	for _, j := range []Jitter{Rigid, Full, Equal, Decorrelated} {
		b.Run(j.String(), func(b *testing.B) {
			backoff := DefaultBackoff
			backoff.Jitter, backoff.Factor, backoff.Cap = j, 1.5, time.Hour
			retry, prev := 0, time.Duration(0)
			for b.Loop() {
				retry = retry%20 + 1
				prev = backoff.Delay(retry, 0.37, prev)
			}
		})
	}
}
