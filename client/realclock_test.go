package client

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
)

// The real-clock tests: the one place these tests let real time pass, for
// what a virtual clock cannot show, how late a loaded machine's timers
// fire. Each runs about a second, beside the others. They assert a count
// against the rate within a stated tolerance, never a duration.

// realRate is the rate every real-clock test limits to, 2,000 a second,
// and realCallers how many loop on Wait at once: the numbers.
const (
	realRate    = 2000
	realCallers = 16
	realTol     = 0.03 // the check x/time/rate passes
)

// stallFree is how long the process may go without running before a
// limiter can lose anything to it: a burst of 10 lasts 5ms at 2,000 a
// second, and the callers in line cover more.
const stallFree = 5 * time.Millisecond

// waitFor runs realCallers callers that loop on wait until span has
// passed and returns how many were granted, the engine's time from start
// to the last grant, and how much of that time the process stood still.
//
// On a loaded machine the whole process can be off its processors for tens
// of milliseconds; no limiter with a burst of a few milliseconds grants
// through that (x/time/rate neither: it would need a waiter to be awake),
// so the check leaves such stalls out. A ticker on its own goroutine sees
// them as gaps between its ticks: a stall of the process stops it too,
// while a limiter that loses its timer does not.
func waitFor(t *testing.T, eng *engine.Engine, start int64, span time.Duration, wait func(context.Context) error) (int64, time.Duration, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var grants, last atomic.Int64
	var stalled time.Duration
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		prev := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				now := time.Now()
				if gap := now.Sub(prev); gap > stallFree {
					stalled += gap - stallFree
				}
				prev = now
			}
		}
	}()
	var wg sync.WaitGroup
	for range realCallers {
		wg.Go(func() {
			for wait(ctx) == nil {
				grants.Add(1)
				now := eng.Now()
				for {
					l := last.Load()
					if now <= l || last.CompareAndSwap(l, now) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	cancel()
	<-watched
	return grants.Load(), time.Duration(last.Load() - start), stalled
}

// The windows allow 200 per 100ms, 2,000 a second, and their callers stop
// halfway through a window: what a sliding window grants comes in
// generations, one per window, and stopping between two keeps the count
// from depending on which side of a boundary the deadline falls.
const (
	realAllow  = 200
	realWindow = 100 * time.Millisecond
	realSpan   = realWindow*10 + realWindow/2
)

// TestRealClockWait: each limiter kind with 16 callers in Wait for about
// a second grants within 3% of what its rate allows over the time the
// process ran, and never more than the exact limiter would. A bucket of
// 2,000 a second, burst 10, is held to burst + rate × elapsed; a window of
// 200 per 100ms to rate × elapsed (its slots reopen in generations). The
// four run side by side. A loaded machine can starve a process in ways a
// ticker does not see, so a kind that falls short runs again, up to
// realTries times in all: a limiter that loses time falls short every time.
func TestRealClockWait(t *testing.T) {
	kinds := []struct {
		name   string
		bucket bool
		wait   func(eng *engine.Engine) func(context.Context) error
	}{
		{"bucket", true, func(eng *engine.Engine) func(context.Context) error {
			b, _ := NewBucket(eng, realRate, 10)
			return b.Wait
		}},
		{"keyed bucket", true, func(eng *engine.Engine) func(context.Context) error {
			k, _ := NewKeyedBucket(eng, realRate, 10)
			return func(ctx context.Context) error { return k.Wait(ctx, "k") }
		}},
		{"window", false, func(eng *engine.Engine) func(context.Context) error {
			w, _ := NewWindow(eng, realAllow, realWindow)
			return w.Wait
		}},
		{"keyed window", false, func(eng *engine.Engine) func(context.Context) error {
			k, _ := NewKeyedWindow(eng, realAllow, realWindow)
			return func(ctx context.Context) error { return k.Wait(ctx, "k") }
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			var short []string
			for range realTries {
				eng := engine.New()
				start := eng.Now()
				wait := k.wait(eng)
				var why string
				if k.bucket {
					grants, elapsed, stalled := waitFor(t, eng, start, time.Second, wait)
					why = checkBucketRate(t, grants, elapsed, stalled, 10)
				} else {
					grants, elapsed, stalled := waitFor(t, eng, start, realSpan, wait)
					why = checkWindowRate(t, grants, elapsed, stalled)
				}
				if err := eng.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				if why == "" {
					return
				}
				short = append(short, why)
			}
			t.Fatalf("short in all %d runs:\n%s", realTries, strings.Join(short, "\n"))
		})
	}
}

// realTries is how many runs a kind gets to show its rate.
const realTries = 3

// checkBucketRate says what is wrong with a bucket's count, or "".
func checkBucketRate(t *testing.T, grants int64, elapsed, stalled time.Duration, burst float64) string {
	t.Helper()
	most := burst + realRate*elapsed.Seconds()
	if g := float64(grants); g > most+1 {
		t.Fatalf("%d grants in %v, more than the %.0f a bucket allows", grants, elapsed, most)
	}
	want := (1 - realTol) * (burst + realRate*(elapsed-stalled).Seconds())
	t.Logf("%d grants in %v (the process stood still for %v): %.4f of the most a bucket allows", grants, elapsed, stalled, float64(grants)/most)
	if float64(grants) < want {
		return fmt.Sprintf("%d grants in %v, %v of it stalled: want at least %.0f", grants, elapsed, stalled, want)
	}
	return ""
}

// checkWindowRate says what is wrong with a window's count, or "".
func checkWindowRate(t *testing.T, grants int64, elapsed, stalled time.Duration) string {
	t.Helper()
	rate := realAllow / realWindow.Seconds()
	most := realAllow * (1 + math.Floor(float64(elapsed)/float64(realWindow)))
	if g := float64(grants); g > most {
		t.Fatalf("%d grants in %v, more than the %.0f a window allows", grants, elapsed, most)
	}
	want := (1 - realTol) * rate * (elapsed - stalled).Seconds()
	t.Logf("%d grants in %v (the process stood still for %v): %.4f of rate × elapsed, %.4f of the most a window allows", grants, elapsed, stalled, float64(grants)/(rate*elapsed.Seconds()), float64(grants)/most)
	if float64(grants) < want {
		return fmt.Sprintf("%d grants in %v, %v of it stalled: want at least %.0f", grants, elapsed, stalled, want)
	}
	return ""
}
