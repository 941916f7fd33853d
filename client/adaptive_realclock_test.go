package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// TestAdaptiveGateRealClock: on the real clock, whose timers fire late on a
// loaded machine, the gate's timer still reads the callers' latencies and
// counts. Eight callers loop for about a second through a gate of four,
// each call a 5 ms sleep on the engine's clock. The latency learnt is at
// least the sleep and at most ten times it (a loaded machine's sleeps run
// late, never early), and every call is counted once.
func TestAdaptiveGateRealClock(t *testing.T) {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: 4, Max: 4, Start: 4, Window: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const sleep = 5 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var calls atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				p, err := g.Enter(ctx)
				if err != nil {
					return
				}
				calls.Add(1)
				_ = eng.Sleep(context.Background(), sleep)
				p.Leave()
			}
		}()
	}
	wg.Wait()
	s := g.Stats()
	var entered int64
	for _, c := range s.Classes {
		entered += c.Entered
	}
	t.Logf("%d calls, latency %v, stats %+v", calls.Load(), s.Latency, s)
	if entered != calls.Load() || s.InFlight != 0 {
		t.Fatalf("%d counted let in of %d, %d inside", entered, calls.Load(), s.InFlight)
	}
	if s.Latency < sleep || s.Latency > 10*sleep {
		t.Fatalf("latency %v for calls of a %v sleep", s.Latency, sleep)
	}
}
