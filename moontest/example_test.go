package moontest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moontest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A user's test, outside the module, drives an engine's time: a bucket of
// one token a second refills only when the test moves the clock.
func Example() {
	clock := moontest.NewClock(nil) // in a test: moontest.NewClock(t)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())

	limit, _ := client.NewBucket(eng, 1, 2)
	fmt.Println(limit.Allow(), limit.Allow(), limit.Allow())
	clock.Advance(time.Second)
	fmt.Println(limit.Allow(), limit.Allow())
	// Output:
	// true true false
	// true false
}

// TestPoolKeepOnUserClock: an idle connection is retired when the test
// moves the clock past Keep, and not a moment before; the timer the pool
// asked for fires on the test's goroutine.
func TestPoolKeepOnUserClock(t *testing.T) {
	clock := moontest.NewClock(t)
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	closed := make(chan int, 1)
	n := 0
	pool, err := client.NewPool(eng, client.PoolConfig[int]{
		Open:   func(context.Context) (int, error) { n++; return n, nil },
		Close:  func(c int) error { closed <- c; return nil },
		Limits: client.Limits{Size: 1, Keep: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := pool.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Put(c); err != nil {
		t.Fatal(err)
	}
	if err := clock.WaitPending(t.Context(), 1); err != nil { // the eviction timer
		t.Fatal(err)
	}
	clock.Advance(time.Minute - 1)
	if s := pool.Stats(); s.Idle != 1 {
		t.Fatalf("idle %d a nanosecond before Keep, want 1", s.Idle)
	}
	clock.Advance(1)
	if got := <-closed; got != c {
		t.Errorf("closed %d, want the idle %d", got, c)
	}
	if s := pool.Stats(); s.Idle != 0 || s.Evicted != 1 {
		t.Errorf("after Keep: idle %d, evicted %d; want 0, 1", s.Idle, s.Evicted)
	}
}

// TestClockDropsTimersAtCleanup: a timer left pending when the test ends
// never fires.
func TestClockDropsTimersAtCleanup(t *testing.T) {
	var clock *moontest.Clock
	fired := false
	t.Run("inner", func(t *testing.T) {
		clock = moontest.NewClock(t, moontest.WithLateness(time.Millisecond))
		clock.AfterFunc(time.Second, func() { fired = true })
	})
	if clock.Pending() != 0 {
		t.Fatalf("%d timers pending after the test ended", clock.Pending())
	}
	clock.Advance(time.Hour)
	if fired {
		t.Error("a timer fired after its test ended")
	}
}

// TestAdvanceByNothing: moving by zero or less, or to an instant passed
// already, fires what is due now and moves nothing.
func TestAdvanceByNothing(t *testing.T) {
	clock := moontest.NewClock(t)
	fired := 0
	clock.AfterFunc(0, func() { fired++ })
	clock.Advance(-time.Second)
	clock.AfterFunc(0, func() { fired++ })
	clock.AdvanceTo(clock.Now() - 5)
	if fired != 2 || clock.Now() != moontest.Epoch {
		t.Errorf("fired %d, clock at %+d; want 2 fired and the clock unmoved", fired, clock.Now()-moontest.Epoch)
	}
}
