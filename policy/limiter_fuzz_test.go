package policy

import (
	"math"
	"testing"
	"time"
)

// fuzzClock moves now by a signed 16-bit step scaled by 2^shift, so one
// input covers nanoseconds to years and clocks that go back, saturating at
// the ends of int64 rather than wrapping.
func fuzzClock(now int64, lo, hi, shift byte) int64 {
	return addClamped(now, int64(int16(uint16(lo)|uint16(hi)<<8))<<(shift%48))
}

// addClamped is now + dt, saturating at the ends of int64: a harness whose
// clock wrapped around would hand the code under test a jump from the far
// future to the far past that no real clock makes.
func addClamped(now, dt int64) int64 {
	switch {
	case dt > 0 && now > math.MaxInt64-dt:
		return math.MaxInt64
	case dt < 0 && now < math.MinInt64-dt:
		return math.MinInt64
	}
	return now + dt
}

// fuzzAmount picks the n a call asks for: mostly small counts and
// fractions, sometimes the values that are bad input.
func fuzzAmount(c byte, burst float64) float64 {
	switch c {
	case 250:
		return math.NaN()
	case 251:
		return math.Inf(1)
	case 252:
		return -1
	case 253:
		return 0
	case 254:
		return burst
	case 255:
		return burst + 1
	}
	return float64(c) / 32
}

// FuzzBucket drives a bucket through any sequence of calls, the clock
// running both ways, and holds it to its invariants: tokens always in
// [0, burst]; a refused Take changes nothing; Tokens changes nothing; a Take
// at now + Next succeeds, and a nanosecond earlier fails; and no more is
// ever taken than the burst plus what the rate earned up to the latest
// instant seen, however often the clock steps back.
func FuzzBucket(f *testing.F) {
	f.Add(10.0, 2.0, int64(0), []byte{0, 0, 0, 32, 0, 0, 0, 32, 0, 0, 0, 32, 1, 0, 0, 32, 8, 1, 0, 32})
	f.Add(1.0, 5.0, int64(1e9), []byte{0xf0, 0xff, 0xff, 32, 0x30, 1, 0, 32, 0x30, 0xff, 0xff, 32, 0x30, 1, 0, 32})
	f.Add(0.0, 0.0, int64(math.MaxInt64-5), []byte{0, 1, 0, 32, 2, 3, 0, 250, 1, 0, 0, 251, 0, 0, 0, 252, 1, 0, 0, 255})
	f.Add(math.NaN(), math.Inf(1), int64(math.MinInt64), []byte{0, 0, 0, 254, 0x78, 0xff, 0x7f, 40, 1, 0, 0, 253})
	f.Add(1e-300, 1.0, int64(0), []byte{0, 0, 0, 254, 1, 0, 0, 32, 0xf8, 0xff, 0x7f, 32})
	f.Add(1e9/7, 3.5, int64(-77), []byte{0, 0, 0, 100, 1, 3, 0, 100, 0, 3, 0, 100, 0x40, 0x11, 0, 17})
	f.Add(math.Inf(1), 2.0, int64(5), []byte{0, 0, 0, 32, 0, 0, 0, 32, 0, 0, 0, 32, 0, 1, 0, 64})
	f.Fuzz(func(t *testing.T, rate, burst float64, start int64, ops []byte) {
		b := NewBucket(rate, burst, start)
		full := b.burst
		now, latest := start, start
		taken := 0.0
		for i := 0; i+3 < len(ops); i += 4 {
			op := ops[i : i+4]
			now = fuzzClock(now, op[1], op[2], op[0]>>3)
			latest = max(latest, now)
			n := fuzzAmount(op[3], full)
			before := *b
			switch op[0] % 3 {
			case 0:
				ok := b.Take(now, n)
				if !ok && *b != before {
					t.Fatalf("step %d: refused Take(%d, %v) changed the bucket", i/4, now, n)
				}
				if ok && n > 0 {
					taken += n
				}
			case 1:
				d := b.Next(now, n)
				if d < 0 {
					t.Fatalf("step %d: Next(%d, %v) = %v", i/4, now, n, d)
				}
				if d != Never && now <= math.MaxInt64-int64(d) {
					if late := *b; !late.Take(now+int64(d), n) {
						t.Fatalf("step %d: Next(%d, %v) = %v, but Take then is refused", i/4, now, n, d)
					}
					if early := *b; d > 0 && d < 1<<50 && early.Take(now+int64(d)-1, n) {
						t.Fatalf("step %d: Next(%d, %v) = %v, but Take a nanosecond earlier passes", i/4, now, n, d)
					}
				}
			case 2:
				got := b.Tokens(now)
				if !(got >= 0 && got <= full) {
					t.Fatalf("step %d: Tokens(%d) = %v, want in [0, %v]", i/4, now, got, full)
				}
			}
			if *b != before && op[0]%3 != 0 {
				t.Fatalf("step %d: a read changed the bucket", i/4)
			}
			if !(b.tokens >= 0 && b.tokens <= full) || b.burst != full {
				t.Fatalf("step %d: holds %v of burst %v", i/4, b.tokens, b.burst)
			}
			if b.at < start || b.at > latest {
				t.Fatalf("step %d: reference time %d outside [%d, %d]", i/4, b.at, start, latest)
			}
		}
		earned := b.perNs * float64(uint64(latest-start))
		if bound := full + earned; !math.IsInf(bound, 1) && taken > bound*(1+1e-9)+1e-9 {
			t.Fatalf("took %v, more than the burst %v plus %v earned", taken, full, earned)
		}
	})
}

// FuzzWindow drives a window and the brute-force model through the same
// calls, the clock running both ways, and requires the same answer to every
// one; then checks the quota itself against every counted stamp.
func FuzzWindow(f *testing.F) {
	f.Add(int8(3), int64(10), int64(0), []byte{0, 1, 0, 0, 0, 0, 0, 3, 0, 1, 0, 0, 2, 0, 0})
	f.Add(int8(2), int64(10), int64(100), []byte{0, 0, 0, 0, 0xce, 0xff, 0, 10, 0, 1, 0, 0, 2, 0, 0, 0, 0x9c, 0xff})
	f.Add(int8(5), int64(1e9), int64(math.MaxInt64-1e9), []byte{0x80, 1, 0, 0x80, 1, 0, 0x82, 0, 0, 0x81, 0xff, 0x7f})
	f.Add(int8(0), int64(10), int64(0), []byte{0, 1, 0, 1, 1, 0, 2, 1, 0})
	f.Add(int8(4), int64(0), int64(0), []byte{0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0})
	f.Add(int8(-3), int64(-10), int64(math.MinInt64), []byte{0, 1, 0, 1, 1, 0, 2, 1, 0})
	f.Add(int8(1), int64(math.MaxInt64), int64(math.MinInt64), []byte{0, 0, 0, 0xf8, 0xff, 0x7f, 0, 0, 0, 2, 0, 0})
	f.Add(int8(20), int64(7), int64(0), []byte{
		0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0,
		0, 2, 0, 0, 2, 0, 0, 2, 0, 0, 2, 0, 0, 2, 0, 0, 2, 0, 0, 2, 0, 0, 2, 0, 0, 2, 0, 0, 2, 0,
		0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0,
	})
	f.Fuzz(func(t *testing.T, allow int8, window, start int64, ops []byte) {
		w := NewWindow(int(allow), time.Duration(window))
		m := &windowModel{allow: int(allow), window: window}
		now := start
		for i := 0; i+2 < len(ops); i += 3 {
			op := ops[i : i+3]
			now = fuzzClock(now, op[1], op[2], op[0]>>2)
			checkWindow(t, w, m, i/3, op[0], now)
			if w.n < 0 || w.n > max(int(allow), 0) || len(w.ring) > max(int(allow), 0) {
				t.Fatalf("step %d: %d stamps in a ring of %d, allow %d", i/3, w.n, len(w.ring), allow)
			}
		}
		checkStretches(t, m)
	})
}

// FuzzGate drives a gate through any run of Enter and Leave, one bit each,
// and requires the count a model keeps, held in [0, limit].
func FuzzGate(f *testing.F) {
	f.Add(2, []byte{0xff, 0x00, 0xff})
	f.Add(0, []byte{0xaa, 0xff})
	f.Add(-5, []byte{0x0f, 0xf0})
	f.Add(1, []byte{0x00, 0x01, 0x03})
	f.Fuzz(func(t *testing.T, limit int, ops []byte) {
		g := NewGate(limit)
		held := 0
		for i := range 8 * len(ops) {
			if ops[i/8]>>(i%8)&1 == 1 {
				want := limit <= 0 || held < limit
				if got := g.Enter(); got != want {
					t.Fatalf("step %d: Enter() = %v with %d held, limit %d", i, got, held, limit)
				}
				if want {
					held++
				}
			} else {
				g.Leave()
				held = max(held-1, 0)
			}
			if got := g.Held(); got != held || got < 0 || (limit > 0 && got > limit) {
				t.Fatalf("step %d: Held() = %d, want %d in [0, %d]", i, got, held, limit)
			}
		}
	})
}
