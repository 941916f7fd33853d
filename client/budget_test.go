package client_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moontest"
)

// budgetClocks are the ways timers fire in the budget's tests: on time,
// late by a fixed span, and late by a seeded random span. The budget's
// actor folds first attempts in on a timer, and a late fold must not let
// more retries through.
var budgetClocks = []struct {
	name string
	opts []moontest.Option
}{
	{"on time", nil},
	{"40ms late", []moontest.Option{moontest.WithLateness(40 * time.Millisecond)}},
	{"up to 300ms late", []moontest.Option{moontest.WithRandomLateness(300*time.Millisecond, 7)}},
}

// newBudgetRig is an engine on a virtual clock with a budget of cfg.
func newBudgetRig(t *testing.T, cfg client.BudgetConfig, opts ...moontest.Option) (*moontest.Clock, *client.Engine, *client.Budget) {
	t.Helper()
	clock := moontest.NewClock(t, opts...)
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	b, err := client.NewBudget(eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return clock, eng, b
}

// noSleep retries at once, four attempts in all.
var noSleep = client.Backoff{Attempts: 4}

// TestBudgetOutage: a backend that fails every request for a minute, with
// five requests a millisecond each wanting four attempts, sees 1.1
// attempts per request, not four; and at every retry the budget let
// through, the retries of the ten seconds ending then, on the engine's
// clock, are at most a tenth of the first attempts of those ten seconds
// (or the floor of ten). That holds with the actor's timers late: the
// actor dates first attempts no later than they happened. Every refused
// call returns the last failure and ErrBudget.
func TestBudgetOutage(t *testing.T) {
	for _, c := range budgetClocks {
		t.Run(c.name, func(t *testing.T) {
			clock, _, b := newBudgetRig(t, client.BudgetConfig{}, c.opts...)
			ctx := context.Background()
			var firsts, retries []int64 // the clock's reading at each
			refused := 0
			for range 60_000 {
				for range 5 {
					attempt := 0
					err := client.Retry(ctx, noSleep, func(context.Context) error {
						if attempt++; attempt == 1 {
							firsts = append(firsts, clock.Now())
						} else {
							retries = append(retries, clock.Now())
						}
						return errDown
					}, client.WithBudget(b))
					if !errors.Is(err, errDown) {
						t.Fatalf("Retry = %v, want the last failure", err)
					}
					if errors.Is(err, client.ErrBudget) {
						refused++
					}
				}
				clock.Advance(time.Millisecond)
			}
			per := float64(len(firsts)+len(retries)) / float64(len(firsts))
			if per > 1.1 || per < 1.08 {
				t.Fatalf("%d requests made %d attempts: %.4f per request, want 1.08 to 1.1",
					len(firsts), len(firsts)+len(retries), per)
			}
			if refused < len(firsts)*8/10 {
				t.Fatalf("%d of %d requests were refused a retry; want most", refused, len(firsts))
			}
			window := int64(10 * time.Second)
			for _, at := range retries {
				n := count(retries, at-window, at)
				f := count(firsts, at-window, at)
				if bound := max(0.1*float64(f), 10); float64(n) > bound {
					t.Fatalf("%d retries in the 10s to +%v, with %d first attempts: over %v",
						n, time.Duration(at-retries[0]), f, bound)
				}
			}
			s := b.Stats()
			if s.Firsts != int64(len(firsts)) || s.Retries != int64(len(retries)) || s.RefusedRetries != int64(refused) {
				t.Fatalf("Stats = %+v; counted %d firsts, %d retries, %d refused", s, len(firsts), len(retries), refused)
			}
		})
	}
}

// count is how many of the sorted instants fall in (from, to].
func count(at []int64, from, to int64) int {
	lo := sort.Search(len(at), func(i int) bool { return at[i] > from })
	hi := sort.Search(len(at), func(i int) bool { return at[i] > to })
	return hi - lo
}

// TestBudgetWindowSlides: first attempts raise the budget for the window
// on the engine's clock and then leave it, however late the actor's
// timers fire, whether they came while the actor was asleep or awake.
func TestBudgetWindowSlides(t *testing.T) {
	for _, c := range budgetClocks {
		t.Run(c.name, func(t *testing.T) {
			clock, _, b := newBudgetRig(t, client.BudgetConfig{}, c.opts...)
			if got := b.Stats().Left; got != 10 {
				t.Fatalf("a new budget allows %d, want the floor of 10", got)
			}
			// A retry at t0: first attempts are counted from here on.
			if !b.Retry() {
				t.Fatal("the floor refused a retry")
			}
			for range 1000 {
				b.First()
			}
			if got := b.Stats().Left; got != 99 {
				t.Fatalf("after 1,000 first attempts the budget allows %d, want 99", got)
			}
			clock.Advance(5 * time.Second)
			for range 1000 {
				b.First()
			}
			clock.Advance(4 * time.Second)
			if got := b.Stats().Left; got != 199 {
				t.Fatalf("at +9s the budget allows %d, want 199", got)
			}
			// The first thousand leave by +10s, the second by +15s.
			clock.Advance(time.Second)
			if got := b.Stats().Left; got != 99 {
				t.Fatalf("at +10s the budget allows %d, want 99", got)
			}
			clock.Advance(5 * time.Second)
			if got := b.Stats().Left; got != 10 {
				t.Fatalf("at +15s the budget allows %d, want the floor of 10", got)
			}
			for range 10 {
				if !b.Retry() {
					t.Fatal("the floor refused a retry")
				}
			}
			if b.Retry() || b.Hedge() {
				t.Fatal("the budget allowed past its floor")
			}
			s := b.Stats()
			if s.Retries != 11 || s.RefusedRetries != 1 || s.RefusedHedges != 1 || s.Left != 0 {
				t.Fatalf("Stats = %+v", s)
			}
		})
	}
}

// TestBudgetSleeps: a budget nobody uses asks for no timer, so an idle
// program's clock has nothing pending; the next first attempt wakes it.
func TestBudgetSleeps(t *testing.T) {
	clock, _, b := newBudgetRig(t, client.BudgetConfig{})
	if n := clock.Pending(); n != 0 {
		t.Fatalf("a new budget has %d timers pending, want 0", n)
	}
	b.First()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.WaitPending(ctx, 1); err != nil {
		t.Fatalf("a first attempt did not wake the budget: %v", err)
	}
	// One fold finds the first attempt, the next finds nothing and the
	// actor sleeps.
	clock.Advance(time.Second)
	b.Stats() // a barrier: the Ticks before it are handled
	if n := clock.Pending(); n != 0 {
		t.Fatalf("an idle budget has %d timers pending, want 0", n)
	}
	b.Observe(time.Millisecond)
	if err := clock.WaitPending(ctx, 1); err != nil {
		t.Fatalf("a latency did not wake the budget: %v", err)
	}
	if got := b.Stats().Left; got != 10 {
		t.Fatalf("Left = %d, want the floor of 10", got)
	}
}

// TestBudgetCountsWhileAsked: a budget counts first attempts from its
// start or a retry asked, until a whole window passes without one. A
// request asking for a retry has its own first attempt counted even so.
// While nobody asks, a call that succeeds at once costs the budget no
// count.
func TestBudgetCountsWhileAsked(t *testing.T) {
	for _, c := range budgetClocks {
		t.Run(c.name, func(t *testing.T) {
			clock, eng, b := newBudgetRig(t, client.BudgetConfig{}, c.opts...)
			ctx := context.Background()
			ok := func(context.Context) error { return nil }
			step := func(n int, want int64, why string) {
				t.Helper()
				for range n {
					if err := client.Retry(ctx, noSleep, ok, client.WithBudget(b)); err != nil {
						t.Fatal(err)
					}
				}
				if got := b.Stats().Firsts; got != want {
					t.Fatalf("%s: Firsts = %d, want %d", why, got, want)
				}
			}
			step(100, 100, "a new budget")
			// A whole window passes with no retry asked. The count stops
			// at the fold the next first attempt wakes the actor for.
			clock.Advance(10 * time.Second)
			step(1, 101, "the first attempt after a quiet window")
			b.Stats() // a barrier: the fold is done
			step(100, 101, "after a quiet window")
			// A request that fails once: its first attempt is counted as
			// it asks for the retry, and the calls after it are too.
			failed := false
			err := client.Retry(ctx, noSleep, func(context.Context) error {
				if !failed {
					failed = true
					return errDown
				}
				return nil
			}, client.WithBudget(b), client.SleepOn(eng.Clock()))
			if err != nil {
				t.Fatal(err)
			}
			step(100, 202, "after a retry")
			clock.Advance(9 * time.Second)
			step(100, 302, "9s after the retry")
			// A whole window with no retry asked: the count stops, at
			// the timer's fold, however late it fires.
			clock.Advance(2 * time.Second)
			b.Stats() // a barrier: the Ticks before it are handled
			step(100, 302, "11s after the retry")
			if b.Retry() != true {
				t.Fatal("the floor refused a retry")
			}
			step(100, 402, "after the next retry")
			if s := b.Stats(); s.Retries != 2 || s.RefusedRetries != 0 {
				t.Fatalf("Stats = %+v, want 2 retries", s)
			}
		})
	}
}

// TestBudgetHedgeDelay: the delay is the quantile of the latencies
// observed over the window, once there are enough of them, as of the
// actor's last fold. While the window holds too few, a quantile known
// before is answered as it was last.
func TestBudgetHedgeDelay(t *testing.T) {
	for _, c := range budgetClocks {
		t.Run(c.name, func(t *testing.T) {
			clock, _, b := newBudgetRig(t, client.BudgetConfig{Window: 2 * time.Second}, c.opts...)
			for range 95 {
				b.Observe(10 * time.Millisecond)
			}
			if d, ok := b.HedgeDelay(0.95); ok {
				t.Fatalf("HedgeDelay(0.95) of 95 latencies = %v, true; want too few", d)
			}
			for range 95 {
				b.Observe(10 * time.Millisecond)
			}
			for range 10 {
				b.Observe(200 * time.Millisecond)
			}
			near := func(p float64, want time.Duration) {
				t.Helper()
				// Asked twice: once of the actor, once of what it published.
				for i := range 2 {
					d, ok := b.HedgeDelay(p)
					if !ok || math.Abs(float64(d-want)) > float64(want)/32 {
						t.Fatalf("ask %d: HedgeDelay(%v) = %v, %v; want %v", i, p, d, ok, want)
					}
				}
			}
			// Too few was not published: the next ask reaches the actor,
			// which counts the latencies since.
			near(0.95, 10*time.Millisecond)
			// An answer published is worked out again at the actor's
			// next fold: a twentieth of the window, 100ms, and however
			// late its timer fires.
			clock.Advance(500 * time.Millisecond)
			near(0.96, 200*time.Millisecond)
			near(2, 200*time.Millisecond)
			near(-1, 10*time.Millisecond)
			if _, ok := b.HedgeDelay(math.NaN()); ok {
				t.Fatal("HedgeDelay(NaN) is true")
			}
			// More latencies are seen at the next fold.
			for range 100 {
				b.Observe(50 * time.Millisecond)
			}
			clock.Advance(500 * time.Millisecond)
			near(0.95, 50*time.Millisecond)
			near(0.97, 200*time.Millisecond)
			near(0.5, 10*time.Millisecond)
			// The window passes with nothing counted: each quantile is
			// what it was last, and one never known is still unknown.
			clock.Advance(3 * time.Second)
			b.Stats() // a barrier: the Ticks before it are handled
			near(0.5, 10*time.Millisecond)
			near(0.97, 200*time.Millisecond)
			if d, ok := b.HedgeDelay(0.9); ok {
				t.Fatalf("after the window HedgeDelay(0.9), never asked, = %v, true", d)
			}
			// Fresh latencies, enough of them, answer from the next fold.
			for range 100 {
				b.Observe(30 * time.Millisecond)
			}
			clock.Advance(500 * time.Millisecond)
			near(0.5, 30*time.Millisecond)
		})
	}
}

// TestBudgetHedgeDelayShare: a hedge sent past HedgeDelay(p) goes to the
// share 1−p of requests slower than it, within a fifth of a percent, once
// the latencies have passed through the budget's actor. The latencies are
// a backend's 2 ms ±20 %, a network's 300 µs on average, and 3 requests
// in 200 twenty times slower, drawn from a fixed seed. At p 0.97 a
// percent of them is about 11 µs wide: a quote off by a bucket's width,
// 65 µs there, would hedge several percent more or fewer.
func TestBudgetHedgeDelayShare(t *testing.T) {
	clock, _, b := newBudgetRig(t, client.BudgetConfig{})
	r := rand.New(rand.NewPCG(3, 4))
	lat := make([]time.Duration, 20_000)
	for i := range lat {
		d := float64(2*time.Millisecond)*(0.8+0.4*r.Float64()) + r.ExpFloat64()*float64(300*time.Microsecond)
		if r.IntN(200) < 3 {
			d *= 20
		}
		lat[i] = time.Duration(d)
		b.Observe(lat[i])
	}
	clock.Advance(time.Second) // the actor folds them in
	for _, p := range []float64{0.9, 0.95, 0.97, 0.99} {
		d, ok := b.HedgeDelay(p)
		if !ok {
			t.Fatalf("HedgeDelay(%v) of %d latencies is false", p, len(lat))
		}
		above := 0
		for _, l := range lat {
			if l > d {
				above++
			}
		}
		share := float64(above) / float64(len(lat))
		if math.Abs(share-(1-p)) > 0.002 {
			t.Errorf("HedgeDelay(%v) = %v: %.2f%% of latencies above it, want %.2f%% ± 0.2", p, d, 100*share, 100*(1-p))
		}
	}
}

// TestBudgetClose: a closed budget allows nothing, counts its refusals,
// and closes once.
func TestBudgetClose(t *testing.T) {
	_, eng, b := newBudgetRig(t, client.BudgetConfig{})
	for range 100 {
		b.Observe(time.Millisecond)
	}
	ctx := context.Background()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Retry() || b.Hedge() {
		t.Fatal("a closed budget allowed a retry or a hedge")
	}
	if d, ok := b.HedgeDelay(0.5); ok {
		t.Fatalf("a closed budget's HedgeDelay = %v, true", d)
	}
	b.First() // counts to no effect
	s := b.Stats()
	if s.RefusedRetries != 1 || s.RefusedHedges != 1 || s.Left != 0 {
		t.Fatalf("Stats after Close = %+v", s)
	}
	err := client.Retry(ctx, noSleep, func(context.Context) error { return errDown }, client.WithBudget(b))
	var re *client.RetryError
	if !errors.As(err, &re) || re.Attempts != 1 || !errors.Is(err, client.ErrBudget) || !errors.Is(err, errDown) {
		t.Fatalf("Retry on a closed budget = %v, want one attempt and ErrBudget", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("a second Close = %v", err)
	}
	//lint:ignore SA1012 a nil ctx is the point
	if err := b.Close(nil); err == nil { //nolint:staticcheck
		t.Fatal("Close(nil) = nil")
	}
	b2, err := client.NewBudget(eng, client.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if b2.Retry() {
		t.Fatal("a budget whose engine shut down allowed a retry")
	}
	if err := b2.Close(ctx); err != nil {
		t.Fatalf("Close after the engine shut down = %v", err)
	}
	if _, err := client.NewBudget(eng, client.BudgetConfig{}); err == nil {
		t.Fatal("NewBudget on a shut engine = nil error")
	}
	if _, err := client.NewBudget(nil, client.BudgetConfig{}); err == nil {
		t.Fatal("NewBudget(nil) = nil error")
	}
}

// TestBudgetNil: a nil budget bounds nothing.
func TestBudgetNil(t *testing.T) {
	var b *client.Budget
	b.First()
	b.Observe(time.Second)
	if !b.Retry() || !b.Hedge() {
		t.Fatal("a nil budget refused")
	}
	if _, ok := b.HedgeDelay(0.5); ok {
		t.Fatal("a nil budget knows a delay")
	}
	if s := b.Stats(); s != (client.BudgetStats{Left: math.MaxInt}) {
		t.Fatalf("a nil budget's Stats = %+v", s)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := client.Retry(context.Background(), noSleep, func(context.Context) error { calls++; return errDown }, client.WithBudget(nil))
	if calls != 4 || errors.Is(err, client.ErrBudget) {
		t.Fatalf("Retry WithBudget(nil) made %d attempts and returned %v; want 4 and no ErrBudget", calls, err)
	}
}

// TestBudgetConfig: each field's zero and bad values read as documented.
func TestBudgetConfig(t *testing.T) {
	for _, c := range []struct {
		cfg          client.BudgetConfig
		firsts       int
		left, leftAt int // Left before one retry asked, and after it and the first attempts
	}{
		{client.BudgetConfig{}, 1000, 10, 99},
		{client.BudgetConfig{Ratio: math.NaN(), MinPerSecond: math.NaN()}, 1000, 0, 100},
		{client.BudgetConfig{Ratio: -1, MinPerSecond: -1}, 1000, 0, 100},
		{client.BudgetConfig{Ratio: 0.5, MinPerSecond: 2, Window: time.Second}, 10, 2, 4},
		{client.BudgetConfig{Ratio: math.Inf(1)}, 1, 10, math.MaxInt},
		{client.BudgetConfig{MinPerSecond: math.Inf(1)}, 0, math.MaxInt, math.MaxInt},
		{client.BudgetConfig{Window: -time.Second}, 1000, 10, 99},
	} {
		t.Run(fmt.Sprintf("%+v", c.cfg), func(t *testing.T) {
			_, _, b := newBudgetRig(t, c.cfg)
			if got := b.Stats().Left; got != c.left {
				t.Fatalf("Left = %d, want %d", got, c.left)
			}
			b.Retry() // allowed or not, first attempts are counted from here on
			for range c.firsts {
				b.First()
			}
			if got := b.Stats().Left; got != c.leftAt {
				t.Fatalf("after %d first attempts Left = %d, want %d", c.firsts, got, c.leftAt)
			}
		})
	}
}

// TestRetryBudgetHealthy: a call that succeeds at once, with the budget
// watching, counts one first attempt and spends nothing. Retry allocates
// nothing, with a budget or without, with options made once or per call.
func TestRetryBudgetHealthy(t *testing.T) {
	_, eng, b := newBudgetRig(t, client.BudgetConfig{})
	b.Retry() // first attempts are counted from here on
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	for range 50 {
		if err := client.Retry(ctx, client.DefaultBackoff, ok, client.WithBudget(b)); err != nil {
			t.Fatal(err)
		}
	}
	if s := b.Stats(); s.Firsts != 50 || s.Retries != 1 || s.RefusedRetries != 0 {
		t.Fatalf("Stats = %+v, want 50 first attempts and the one retry", s)
	}
	spend, sleep := client.WithBudget(b), client.SleepOn(eng.Clock())
	for name, f := range map[string]func(){
		"alone":            func() { _ = client.Retry(ctx, client.DefaultBackoff, ok) },
		"budget":           func() { _ = client.Retry(ctx, client.DefaultBackoff, ok, spend) },
		"budget, per call": func() { _ = client.Retry(ctx, client.DefaultBackoff, ok, client.WithBudget(b)) },
		"all options":      func() { _ = client.Retry(ctx, client.DefaultBackoff, ok, spend, sleep, client.WithSource(nil)) },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("Retry, %s: %v allocations, want none", name, a)
		}
	}
	asks := testing.AllocsPerRun(1000, func() { b.Retry() })
	if asks != 0 {
		t.Fatalf("Budget.Retry allocates %v times", asks)
	}
}

// TestRetryBudgetRefuses: a refused retry returns at once, before any
// sleep, with the last failure and ErrBudget.
func TestRetryBudgetRefuses(t *testing.T) {
	clock, eng, b := newBudgetRig(t, client.BudgetConfig{MinPerSecond: -1})
	// The call's first attempt is counted as it asks for the retry: a
	// tenth of one, no retry yet.
	start := clock.Now()
	calls := 0
	err := client.Retry(context.Background(), client.DefaultBackoff, func(context.Context) error {
		calls++
		return fmt.Errorf("call %d: %w", calls, errDown)
	}, client.WithBudget(b), client.SleepOn(eng.Clock()))
	var re *client.RetryError
	if !errors.As(err, &re) || re.Attempts != 1 || re.Cause != client.ErrBudget || !errors.Is(err, errDown) {
		t.Fatalf("Retry = %#v, want one attempt, ErrBudget and the failure", err)
	}
	if calls != 1 || clock.Now() != start {
		t.Fatalf("%d calls, %v slept; want one call and no sleep", calls, time.Duration(clock.Now()-start))
	}
	want := "moonpool: retry: stopped (moonpool: retry budget spent) after 1 attempts: call 1: backend down"
	if err.Error() != want {
		t.Fatalf("Error() = %q, want %q", err, want)
	}
}
