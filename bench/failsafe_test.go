package main

import (
	"slices"
	"testing"
)

// TestFailsafeSidesInDefaultRun checks that the default run measures
// failsafe-go wherever it has a counterpart: its two rate limiters beside
// the Bucket, its bulkhead beside the Gate, its circuit breaker beside the
// ward's breaker.
func TestFailsafeSidesInDefaultRun(t *testing.T) {
	picked, err := pick("")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"Rate Allow":       {failsafeSmooth, failsafeBursty},
		"Gate Enter+Leave": {failsafeBulk},
		"Breaker outage":   {failsafeBreaker},
	}
	found := map[string]bool{}
	for _, s := range picked {
		if s.rows == nil {
			continue
		}
		for _, r := range s.rows(nil, configs["default"]) {
			names := want[r.suite+" "+r.name]
			for _, sd := range r.sides {
				if slices.Contains(names, sd.name) {
					found[sd.name] = true
				}
			}
		}
	}
	for row, names := range want {
		for _, n := range names {
			if !found[n] {
				t.Errorf("the default run has no %s side in %s", n, row)
			}
		}
	}
}

// TestFailsafeBreakerStopsAtItsDefaults checks failsafe-go's breaker side
// on the dead backend: with its defaults it opens after one failure, so
// of a thousand attempts only the first reaches the backend, and every
// other is refused with ErrOpen rather than failing some other way.
func TestFailsafeBreakerStopsAtItsDefaults(t *testing.T) {
	c := failsafeCircuit()
	defer c.close()
	c.run(1000)
	if got := c.count(); got != 1 {
		t.Errorf("%d of 1000 attempts reached the dead backend, want 1", got)
	}
	if got := c.errs(); got != 0 {
		t.Errorf("%d attempts failed with neither the backend's error nor ErrOpen", got)
	}
}

// TestFailsafeLimitersAllowAtTheRowsRate checks that failsafe-go's rate
// limiters and bulkhead, set like the Bucket and the Gate, let every call
// through: the rows compare the cost of asking, not of being refused.
func TestFailsafeLimitersAllowAtTheRowsRate(t *testing.T) {
	for name, c := range map[string]contender{
		failsafeSmooth: failsafeRate(failsafeSmooth),
		failsafeBursty: failsafeRate(failsafeBursty),
		failsafeBulk:   failsafeGate(),
	} {
		c.run(10_000)
		if got := c.count(); got != 10_000 {
			t.Errorf("%s let %d of 10000 calls through, want all", name, got)
		}
		c.close()
	}
}
