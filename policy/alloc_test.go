package policy

import (
	"testing"
	"time"
)

// The hot paths allocate nothing: a limiter consulted on every request
// must not make garbage on every request.
func TestLimitersDoNotAllocate(t *testing.T) {
	bucket := NewBucket(1e6, 10, 0)
	window := NewWindow(100, 50*time.Microsecond)
	gate := NewGate(8)
	var now int64
	// Warm the window up past its last growth: its ring is full-sized and
	// wrapping from here on.
	for range 1000 {
		now += int64(time.Microsecond) / 4
		window.Take(now)
	}
	cases := []struct {
		name string
		f    func()
	}{
		{"Bucket.Take", func() { now += 500; bucket.Take(now, 1) }},
		{"Bucket.Take refused", func() { bucket.Take(now, 11) }},
		{"Bucket.Next", func() { bucket.Next(now, 5) }},
		{"Bucket.Tokens", func() { bucket.Tokens(now) }},
		{"Window.Take", func() { now += int64(time.Microsecond) / 4; window.Take(now) }},
		{"Window.Take refused", func() { window.Take(now); window.Take(now) }},
		{"Window.Left", func() { window.Left(now + 1000) }},
		{"Window.Next", func() { window.Next(now) }},
		{"Gate.Enter and Leave", func() { gate.Enter(); gate.Enter(); gate.Leave() }},
	}
	for _, c := range cases {
		if got := testing.AllocsPerRun(1000, c.f); got != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, got)
		}
	}
}

// Backoff's per-step answers allocate nothing either; only Schedule, which
// returns a slice, does.
func TestBackoffDoesNotAllocate(t *testing.T) {
	for _, j := range []Jitter{Rigid, Full, Equal, Decorrelated} {
		b := Backoff{Base: time.Millisecond, Factor: 1.7, Cap: time.Minute, Attempts: 10, Jitter: j}
		retry, prev, ceiling, more := 0, time.Duration(0), time.Duration(0), false
		got := testing.AllocsPerRun(1000, func() {
			retry = retry%40 + 1
			prev = b.Delay(retry, 0.37, prev)
			ceiling = b.Ceiling(retry)
			more = b.More(retry)
		})
		_, _ = ceiling, more
		if got != 0 {
			t.Errorf("%v: Delay allocates %v times per call, want 0", j, got)
		}
	}
}
