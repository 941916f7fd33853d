package policy

import (
	"math"
	"slices"
	"testing"
	"time"
)

// FuzzBudget drives a budget through any sequence of calls, the clock
// running both ways, and holds it to its promise: at every Spend it
// allows, the spends of the window ending then, this one included, are at
// most max(ratio × the firsts of that window, floor). The window is the
// true one, counted from each call's instant (the latest the clock has
// read), not the budget's slots. Left is never NaN nor below zero, and a
// Spend is allowed exactly when Left said one more would be. A refused
// Spend and a Left change nothing.
func FuzzBudget(f *testing.F) {
	f.Add(0.1, 1.0, int64(10*time.Second), int64(0), []byte{0, 0, 0, 200, 1, 0, 0, 30, 1, 0x10, 0, 5, 2, 0xff, 0x7f, 0})
	f.Add(0.5, 0.0, int64(time.Second), int64(1e9), []byte{0, 0, 0, 4, 0x20, 0xf4, 0x01, 4, 1, 0, 0, 9, 0x22, 0xf4, 0x01, 3, 1, 0x32, 0, 9})
	f.Add(math.NaN(), math.Inf(1), int64(-1), int64(math.MaxInt64-5), []byte{0, 1, 0, 7, 1, 1, 0, 255, 2, 0, 0, 0})
	f.Add(math.Inf(1), math.NaN(), int64(21), int64(math.MinInt64), []byte{0, 0, 0, 1, 1, 0, 0, 50, 0x81, 0xff, 0xff, 3, 1, 3, 0, 50})
	f.Add(2.0, 0.5, int64(3*time.Second), int64(-77), []byte{0, 0x9c, 0xff, 10, 1, 0x64, 0, 40, 0x20, 0xe8, 0x03, 0, 1, 0x01, 0, 40})
	f.Fuzz(func(t *testing.T, ratio, minPerSecond float64, window, start int64, ops []byte) {
		b := NewBudget(ratio, minPerSecond, time.Duration(window))
		w := int64(b.Window())
		type event struct{ at, n int64 }
		var firsts, spends []event
		now, latest, begun := start, int64(0), false
		// within sums the events of (at−w, at].
		within := func(evs []event, at int64) (sum float64) {
			for _, e := range evs {
				if e.at <= at && uint64(at-e.at) < uint64(w) {
					sum += float64(e.n)
				}
			}
			return sum
		}
		for i := 0; i+3 < len(ops); i += 4 {
			op := ops[i : i+4]
			now = fuzzClock(now, op[1], op[2], op[0]>>3)
			// Every op calls the budget at now, so the latest instant it
			// has seen is the harness's too. Its time starts at its first
			// call.
			b.Left(now)
			if !begun {
				latest, begun = now, true
			}
			latest = max(latest, now)
			n := int(op[3])
			switch op[0] % 3 {
			case 0:
				b.First(now, n)
				if n > 0 {
					firsts = append(firsts, event{latest, int64(n)})
				}
			case 1: // up to 31 spends in a row
				for k := range n % 32 {
					left := b.Left(now)
					before := *b
					before.slots.ring = slices.Clone(b.slots.ring)
					ok := b.Spend(now)
					if ok != (left >= 1) {
						t.Fatalf("step %d, spend %d: Spend = %v after Left = %v", i/4, k, ok, left)
					}
					if !ok {
						if !budgetSame(&before, b) {
							t.Fatalf("step %d, spend %d: a refused Spend changed the budget", i/4, k)
						}
						break
					}
					if math.IsInf(left, 1) {
						continue // nothing bounds it: the floor or the ratio is infinite
					}
					spends = append(spends, event{latest, 1})
					spent, fs := within(spends, latest), within(firsts, latest)
					bound := b.floor
					if fs > 0 {
						bound = max(bound, b.ratio*fs)
					}
					if spent > bound+1e-9*bound {
						t.Fatalf("step %d, spend %d at %d: %v spent in the window, over max(%v × %v firsts, floor %v)",
							i/4, k, latest, spent, b.ratio, fs, b.floor)
					}
				}
			case 2:
				f0, s0 := b.Counts(now)
				left := b.Left(now)
				if math.IsNaN(left) || left < 0 || (left != math.Floor(left) && !math.IsInf(left, 1)) {
					t.Fatalf("step %d: Left = %v", i/4, left)
				}
				if f1, s1 := b.Counts(now); f1 != f0 || s1 != s0 {
					t.Fatalf("step %d: Left changed the counts from %v, %v to %v, %v", i/4, f0, s0, f1, s1)
				}
			}
			if math.IsNaN(b.firsts) || math.IsNaN(b.spent) || b.firsts < 0 || b.spent < 0 {
				t.Fatalf("step %d: counts %v firsts, %v spent", i/4, b.firsts, b.spent)
			}
		}
	})
}

// budgetSame reports whether two budgets hold the same counts.
func budgetSame(a, b *Budget) bool {
	if a.firsts != b.firsts || a.spent != b.spent || a.slots.head != b.slots.head {
		return false
	}
	for i := range a.slots.ring {
		if a.slots.ring[i] != b.slots.ring[i] {
			return false
		}
	}
	return true
}
