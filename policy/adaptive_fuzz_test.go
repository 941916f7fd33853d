package policy

import (
	"math"
	"testing"
	"time"
)

// FuzzAdaptive drives a limit through windows of any calls, latencies,
// in-flight counts, callers' deadlines and clock steps, some going back,
// and checks after each step that the limit is within its bounds and
// nothing it holds is NaN, infinite or below zero. Every few steps it repeats the last window at
// the same throughput with a higher latency (a pure latency rise): the
// limit after must be no higher than before.
func FuzzAdaptive(f *testing.F) {
	f.Add(uint8(1), uint8(40), uint8(20), []byte{0, 20, 10, 1, 3, 0, 9, 4, 0, 20, 30, 1, 3, 0, 9, 4})
	f.Add(uint8(5), uint8(6), uint8(0), []byte{2, 200, 5, 1, 0, 255, 1, 9, 3, 1, 250, 3, 0, 0, 1, 0})
	f.Add(uint8(0), uint8(0), uint8(200), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add(uint8(3), uint8(100), uint8(50), []byte{0, 100, 1, 0, 100, 2, 0, 100, 4, 0, 100, 8, 3, 0, 9, 4, 3, 0, 9, 2})
	// A window, then the same window slower, three times.
	f.Add(uint8(1), uint8(100), uint8(25), []byte{0, 40, 20, 2, 0, 0, 3, 74, 10, 2, 0, 0, 4, 0, 0, 2, 0, 0, 4, 16, 0, 4, 32, 0})
	f.Fuzz(func(t *testing.T, lo, hi, start uint8, ops []byte) {
		cfg := AdaptiveConfig{
			Min: int(lo) - 2, Max: int(hi) * 3, Start: int(start) - 5,
			Healthy: time.Duration(lo%4) * 15 * time.Millisecond,
			Window:  time.Duration(hi%3) * 50 * time.Millisecond,
		}
		now := int64(1e12)
		a := NewAdaptive(cfg, now)
		// The last window decided, for repeating it with more latency.
		var last struct {
			ok     bool
			n, sum int64
			dt     int64
		}
		var n, sum int64 // this window's samples, as fed
		snapshots := false
		for len(ops) >= 3 {
			op, x, y := ops[0]%5, int64(ops[1]), int64(ops[2])
			ops = ops[3:]
			from := a.from
			switch op {
			case 0: // calls finish
				k, d := x, time.Duration(y*y)*time.Millisecond/4
				a.Sample(k, time.Duration(k)*d)
				n, sum = n+k, sum+k*int64(d)
			case 1: // in-flight seen
				a.InFlight(int(x) - 3)
				snapshots = true
			case 2: // a caller found no room, with a deadline perhaps passed
				a.Full()
				a.Deadline(time.Duration(x-8) * time.Duration(y) * time.Millisecond)
			case 3: // the clock moves, perhaps back
				now += (x - 64) * y * int64(time.Millisecond)
				a.Update(now)
			case 4: // the last window again, at the same throughput, slower
				if !last.ok || snapshots || n != 0 {
					continue
				}
				rise := 1.01 + float64(x)/16
				if float64(last.sum)*rise > 1<<53 { // past what the sums hold exactly
					continue
				}
				before := a.Limit()
				a.Sample(last.n, time.Duration(float64(last.sum)*rise))
				now = a.from + last.dt
				if !a.Update(now) && a.from != now {
					t.Fatalf("the repeated window was not decided")
				}
				if a.Limit() > before {
					t.Fatalf("latency rose ×%.2f at the same throughput and the limit rose from %d to %d", rise, before, a.Limit())
				}
				from = a.from // decided: the checks below are done
				last.sum = int64(float64(last.sum) * rise)
			}
			if a.from != from { // a window was decided or dropped
				last.ok = n > 0 && sum > 0 && !snapshots
				last.n, last.sum, last.dt = n, sum, a.from-from
				n, sum, snapshots = 0, 0, false
			}
			checkAdaptive(t, a)
		}
	})
}

// checkAdaptive fails t if a's numbers are out of bounds or not numbers.
func checkAdaptive(t *testing.T, a *Adaptive) {
	t.Helper()
	if l := a.Limit(); float64(l) < a.lo || float64(l) > a.hi || l < 1 {
		t.Fatalf("limit %d outside [%v, %v]", l, a.lo, a.hi)
	}
	for name, v := range map[string]float64{
		"limit": a.limit, "base": a.base, "rtt": a.rtt, "inflight": a.inflight, "put": a.put, "restore": a.restore,
	} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("%s is %v", name, v)
		}
	}
	if a.n < 0 || a.sum < 0 || a.seen < 0 || a.held < 0 || a.least < 0 {
		t.Fatalf("counts below zero: n %d, sum %d, seen %d, held %d, least %d", a.n, a.sum, a.seen, a.held, a.least)
	}
}
