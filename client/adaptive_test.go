package client_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// adaptiveEngine is an engine on a virtual clock, shut down with the test.
func adaptiveEngine(t *testing.T, opts ...vclock.Option) (*engine.Engine, *vclock.Virtual) {
	t.Helper()
	clock := vclock.NewVirtual(opts...)
	eng := engine.New(engine.WithClock(clock))
	t.Cleanup(func() {
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return eng, clock
}

// fixedGate is an adaptive gate whose limit cannot move from limit.
func fixedGate(t *testing.T, eng *engine.Engine, limit, queue int) *client.AdaptiveGate {
	t.Helper()
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: limit, Max: limit, Start: limit, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// queued waits, with a deadline, until g has n callers in line.
func queued(t *testing.T, g *client.AdaptiveGate, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for g.Stats().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d in line after 5s, want %d", g.Stats().Queued, n)
		}
		runtime.Gosched()
	}
}

// entered is one Enter's outcome.
type entered struct {
	pass client.Pass
	err  error
}

// enterAsync starts an Enter with ctx and returns where its outcome comes.
func enterAsync(g *client.AdaptiveGate, ctx context.Context) <-chan entered {
	ch := make(chan entered, 1)
	go func() {
		p, err := g.Enter(ctx)
		ch <- entered{p, err}
	}()
	return ch
}

// outcome reads one outcome, with a deadline.
func outcome(t *testing.T, ch <-chan entered, what string) entered {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no answer after 5s", what)
	}
	return entered{}
}

// TestAdaptiveGateHoldsItsStart: with the limit at its start, exactly that
// many get in at once; TryEnter refuses the next, a Leave makes room, and
// a second Leave of the same Pass makes none.
func TestAdaptiveGateHoldsItsStart(t *testing.T) {
	for _, limit := range []int{5, 40} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			eng, _ := adaptiveEngine(t)
			g := fixedGate(t, eng, limit, -1)
			ctx := context.Background()
			var passes []client.Pass
			for i := range limit {
				p, err := g.Enter(ctx)
				if err != nil {
					t.Fatalf("enter %d: %v", i, err)
				}
				passes = append(passes, p)
			}
			if _, ok := g.TryEnter(ctx); ok {
				t.Fatalf("TryEnter let one in past a limit of %d", limit)
			}
			if _, err := g.Enter(ctx); !errors.Is(err, client.ErrShed) {
				t.Fatalf("Enter with no room and no line: %v, want ErrShed", err)
			}
			s := g.Stats()
			if s.Limit != limit || s.InFlight != limit || s.Classes[1].Entered != int64(limit) || s.Classes[1].QueueFull != 1 || s.Classes[1].Shed != 1 {
				t.Fatalf("stats %+v, want limit %d, all in flight, entered as normal, one refused by each", s, limit)
			}
			passes[0].Leave()
			passes[0].Leave()
			passes[0].Drop()
			p, ok := g.TryEnter(ctx)
			if !ok {
				t.Fatal("no room after a Leave")
			}
			if _, ok := g.TryEnter(ctx); ok {
				t.Fatal("a second Leave of one Pass made room")
			}
			p.Drop()
			for i := 1; i < len(passes); i++ {
				passes[i].Leave()
			}
			if s := g.Stats(); s.InFlight != 0 {
				t.Fatalf("InFlight %d after every pass came back", s.InFlight)
			}
			var zero client.Pass
			zero.Leave() // holds no room: nothing happens
			if err := g.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Enter(ctx); !errors.Is(err, client.ErrClosed) {
				t.Fatalf("Enter after Close: %v, want ErrClosed", err)
			}
			if _, ok := g.TryEnter(ctx); ok {
				t.Fatal("TryEnter after Close let one in")
			}
		})
	}
}

// TestAdaptiveGatePriorities: waiters go in highest priority first; a
// higher arrival takes the place of the lowest waiter in a full line,
// and one no higher than any waiter is refused.
func TestAdaptiveGatePriorities(t *testing.T) {
	eng, _ := adaptiveEngine(t)
	g := fixedGate(t, eng, 1, 2)
	bg := context.Background()
	in, err := g.Enter(bg)
	if err != nil {
		t.Fatal(err)
	}
	low := enterAsync(g, client.WithPriority(bg, client.PriorityLow))
	queued(t, g, 1)
	normal := enterAsync(g, bg)
	queued(t, g, 2)
	// The line is full: a high arrival evicts the low waiter.
	high := enterAsync(g, client.WithPriority(bg, client.PriorityHigh))
	if e := outcome(t, low, "low"); !errors.Is(e.err, client.ErrTooManyWaiting) || !errors.Is(e.err, client.ErrShed) {
		t.Fatalf("low waiter: %v, want ErrTooManyWaiting", e.err)
	}
	queued(t, g, 2)
	// A low arrival finds nobody lower: refused at once.
	if _, err := g.Enter(client.WithPriority(bg, client.PriorityLow)); !errors.Is(err, client.ErrTooManyWaiting) {
		t.Fatalf("low arrival at a full line: %v, want ErrTooManyWaiting", err)
	}
	// Room: the high waiter goes first, though it came last.
	in.Leave()
	e := outcome(t, high, "high")
	if e.err != nil {
		t.Fatalf("high waiter: %v", e.err)
	}
	select {
	case e := <-normal:
		t.Fatalf("normal waiter let in past the limit: %v", e.err)
	default:
	}
	e.pass.Leave()
	if e := outcome(t, normal, "normal"); e.err != nil {
		t.Fatalf("normal waiter: %v", e.err)
	} else {
		e.pass.Leave()
	}
	s := g.Stats()
	if s.Classes[0].QueueFull != 2 || s.Classes[2].Entered != 1 || s.Classes[1].Entered != 2 || s.InFlight != 0 || s.Queued != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// learnLatency lets n calls through g, each taking rtt on clock, one
// after another, and moves the clock on until the gate has decided on
// them.
func learnLatency(t *testing.T, g *client.AdaptiveGate, clock *vclock.Virtual, n int, rtt time.Duration) {
	t.Helper()
	for range n {
		p, err := g.Enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(rtt)
		p.Leave()
	}
	for range 20 {
		if g.Stats().Latency != 0 {
			return
		}
		clock.Advance(25 * time.Millisecond)
	}
	t.Fatalf("no latency learnt from %d calls of %v", n, rtt)
}

// TestAdaptiveGateDeadline: a caller whose deadline comes before its
// expected wait and one latency is refused at once with a *WaitError;
// one with time enough waits in line.
func TestAdaptiveGateDeadline(t *testing.T) {
	eng, clock := adaptiveEngine(t)
	g := fixedGate(t, eng, 2, 0)
	learnLatency(t, g, clock, 20, 100*time.Millisecond)
	if l := g.Stats().Latency; l != 100*time.Millisecond {
		t.Fatalf("latency %v, want 100ms", l)
	}
	bg := context.Background()
	a, _ := g.Enter(bg)
	b, _ := g.Enter(bg)
	// One ahead of nobody: half a latency of waiting, and a latency and a
	// quarter to finish.
	short, cancel := context.WithTimeout(bg, 140*time.Millisecond)
	defer cancel()
	_, err := g.Enter(short)
	var we *client.WaitError
	if !errors.As(err, &we) || !errors.Is(err, client.ErrExceedsDeadline) || we.Wait != 50*time.Millisecond {
		t.Fatalf("Enter with 140ms to go: %v, want a *WaitError of 50ms", err)
	}
	if s := g.Stats(); s.Classes[1].Deadline != 1 || s.Queued != 0 {
		t.Fatalf("stats %+v, want one refused for its deadline and none in line", s)
	}
	long, cancel := context.WithTimeout(bg, time.Hour)
	defer cancel()
	ch := enterAsync(g, long)
	queued(t, g, 1)
	a.Leave()
	e := outcome(t, ch, "waiter with time enough")
	if e.err != nil {
		t.Fatalf("waiter with time enough: %v", e.err)
	}
	e.pass.Leave()
	// A waiter whose turn comes less than a latency before its deadline
	// is refused then, and the room goes to the next.
	near, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	a, _ = g.Enter(bg)
	ch = enterAsync(g, near)
	queued(t, g, 1)
	next := enterAsync(g, bg)
	queued(t, g, 2)
	clock.Advance(10*time.Second - 10*time.Millisecond)
	a.Leave()
	if e := outcome(t, ch, "waiter too close to its deadline"); !errors.As(e.err, &we) {
		t.Fatalf("waiter whose turn came 10ms before its deadline: %v, want a *WaitError", e.err)
	}
	e = outcome(t, next, "waiter behind it")
	if e.err != nil {
		t.Fatalf("waiter behind: %v", e.err)
	}
	e.pass.Leave()
	b.Leave()
	if s := g.Stats(); s.Classes[1].Deadline != 2 || s.InFlight != 0 {
		t.Fatalf("stats %+v, want two refused for their deadlines and none inside", s)
	}
}

// TestAdaptiveGateCancel: a caller whose ctx ends in line leaves it with
// ctx's error, and its place is not taken from anyone.
func TestAdaptiveGateCancel(t *testing.T) {
	eng, _ := adaptiveEngine(t)
	g := fixedGate(t, eng, 1, 0)
	bg := context.Background()
	in, _ := g.Enter(bg)
	ctx, cancel := context.WithCancel(bg)
	ch := enterAsync(g, ctx)
	queued(t, g, 1)
	cancel()
	if e := outcome(t, ch, "cancelled waiter"); !errors.Is(e.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", e.err)
	}
	if s := g.Stats(); s.Queued != 0 || s.InFlight != 1 || s.Classes[1].Cancelled != 1 {
		t.Fatalf("stats %+v, want none in line, one in flight, one cancelled", s)
	}
	if _, err := g.Enter(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with an ended ctx and no room: %v", err)
	}
	in.Leave()
	if p, ok := g.TryEnter(bg); !ok {
		t.Fatal("no room after the one inside left")
	} else {
		p.Leave()
	}
}

// TestAdaptiveGateCloseRefusesWaiters: Close answers the line ErrClosed.
func TestAdaptiveGateCloseRefusesWaiters(t *testing.T) {
	eng, _ := adaptiveEngine(t)
	g := fixedGate(t, eng, 1, 0)
	bg := context.Background()
	in, _ := g.Enter(bg)
	ch := enterAsync(g, bg)
	queued(t, g, 1)
	if err := g.Close(bg); err != nil {
		t.Fatal(err)
	}
	if e := outcome(t, ch, "waiter at Close"); !errors.Is(e.err, client.ErrClosed) {
		t.Fatalf("waiter at Close: %v, want ErrClosed", e.err)
	}
	in.Leave() // after Close: no effect, no panic
	if s := g.Stats(); s != (client.AdaptiveStats{}) {
		t.Fatalf("stats after Close %+v, want zero", s)
	}
	if err := g.Close(bg); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// kneeLoad drives g on clock for d, a millisecond at a time, as a
// dependency with a concurrency knee would: callers arrive at rate a
// second, each call takes base while knee or fewer are in flight, and
// base × in-flight / knee beyond. It returns the mean limit over the last
// half of d.
func kneeLoad(t *testing.T, g *client.AdaptiveGate, clock *vclock.Virtual, knee int, base time.Duration, rate float64, d time.Duration) float64 {
	t.Helper()
	type call struct {
		pass client.Pass
		done time.Duration
	}
	var inside []call
	var owed float64
	var sum, n float64
	for now := time.Duration(0); now < d; now += time.Millisecond {
		clock.Advance(time.Millisecond)
		kept := inside[:0]
		for _, c := range inside {
			if c.done <= now {
				c.pass.Leave()
				continue
			}
			kept = append(kept, c)
		}
		inside = kept
		for owed += rate / 1000; owed >= 1; owed-- {
			p, ok := g.TryEnter(context.Background())
			if !ok {
				continue
			}
			rtt := base * time.Duration(max(len(inside)+1, knee)) / time.Duration(knee)
			inside = append(inside, call{p, now + rtt})
		}
		if now >= d/2 && now%(10*time.Millisecond) == 0 {
			sum += float64(g.Stats().Limit)
			n++
		}
	}
	for _, c := range inside {
		c.pass.Leave()
	}
	return sum / n
}

// TestAdaptiveGateFindsTheKnee: through the actor and its stripes, on the
// engine's clock, the limit falls from above a dependency's knee to near
// it, and grows from below. Timers that fire late change nothing.
func TestAdaptiveGateFindsTheKnee(t *testing.T) {
	for _, tc := range []struct {
		name        string
		knee, start int
		late        time.Duration
	}{
		{"falls", 8, 40, 0},
		{"grows", 40, 5, 0},
		{"falls with late timers", 8, 40, 3 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, clock := adaptiveEngine(t, vclock.WithLateness(tc.late))
			g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Start: tc.start, Queue: -1})
			if err != nil {
				t.Fatal(err)
			}
			const base = 10 * time.Millisecond
			rate := 2 * float64(tc.knee) * float64(time.Second) / float64(base)
			mean := kneeLoad(t, g, clock, tc.knee, base, rate, 10*time.Second)
			t.Logf("knee %d: mean limit %.1f, baseline %v", tc.knee, mean, g.Stats().Baseline)
			if mean < 0.7*float64(tc.knee) || mean > 1.5*float64(tc.knee)+1 {
				t.Fatalf("mean limit %.1f for a knee of %d", mean, tc.knee)
			}
		})
	}
}

// TestAdaptiveGateInBubble: the gate works inside a testing/synctest
// bubble, on the bubble's clock: a waiter gets in when a caller leaves a
// second later, and the gate learns that second as the latency.
func TestAdaptiveGateInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := client.NewEngine()
		defer eng.Shutdown(context.Background())
		g := fixedGate(t, eng, 1, 0)
		bg := context.Background()
		for range 16 {
			p, err := g.Enter(bg)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				_ = eng.Sleep(bg, time.Second) // the bubble's clock: no real time
				p.Leave()
			}()
			start := time.Now()
			p2, err := g.Enter(bg)
			if err != nil {
				t.Fatal(err)
			}
			if waited := time.Since(start); waited != time.Second {
				t.Fatalf("waited %v for a caller that left after 1s", waited)
			}
			p2.Drop()
		}
		_ = eng.Sleep(bg, time.Second)
		if s := g.Stats(); s.Latency != time.Second || s.InFlight != 0 {
			t.Fatalf("stats %+v, want a latency of 1s and none inside", s)
		}
		if err := g.Close(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAdaptiveGateAllocatesNothing: Enter and Leave with room allocate
// nothing, nor does a wait in line that is answered.
func TestAdaptiveGateAllocatesNothing(t *testing.T) {
	eng, _ := adaptiveEngine(t)
	g := fixedGate(t, eng, 64, 0)
	ctx := context.Background()
	if a := testing.AllocsPerRun(1000, func() {
		p, err := g.Enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Leave()
	}); a != 0 {
		t.Fatalf("%v allocations an Enter and Leave", a)
	}
	small := fixedGate(t, eng, 1, 0)
	if a := testing.AllocsPerRun(1000, func() {
		p, _ := small.Enter(ctx)
		p.Leave()
	}); a != 0 {
		t.Fatalf("%v allocations an Enter and Leave through the actor", a)
	}
}

// TestPriorityNames: String and ParsePriority are inverses over the four
// names, read in any case with spaces around them; out-of-range
// priorities clamp; anything else is an error.
func TestPriorityNames(t *testing.T) {
	for _, p := range []client.Priority{client.PriorityLow, client.PriorityNormal, client.PriorityHigh, client.PriorityCritical} {
		got, err := client.ParsePriority(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePriority(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	if s := client.Priority(-100).String(); s != "low" {
		t.Errorf("Priority(-100) reads %q, want low", s)
	}
	for _, s := range []string{"urgent", "", "2", "hi gh"} {
		if p, err := client.ParsePriority(s); err == nil || p != client.PriorityNormal {
			t.Errorf("ParsePriority(%q) = %v, %v; want PriorityNormal and an error", s, p, err)
		}
	}
	if p, err := client.ParsePriority("\t Critical "); err != nil || p != client.PriorityCritical {
		t.Errorf("ParsePriority of Critical with spaces = %v, %v; want PriorityCritical", p, err)
	}
	ctx := context.Background()
	if p := client.PriorityFrom(ctx); p != client.PriorityNormal {
		t.Errorf("PriorityFrom an empty ctx: %v", p)
	}
	if p := client.PriorityFrom(client.WithPriority(ctx, 9)); p != client.PriorityCritical {
		t.Errorf("WithPriority(9) reads %v, want critical", p)
	}
	if p := client.PriorityFrom(client.WithPriority(ctx, -9)); p != client.PriorityLow {
		t.Errorf("WithPriority(-9) reads %v, want low", p)
	}
}

// TestAdaptiveGateAfterShutdown: once its engine shut down, the gate
// refuses with ErrClosed, its Stats are zero, and a Pass still out goes
// back without a panic. A nil ctx reads as context.Background().
func TestAdaptiveGateAfterShutdown(t *testing.T) {
	eng := client.NewEngine()
	g := fixedGate(t, eng, 2, 0)
	//lint:ignore SA1012 a nil ctx is bad input the gate must survive
	p, err := g.Enter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Leave()
	if _, err := g.Enter(context.Background()); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Enter after Shutdown: %v, want ErrClosed", err)
	}
	if _, ok := g.TryEnter(context.Background()); ok {
		t.Fatal("TryEnter after Shutdown let one in")
	}
	if s := g.Stats(); s != (client.AdaptiveStats{}) {
		t.Fatalf("stats after Shutdown %+v, want zero", s)
	}
	if err := g.Close(context.Background()); err != nil {
		t.Fatalf("Close after Shutdown: %v", err)
	}
}
