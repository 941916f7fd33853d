package main

import (
	"sync"
	"testing"
)

// TestTallyCounts: a tally added to from many goroutines at once holds
// the exact sum, whichever cells the goroutines' stacks pick.
func TestTallyCounts(t *testing.T) {
	var tl tally
	var wg sync.WaitGroup
	const goroutines, adds = 64, 1000
	for g := range goroutines {
		wg.Go(func() {
			for range adds {
				tl.Add(int64(g % 3))
			}
		})
	}
	wg.Wait()
	want := int64(0)
	for g := range goroutines {
		want += int64(g%3) * adds
	}
	if got := tl.Load(); got != want {
		t.Fatalf("tally %d, want %d", got, want)
	}
}
