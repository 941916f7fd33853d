package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

func TestBucketAllowSteps(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnBucket(r.e, "", 10, 3) // a token every 100ms, three at most
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	steps := []struct {
		at    time.Duration
		n     float64
		ok    bool
		after time.Duration
		left  float64 // after the step
	}{
		{0, 1, true, 0, 2},                                // full at spawn: the first burst goes through
		{0, 2, true, 0, 0},                                // the rest of it
		{0, 1, false, 100 * ms, 0},                        // empty: a token in 100ms
		{50 * ms, 1, false, 50 * ms, 0.5},                 // half way there
		{100 * ms, 1, true, 0, 0},                         // exactly when Next said
		{100 * ms, 4, false, policy.Never, 0},             // more than the burst: never
		{time.Second, 3, true, 0, 0},                      // full again after a quiet spell, and no more
		{time.Second, 0, true, 0, 0},                      // nothing asked, nothing taken
		{time.Second, -1, true, 0, 0},                     // less than nothing: the same
		{time.Second, math.NaN(), false, policy.Never, 0}, // NaN can never be had
		{500 * ms, 1, false, 600 * ms, 0},                 // the clock went back: no tokens minted
		{1100 * ms, 1, true, 0, 0},                        // and the reference time stayed put
	}
	for i, s := range steps {
		now := r.at(s.at)
		p := ask(ref, "", now, s.n)
		if p.OK != s.ok || p.After != s.after || p.Err != nil {
			t.Fatalf("step %d: Allow(%v at +%v) = %+v, want OK %v After %v", i, s.n, s.at, p, s.ok, s.after)
		}
		if got := left(ref, "", now); math.Abs(got-s.left) > 1e-9 {
			t.Fatalf("step %d: Left = %v, want %v", i, got, s.left)
		}
	}
}

func TestWindowAllowSteps(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnWindow(r.e, "", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	steps := []struct {
		at    time.Duration
		ok    bool
		after time.Duration
		left  float64
	}{
		{0, true, 0, 1},
		{10 * s, true, 0, 0},
		{20 * s, false, 40 * s, 0}, // the first event leaves at +60s
		{60 * s, true, 0, 0},       // it has: an event counts while now - t < window
		{65 * s, false, 5 * s, 0},  // the +10s one leaves at +70s
		{70 * s, true, 0, 0},
		{3 * time.Minute, true, 0, 1}, // quiet: the window is empty again
	}
	for i, st := range steps {
		now := r.at(st.at)
		p := ask(ref, "", now, 1)
		if p.OK != st.ok || p.After != st.after || p.Err != nil {
			t.Fatalf("step %d: Allow at +%v = %+v, want OK %v After %v", i, st.at, p, st.ok, st.after)
		}
		if got := left(ref, "", now); got != st.left {
			t.Fatalf("step %d: Left = %v, want %v", i, got, st.left)
		}
	}
}

// TestWaitersFIFO: parked callers are granted in the order they came, each
// at its own instant, and nobody overtakes them, with Wait or without.
func TestWaitersFIFO(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnBucket(r.e, "", 1, 2) // a token a second, two at most
	if err != nil {
		t.Fatal(err)
	}
	if p := ask(ref, "", r.t0, 2); !p.OK {
		t.Fatalf("emptying: %+v", p)
	}
	a := park(ref, "", r.t0, 2, 0) // its turn at +2s
	b := park(ref, "", r.t0, 1, 0) // behind it, at +3s
	left(ref, "", r.t0)
	if d, ok := r.clock.Next(); !ok || d != 2*time.Second || r.clock.Pending() != 1 {
		t.Fatalf("step 0: timer in %v (%v), %d pending; want one, in 2s", d, ok, r.clock.Pending())
	}

	// At +1s one token is there, which would do for b, but a is first.
	c := park(ref, "", r.at(time.Second), 1, 0)
	p := ask(ref, "", r.at(time.Second), 1)
	// Without Wait it is refused too, told the wait from the back of the
	// line: 2+1+1 tokens parked and its own 1 wanted, 1 there, a token a
	// second.
	if p.OK || p.After != 4*time.Second {
		t.Fatalf("step 1: Allow without Wait behind parked callers = %+v, want refused After 4s", p)
	}
	r.advance(ref, time.Second) // to +1s: nothing is due
	left(ref, "", r.clock.Now())
	unanswered(t, "step 1", a)
	unanswered(t, "step 1", b)
	unanswered(t, "step 1", c)

	r.advance(ref, time.Second) // +2s: a
	if p := answer(a); !p.OK || p.Err != nil {
		t.Fatalf("step 2: a = %+v", p)
	}
	left(ref, "", r.clock.Now())
	unanswered(t, "step 2", b)
	unanswered(t, "step 2", c)
	if d, _ := r.clock.Next(); d != time.Second {
		t.Fatalf("step 2: next timer in %v, want 1s", d)
	}

	r.advance(ref, time.Second) // +3s: b
	if p := answer(b); !p.OK {
		t.Fatalf("step 3: b = %+v", p)
	}
	left(ref, "", r.clock.Now())
	unanswered(t, "step 3", c)

	r.advance(ref, time.Second) // +4s: c
	if p := answer(c); !p.OK {
		t.Fatalf("step 4: c = %+v", p)
	}
	left(ref, "", r.clock.Now())
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("step 4: %d timers pending with nobody parked", n)
	}
}

// TestTickAtHeadInstant: the timer is asked for at exactly the instant the
// head can be granted, to the nanosecond, even when the rate does not divide
// a second; a nanosecond early grants nothing.
func TestTickAtHeadInstant(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnBucket(r.e, "", 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	model := policy.NewBucket(3, 1, r.t0)
	model.Take(r.t0, 1)
	want := model.Next(r.t0, 1) // a third of a second, rounded up

	ask(ref, "", r.t0, 1)
	a := park(ref, "", r.t0, 1, 0)
	b := park(ref, "", r.t0, 1, 0)
	left(ref, "", r.t0)
	if err := r.clock.WaitPending(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if d, ok := r.clock.Next(); !ok || d != want || r.clock.Pending() != 1 {
		t.Fatalf("timer in %v, %d pending; want one in %v", d, r.clock.Pending(), want)
	}
	r.clock.Advance(want - 1)
	left(ref, "", r.clock.Now())
	unanswered(t, "a nanosecond early", a)
	r.clock.Advance(1)
	if p := answer(a); !p.OK {
		t.Fatalf("at the instant: %+v", p)
	}
	model.Take(r.t0+int64(want), 1)
	want2 := model.Next(r.t0+int64(want), 1)
	left(ref, "", r.clock.Now())
	if d, ok := r.clock.Next(); !ok || d != want2 || r.clock.Pending() != 1 {
		t.Fatalf("second timer in %v, %d pending; want one in %v", d, r.clock.Pending(), want2)
	}
	unanswered(t, "b before its instant", b)
	r.clock.Advance(want2)
	if p := answer(b); !p.OK {
		t.Fatalf("b at its instant: %+v", p)
	}
}

func TestDeadline(t *testing.T) {
	r := newHarness(t)
	ms := time.Millisecond
	bucket, err := SpawnBucket(r.e, "bucket", 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	stingy, err := SpawnBucket(r.e, "stingy", 0, 1) // its one token, then nothing
	if err != nil {
		t.Fatal(err)
	}
	window, err := SpawnWindow(r.e, "window", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ask(bucket, "", r.t0, 1)
	ask(stingy, "", r.t0, 1)
	ask(window, "", r.t0, 1)

	// In order; each either parks (no answer yet) or is refused at once.
	steps := []struct {
		ref      *engine.Ref
		n        float64
		deadline time.Duration // after t0; 0 is none
		parks    bool
		after    time.Duration // the refusal's After
	}{
		{bucket, 1, 50 * ms, false, 100 * ms},  // the token comes at +100ms: too late
		{bucket, 1, 100 * ms, true, 0},         // exactly at the deadline is in time
		{bucket, 1, 150 * ms, false, 200 * ms}, // behind one: +200ms
		{bucket, 1, 200 * ms, true, 0},         // in time behind it
		{bucket, 2, 0, false, policy.Never},    // more than the burst, even with no deadline
		{stingy, 1, 0, false, policy.Never},    // earns nothing and is empty
		{window, 1, 30 * time.Second, false, time.Minute},
		{window, 1, time.Minute, true, 0},
	}
	var parked []*Allow
	for i, s := range steps {
		var dl int64
		if s.deadline != 0 {
			dl = r.at(s.deadline)
		}
		a := park(s.ref, "", r.t0, s.n, dl)
		left(s.ref, "", r.t0)
		if s.parks {
			unanswered(t, fmt.Sprintf("step %d", i), a)
			parked = append(parked, a)
			continue
		}
		select {
		case p := <-a.Reply:
			if p.OK || !errors.Is(p.Err, ErrDeadline) || p.After != s.after {
				t.Fatalf("step %d: %+v, want ErrDeadline After %v", i, p, s.after)
			}
		default:
			t.Fatalf("step %d: parked, want refused at once", i)
		}
	}
	r.clock.Advance(time.Minute)
	for i, a := range parked {
		if p := answer(a); !p.OK {
			t.Fatalf("parked %d: %+v", i, p)
		}
	}
}

// TestNoGrantPastDeadline: a window's wait behind others is estimated from
// below, so a caller can park and find its turn comes after its deadline;
// then it is refused with ErrDeadline, and the slot goes to whoever is next.
func TestNoGrantPastDeadline(t *testing.T) {
	r := newHarness(t)
	w, err := SpawnWindow(r.e, "window", 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	ask(w, "", r.at(0), 1)
	r.clock.AdvanceTo(r.at(5 * s)) // the clock reads what the requests say
	ask(w, "", r.at(5*s), 1)       // full: slots open at +10s and +15s
	first := park(w, "", r.at(5*s), 1, 0)
	// Behind first, the estimate is +10s (the oldest slot), within a
	// deadline of +12s; the truth is +15s.
	late := park(w, "", r.at(5*s), 1, r.at(12*s))
	last := park(w, "", r.at(5*s), 1, 0)
	left(w, "", r.at(5*s))
	unanswered(t, "step 1", late)

	r.advance(w, 5*s) // +10s: first's slot
	if p := answer(first); !p.OK {
		t.Fatalf("step 2: first %+v, want granted at +10s", p)
	}
	unanswered(t, "step 3", late)
	r.advance(w, 5*s) // +15s: late's turn, past its deadline
	if p := answer(late); p.OK || !errors.Is(p.Err, ErrDeadline) {
		t.Fatalf("step 4: late %+v, want ErrDeadline", p)
	}
	if p := answer(last); !p.OK {
		t.Fatalf("step 5: last %+v, want the slot late could not use", p)
	}
}

// TestWithdraw: every Allow gets exactly one answer, whether the Withdraw
// comes before its grant or after, and a reused Allow is not withdrawn by a
// Withdraw meant for its earlier use.
func TestWithdraw(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnBucket(r.e, "", 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	ask(ref, "", r.t0, 5)

	// Before the grant: answered ErrCancelled, once.
	big := park(ref, "", r.t0, 5, 0) // +5s
	small := park(ref, "", r.t0, 1, 0)
	ref.Send(&Withdraw{Allow: big})
	if p := answer(big); p.OK || !errors.Is(p.Err, ErrCancelled) {
		t.Fatalf("withdrawn before grant: %+v", p)
	}
	ref.Send(&Withdraw{Allow: big}) // again: nothing more
	left(ref, "", r.t0)
	unanswered(t, "second withdraw", big)
	// The head changed: the timer follows it, from +5s to +1s.
	if d, ok := r.clock.Next(); !ok || d != time.Second || r.clock.Pending() != 1 {
		t.Fatalf("timer in %v, %d pending; want one in 1s", d, r.clock.Pending())
	}

	// After the grant: nothing more.
	r.clock.Advance(time.Second)
	if p := answer(small); !p.OK {
		t.Fatalf("small: %+v", p)
	}
	ref.Send(Withdraw{Allow: small})
	left(ref, "", r.clock.Now())
	unanswered(t, "withdraw after grant", small)

	// The same Allow used again, parked again: a stale Withdraw sent
	// before this use does not touch it... (the engine keeps order, so the
	// stale one is handled first and finds nothing).
	now := r.clock.Now()
	small.Now, small.Wait = now, true
	ref.Send(&Withdraw{Allow: small})
	ref.Send(small)
	left(ref, "", now)
	unanswered(t, "reused", small)
	r.clock.Advance(time.Second)
	if p := answer(small); !p.OK {
		t.Fatalf("reused: %+v", p)
	}

	// Withdrawing the only waiter stops the timer; a nil Withdraw is
	// ignored.
	last := park(ref, "", r.clock.Now(), 1, 0)
	left(ref, "", r.clock.Now())
	ref.Send(&Withdraw{Allow: last})
	ref.Send(&Withdraw{})
	if p := answer(last); !errors.Is(p.Err, ErrCancelled) {
		t.Fatalf("last: %+v", p)
	}
	left(ref, "", r.clock.Now())
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending with nobody parked", n)
	}
}

// TestStopAnswersParked: stopping the actor answers its parked callers, and
// requests sent afterwards are refused, so nobody waits for ever.
func TestStopAnswersParked(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnWindow(r.e, "w", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ask(ref, "", r.t0, 1)
	a := park(ref, "", r.t0, 1, 0)
	left(ref, "", r.t0)
	if err := r.e.Stop(context.Background(), "w"); err != nil {
		t.Fatal(err)
	}
	if p := answer(a); !errors.Is(p.Err, ErrStopped) {
		t.Fatalf("parked: %+v", p)
	}
	if p := ask(ref, "", r.t0, 1); !errors.Is(p.Err, ErrStopped) || p.After != policy.Never {
		t.Fatalf("after stop: %+v", p)
	}
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("%d timers left behind", n)
	}
}

// TestLimiterBadInput: odd input gets a documented answer, and a caller's
// misuse of its reply channel cannot stall the actor.
func TestLimiterBadInput(t *testing.T) {
	r := newHarness(t)
	if _, err := SpawnBucket(nil, "", 1, 1); err == nil {
		t.Fatal("SpawnBucket(nil engine): no error")
	}
	if _, err := SpawnWindow(nil, "", 1, time.Second); err == nil {
		t.Fatal("SpawnWindow(nil engine): no error")
	}
	none, _ := SpawnWindow(r.e, "", 0, time.Second)
	if p := ask(none, "", r.t0, 1); p.OK || p.After != policy.Never {
		t.Fatalf("window of nothing: %+v", p)
	}
	nan, _ := SpawnBucket(r.e, "", math.NaN(), math.NaN()) // earns nothing, holds one
	if p := ask(nan, "", r.t0, 1); !p.OK {
		t.Fatalf("NaN bucket, first token: %+v", p)
	}
	if p := ask(nan, "", r.t0+int64(time.Hour), 1); p.OK || p.After != policy.Never {
		t.Fatalf("NaN bucket, second token: %+v", p)
	}

	ref, _ := SpawnBucket(r.e, "", 1, 1)
	ref.Send(&Allow{Now: r.t0, N: 1})                           // no reply channel at all
	ref.Send(&Allow{Now: r.t0, N: 1, Reply: make(chan Permit)}) // one without room
	if got := left(ref, "", r.t0); got != 0 {
		t.Fatalf("Left = %v: the unanswerable Allows should still have taken", got)
	}
	// A request the actor does not serve is refused, not left hanging.
	e := &Enter{Reply: make(chan Permit, 1)}
	ref.Send(e)
	if p := <-e.Reply; !errors.Is(p.Err, ErrStopped) {
		t.Fatalf("Enter to a bucket: %+v", p)
	}
}

// TestWindowQuotaModel: a quota of N an hour admits exactly what a brute
// force count of the last hour's admissions says, under random arrivals,
// so no hour ever holds more than N and none is refused short of N.
func TestWindowQuotaModel(t *testing.T) {
	const n = 7
	r := newHarness(t)
	ref, err := SpawnWindow(r.e, "", n, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var admitted []int64
	now := r.t0
	for step := range 5000 {
		// Bursts and lulls: mostly seconds apart, now and then an hour.
		switch rng.IntN(10) {
		case 0:
			now += rng.Int64N(int64(2 * time.Hour))
		case 1, 2:
			// the same instant again
		default:
			now += rng.Int64N(int64(10 * time.Minute))
		}
		in := 0
		oldest := int64(math.MaxInt64)
		for _, s := range admitted {
			if now-s < int64(time.Hour) {
				in++
				oldest = min(oldest, s)
			}
		}
		p := ask(ref, "", now, 1)
		if want := in < n; p.OK != want {
			t.Fatalf("step %d: OK = %v with %d in the last hour, want %v", step, p.OK, in, want)
		}
		if p.OK {
			admitted = append(admitted, now)
		} else if want := time.Duration(oldest + int64(time.Hour) - now); p.After != want {
			t.Fatalf("step %d: After = %v, want %v", step, p.After, want)
		}
	}
	// And the stronger statement, checked directly: every hour-long
	// stretch starting at an admission holds at most n.
	for i, s := range admitted {
		k := 0
		for _, u := range admitted[i:] {
			if u-s < int64(time.Hour) {
				k++
			}
		}
		if k > n {
			t.Fatalf("%d admitted in the hour from admission %d", k, i)
		}
	}
	if len(admitted) < 100 {
		t.Fatalf("only %d admitted: the pattern tests little", len(admitted))
	}
}

// TestAllowAllocs: the answer to an Allow costs no allocation in the actor,
// with its request and channel reused as a client would.
func TestAllowAllocs(t *testing.T) {
	r := newHarness(t)
	bucket, _ := SpawnBucket(r.e, "", math.Inf(1), 1)
	window, _ := SpawnWindow(r.e, "", 1, 0)
	for name, ref := range map[string]*engine.Ref{"bucket": bucket, "window": window} {
		a := &Allow{Now: r.t0, N: 1, Reply: make(chan Permit, 1)}
		got := testing.AllocsPerRun(1000, func() {
			a.Now++
			ref.Send(a)
			if p := <-a.Reply; !p.OK {
				t.Fatalf("%s: %+v", name, p)
			}
		})
		if got != 0 {
			t.Errorf("%s: %v allocations an Allow, want 0", name, got)
		}
	}
}

// FuzzBucketWaiters drives a bucket with parked callers, withdrawals,
// callers that do not wait and the passing of time in any order, and checks
// what a client relies on: every Allow gets exactly one answer, parked
// callers are granted in the order they came, and no more tokens are
// granted than the bucket earned.
func FuzzBucketWaiters(f *testing.F) {
	f.Add([]byte{0, 4, 8, 3, 7, 2, 1, 11})
	f.Add([]byte{12, 12, 12, 1, 5, 9, 255, 3})
	f.Add([]byte{2, 2, 2, 2, 0, 0, 3, 1, 1, 43})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		const rate, burst = 10, 3
		r := newHarness(t)
		ref, err := SpawnBucket(r.e, "", rate, burst)
		if err != nil {
			t.Fatal(err)
		}
		type waiter struct {
			a    *Allow
			done bool
			ok   bool
			at   int64
		}
		var ws []*waiter
		granted := 0.0
		collect := func() {
			left(ref, "", r.clock.Now())
			for _, w := range ws {
				if w.done {
					continue
				}
				select {
				case p := <-w.a.Reply:
					w.done, w.ok, w.at = true, p.OK, r.clock.Now()
					if p.OK {
						granted += w.a.N
					} else if !errors.Is(p.Err, ErrCancelled) {
						t.Fatalf("parked caller answered %+v", p)
					}
				default:
				}
			}
		}
		for step, op := range ops {
			arg := int(op >> 2)
			switch op % 4 {
			case 0:
				ws = append(ws, &waiter{a: park(ref, "", r.clock.Now(), float64(arg%burst+1), 0)})
			case 1:
				if len(ws) > 0 {
					ref.Send(&Withdraw{Allow: ws[arg%len(ws)].a})
				}
			case 2:
				if p := ask(ref, "", r.clock.Now(), 1); p.OK {
					granted++
				}
			case 3:
				r.advance(ref, time.Duration(arg)*7*time.Millisecond)
			}
			collect()
			if limit := burst + rate*float64(r.clock.Now()-r.t0)/1e9; granted > limit+1e-9 {
				t.Fatalf("step %d: %v tokens granted, only %v earned", step, granted, limit)
			}
		}
		r.advance(ref, time.Hour)
		collect()
		var last int64
		for i, w := range ws {
			if !w.done {
				t.Fatalf("waiter %d never answered", i)
			}
			select {
			case p := <-w.a.Reply:
				t.Fatalf("waiter %d answered twice: %+v", i, p)
			default:
			}
			if w.ok {
				if w.at < last {
					t.Fatalf("waiter %d granted at %d, before one that came earlier", i, w.at-r.t0)
				}
				last = w.at
			}
		}
	})
}

func ExampleSpawnBucket() {
	clock := moontest.NewClock(nil)
	e := engine.New(engine.WithClock(clock))
	defer e.Shutdown(context.Background())

	ref, _ := SpawnBucket(e, "api", 2, 2) // two a second, two at once
	for range 3 {
		a := &Allow{Now: clock.Now(), N: 1, Reply: make(chan Permit, 1)}
		ref.Send(a)
		p := <-a.Reply
		fmt.Println(p.OK, p.After)
	}

	// A caller that waits is answered when its token comes, by a Tick the
	// actor asked the clock for: here when the test moves time.
	a := &Allow{Now: clock.Now(), N: 1, Wait: true, Reply: make(chan Permit, 1)}
	ref.Send(a)
	clock.WaitPending(context.Background(), 1)
	clock.Advance(500 * time.Millisecond)
	fmt.Println((<-a.Reply).OK)
	// Output:
	// true 0s
	// true 0s
	// false 500ms
	// true
}

func ExampleSpawnKeyedWindow() {
	clock := moontest.NewClock(nil)
	e := engine.New(engine.WithClock(clock))
	defer e.Shutdown(context.Background())

	ref, _ := SpawnKeyedWindow(e, "per-user", 2, time.Hour) // two an hour, per user
	for _, user := range []string{"ann", "ann", "ann", "bob"} {
		a := &Allow{Now: clock.Now(), Key: user, Reply: make(chan Permit, 1)}
		ref.Send(a)
		p := <-a.Reply
		fmt.Println(user, p.OK, p.After)
	}
	// Output:
	// ann true 0s
	// ann true 0s
	// ann false 1h0m0s
	// bob true 0s
}

// TestAllowNothing: a bucket's Allow of N <= 0 asks for nothing and is
// granted, with or without Wait, even while callers are parked (they lose
// nothing to it), and changes nothing. A window counts one event whatever
// N, so for a window N = 0 is an event like any other.
func TestAllowNothing(t *testing.T) {
	r := newHarness(t)
	b, err := SpawnBucket(r.e, "", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	ask(b, "", r.t0, 2)
	parked := park(b, "", r.t0, 1, 0)
	for i, n := range []float64{0, -1, math.Inf(-1)} {
		if p := ask(b, "", r.t0, n); !p.OK || p.Err != nil {
			t.Fatalf("step %d: Allow(%v) with a caller parked = %+v, want granted", i, n, p)
		}
		if p := answer(park(b, "", r.t0, n, 0)); !p.OK || p.Err != nil {
			t.Fatalf("step %d: Allow(%v) with Wait and a caller parked = %+v, want granted at once", i, n, p)
		}
	}
	unanswered(t, "the parked caller", parked)
	r.advance(b, time.Second)
	if p := answer(parked); !p.OK {
		t.Fatalf("the parked caller = %+v, want its token at +1s", p)
	}

	w, err := SpawnWindow(r.e, "", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if p := ask(w, "", r.t0, 0); !p.OK {
		t.Fatalf("window: Allow(0) = %+v, want one event counted", p)
	}
	if p := ask(w, "", r.t0, 0); p.OK || p.After != time.Minute {
		t.Fatalf("window: a second Allow(0) = %+v, want refused: it is an event", p)
	}
}

// TestAnswersCarryLeft: every answer to an Allow says what a caller that
// does not wait could still have at once, in the same turn as the
// decision: what is left after a grant, what is there at a refusal, and
// nothing while callers are parked, since they come first.
func TestAnswersCarryLeft(t *testing.T) {
	r := newHarness(t)
	b, _ := SpawnBucket(r.e, "", 10, 3)
	w, _ := SpawnWindow(r.e, "", 2, time.Minute)
	kb, _ := SpawnKeyedBucket(r.e, "", 10, 3)
	ms := time.Millisecond
	steps := []struct {
		ref   *engine.Ref
		key   string
		at    time.Duration
		n     float64
		wait  bool // park, and expect no answer
		ok    bool
		after time.Duration
		left  float64
	}{
		{b, "", 0, 1, false, true, 0, 2},
		{b, "", 0, 2, false, true, 0, 0},
		{b, "", 50 * ms, 1, false, false, 50 * ms, 0.5},
		{b, "", 50 * ms, 1, true, false, 0, 0},          // parks for +100ms
		{b, "", 60 * ms, 0, false, true, 0, 0},          // nothing asked: granted, and nothing is spare behind the parked one
		{b, "", 60 * ms, 0.1, false, false, 50 * ms, 0}, // behind it
		{kb, "a", 0, 3, false, true, 0, 0},
		{kb, "a", 0, 1, false, false, 100 * ms, 0},
		{kb, "b", 0, 1, false, true, 0, 2},
		{w, "", 0, 1, false, true, 0, 1},
		{w, "", 0, 1, false, true, 0, 0},
		{w, "", 0, 1, false, false, time.Minute, 0},
	}
	for i, s := range steps {
		if s.wait {
			a := park(s.ref, s.key, r.at(s.at), s.n, 0)
			left(s.ref, s.key, r.at(s.at))
			unanswered(t, fmt.Sprintf("step %d", i), a)
			continue
		}
		p := ask(s.ref, s.key, r.at(s.at), s.n)
		if p.OK != s.ok || p.After != s.after || math.Abs(p.Left-s.left) > 1e-9 || p.Err != nil {
			t.Fatalf("step %d: Allow(%v at +%v) = %+v, want OK %v After %v Left %v", i, s.n, s.at, p, s.ok, s.after, s.left)
		}
	}
}
