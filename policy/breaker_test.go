package policy

import (
	"math"
	"testing"
	"time"
)

// breakerStep is one call on a Breaker: allow, success, failure, or reject
// (which only reads), and what it must answer.
type breakerStep struct {
	call   string
	at     int64
	allow  bool    // for allow
	reject float64 // the Reject after the call
}

func runBreaker(t *testing.T, b *Breaker, steps []breakerStep) {
	t.Helper()
	for n, s := range steps {
		switch s.call {
		case "allow":
			if got := b.Allow(s.at); got != s.allow {
				t.Fatalf("step %d: Allow = %v, want %v", n, got, s.allow)
			}
		case "success":
			b.Success(s.at)
		case "failure":
			b.Failure(s.at)
		case "reject":
		default:
			t.Fatalf("step %d: unknown call %q", n, s.call)
		}
		if got := b.Reject(s.at); math.Abs(got-s.reject) > 1e-12 {
			t.Fatalf("step %d: %s: Reject = %v, want %v", n, s.call, got, s.reject)
		}
	}
}

// bookBreaker is the SRE book's rule alone, with no floor and no cap
// beyond the formula's own: what the formula tests check.
func bookBreaker(k float64, period time.Duration) *Breaker {
	b := &Breaker{}
	b.set(Throttle{K: k, Period: period, Floor: 1, Cap: 1})
	return b
}

func TestBreaker(t *testing.T) {
	sec := func(s int64) int64 { return t0 + s*int64(time.Second) }
	tests := []struct {
		name  string
		b     *Breaker
		steps []breakerStep
	}{
		{"a backend that accepts is never refused", bookBreaker(2, time.Minute), []breakerStep{
			{call: "allow", at: sec(0), allow: true},
			{call: "success", at: sec(0)},
			{call: "allow", at: sec(1), allow: true},
			{call: "success", at: sec(1)},
			{call: "allow", at: sec(2), allow: true},
		}},
		{"up to K requests per accept, nothing is refused", bookBreaker(2, time.Minute), []breakerStep{
			{call: "success", at: sec(0)},
			{call: "failure", at: sec(0)},
			{call: "reject", at: sec(0), reject: 0},
			{call: "failure", at: sec(0), reject: 1.0 / 4}, // (3 − 2·1)/(3 + 1)
			{call: "failure", at: sec(0), reject: 2.0 / 5},
		}},
		{"the reject fraction is paid as a debt: exactly every fourth at ¼", bookBreaker(2, time.Minute), []breakerStep{
			{call: "success", at: sec(0)},
			{call: "failure", at: sec(0)},
			{call: "failure", at: sec(0), reject: 1.0 / 4},
			{call: "allow", at: sec(0), allow: true, reject: 1.0 / 4},
			{call: "allow", at: sec(0), allow: true, reject: 1.0 / 4},
			{call: "allow", at: sec(0), allow: true, reject: 1.0 / 4},
			// The fourth is refused, and a refusal is a request: (4−2)/5.
			{call: "allow", at: sec(0), allow: false, reject: 2.0 / 5},
			{call: "allow", at: sec(0), allow: true, reject: 2.0 / 5},
			{call: "allow", at: sec(0), allow: true, reject: 2.0 / 5},
			{call: "allow", at: sec(0), allow: false, reject: 3.0 / 6},
		}},
		{"a higher K forgives more", bookBreaker(3, time.Minute), []breakerStep{
			{call: "success", at: sec(0)},
			{call: "failure", at: sec(0)},
			{call: "failure", at: sec(0), reject: 0},
			{call: "failure", at: sec(0), reject: 1.0 / 5},
		}},
		{"counts age out of the period one slot at a time", bookBreaker(2, 24*time.Second), []breakerStep{
			{call: "failure", at: sec(0), reject: 1.0 / 2},
			{call: "failure", at: sec(5), reject: 2.0 / 3},
			{call: "reject", at: sec(23), reject: 2.0 / 3},
			{call: "reject", at: sec(24), reject: 1.0 / 2}, // the slot of sec(0) is out
			{call: "reject", at: sec(28), reject: 1.0 / 2},
			{call: "reject", at: sec(29), reject: 0},
		}},
		{"a clock that goes back counts in the newest slot", bookBreaker(2, 24*time.Second), []breakerStep{
			{call: "failure", at: sec(10), reject: 1.0 / 2},
			{call: "failure", at: sec(0), reject: 2.0 / 3},
			{call: "reject", at: sec(24), reject: 2.0 / 3}, // sec(0) was counted at sec(10)
			{call: "reject", at: sec(34), reject: 0},
		}},
		{"the ends of time neither panic nor wrap", bookBreaker(2, time.Minute), []breakerStep{
			{call: "failure", at: math.MinInt64, reject: 1.0 / 2},
			{call: "allow", at: math.MinInt64, allow: true, reject: 1.0 / 2},
			{call: "reject", at: math.MaxInt64, reject: 0},
			{call: "failure", at: math.MaxInt64, reject: 1.0 / 2},
			{call: "reject", at: math.MinInt64, reject: 1.0 / 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runBreaker(t, tt.b, tt.steps) })
	}
}

// TestBreakerRecoversWithoutTraffic is go-redis/go-redis#3062: a breaker
// that only traffic could close, and that let no traffic through, stayed
// open for good. This one, refusing nearly everything, admits again once
// a period passes with nothing to count.
func TestBreakerRecoversWithoutTraffic(t *testing.T) {
	b := bookBreaker(2, time.Minute)
	for range 1000 {
		b.Failure(t0)
	}
	refused := 0
	for range 100 {
		if !b.Allow(t0) {
			refused++
		}
	}
	if refused < 95 {
		t.Fatalf("after 1000 failures refused %d of 100, want nearly all", refused)
	}
	quiet := t0 + int64(time.Minute) + int64(time.Minute)/breakerSlots
	if r := b.Reject(quiet); r != 0 {
		t.Fatalf("Reject after a quiet period = %v, want 0", r)
	}
	// From here it answers as a breaker that never saw the outage: the
	// debt the refusals left is forgiven along with the counts.
	fresh := bookBreaker(2, time.Minute)
	for n := range 20 {
		now := quiet + int64(n)*int64(time.Millisecond)
		got, want := b.Allow(now), fresh.Allow(now)
		if got != want {
			t.Fatalf("attempt %d after a quiet period: Allow = %v, a fresh breaker says %v", n, got, want)
		}
		if got {
			b.Failure(now)
			fresh.Failure(now)
		}
	}
}

// TestBreakerNeverRefusesAll: the +1 in the fraction lets a trickle
// through however bad the backend, so it can be seen to recover.
func TestBreakerNeverRefusesAll(t *testing.T) {
	b := bookBreaker(2, time.Minute)
	for range 100 {
		b.Failure(t0)
	}
	admitted, last := 0, 0
	for i := range 10_000 {
		if b.Allow(t0) {
			admitted++
			last = i
			b.Failure(t0)
		}
	}
	// Each refusal is a request, so the fraction creeps towards 1 and the
	// gaps between admissions grow, but some still get through late on.
	if admitted < 3 || last < 5000 {
		t.Fatalf("10000 attempts at a failing backend: %d admitted, the last at %d", admitted, last)
	}
}

// TestBreakerReproducible: the same calls at the same times give the same
// answers, since nothing is drawn at random.
func TestBreakerReproducible(t *testing.T) {
	play := func() []bool {
		b := NewBreaker(2, 10*time.Second)
		var got []bool
		for i := range 500 {
			now := t0 + int64(i)*int64(37*time.Millisecond)
			ok := b.Allow(now)
			got = append(got, ok)
			if ok && i%3 == 0 {
				b.Success(now)
			} else if ok {
				b.Failure(now)
			}
		}
		return got
	}
	a, b := play(), play()
	refused := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("attempt %d: %v the first time, %v the second", i, a[i], b[i])
		}
		if !a[i] {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("a backend accepting one in three was never refused")
	}
}

// TestBreakerClamps: knobs with no sensible reading get the defaults, the
// SRE book's K and period and DefaultBreaker's floor and cap.
func TestBreakerClamps(t *testing.T) {
	book := NewBreaker(2, 2*time.Minute)
	if book.floor != 10 || book.cap != 0.9 {
		t.Fatalf("NewBreaker's floor %d and cap %v, want DefaultBreaker's 10 and 0.9", book.floor, book.cap)
	}
	for _, tt := range []struct {
		name string
		b    *Breaker
	}{
		{"K below 1", NewBreaker(0.5, 2*time.Minute)},
		{"K negative", NewBreaker(-3, 2*time.Minute)},
		{"K NaN", NewBreaker(math.NaN(), 2*time.Minute)},
		{"period zero", NewBreaker(2, 0)},
		{"period negative", NewBreaker(2, -time.Second)},
		{"zero Breaker", &Breaker{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.b.Reject(t0) != 0 || !tt.b.Allow(t0) {
				t.Fatal("a fresh breaker refuses")
			}
			if tt.b.k != book.k || tt.b.slots.width != book.slots.width || tt.b.floor != book.floor || tt.b.cap != book.cap {
				t.Fatalf("k %v width %d floor %d cap %v, want %v %d %d %v", tt.b.k, tt.b.slots.width, tt.b.floor, tt.b.cap,
					book.k, book.slots.width, book.floor, book.cap)
			}
			// K = 2: an accept and nine failures are ten requests, the
			// floor, and refuse (10 − 2)/11.
			tt.b.Success(t0)
			for range 8 {
				tt.b.Failure(t0)
			}
			if r := tt.b.Reject(t0); r != 0 {
				t.Fatalf("Reject at 9 requests, below the floor = %v, want 0", r)
			}
			tt.b.Failure(t0)
			if r := tt.b.Reject(t0); r != 8.0/11 {
				t.Fatalf("Reject at 10 requests, 1 accept = %v, want 8/11", r)
			}
			// Two minutes in slots of five seconds: a count lasts at least
			// the period less a slot, and is gone a period and a slot on.
			if r := tt.b.Reject(t0 + int64(2*time.Minute-5*time.Second) - 1); r != 8.0/11 {
				t.Fatalf("Reject just before the period ends = %v, want 8/11", r)
			}
			if r := tt.b.Reject(t0 + int64(2*time.Minute) + int64(5*time.Second)); r != 0 {
				t.Fatalf("Reject after the period = %v, want 0", r)
			}
		})
	}

	// An infinite K refuses nothing once anything has been accepted, and
	// before that refuses n/(n+1) like any other.
	inf := bookBreaker(math.Inf(1), time.Minute)
	for range 3 {
		inf.Failure(t0)
	}
	if r := inf.Reject(t0); r != 3.0/4 {
		t.Fatalf("infinite K, 3 failures: Reject %v, want 3/4", r)
	}
	inf.Success(t0)
	for range 100 {
		inf.Failure(t0)
	}
	if r := inf.Reject(t0); r != 0 || !inf.Allow(t0) {
		t.Fatalf("infinite K: Reject %v, want 0", r)
	}
}

// TestBreakerFloorAndCap: the two limits DefaultBreaker adds to the book's
// formula, and how each Throttle field out of range is read.
func TestBreakerFloorAndCap(t *testing.T) {
	tests := []struct {
		name     string
		throttle Throttle
		floor    int64
		cap      float64
	}{
		{"zero: the defaults", Throttle{K: 2}, 10, 0.9},
		{"negative: the defaults", Throttle{K: 2, Floor: -1, Cap: -0.5}, 10, 0.9},
		{"NaN cap: the default", Throttle{K: 2, Cap: math.NaN()}, 10, 0.9},
		{"set", Throttle{K: 2, Floor: 3, Cap: 0.5}, 3, 0.5},
		{"a cap of one or more is none", Throttle{K: 2, Floor: 1, Cap: 7}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Breaker{}
			b.set(tt.throttle)
			if b.floor != tt.floor || b.cap != tt.cap {
				t.Fatalf("floor %d cap %v, want %d %v", b.floor, b.cap, tt.floor, tt.cap)
			}
			// Below the floor nothing is refused, however bad it looks.
			for n := int64(1); n < tt.floor; n++ {
				b.Failure(t0)
				if r := b.Reject(t0); r != 0 || !b.admits(t0) {
					t.Fatalf("%d failures, below the floor of %d: Reject %v", n, tt.floor, r)
				}
			}
			// At the floor and past it, the book's n/(n+1) up to the cap.
			for n := max(tt.floor, 1); n <= 100; n++ {
				b.Failure(t0)
				want := min(float64(n)/float64(n+1), tt.cap)
				if r := b.Reject(t0); r != want {
					t.Fatalf("%d failures: Reject %v, want %v", n, r, want)
				}
			}
		})
	}
}

func TestBreakerAllocs(t *testing.T) {
	b := NewBreaker(2, time.Minute)
	now := t0
	if n := testing.AllocsPerRun(1000, func() {
		now += int64(time.Second)
		if b.Allow(now) {
			b.Failure(now)
		}
		b.Success(now)
	}); n != 0 {
		t.Errorf("Allow, Success, Failure: %v allocations, want 0", n)
	}
}
