package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// FuzzAdaptiveGate drives an adaptive gate on a virtual clock through
// waiting Enters of every priority, TryEnters, Leaves, second Leaves,
// Drops, callers that give up, and time passing, so the limit moves. Every
// Enter gets one answer; the gate never counts fewer inside than the
// passes out, nor any count below zero; and once every pass is back,
// nobody is inside or in line and every pass was counted as let in.
func FuzzAdaptiveGate(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 0, 3, 2, 0, 5, 40, 4, 0, 3, 0})
	f.Add([]byte{1, 1, 1, 1, 0, 3, 0, 0, 5, 200, 2, 1, 2, 1, 4, 1, 5, 9, 3, 0})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 0, 2, 0, 2, 0, 5, 255, 5, 255})
	f.Fuzz(func(t *testing.T, ops []byte) {
		clock := vclock.NewVirtual()
		eng := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
		defer func() {
			if err := eng.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}()
		g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: 1, Max: 4, Start: 2, Queue: 3, Window: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		type waiter struct {
			cancel context.CancelFunc
			done   <-chan entered
		}
		var held []client.Pass
		var waiting []waiter
		got := 0    // passes let in
		gaveUp := 0 // Enters that ended with ctx: the gate may have let one in as it ended
		// collect takes the answers that have come, or all of them.
		collect := func(all bool) {
			kept := waiting[:0]
			for _, w := range waiting {
				var e entered
				if all {
					e = outcome(t, w.done, "waiter")
				} else {
					select {
					case e = <-w.done:
					default:
						kept = append(kept, w)
						continue
					}
				}
				if e.err == nil {
					held = append(held, e.pass)
					got++
				} else if errors.Is(e.err, context.Canceled) {
					gaveUp++
				} else if !errors.Is(e.err, client.ErrShed) && !errors.Is(e.err, client.ErrExceedsDeadline) {
					t.Fatalf("an Enter refused with %v", e.err)
				}
			}
			waiting = kept
		}
		for len(ops) >= 2 {
			op, x := ops[0]%6, int(ops[1])
			ops = ops[2:]
			switch op {
			case 0: // a waiting Enter
				ctx, cancel := context.WithCancel(client.WithPriority(context.Background(), client.Priority(x%4-1)))
				waiting = append(waiting, waiter{cancel, enterAsync(g, ctx)})
			case 1:
				if p, ok := g.TryEnter(context.Background()); ok {
					held = append(held, p)
					got++
				}
			case 2, 3: // Leave (twice, now and then) or Drop
				if len(held) == 0 {
					continue
				}
				i := x % len(held)
				clock.Advance(time.Duration(x) * time.Millisecond / 8)
				if op == 2 {
					held[i].Leave()
					if x%5 == 0 {
						held[i].Leave()
					}
				} else {
					held[i].Drop()
				}
				held = append(held[:i], held[i+1:]...)
			case 4: // a waiter gives up
				if len(waiting) > 0 {
					waiting[x%len(waiting)].cancel()
				}
			case 5:
				clock.Advance(time.Duration(x) * time.Millisecond)
			}
			collect(false)
			s := g.Stats()
			if s.InFlight < len(held) || s.InFlight > len(held)+len(waiting) || s.Queued > len(waiting) || s.Queued < 0 {
				t.Fatalf("%d inside and %d in line, with %d passes out and %d waiting", s.InFlight, s.Queued, len(held), len(waiting))
			}
		}
		for _, w := range waiting {
			w.cancel()
		}
		collect(true)
		for i := range held {
			held[i].Leave()
		}
		s := g.Stats()
		var entered int64
		for _, c := range s.Classes {
			entered += c.Entered
			if c.Entered < 0 || c.Shed < 0 || c.QueueFull < 0 || c.Deadline < 0 || c.Cancelled < 0 {
				t.Fatalf("a count below zero: %+v", c)
			}
		}
		if s.InFlight != 0 || s.Queued != 0 || entered < int64(got) || entered > int64(got+gaveUp) {
			t.Fatalf("all back: %d inside, %d in line, %d counted let in of %d, and %d gave up", s.InFlight, s.Queued, entered, got, gaveUp)
		}
	})
}
