package policy

import (
	"math"
	"testing"
	"time"
)

// shedAt is t0 plus a number of tenths of a second: with a ten-second
// window, slots are a second long and t0 starts one.
func shedAt(tenths int64) int64 { return t0 + tenths*int64(100*time.Millisecond) }

// shedderStep is one call on a Shedder and what must hold after it.
type shedderStep struct {
	call     string // heat, done, allow
	at       int64
	heat     float64       // for heat
	held     time.Duration // for done
	inflight int           // for allow
	allow    bool          // for allow
	limit    int           // Limit after the step; 0 means no evidence
	hot      bool          // Hot after the step
}

func runShedder(t *testing.T, s *Shedder, steps []shedderStep) {
	t.Helper()
	for n, st := range steps {
		switch st.call {
		case "heat":
			s.Heat(st.heat, st.at)
		case "done":
			s.Done(st.at, st.held)
		case "allow":
			if got := s.Allow(st.at, st.inflight); got != st.allow {
				t.Fatalf("step %d: Allow(%d in flight) = %v, want %v", n, st.inflight, got, st.allow)
			}
		default:
			t.Fatalf("step %d: unknown call %q", n, st.call)
		}
		limit, ok := s.Limit(st.at)
		if ok != (st.limit > 0) || limit != st.limit {
			t.Fatalf("step %d: %s: Limit = %d, %v; want %d", n, st.call, limit, ok, st.limit)
		}
		if got := s.Hot(st.at); got != st.hot {
			t.Fatalf("step %d: %s: Hot = %v, want %v", n, st.call, got, st.hot)
		}
	}
}

// done is n completions at one instant, each held for held, on a cold
// shedder whose Limit is limit meanwhile.
func done(at int64, n int, held time.Duration, limit int) []shedderStep {
	var out []shedderStep
	for range n {
		out = append(out, shedderStep{call: "done", at: at, held: held, limit: limit})
	}
	return out
}

func TestShedder(t *testing.T) {
	type steps = []shedderStep
	cat := func(parts ...steps) steps {
		var out steps
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name  string
		steps steps
	}{
		{"a cold shedder never refuses", cat(
			done(shedAt(1), 10, 100*time.Millisecond, 0),
			steps{
				{call: "heat", at: shedAt(10), heat: 0.5, limit: 1},
				{call: "allow", at: shedAt(10), inflight: 1_000_000, allow: true, limit: 1},
			})},
		{"a hot shedder with no evidence admits", steps{
			{call: "heat", at: shedAt(0), heat: 1, hot: true},
			{call: "allow", at: shedAt(0), inflight: 1_000_000, allow: true, hot: true},
			{call: "allow", at: shedAt(50), inflight: 1_000_000, allow: true, hot: true},
		}},
		{"hot, it refuses above the throughput × holding time it has shown", cat(
			done(shedAt(2), 30, 300*time.Millisecond, 0), // 30/s × 0.3 s = 9
			steps{
				// The slot is not over: the evidence does not count yet.
				{call: "heat", at: shedAt(9), heat: 0.8, hot: true},
				{call: "allow", at: shedAt(9), inflight: 50, allow: true, hot: true},
				{call: "allow", at: shedAt(10), inflight: 9, allow: true, limit: 9, hot: true},
				{call: "allow", at: shedAt(10), inflight: 10, allow: false, limit: 9, hot: true},
				{call: "heat", at: shedAt(10), heat: 0.79, limit: 9},
				{call: "allow", at: shedAt(10), inflight: 10, allow: true, limit: 9},
			})},
		{"the most completions and the least holding time, from different slots", cat(
			done(shedAt(0), 50, 400*time.Millisecond, 0),
			done(shedAt(10), 20, 100*time.Millisecond, 20), // 50/s × 0.4 s meanwhile
			steps{
				// 50/s from the first, 0.1 s from the second: 5.
				{call: "heat", at: shedAt(20), heat: 0.9, limit: 5, hot: true},
				{call: "allow", at: shedAt(20), inflight: 5, allow: true, limit: 5, hot: true},
				{call: "allow", at: shedAt(20), inflight: 6, allow: false, limit: 5, hot: true},
			})},
		{"the limit is at least one", cat(
			done(shedAt(0), 1, time.Millisecond, 0),
			steps{
				{call: "heat", at: shedAt(10), heat: 0.9, limit: 1, hot: true},
				{call: "allow", at: shedAt(10), inflight: 1, allow: true, limit: 1, hot: true},
				{call: "allow", at: shedAt(10), inflight: 2, allow: false, limit: 1, hot: true},
			})},
		{"evidence ages out of the window, and then it admits", cat(
			done(shedAt(0), 10, 100*time.Millisecond, 0),
			steps{
				{call: "heat", at: shedAt(95), heat: 0.9, limit: 1, hot: true},
				{call: "allow", at: shedAt(95), inflight: 5, allow: false, limit: 1, hot: true},
				{call: "heat", at: shedAt(100), heat: 0.9, hot: true},
				{call: "allow", at: shedAt(100), inflight: 5, allow: true, hot: true},
			})},
		{"a heat report goes stale after the window", cat(
			done(shedAt(0), 10, 100*time.Millisecond, 0),
			steps{
				{call: "heat", at: shedAt(10), heat: 0.9, limit: 1, hot: true},
				{call: "allow", at: shedAt(19), inflight: 5, allow: false, limit: 1, hot: true},
				{call: "done", at: shedAt(19), held: 100 * time.Millisecond, limit: 1, hot: true},
				{call: "allow", at: shedAt(109), inflight: 5, allow: false, limit: 1, hot: true},
				{call: "done", at: shedAt(109), held: 100 * time.Millisecond, limit: 1, hot: true},
				// Ten seconds after the report: still the evidence, no heat.
				{call: "allow", at: shedAt(110), inflight: 5, allow: true, limit: 1},
			})},
		{"bad readings: NaN heat is cold, negative held is zero", cat(
			done(shedAt(0), 4, -time.Second, 0),
			steps{
				{call: "heat", at: shedAt(10), heat: math.NaN(), limit: 1},
				{call: "allow", at: shedAt(10), inflight: 9, allow: true, limit: 1},
				{call: "heat", at: shedAt(10), heat: math.Inf(1), limit: 1, hot: true},
				{call: "allow", at: shedAt(10), inflight: 9, allow: false, limit: 1, hot: true},
				{call: "heat", at: shedAt(10), heat: math.Inf(-1), limit: 1},
			})},
		{"a clock that goes back is read as standing still", cat(
			done(shedAt(10), 10, 500*time.Millisecond, 0),
			done(shedAt(0), 10, 500*time.Millisecond, 0), // counted at shedAt(10)
			steps{
				{call: "heat", at: shedAt(0), heat: 1, hot: true},
				{call: "allow", at: shedAt(20), inflight: 10, allow: true, limit: 10, hot: true},
				{call: "allow", at: shedAt(20), inflight: 11, allow: false, limit: 10, hot: true},
				// The heat was reported when the clock stood at shedAt(10),
				// so it is fresh until ten seconds after that.
				{call: "allow", at: shedAt(105), inflight: 11, allow: false, limit: 10, hot: true},
				{call: "allow", at: shedAt(110), inflight: 11, allow: true},
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runShedder(t, NewShedder(0.8, 10*time.Second), tt.steps)
		})
	}
}

// TestShedderClamps: knobs with no sensible reading get Kratos BBR's.
func TestShedderClamps(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    *Shedder
	}{
		{"hot zero", NewShedder(0, 10*time.Second)},
		{"hot negative", NewShedder(-1, 10*time.Second)},
		{"hot NaN", NewShedder(math.NaN(), 10*time.Second)},
		{"window zero", NewShedder(0.8, 0)},
		{"window negative", NewShedder(0.8, -time.Minute)},
		{"zero Shedder", &Shedder{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runShedder(t, tt.s, []shedderStep{
				{call: "heat", at: shedAt(0), heat: 0.79},
				{call: "heat", at: shedAt(0), heat: 0.8, hot: true},
				{call: "done", at: shedAt(0), held: time.Second, hot: true},
				// One-second slots: the evidence counts from shedAt(10).
				{call: "done", at: shedAt(9), held: time.Second, hot: true},
				{call: "allow", at: shedAt(10), inflight: 3, allow: false, limit: 2, hot: true},
				// A ten-second window: the heat is stale at shedAt(100).
				{call: "allow", at: shedAt(99), inflight: 3, allow: false, limit: 2, hot: true},
				{call: "allow", at: shedAt(100), inflight: 3, allow: true},
			})
		})
	}
}

func TestShedderAllocs(t *testing.T) {
	s := NewShedder(0.5, time.Second)
	now := t0
	s.Heat(0.9, now)
	if n := testing.AllocsPerRun(1000, func() {
		now += int64(time.Millisecond)
		s.Heat(0.9, now)
		if s.Allow(now, 3) {
			s.Done(now, time.Millisecond)
		}
	}); n != 0 {
		t.Errorf("Heat, Allow, Done: %v allocations, want 0", n)
	}
}
