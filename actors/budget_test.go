package actors

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// spend asks a budget for one retry at now.
func spend(ref *engine.Ref, now int64) Permit {
	m := &Spend{Now: now, Reply: make(chan Permit, 1)}
	ref.Send(m)
	return <-m.Reply
}

// latency asks a budget for its p-quantile at now.
func latency(ref *engine.Ref, now int64, p float64) Permit {
	m := &Latency{Now: now, P: p, Reply: make(chan Permit, 1)}
	ref.Send(m)
	return <-m.Reply
}

func spawnBudget(t *testing.T, h *harness, ratio, floor float64, window time.Duration) (*engine.Ref, *Tally) {
	t.Helper()
	ref, tally, err := SpawnBudget(h.e, "", ratio, floor, window)
	if err != nil {
		t.Fatal(err)
	}
	return ref, tally
}

// TestBudgetDatesFirstsEarly: first attempts counted between two folds are
// folded in dated at the earlier one, the first instant they can have
// happened, however late the timer that folds them fires. Dated at the
// fold that found them, they would stay in the window up to a fold longer
// than they should, and let more retries through than the budget allows.
func TestBudgetDatesFirstsEarly(t *testing.T) {
	for _, late := range lateClocks {
		t.Run(late.name, func(t *testing.T) {
			h := newHarness(t, late.opts...)
			ref, tally := spawnBudget(t, h, 0.1, 1, 10*time.Second)
			// A retry at t0 spends one of the floor's ten, and has first
			// attempts counted from then on.
			if p := spend(ref, h.t0); !p.OK || p.Left != 9 {
				t.Fatalf("Spend = %+v, want allowed with 9 left", p)
			}
			tally.First() // folded in at t0 by the next answer
			if got := left(ref, "", h.t0); got != 9 {
				t.Fatalf("Left = %v, want the floor of 10 less the one spent", got)
			}
			h.clock.Advance(400 * time.Millisecond)
			for range 999 {
				tally.First() // the actor is awake: no message, only a count
			}
			// The fold timer, due at +500ms, fires (late, maybe) and
			// finds them; the barrier after it finds nothing more.
			h.clock.Advance(200 * time.Millisecond)
			if got := left(ref, "", h.clock.Now()); got != 99 {
				t.Fatalf("at +600ms Left = %v, want 99", got)
			}
			h.clock.AdvanceTo(h.at(10*time.Second - 1))
			if got := left(ref, "", h.clock.Now()); got != 99 {
				t.Fatalf("at +10s−1ns Left = %v, want 99", got)
			}
			h.clock.AdvanceTo(h.at(10 * time.Second))
			if got := left(ref, "", h.clock.Now()); got != 9 {
				t.Fatalf("at +10s Left = %v, want the floor less the one spent: first attempts counted after +400ms were dated later than t0", got)
			}
		})
	}
}

// TestBudgetWindowSlides: with every timer late by its own seeded draw,
// a budget under steady traffic keeps the retries of every window within
// its share of that window's first attempts, on the engine's clock, and
// once the traffic stops its window empties and its timer stops.
func TestBudgetWindowSlides(t *testing.T) {
	for _, late := range lateClocks {
		t.Run(late.name, func(t *testing.T) {
			h := newHarness(t, late.opts...)
			const window = time.Second
			ref, tally := spawnBudget(t, h, 0.2, 0, window)
			var firsts, spends []int64
			for step := range 3000 { // 3s of 1ms steps
				now := h.clock.Now()
				for range 3 {
					tally.First()
					firsts = append(firsts, now)
				}
				if step%2 == 0 { // a retry wanted every 2ms: 500/s against 300/s of share
					if p := spend(ref, now); p.OK {
						spends = append(spends, now)
					}
				}
				h.clock.Advance(time.Millisecond)
			}
			for _, at := range spends {
				n, f := 0, 0
				for _, s := range spends {
					if s <= at && at-s < int64(window) {
						n++
					}
				}
				for _, s := range firsts {
					if s <= at && at-s < int64(window) {
						f++
					}
				}
				if float64(n) > 0.2*float64(f) {
					t.Fatalf("at +%v: %d retries in the window, over a fifth of %d first attempts",
						time.Duration(at-h.t0), n, f)
				}
			}
			// The share is 3 a millisecond × 0.2 over 1,500 asked: most of
			// it is spent, minus the first window's warm-up.
			if len(spends) < 1400 {
				t.Fatalf("%d retries allowed of 1,500 asked, want most", len(spends))
			}
			h.advance(ref, 2*window)
			if got := left(ref, "", h.clock.Now()); got != 0 {
				t.Fatalf("after the traffic, Left = %v, want 0", got)
			}
			if n := h.clock.Pending(); n != 0 {
				t.Fatalf("an idle budget has %d timers pending", n)
			}
		})
	}
}

// TestBudgetPublishes: a quantile asked of the actor is published on the
// Tally, worked out again at each fold, and withdrawn when the actor
// sleeps.
func TestBudgetPublishes(t *testing.T) {
	h := newHarness(t)
	ref, tally := spawnBudget(t, h, 0.1, 1, 2*time.Second)
	for range 100 {
		tally.Observe(10 * time.Millisecond)
	}
	if _, found := tally.Quote(0.5); found {
		t.Fatal("a quantile nobody asked for is published")
	}
	p := latency(ref, h.t0, 0.5)
	q := policy.NewQuantile(2 * time.Second)
	q.AddN(10*time.Millisecond, 100, 0)
	if want, _ := q.At(0.5, 0); !p.OK || p.After != want {
		t.Fatalf("Latency(0.5) = %+v, want %v as the policy says", p, want)
	}
	d, found := tally.Quote(0.5)
	if !found || d != p.After {
		t.Fatalf("Quote(0.5) = %v, %v; want %v published", d, found, p.After)
	}
	for range 200 {
		tally.Observe(time.Second)
	}
	h.clock.Advance(100 * time.Millisecond) // a fold: a twentieth of the window
	left(ref, "", h.clock.Now())            // a barrier: the Tick is handled
	if d, found := tally.Quote(0.5); !found || math.Abs(float64(d-time.Second)) > float64(time.Second)/32 {
		t.Fatalf("after a fold Quote(0.5) = %v, %v; want 1s", d, found)
	}
	// Five more quantiles: the oldest place goes to the newest.
	for _, q := range []float64{0.1, 0.2, 0.3, 0.4, 0.6} {
		latency(ref, h.clock.Now(), q)
	}
	if _, found := tally.Quote(0.5); found {
		t.Fatal("Quote(0.5) still published after four newer ones")
	}
	if _, found := tally.Quote(0.6); !found {
		t.Fatal("Quote(0.6) not published")
	}
	h.advance(ref, 300*time.Millisecond) // folds that find nothing: the actor sleeps
	if n := h.clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending after the actor went to sleep", n)
	}
	if _, found := tally.Quote(0.6); found {
		t.Fatal("a quantile stays published while the actor sleeps")
	}
	// Asked again, the actor wakes to keep it current, and sleeps again
	// once its folds find nothing new.
	latency(ref, h.clock.Now(), 0.6)
	if _, found := tally.Quote(0.6); !found {
		t.Fatal("a quantile asked of a sleeping actor is not published")
	}
	if n := h.clock.Pending(); n != 1 {
		t.Fatalf("%d timers pending after a Latency woke the actor, want 1", n)
	}
	h.advance(ref, 300*time.Millisecond)
	if _, found := tally.Quote(0.6); found || h.clock.Pending() != 0 {
		t.Fatal("the actor did not sleep again")
	}
}

// TestBudgetQuoteKnown: a quantile too few latencies answer is not
// published, so the next ask reaches the actor, which counts what came
// since: the first delay is there as soon as enough latencies are, not at
// the next fold. Once answered, a quantile is answered from what was
// last known while the window holds too few, as after a spell quieter
// than the window. Fresh latencies take over once there are enough.
func TestBudgetQuoteKnown(t *testing.T) {
	h := newHarness(t)
	ref, tally := spawnBudget(t, h, 0.1, 1, 2*time.Second)
	ms := time.Millisecond
	near := func(name string, p Permit, want time.Duration) {
		t.Helper()
		if !p.OK || math.Abs(float64(p.After-want)) > float64(want)/32 {
			t.Fatalf("%s: Latency = %+v, want %v", name, p, want)
		}
	}
	for range 10 {
		tally.Observe(10 * ms)
	}
	if p := latency(ref, h.t0, 0.9); p.OK {
		t.Fatalf("Latency(0.9) of 10 latencies = %+v, want too few", p)
	}
	if _, found := tally.Quote(0.9); found {
		t.Fatal("too few is published")
	}
	for range 100 {
		tally.Observe(20 * ms)
	}
	near("at the same instant, with enough", latency(ref, h.t0, 0.9), 20*ms)
	if d, found := tally.Quote(0.9); !found || d != latency(ref, h.t0, 0.9).After {
		t.Fatalf("Quote(0.9) = %v, %v; want the answer published", d, found)
	}
	// Two windows with nothing: the actor sleeps, its latencies are gone.
	h.advance(ref, 4*time.Second)
	if _, found := tally.Quote(0.9); found {
		t.Fatal("a quantile stays published while the actor sleeps")
	}
	near("after the quiet spell", latency(ref, h.clock.Now(), 0.9), 20*ms)
	if p := latency(ref, h.clock.Now(), 0.5); p.OK {
		t.Fatalf("Latency(0.5), never known, = %+v; want too few", p)
	}
	// Too few fresh ones: still what was known.
	for range 10 {
		tally.Observe(40 * ms)
	}
	near("with 10 fresh latencies", latency(ref, h.clock.Now(), 0.9), 20*ms)
	// Enough fresh latencies: they answer.
	for range 200 {
		tally.Observe(40 * ms)
	}
	near("with fresh latencies", latency(ref, h.clock.Now(), 0.9), 40*ms)
	// Four more quantiles take every place. The one that took its place
	// longest ago, 0.9, goes, and what was known of it with it: asked
	// again, it takes a place with nothing known.
	for _, q := range []float64{0.5, 0.6, 0.7, 0.8} {
		latency(ref, h.clock.Now(), q)
	}
	h.advance(ref, 4*time.Second)
	for i := range 2 {
		if p := latency(ref, h.clock.Now(), 0.9); p.OK {
			t.Fatalf("ask %d: Latency(0.9) after four newer quantiles and a quiet spell = %+v; want too few", i, p)
		}
	}
	near("p 0.8, still known", latency(ref, h.clock.Now(), 0.8), 40*ms)
}

// TestBudgetQuoteZero: p 0 is a quantile like any other: it takes a place
// of its own and keeps it until four later ones have taken theirs.
func TestBudgetQuoteZero(t *testing.T) {
	h := newHarness(t)
	ref, tally := spawnBudget(t, h, 0.1, 1, 2*time.Second)
	for range 100 {
		tally.Observe(10 * time.Millisecond)
	}
	for _, q := range []float64{0.1, 0.2, 0.3, 0, 0.4} {
		if p := latency(ref, h.t0, q); !p.OK {
			t.Fatalf("Latency(%v) = %+v, want an answer", q, p)
		}
	}
	if _, found := tally.Quote(0); !found {
		t.Fatal("Quote(0) is not published after one later quantile")
	}
	if _, found := tally.Quote(0.1); found {
		t.Fatal("Quote(0.1) is still published after four later quantiles")
	}
}

// TestBudgetQuoteFollows: the quantile follows a change of latency
// within a tenth of the window, both ways, once that tenth holds ten
// samples at or above it. A client too quiet for that is answered from
// the whole window. A window of 0 is the default one, and its tenth
// follows it.
func TestBudgetQuoteFollows(t *testing.T) {
	for _, c := range []struct {
		window, is time.Duration // as given, and as the budget takes it
	}{
		{2 * time.Second, 2 * time.Second},
		{0, policy.DefaultBudgetWindow},
	} {
		t.Run(c.window.String(), func(t *testing.T) {
			h := newHarness(t)
			ref, tally := spawnBudget(t, h, 0.1, 1, c.window)
			ms := time.Millisecond
			step := c.is * 3 / 20 // past the last tenth, within the window
			steps := []struct {
				name  string
				after time.Duration // the clock moves on by this first
				n     int           // then this many latencies of d are seen
				d     time.Duration
				p     float64
				want  time.Duration
			}{
				{"step 0: steady at 10ms", 0, 4000, 10 * ms, 0.97, 10 * ms},
				{"step 1: slower, the last tenth holds 20 at or above p90", step, 200, 50 * ms, 0.9, 50 * ms},
				{"step 2: fast again, the last tenth holds 12 at or above p97", step, 400, 10 * ms, 0.97, 10 * ms},
				{"step 3: quiet, the last tenth holds 4 at or above p90", step, 40, 50 * ms, 0.9, 10 * ms},
			}
			for _, s := range steps {
				h.clock.Advance(s.after)
				for range s.n {
					tally.Observe(s.d)
				}
				p := latency(ref, h.clock.Now(), s.p)
				if !p.OK || math.Abs(float64(p.After-s.want)) > float64(s.want)/32 {
					t.Fatalf("%s: Latency(%v) = %+v, want %v", s.name, s.p, p, s.want)
				}
			}
		})
	}
}

// TestBudgetFoldsAsSlotBegins: while callers count, the actor folds as
// each slot of the budget begins, when what it lent runs out, whatever
// instant it woke at. Folding a slot's width after it woke instead, the
// loan would lie spent for most of a slot, and every retry and hedge in
// that time would ask the actor.
func TestBudgetFoldsAsSlotBegins(t *testing.T) {
	h := newHarness(t)
	ref, tally := spawnBudget(t, h, 0.1, 0, time.Second) // slots of 50ms
	const width = int64(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Woken 20ms into a slot of the engine's clock.
	h.clock.AdvanceTo((h.t0/width+1)*width + int64(20*time.Millisecond))
	for range 100 {
		tally.First()
	}
	if p := spend(ref, h.clock.Now()); !p.OK {
		t.Fatalf("Spend = %+v, want allowed", p)
	}
	until := tally.until.Load()
	for step := range 3 {
		if err := h.clock.WaitPending(ctx, 1); err != nil {
			t.Fatalf("step %d: no fold pending: %v", step, err)
		}
		d, ok := h.clock.Next()
		if got := h.clock.Now() + int64(d); !ok || got != until {
			t.Fatalf("step %d: the next fold is at +%v of the slot, want its end, when the loan runs out", step, time.Duration(got-until+width))
		}
		tally.First() // callers still count: the actor stays awake
		h.clock.AdvanceTo(until)
		until += width
	}
}

// TestBudgetStopped: a stopped budget refuses, and a count that wakes it
// afterwards goes nowhere.
func TestBudgetStopped(t *testing.T) {
	h := newHarness(t)
	ref, tally := spawnBudget(t, h, 0.1, 1, time.Second)
	tally.First()
	if err := ref.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := spend(ref, h.t0); p.OK || !errors.Is(p.Err, ErrStopped) {
		t.Fatalf("Spend after Stop = %+v", p)
	}
	if p := latency(ref, h.t0, 0.5); p.OK || !errors.Is(p.Err, ErrStopped) {
		t.Fatalf("Latency after Stop = %+v", p)
	}
	tally.First()
	tally.Observe(time.Second)
	if n := h.clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending after Stop", n)
	}
	if _, _, err := SpawnBudget(nil, "", 0.1, 1, time.Second); err == nil {
		t.Fatal("SpawnBudget(nil) = nil error")
	}
}

// TestBudgetConcurrent: callers counting and spending on many goroutines
// while the clock moves lose no count, and leave no timer behind once
// they stop.
func TestBudgetConcurrent(t *testing.T) {
	h := newHarness(t)
	// A window far longer than the test: first attempts are counted
	// throughout, however fast the clock runs against the callers.
	const window = time.Hour
	ref, tally := spawnBudget(t, h, 0.5, 0, window)
	spend(ref, h.t0) // first attempts are counted from here on
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		for {
			select {
			case <-stop:
				return
			default:
				h.clock.Advance(time.Millisecond)
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tally.First()
				tally.Observe(time.Duration(i) * time.Microsecond)
				if i%10 == w%10 {
					spend(ref, h.clock.Now())
				}
				if i%100 == 0 {
					latency(ref, h.clock.Now(), 0.9)
					tally.Quote(0.9)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-ticking
	if got := tally.Firsts(); got != workers*each {
		t.Fatalf("Firsts = %d, want %d", got, workers*each)
	}
	h.advance(ref, 3*window)
	if n := h.clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending once the callers stopped", n)
	}
	if got := left(ref, "", h.clock.Now()); got != 0 {
		t.Fatalf("Left = %v once the window passed, want 0", got)
	}
}

// TestBudgetLeftSamples: Spend answers with what is left after it.
func TestBudgetLeftSamples(t *testing.T) {
	h := newHarness(t)
	ref, _ := spawnBudget(t, h, 0.1, 3, time.Second)
	for i, want := range []Permit{{OK: true, Left: 2}, {OK: true, Left: 1}, {OK: true, Left: 0}, {Left: 0}} {
		if p := spend(ref, h.t0); p != want {
			t.Fatalf("spend %d = %+v, want %+v", i, p, want)
		}
	}
}

// folds is an actor that counts the Folds it gets, and closes a ping.
type folds struct{ n atomic.Int64 }

type ping chan struct{}

func (f *folds) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case Fold:
		f.n.Add(1)
	case ping:
		close(m)
	}
}

// TestBudgetCountsSendNothing: while the actor is awake, First and
// Observe send it nothing: each is a count on the Tally. Once the actor
// has gone to sleep, the first count to come sends one Fold, and the
// counts after it none. The Tally's Folds go to a counting actor here,
// so that the budget's own actor never hears them.
func TestBudgetCountsSendNothing(t *testing.T) {
	h := newHarness(t)
	ref, tally := spawnBudget(t, h, 0.1, 1, time.Second)
	latency(ref, h.t0, 0.5) // wakes the actor: it folds on its timer now
	spend(ref, h.t0)        // first attempts are counted
	counter := &folds{}
	cref, err := h.e.Spawn("", counter, nil)
	if err != nil {
		t.Fatal(err)
	}
	tally.ref = cref
	barrier := func() {
		p := make(ping)
		cref.Send(p) // every Fold sent before it is counted once it is closed
		<-p
	}
	for range 1000 {
		tally.First()
		tally.Observe(time.Millisecond)
	}
	barrier()
	if n := counter.n.Load(); n != 0 {
		t.Fatalf("2,000 counts to an awake actor sent %d Folds, want none", n)
	}
	if got := left(ref, "", h.t0); got != 99 {
		t.Fatalf("Left = %v, want 100 less the one spent: the counts are folded in all the same", got)
	}
	// A fold that finds nothing new: the actor sleeps.
	h.clock.Advance(50 * time.Millisecond) // folds the 1000, counted by Left's fold
	left(ref, "", h.clock.Now())
	h.clock.Advance(50 * time.Millisecond) // finds nothing: sleeps
	left(ref, "", h.clock.Now())
	if n := h.clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending, want the actor asleep", n)
	}
	for range 100 {
		tally.First()
	}
	barrier()
	if n := counter.n.Load(); n != 1 {
		t.Fatalf("100 counts to a sleeping actor sent %d Folds, want 1", n)
	}
}

// TestBudgetLends: after each answer the actor lends what the budget
// allows, until its next slot begins. Callers take it without a message,
// and the actor counts what they took before its next answer, so taken
// and asked spends together keep the bound. A stopped actor lends
// nothing.
func TestBudgetLends(t *testing.T) {
	h := newHarness(t)
	ref, tally := spawnBudget(t, h, 0.1, 0, time.Second) // slots of 50ms
	for range 100 {
		tally.First()
	}
	if tally.Lease(h.t0) {
		t.Fatal("a lease before the actor answered anything")
	}
	if p := spend(ref, h.t0); !p.OK || p.Left != 9 {
		t.Fatalf("Spend = %+v, want allowed with 9 left", p)
	}
	until := tally.until.Load()
	if until <= h.t0 || until > h.t0+int64(50*time.Millisecond) {
		t.Fatalf("lent until +%v, want within the slot", time.Duration(until-h.t0))
	}
	if tally.Lease(until) {
		t.Fatal("a lease taken at its expiry")
	}
	for i := range 9 {
		if !tally.Lease(until - 1) {
			t.Fatalf("lease %d of 9 refused", i+1)
		}
	}
	if tally.Lease(h.t0) {
		t.Fatal("a tenth lease taken of 9 lent")
	}
	if got := left(ref, "", h.t0); got != 0 {
		t.Fatalf("Left = %v after 9 leases and a spend, want 0", got)
	}
	if p := spend(ref, h.t0); p.OK {
		t.Fatalf("Spend = %+v past the share, want refused", p)
	}
	for range 100 {
		tally.First()
	}
	if got := left(ref, "", h.t0); got != 10 {
		t.Fatalf("Left = %v after 100 more first attempts, want 10", got)
	}
	for range 4 {
		tally.Lease(h.t0)
	}
	if p := spend(ref, h.t0); !p.OK || p.Left != 5 {
		t.Fatalf("Spend = %+v after 4 leases of 10, want allowed with 5 left", p)
	}
	if err := ref.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tally.Lease(h.t0) {
		t.Fatal("a lease taken from a stopped actor")
	}
}
