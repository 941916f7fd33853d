package policy

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

const milli = time.Millisecond

// after0 is t0 plus a span: the instants of the ward tables.
func after0(d time.Duration) int64 { return t0 + int64(d) }

// rigid is the backoff of most ward tables: 100 ms doubling to a second,
// no jitter, so the holds are the ceilings.
var rigid = Backoff{Base: 100 * milli, Factor: 2, Cap: time.Second, Jitter: Rigid}

func TestWardBucket(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{Bucket: Rate{PerSecond: 1, Burst: 1}}) // one make a second
	runPool(t, p, []poolOp{
		{call: poolTake{after0(0), mk}, live: 1, busy: 1},
		{call: poolUnmade{after0(0)}, live: 0},
		// The failed make spent its token, so the next is spaced too, and
		// Later reserves nothing.
		{call: poolTake{after0(0), later(time.Second, ReasonBucket)}, live: 0},
		{call: poolTake{after0(400 * milli), later(600*milli, ReasonBucket)}, live: 0},
		{call: poolTake{after0(time.Second), mk}, live: 1, busy: 1},
		{call: poolMade{1, after0(time.Second)}, live: 1, busy: 1},
		{call: poolGive{1, after0(time.Second), true}, live: 1, idle: 1},
		// The bucket holds back makes, never lending: it is empty, and the
		// idle one is lent all the same.
		{call: poolTake{after0(time.Second), ready(1)}, live: 1, busy: 1},
		{call: poolTake{after0(time.Second), later(time.Second, ReasonBucket)}, live: 1, busy: 1},
	})
	if got := p.ward.bucket.Tokens(after0(time.Second)); got != 0 {
		t.Fatalf("tokens after the second make: %v, want 0", got)
	}
}

// TestWardBucketStartsFull: no timestamp configures the bucket; it is full
// at whatever instant the pool is first given, however far from zero.
func TestWardBucketStartsFull(t *testing.T) {
	for _, start := range []int64{0, t0, -int64(time.Hour), math.MaxInt64 - int64(time.Hour)} {
		p := NewPool[int](Limits{}, Ward{Bucket: Rate{PerSecond: 2, Burst: 3}})
		for n := range 3 {
			if got := p.Take(start); got != mk {
				t.Fatalf("start %d, make %d: %+v, want Make from a full bucket", start, n+1, got)
			}
		}
		if got := p.Take(start); got != later(500*milli, ReasonBucket) {
			t.Fatalf("start %d, the fourth: %+v, want Later 500ms by the bucket", start, got)
		}
		if got := p.Take(start + int64(500*milli)); got != mk {
			t.Fatalf("start %d, half a second on: %+v, want Make", start, got)
		}
	}
}

func TestWardBackoff(t *testing.T) {
	// Attempts 1 would allow no retry at all; the pool makes anyway, since
	// a pool never gives up on its backend.
	bo := Backoff{Base: 100 * milli, Factor: 2, Cap: time.Second, Attempts: 1, Jitter: Rigid}
	p := NewPool[int](Limits{}, Ward{Backoff: bo})
	runPool(t, p, []poolOp{
		{call: poolTake{after0(0), mk}, live: 1, busy: 1},
		{call: poolUnmade{after0(0)}, live: 0},
		{call: poolTake{after0(0), later(100*milli, ReasonBackoff)}, live: 0},
		{call: poolTake{after0(99 * milli), later(1*milli, ReasonBackoff)}, live: 0},
		{call: poolTake{after0(100 * milli), mk}, live: 1, busy: 1},
		{call: poolUnmade{after0(100 * milli)}, live: 0},
		{call: poolTake{after0(100 * milli), later(200*milli, ReasonBackoff)}, live: 0},
		{call: poolTake{after0(300 * milli), mk}, live: 1, busy: 1},
		{call: poolUnmade{after0(300 * milli)}, live: 0},
		{call: poolTake{after0(300 * milli), later(400*milli, ReasonBackoff)}, live: 0},
		{call: poolTake{after0(700 * milli), mk}, live: 1, busy: 1},
		{call: poolUnmade{after0(700 * milli)}, live: 0},
		{call: poolTake{after0(700 * milli), later(800*milli, ReasonBackoff)}, live: 0},
		{call: poolTake{after0(1500 * milli), mk}, live: 1, busy: 1},
		{call: poolUnmade{after0(1500 * milli)}, live: 0},
		// 100 milli × 2⁴ is past the Cap.
		{call: poolTake{after0(1500 * milli), later(time.Second, ReasonBackoff)}, live: 0},
		{call: poolTake{after0(2500 * milli), mk}, live: 1, busy: 1},
		// A make that works ends the run: the next failure starts over.
		{call: poolMade{1, after0(2500 * milli)}, live: 1, busy: 1},
		{call: poolTake{after0(2500 * milli), mk}, live: 2, busy: 2},
		{call: poolUnmade{after0(2500 * milli)}, live: 1, busy: 1},
		{call: poolTake{after0(2500 * milli), later(100*milli, ReasonBackoff)}, live: 1, busy: 1},
		// Lending is never held back.
		{call: poolGive{1, after0(2500 * milli), true}, live: 1, idle: 1},
		{call: poolTake{after0(2500 * milli), ready(1)}, live: 1, busy: 1},
	})
}

// TestWardBackoffDraw: the owner's draws spread the hold; without a Draw
// the hold is the Ceiling whatever the jitter.
func TestWardBackoffDraw(t *testing.T) {
	tests := []struct {
		name  string
		bo    Backoff
		draws []float64 // nil: no Draw
		holds []time.Duration
	}{
		{"Full without a Draw holds the Ceiling",
			Backoff{Base: 100 * milli, Factor: 2, Cap: time.Second, Jitter: Full}, nil,
			[]time.Duration{100 * milli, 200 * milli, 400 * milli}},
		{"Full spreads by the draws",
			Backoff{Base: 100 * milli, Factor: 2, Cap: time.Second, Jitter: Full}, []float64{0.25, 0.5, 0.75},
			[]time.Duration{25 * milli, 100 * milli, 300 * milli}},
		{"Equal keeps half the Ceiling",
			Backoff{Base: 100 * milli, Factor: 2, Cap: time.Second, Jitter: Equal}, []float64{0, 0.5, 0.5},
			[]time.Duration{50 * milli, 150 * milli, 300 * milli}},
		{"Decorrelated grows from the last hold",
			Backoff{Base: 100 * milli, Factor: 2, Cap: 10 * time.Second, Jitter: Decorrelated}, []float64{0.5, 0.5, 0.5},
			[]time.Duration{200 * milli, 350 * milli, 575 * milli}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := Ward{Backoff: tt.bo}
			if tt.draws != nil {
				n := 0
				w.Draw = func() float64 { n++; return tt.draws[n-1] }
			}
			p := NewPool[int](Limits{}, w)
			now := t0
			for step, hold := range tt.holds {
				if got := p.Take(now); got != mk {
					t.Fatalf("step %d: Take = %+v, want Make", step, got)
				}
				p.Unmade(now)
				if got := p.Take(now); got != later(hold, ReasonBackoff) {
					t.Fatalf("step %d: Take = %+v, want Later %v", step, got, hold)
				}
				now += int64(hold)
			}
		})
	}
}

// dialStep is one fixed instant of a dial schedule: after the dials due then
// have failed, every caller not dialing asks once. makes is how many were
// told Make; the rest were told Later, for why.
type dialStep struct {
	at    time.Duration
	makes int
	why   Reason // the Later the others got; NoReason when there were none
}

// TestWardProbeSchedule: with a dead backend, when the backoff's hold
// ends only one make goes ahead, however many callers wait, and the rest
// wait for its outcome. Each dial fails 10 ms after its Make. Without the
// probe rule, all 16 callers would be told Make at 1010 ms below.
func TestWardProbeSchedule(t *testing.T) {
	const dial = 10 * milli
	tests := []struct {
		callers int
		steps   []dialStep
	}{
		{1, []dialStep{
			{0, 1, NoReason},
			{10 * milli, 0, ReasonBackoff}, // failed: held 100 ms
			{50 * milli, 0, ReasonBackoff},
			{110 * milli, 1, NoReason},      // the probe
			{120 * milli, 0, ReasonBackoff}, // it failed: held 200 ms
			{320 * milli, 1, NoReason},
			{330 * milli, 0, ReasonBackoff}, // held 400 ms
			{730 * milli, 1, NoReason},
			{740 * milli, 0, ReasonBackoff}, // held 800 ms
			{1540 * milli, 1, NoReason},
			{1550 * milli, 0, ReasonBackoff}, // held the Cap, a second
			{2549 * milli, 0, ReasonBackoff},
			{2550 * milli, 1, NoReason},
		}},
		{16, []dialStep{
			// A cold pool knows nothing yet: all sixteen dial.
			{0, 16, NoReason},
			// Sixteen failures in a row: held the Cap from the last.
			{10 * milli, 0, ReasonBackoff},
			{500 * milli, 0, ReasonBackoff},
			{1010 * milli, 1, ReasonProbe},
			{1015 * milli, 0, ReasonProbe},
			{1020 * milli, 0, ReasonBackoff},
			{2020 * milli, 1, ReasonProbe},
			{2025 * milli, 0, ReasonProbe},
			{2030 * milli, 0, ReasonBackoff},
			{3030 * milli, 1, ReasonProbe},
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d callers", tt.callers), func(t *testing.T) {
			p := NewPool[int](Limits{Size: 16}, Ward{Backoff: rigid})
			var dials []int64 // when each dial under way fails
			for n, st := range tt.steps {
				now := after0(st.at)
				kept := dials[:0]
				for _, due := range dials {
					if due <= now {
						p.Unmade(due)
					} else {
						kept = append(kept, due)
					}
				}
				dials = kept
				makes, why := 0, NoReason
				for range tt.callers - len(dials) {
					switch got := p.Take(now); got.Verdict {
					case Make:
						makes++
						dials = append(dials, now+int64(dial))
					case Later:
						if why != NoReason && got.Why != why {
							t.Fatalf("step %d at %v: Later for %v and for %v at once", n, st.at, why, got.Why)
						}
						why = got.Why
					default:
						t.Fatalf("step %d at %v: %+v", n, st.at, got)
					}
				}
				if makes != st.makes || why != st.why {
					t.Fatalf("step %d at %v: %d told Make, the others Later for %v; want %d and %v",
						n, st.at, makes, why, st.makes, st.why)
				}
			}
		})
	}
}

// TestWardProbeResolved: the probe is whichever make is in flight after the
// hold, so any way its reservation ends clears the way, and a probe whose
// caller gave up never wedges the pool.
func TestWardProbeResolved(t *testing.T) {
	end := after0(100 * milli) // when the first hold ends
	tests := []struct {
		name    string
		resolve func(p *Pool[int])
		next    []Taken[int] // three callers asking at end, after the resolution
	}{
		{"Made: the backend is back, and every caller makes",
			func(p *Pool[int]) { p.Made(1, end) },
			[]Taken[int]{mk, mk, mk}},
		{"Give of the new resource: as Made",
			func(p *Pool[int]) { p.Give(1, end) },
			[]Taken[int]{ready(1), mk, mk}},
		{"Unmade: the probe failed, and the hold is longer",
			func(p *Pool[int]) { p.Unmade(end) },
			[]Taken[int]{later(200*milli, ReasonBackoff), later(200*milli, ReasonBackoff), later(200*milli, ReasonBackoff)}},
		{"Release: the caller gave up before dialing; the next is the probe",
			func(p *Pool[int]) { p.Release() },
			[]Taken[int]{mk, later(100*milli, ReasonProbe), later(100*milli, ReasonProbe)}},
		{"Drop of the resource asked for: as Release",
			func(p *Pool[int]) { p.Drop(1) },
			[]Taken[int]{mk, later(100*milli, ReasonProbe), later(100*milli, ReasonProbe)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPool[int](Limits{}, Ward{Backoff: rigid})
			runPool(t, p, []poolOp{
				{call: poolTake{t0, mk}, live: 1, busy: 1},
				{call: poolUnmade{t0}, live: 0},
				{call: poolTake{end, mk}, live: 1, busy: 1},
				// The probe is out: the hold's ceiling is the fallback After.
				{call: poolTake{end, later(100*milli, ReasonProbe)}, live: 1, busy: 1},
			})
			if !p.Probing() {
				t.Fatal("Probing is false with the probe out")
			}
			tt.resolve(p)
			for n, want := range tt.next {
				if got := p.Take(end); got != want {
					t.Fatalf("caller %d after the resolution: %+v, want %+v", n+1, got, want)
				}
			}
		})
	}
}

// TestWardProbeOldMakes: makes reserved before the failure are in flight
// when the hold ends, so they stand as the probe: no new make until one of
// them is resolved.
func TestWardProbeOldMakes(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{Backoff: rigid})
	runPool(t, p, []poolOp{
		{call: poolTake{t0, mk}, live: 1, busy: 1},
		{call: poolTake{t0, mk}, live: 2, busy: 2},
		{call: poolUnmade{t0}, live: 1, busy: 1},
		{call: poolTake{after0(100 * milli), later(100*milli, ReasonProbe)}, live: 1, busy: 1},
		// The old make works: the backend is good after all.
		{call: poolMade{1, after0(120 * milli)}, live: 1, busy: 1},
		{call: poolTake{after0(120 * milli), mk}, live: 2, busy: 2},
		{call: poolTake{after0(120 * milli), mk}, live: 3, busy: 3},
	})
}

// TestWardBackoffOff: a Backoff whose Base is not above zero is no backoff
// at all, and so no probe either, whatever its other fields say.
func TestWardBackoffOff(t *testing.T) {
	for _, bo := range []Backoff{{}, {Factor: 2, Cap: time.Second, Attempts: 3, Jitter: Full}, {Base: -time.Second}} {
		p := NewPool[int](Limits{}, Ward{Backoff: bo})
		p.Take(t0)
		p.Unmade(t0)
		p.Take(t0)
		if got := p.Take(t0); got != mk {
			t.Fatalf("%+v: a second make in flight after a failure: %+v, want Make", bo, got)
		}
		if _, held := p.Held(t0); held || p.Probing() {
			t.Fatalf("%+v: Held %v, Probing %v without a backoff", bo, held, p.Probing())
		}
	}
}

// TestWardHeld: what an owner reports of the backoff and the breaker.
func TestWardHeld(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{Backoff: rigid, Breaker: DefaultBreaker})
	if _, held := p.Held(t0); held || p.Probing() || p.Refusal(t0) != 0 {
		t.Fatal("a fresh pool says it is held back")
	}
	p.Take(t0)
	p.Unmade(t0)
	if until, held := p.Held(t0); !held || until != after0(100*milli) {
		t.Fatalf("Held after a failure = %d, %v; want %d, true", until, held, after0(100*milli))
	}
	if until, held := p.Held(after0(99 * milli)); !held || until != after0(100*milli) {
		t.Fatalf("Held within the hold = %d, %v", until, held)
	}
	if _, held := p.Held(after0(100 * milli)); held {
		t.Fatal("Held when the hold is over")
	}
	// A clock read backwards is the latest time the pool was given.
	p.Take(after0(150 * milli))
	if _, held := p.Held(t0); held {
		t.Fatal("Held at an earlier instant than the pool has seen")
	}
	if !p.Probing() {
		t.Fatal("Probing false with the probe out")
	}
	p.Unmade(after0(160 * milli))
	if p.Probing() {
		t.Fatal("Probing with nothing in flight")
	}
	if until, held := p.Held(after0(160 * milli)); !held || until != after0(360*milli) {
		t.Fatalf("Held after the probe failed = %d, %v; want %d, true", until, held, after0(360*milli))
	}

	// Ten failures reach the breaker's floor: it refuses its cap.
	q := NewPool[int](Limits{}, Ward{Breaker: DefaultBreaker})
	for n := range 10 {
		if r := q.Refusal(t0); r != 0 {
			t.Fatalf("Refusal after %d failures = %v, want 0 below the floor", n, r)
		}
		q.Take(t0)
		q.Unmade(t0)
	}
	if r := q.Refusal(t0); r != 0.9 {
		t.Fatalf("Refusal after ten failures = %v, want the cap, 0.9", r)
	}
}

// TestWardShared: one Ward value given to two
// pools, driven from two goroutines, shares no state between them (run it
// under -race), and each pool answers as if it were alone.
func TestWardShared(t *testing.T) {
	w := Ward{
		Breaker: DefaultBreaker,
		Bucket:  Rate{PerSecond: 100, Burst: 5},
		Backoff: DefaultBackoff,
		Shedder: DefaultShedder,
	}
	copyOf := w
	drive := func(p *Pool[int], base int) []Taken[int] {
		var got []Taken[int]
		for i := range 2000 {
			now := t0 + int64(i)*int64(milli)
			p.Heat(float64(i%10)/10, now)
			t := p.Take(now)
			got = append(got, t)
			switch t.Verdict {
			case Make:
				if i%3 == 0 {
					p.Unmade(now)
				} else {
					p.Made(base+i, now)
					p.Give(base+i, now)
				}
			case Ready:
				if i%5 == 0 {
					p.Drop(t.Item)
				} else {
					p.Give(t.Item, now)
				}
			}
			if i%7 == 0 {
				p.Evict(now)
			}
		}
		return got
	}
	alone := drive(NewPool[int](DefaultLimits, w), 0)

	var wg sync.WaitGroup
	got := make([][]Taken[int], 2)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g] = drive(NewPool[int](DefaultLimits, w), 0)
		}()
	}
	wg.Wait()
	for g := range got {
		for i := range alone {
			if got[g][i] != alone[i] {
				t.Fatalf("pool %d, step %d: %+v beside another pool, %+v alone", g, i, got[g][i], alone[i])
			}
		}
	}
	if w.Breaker != copyOf.Breaker || w.Bucket != copyOf.Bucket || w.Backoff != copyOf.Backoff || w.Shedder != copyOf.Shedder {
		t.Fatalf("the pools changed the Ward they were given: %+v, was %+v", w, copyOf)
	}
}

// TestWardPartsOff: each part's switch. A part whose switch is off is no
// part, whatever its other fields say: the pool answers as one with no ward.
func TestWardPartsOff(t *testing.T) {
	for _, w := range []Ward{
		{Bucket: Rate{Burst: 5}},
		{Bucket: Rate{PerSecond: -1, Burst: 5}},
		{Bucket: Rate{PerSecond: math.NaN()}},
		{Breaker: Throttle{Period: time.Second, Floor: 1, Cap: 1}},
		{Breaker: Throttle{K: -2}},
		{Breaker: Throttle{K: math.NaN()}},
		{Shedder: Overload{Window: time.Second}},
		{Shedder: Overload{Hot: math.NaN()}},
	} {
		p := NewPool[int](Limits{Size: 100}, w)
		p.Heat(1, t0)
		for n := range 50 {
			got := p.Take(t0)
			if got != mk {
				t.Fatalf("%+v: make %d: %+v, want Make", w, n+1, got)
			}
			p.Unmade(t0)
		}
		if b := p.ward; b.bucket != nil || b.breaker != nil || b.shedder != nil {
			t.Fatalf("%+v: built %+v", w, b)
		}
	}
	if !(Rate{PerSecond: 1}).On() || !(Throttle{K: 0.5}).On() || !(Overload{Hot: 0.1}).On() {
		t.Fatal("On is false for a part with its switch on")
	}
}

// TestWardBreakerFloor: with the book's formula alone, one failed make on
// a cold pool would refuse half the makes after it (3 of 10 callers let
// through). With the floor, nothing is refused until the period holds ten
// requests.
func TestWardBreakerFloor(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{Breaker: DefaultBreaker})
	p.Take(t0)
	p.Unmade(t0)
	for n := range 10 {
		if got := p.Take(t0); got != mk {
			t.Fatalf("caller %d after one failed make: %+v, want Make", n+1, got)
		}
	}

	// The book's rule is still there for who asks for it: a Floor of 1.
	book := NewPool[int](Limits{}, Ward{Breaker: Throttle{K: 2, Floor: 1, Cap: 1}})
	book.Take(t0)
	book.Unmade(t0)
	var got []Verdict
	for range 10 {
		got = append(got, book.Take(t0).Verdict)
	}
	want := []Verdict{Make, Shed, Make, Shed, Shed, Make, Shed, Shed, Shed, Shed}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the book's rule after one failure: %v, want %v", got, want)
	}
}

func TestWardBreaker(t *testing.T) {
	// Nothing but failures. The first ten are below the floor; from there
	// the book's n/(n+1) is over the cap, so 0.9 is refused: each attempt
	// adds it to a debt and is refused when the debt reaches one, which
	// lets one in ten through (0.9 is not exact in binary, so a rounding
	// may let one more through over the run).
	p := NewPool[int](Limits{}, Ward{Breaker: DefaultBreaker})
	made := 0
	for step := range 1010 {
		got := p.Take(t0)
		switch {
		case step < 10 && got != mk:
			t.Fatalf("step %d, below the floor: %+v, want Make", step, got)
		case got.Verdict == Make:
			made++
			p.Unmade(t0)
		case got != shed(ReasonBreaker):
			t.Fatalf("step %d: %+v, want Make or Shed by the breaker", step, got)
		}
		if p.Live() != 0 {
			t.Fatalf("step %d: Live %d after the attempt, want 0", step, p.Live())
		}
	}
	if made < 110 || made > 111 {
		t.Fatalf("1010 attempts at a dead backend: %d made, want 10 below the floor and 1 in 10 of the rest", made)
	}
	if r := p.Refusal(t0); r != 0.9 {
		t.Fatalf("Refusal after 1010 requests, no accept: %v, want the cap 0.9", r)
	}

	// It never latches shut: with no traffic for the period, it admits.
	quiet := t0 + int64(2*time.Minute) + int64(5*time.Second)
	if got := p.Take(quiet); got != mk {
		t.Fatalf("Take after a quiet period = %+v, want Make", got)
	}
	// And a make that works is an accept: with one accept per two requests
	// nothing is refused.
	p.Made(1, quiet)
	for step := range 40 {
		now := quiet + int64(step)
		if got := p.Take(now); got != mk {
			t.Fatalf("healthy step %d: Take = %+v, want Make", step, got)
		}
		if step%2 == 0 {
			p.Unmade(now)
		} else {
			p.Made(step+10, now)
		}
	}
}

func TestWardShedder(t *testing.T) {
	// Twenty completions held 200 milli in the first one-second slot: the pool
	// has shown it carries 20/s × 0.2 s = 4 at once.
	p := NewPool[int](Limits{}, Ward{Shedder: Overload{Hot: 0.8, Window: 10 * time.Second}})
	for i := 1; i <= 20; i++ {
		p.Made(i, t0)
	}
	for i := 1; i <= 20; i++ {
		p.Give(i, after0(200*milli))
	}
	tick := after0(time.Second)
	sheds := shed(ReasonShedder)
	runPool(t, p, []poolOp{
		// Hot, but the slot of the evidence has not finished: no evidence,
		// so nothing is refused.
		{call: poolHeat{0.9, after0(500 * milli)}, live: 20, idle: 20},
		{call: poolTake{after0(500 * milli), ready(20)}, live: 20, idle: 19, busy: 1},
		// Now the slot is finished: a call may start while four or fewer
		// are in flight, so a fifth is lent and a sixth is refused, even
		// with idle ones there.
		{call: poolTake{tick, ready(19)}, live: 20, idle: 18, busy: 2},
		{call: poolTake{tick, ready(18)}, live: 20, idle: 17, busy: 3},
		{call: poolTake{tick, ready(17)}, live: 20, idle: 16, busy: 4},
		{call: poolTake{tick, ready(16)}, live: 20, idle: 15, busy: 5},
		{call: poolTake{tick, sheds}, live: 20, idle: 15, busy: 5},
		// Cool again: lending resumes.
		{call: poolHeat{0.79, tick}, live: 20, idle: 15, busy: 5},
		{call: poolTake{tick, ready(15)}, live: 20, idle: 14, busy: 6},
		// Hot, and one back: six in flight is still over four.
		{call: poolHeat{0.95, tick}, live: 20, idle: 14, busy: 6},
		{call: poolGive{15, tick, true}, live: 20, idle: 15, busy: 5},
		{call: poolTake{tick, sheds}, live: 20, idle: 15, busy: 5},
		{call: poolDrop{16}, live: 19, idle: 15, busy: 4},
		{call: poolTake{tick, ready(15)}, live: 19, idle: 14, busy: 5},
	})
}

// TestWardShedderCompletions: the pool measures how long each resource was
// held from its lending to its Give or Drop.
func TestWardShedderCompletions(t *testing.T) {
	tests := []struct {
		name  string
		back  func(p *Pool[int], i int)
		limit int
	}{
		// 10 in the slot, each held 800 milli: 10/s × 0.8 s = 8.
		{"Give", func(p *Pool[int], i int) { p.Give(i, after0(800*milli)) }, 8},
		{"Drop, stamped with the latest time the pool was given", func(p *Pool[int], i int) {
			p.Heat(0, after0(800*milli))
			p.Drop(i)
		}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPool[int](Limits{}, Ward{Shedder: Overload{Hot: 0.8, Window: 10 * time.Second}})
			for i := 1; i <= 10; i++ {
				p.Made(i, t0)
			}
			for i := 1; i <= 10; i++ {
				tt.back(p, i)
			}
			if got, ok := p.ward.shedder.Limit(after0(time.Second)); got != tt.limit || !ok {
				t.Fatalf("Limit = %d, %v; want %d, true", got, ok, tt.limit)
			}
		})
	}
}

// TestWardOrder checks each place in the order against the one after it,
// and the reason each answer gives.
func TestWardOrder(t *testing.T) {
	t.Run("a closed pool answers Shed before asking the ward", func(t *testing.T) {
		p := NewPool[int](Limits{}, Ward{Bucket: Rate{PerSecond: 1, Burst: 1}, Breaker: DefaultBreaker, Shedder: Overload{Hot: 0.5}})
		p.Close()
		runPool(t, p, []poolOp{{call: poolTake{t0, shed(ReasonClosed)}}})
		if p.ward.bucket.Tokens(t0) != 1 || p.ward.breaker.requests != 0 {
			t.Fatalf("a closed pool spent a token (%v left) or counted a request (%d)", p.ward.bucket.Tokens(t0), p.ward.breaker.requests)
		}
	})
	t.Run("idle lending goes before bucket, backoff and breaker", func(t *testing.T) {
		p := NewPool[int](Limits{}, Ward{Bucket: Rate{PerSecond: 1, Burst: 1}, Breaker: Throttle{K: 2, Floor: 1}, Backoff: Backoff{Base: time.Second, Jitter: Rigid}})
		runPool(t, p, []poolOp{
			{call: poolMade{1, t0}, live: 1, busy: 1},
			{call: poolTake{t0, mk}, live: 2, busy: 2},
			{call: poolUnmade{t0}, live: 1, busy: 1},
			{call: poolGive{1, t0, true}, live: 1, idle: 1},
			// Bucket empty, backoff holding, breaker at ½: a Ready still.
			{call: poolTake{t0, ready(1)}, live: 1, busy: 1},
		})
	})
	t.Run("a full pool answers Wait before the ward's makes", func(t *testing.T) {
		p := NewPool[int](Limits{Size: 1}, Ward{Bucket: Rate{PerSecond: 1, Burst: 1}, Breaker: DefaultBreaker})
		runPool(t, p, []poolOp{
			{call: poolMade{1, t0}, live: 1, busy: 1},
			{call: poolTake{t0, wait}, live: 1, busy: 1},
		})
		if p.ward.breaker.requests != 0 {
			t.Fatal("Wait counted a request at the breaker")
		}
	})
	t.Run("the breaker's Shed goes before the backoff's Later", func(t *testing.T) {
		p := NewPool[int](Limits{}, Ward{Breaker: Throttle{K: 2, Floor: 1}, Backoff: Backoff{Base: time.Second, Jitter: Rigid}})
		runPool(t, p, []poolOp{
			{call: poolTake{t0, mk}, live: 1, busy: 1},
			{call: poolUnmade{t0}, live: 0},
			// Breaker at ½ admits, the backoff holds: Later.
			{call: poolTake{t0, later(time.Second, ReasonBackoff)}, live: 0},
			{call: poolTake{after0(time.Second), mk}, live: 1, busy: 1},
			{call: poolUnmade{after0(time.Second)}, live: 0},
			// Debt ½ + ⅔ reaches one: the breaker refuses before the
			// backoff is asked.
			{call: poolTake{after0(time.Second), shed(ReasonBreaker)}, live: 0},
		})
	})
	t.Run("the backoff's Later goes before the bucket, which spends nothing", func(t *testing.T) {
		p := NewPool[int](Limits{}, Ward{Bucket: Rate{PerSecond: 1, Burst: 2}, Backoff: Backoff{Base: time.Second, Jitter: Rigid}})
		runPool(t, p, []poolOp{
			{call: poolTake{t0, mk}, live: 1, busy: 1},
			{call: poolUnmade{t0}, live: 0},
			{call: poolTake{t0, later(time.Second, ReasonBackoff)}, live: 0},
			{call: poolTake{t0, later(time.Second, ReasonBackoff)}, live: 0},
		})
		if got := p.ward.bucket.Tokens(t0); got != 1 {
			t.Fatalf("tokens %v after the backoff held makes back, want 1", got)
		}
	})
	t.Run("the probe's Later goes before the bucket, which spends nothing", func(t *testing.T) {
		p := NewPool[int](Limits{}, Ward{Bucket: Rate{PerSecond: 1, Burst: 3}, Backoff: Backoff{Base: time.Second, Jitter: Rigid}})
		runPool(t, p, []poolOp{
			{call: poolTake{t0, mk}, live: 1, busy: 1},
			{call: poolUnmade{t0}, live: 0},
			{call: poolTake{after0(time.Second), mk}, live: 1, busy: 1},
			{call: poolTake{after0(time.Second), later(time.Second, ReasonProbe)}, live: 1, busy: 1},
		})
		if got := p.ward.bucket.Tokens(after0(time.Second)); got != 2 {
			t.Fatalf("tokens %v while the probe held makes back, want 2", got)
		}
	})
	t.Run("a make held back costs the breaker no debt", func(t *testing.T) {
		p := NewPool[int](Limits{}, Ward{Breaker: Throttle{K: 2, Floor: 1}, Bucket: Rate{PerSecond: 1, Burst: 1}})
		runPool(t, p, []poolOp{
			{call: poolTake{t0, mk}, live: 1, busy: 1},
			{call: poolUnmade{t0}, live: 0},
			// At ½, three Laters that charged the debt would have refused.
			{call: poolTake{t0, later(time.Second, ReasonBucket)}, live: 0},
			{call: poolTake{t0, later(time.Second, ReasonBucket)}, live: 0},
			{call: poolTake{t0, later(time.Second, ReasonBucket)}, live: 0},
			{call: poolTake{after0(time.Second), mk}, live: 1, busy: 1},
			{call: poolUnmade{after0(time.Second)}, live: 0},
			{call: poolTake{after0(time.Second), shed(ReasonBreaker)}, live: 0},
		})
	})
	t.Run("the shedder refuses before an idle one is lent", func(t *testing.T) {
		p := NewPool[int](Limits{}, Ward{Shedder: Overload{Hot: 0.5, Window: 10 * time.Second}})
		for i := 1; i <= 3; i++ {
			p.Made(i, t0)
		}
		p.Give(1, after0(time.Second/2)) // one at a time, held half a second: a limit of 1
		p.Heat(1, after0(time.Second))
		runPool(t, p, []poolOp{
			{call: poolTake{after0(time.Second), shed(ReasonShedder)}, live: 3, idle: 1, busy: 2},
			{call: poolDrop{2}, live: 2, idle: 1, busy: 1},
			{call: poolTake{after0(time.Second), ready(1)}, live: 2, busy: 2},
		})
	})
}

// TestWardAllParts runs a pool with every part of the ward through a
// backend outage and its recovery.
func TestWardAllParts(t *testing.T) {
	p := NewPool[int](Limits{Size: 4}, Ward{
		Breaker: Throttle{K: 2, Period: 10 * time.Second, Floor: 4},
		Bucket:  Rate{PerSecond: 10, Burst: 2},
		Backoff: rigid,
		Shedder: DefaultShedder,
	})
	runPool(t, p, []poolOp{
		{call: poolTake{t0, mk}, live: 1, busy: 1},
		{call: poolMade{1, t0}, live: 1, busy: 1},
		{call: poolTake{t0, mk}, live: 2, busy: 2},
		// The bucket held two; a tenth of a second earns the next.
		{call: poolTake{t0, later(100*milli, ReasonBucket)}, live: 2, busy: 2},
		// The backend goes down.
		{call: poolUnmade{t0}, live: 1, busy: 1},
		{call: poolTake{after0(100 * milli), mk}, live: 2, busy: 2},
		// That make is the probe: the others wait for it.
		{call: poolTake{after0(100 * milli), later(100*milli, ReasonProbe)}, live: 2, busy: 2},
		{call: poolUnmade{after0(100 * milli)}, live: 1, busy: 1},
		// Two failures in a row: held 200 milli.
		{call: poolTake{after0(100 * milli), later(200*milli, ReasonBackoff)}, live: 1, busy: 1},
		// Three requests, one accept: below the breaker's floor of four.
		{call: poolTake{after0(300 * milli), mk}, live: 2, busy: 2},
		{call: poolUnmade{after0(300 * milli)}, live: 1, busy: 1},
		// Four and one: ⅖, a debt of .4 after this make.
		{call: poolTake{after0(700 * milli), mk}, live: 2, busy: 2},
		{call: poolUnmade{after0(700 * milli)}, live: 1, busy: 1},
		// Five and one: ½ takes the debt to .9, and this make goes out.
		{call: poolTake{after0(1500 * milli), mk}, live: 2, busy: 2},
		{call: poolUnmade{after0(1500 * milli)}, live: 1, busy: 1},
		// Six and one: 4/7 takes the debt past one, and the breaker refuses
		// at the very instant the backoff's hold of a second ends.
		{call: poolTake{after0(2500 * milli), shed(ReasonBreaker)}, live: 1, busy: 1},
		// The lent one comes back and is lent again whatever the ward says.
		{call: poolGive{1, after0(2500 * milli), true}, live: 1, idle: 1},
		{call: poolTake{after0(2500 * milli), ready(1)}, live: 1, busy: 1},
		// Ten quiet seconds: the breaker has forgotten, the backoff's hold
		// has long passed, the bucket is full again. The backend is back:
		// the probe works, and the run is over.
		{call: poolTake{after0(13 * time.Second), mk}, live: 2, busy: 2},
		{call: poolMade{2, after0(13 * time.Second)}, live: 2, busy: 2},
		{call: poolTake{after0(13 * time.Second), mk}, live: 3, busy: 3},
	})
	if r := p.Refusal(after0(13 * time.Second)); r != 0 {
		t.Fatalf("Refusal after the recovery: %v, want 0", r)
	}
}

func TestReasonString(t *testing.T) {
	want := []string{"none", "closed", "shedder", "breaker", "backoff", "probe", "bucket", "fleet", "ramp", "Reason(9)"}
	for r, w := range want {
		if got := Reason(r).String(); got != w {
			t.Errorf("Reason(%d).String() = %q, want %q", r, got, w)
		}
	}
}
