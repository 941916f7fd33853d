package bubble_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/engine"
)

// rounds is how many bubbles each test runs its body in, one after another
// in one binary. Objects made in one bubble must never hand their channels
// to the next: the runtime kills the binary if they do.
const rounds = 3

// realLimit is the most real time a test's bubbles may take in all. Their
// fake clocks pass minutes or hours; the real one should pass milliseconds.
const realLimit = 10 * time.Second

// inBubbles runs f rounds times, each in a bubble of its own with a fresh
// engine on the bubble's clock, shut down when f returns.
func inBubbles(t *testing.T, f func(t *testing.T, eng *engine.Engine)) {
	t.Helper()
	start := time.Now()
	for i := range rounds {
		t.Run(fmt.Sprint("bubble", i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := engine.New()
				defer func() {
					if err := eng.Shutdown(context.Background()); err != nil {
						t.Errorf("shutdown: %v", err)
					}
				}()
				f(t, eng)
			})
		})
	}
	if real := time.Since(start); real > realLimit {
		t.Errorf("%d bubbles took %v of real time, want under %v", rounds, real, realLimit)
	}
}

// took runs f and says how much time passed on the bubble's clock.
func took(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// must fails the test at once on a non-nil err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
