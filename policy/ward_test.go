package policy

import (
	"testing"
	"time"
)

const milli = time.Millisecond

// after0 is t0 plus a span: the instants of the ward tables.
func after0(d time.Duration) int64 { return t0 + int64(d) }

func TestWardBucket(t *testing.T) {
	b := NewBucket(1, 1, t0) // one make a second
	p := NewPool[int](Limits{}, Ward{Bucket: b})
	runPool(t, p, []poolOp{
		{call: "take", at: after0(0), want: mk, live: 1, busy: 1},
		{call: "unmade", at: after0(0), live: 0},
		// The failed make spent its token, so the next is spaced too, and
		// Later reserves nothing.
		{call: "take", at: after0(0), want: later(time.Second), live: 0},
		{call: "take", at: after0(400 * milli), want: later(600 * milli), live: 0},
		{call: "take", at: after0(time.Second), want: mk, live: 1, busy: 1},
		{call: "made", at: after0(time.Second), item: 1, live: 1, busy: 1},
		{call: "give", at: after0(time.Second), item: 1, want: true, live: 1, idle: 1},
		// The bucket holds back makes, never lending: it is empty, and the
		// idle one is lent all the same.
		{call: "take", at: after0(time.Second), want: ready(1), live: 1, busy: 1},
		{call: "take", at: after0(time.Second), want: later(time.Second), live: 1, busy: 1},
	})
	if got := b.Tokens(after0(time.Second)); got != 0 {
		t.Fatalf("tokens after the second make: %v, want 0", got)
	}
}

func TestWardBackoff(t *testing.T) {
	// Attempts 1 would allow no retry at all; the pool makes anyway, since
	// a pool never gives up on its backend.
	bo := &Backoff{Base: 100 * milli, Factor: 2, Cap: time.Second, Attempts: 1, Jitter: Rigid}
	p := NewPool[int](Limits{}, Ward{Backoff: bo})
	runPool(t, p, []poolOp{
		{call: "take", at: after0(0), want: mk, live: 1, busy: 1},
		{call: "unmade", at: after0(0), live: 0},
		{call: "take", at: after0(0), want: later(100 * milli), live: 0},
		{call: "take", at: after0(99 * milli), want: later(1 * milli), live: 0},
		{call: "take", at: after0(100 * milli), want: mk, live: 1, busy: 1},
		{call: "unmade", at: after0(100 * milli), live: 0},
		{call: "take", at: after0(100 * milli), want: later(200 * milli), live: 0},
		{call: "take", at: after0(300 * milli), want: mk, live: 1, busy: 1},
		{call: "unmade", at: after0(300 * milli), live: 0},
		{call: "take", at: after0(300 * milli), want: later(400 * milli), live: 0},
		{call: "take", at: after0(700 * milli), want: mk, live: 1, busy: 1},
		{call: "unmade", at: after0(700 * milli), live: 0},
		{call: "take", at: after0(700 * milli), want: later(800 * milli), live: 0},
		{call: "take", at: after0(1500 * milli), want: mk, live: 1, busy: 1},
		{call: "unmade", at: after0(1500 * milli), live: 0},
		// 100 milli × 2⁴ is past the Cap.
		{call: "take", at: after0(1500 * milli), want: later(time.Second), live: 0},
		{call: "take", at: after0(2500 * milli), want: mk, live: 1, busy: 1},
		// A make that works ends the run: the next failure starts over.
		{call: "made", at: after0(2500 * milli), item: 1, live: 1, busy: 1},
		{call: "take", at: after0(2500 * milli), want: mk, live: 2, busy: 2},
		{call: "unmade", at: after0(2500 * milli), live: 1, busy: 1},
		{call: "take", at: after0(2500 * milli), want: later(100 * milli), live: 1, busy: 1},
		// Lending is never held back.
		{call: "give", at: after0(2500 * milli), item: 1, want: true, live: 1, idle: 1},
		{call: "take", at: after0(2500 * milli), want: ready(1), live: 1, busy: 1},
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
			w := Ward{Backoff: &tt.bo}
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
				if got := p.Take(now); got != later(hold) {
					t.Fatalf("step %d: Take = %+v, want Later %v", step, got, hold)
				}
				now += int64(hold)
			}
		})
	}
}

func TestWardBreaker(t *testing.T) {
	// With nothing but failures, the SRE book's fraction after n requests
	// is n/(n+1); each attempt adds it to a debt and is refused when the
	// debt reaches one: 0, ½, ⅔ (1.17: refused), ¾, ⅘ (refused), ...
	br := NewBreaker(2, 2*time.Minute)
	p := NewPool[int](Limits{}, Ward{Breaker: br})
	want := []Verdict{Make, Make, Shed, Make, Shed, Shed, Shed, Shed, Shed, Shed, Make}
	for step, w := range want {
		got := p.Take(t0)
		if got.Verdict != w {
			t.Fatalf("step %d: Take = %v, want %v", step, got.Verdict, w)
		}
		if got.Verdict == Make {
			p.Unmade(t0)
		}
		if p.Live() != 0 {
			t.Fatalf("step %d: Live %d after the attempt, want 0", step, p.Live())
		}
	}
	if r := br.Reject(t0); r != 11.0/12 {
		t.Fatalf("Reject after 11 requests, no accept: %v, want 11/12", r)
	}

	// It never latches shut: with no traffic for the period, it admits.
	if got := p.Take(t0 + int64(2*time.Minute)); got.Verdict != Make {
		t.Fatalf("Take after a quiet period = %v, want Make", got.Verdict)
	}
	// And a make that works is an accept: with one accept per two requests
	// nothing is refused.
	p.Made(1, t0+int64(2*time.Minute))
	for step := range 20 {
		now := t0 + int64(2*time.Minute) + int64(step)
		got := p.Take(now)
		if got.Verdict != Make {
			t.Fatalf("healthy step %d: Take = %v, want Make", step, got.Verdict)
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
	s := NewShedder(0.8, 10*time.Second)
	p := NewPool[int](Limits{}, Ward{Shedder: s})
	for i := 1; i <= 20; i++ {
		p.Made(i, t0)
	}
	for i := 1; i <= 20; i++ {
		p.Give(i, after0(200*milli))
	}
	tick := after0(time.Second)
	runPool(t, p, []poolOp{
		// Hot, but the slot of the evidence has not finished: no evidence,
		// so nothing is refused.
		{call: "heat", at: after0(500 * milli), item: 90, live: 20, idle: 20},
		{call: "take", at: after0(500 * milli), want: ready(20), live: 20, idle: 19, busy: 1},
		// Now the slot is finished: a call may start while four or fewer
		// are in flight, so a fifth is lent and a sixth is refused, even
		// with idle ones there.
		{call: "take", at: tick, want: ready(19), live: 20, idle: 18, busy: 2},
		{call: "take", at: tick, want: ready(18), live: 20, idle: 17, busy: 3},
		{call: "take", at: tick, want: ready(17), live: 20, idle: 16, busy: 4},
		{call: "take", at: tick, want: ready(16), live: 20, idle: 15, busy: 5},
		{call: "take", at: tick, want: shed, live: 20, idle: 15, busy: 5},
		// Cool again: lending resumes.
		{call: "heat", at: tick, item: 79, live: 20, idle: 15, busy: 5},
		{call: "take", at: tick, want: ready(15), live: 20, idle: 14, busy: 6},
		// Hot, and one back: six in flight is still over four.
		{call: "heat", at: tick, item: 95, live: 20, idle: 14, busy: 6},
		{call: "give", at: tick, item: 15, want: true, live: 20, idle: 15, busy: 5},
		{call: "take", at: tick, want: shed, live: 20, idle: 15, busy: 5},
		{call: "drop", item: 16, live: 19, idle: 15, busy: 4},
		{call: "take", at: tick, want: ready(15), live: 19, idle: 14, busy: 5},
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
			s := NewShedder(0.8, 10*time.Second)
			p := NewPool[int](Limits{}, Ward{Shedder: s})
			for i := 1; i <= 10; i++ {
				p.Made(i, t0)
			}
			for i := 1; i <= 10; i++ {
				tt.back(p, i)
			}
			if got, ok := s.Limit(after0(time.Second)); got != tt.limit || !ok {
				t.Fatalf("Limit = %d, %v; want %d, true", got, ok, tt.limit)
			}
		})
	}
}

// TestWardOrder checks each place in the order against the one after it.
func TestWardOrder(t *testing.T) {
	t.Run("a closed pool answers Shed before asking the ward", func(t *testing.T) {
		b := NewBucket(1, 1, t0)
		br := NewBreaker(2, 0)
		p := NewPool[int](Limits{}, Ward{Bucket: b, Breaker: br, Shedder: NewShedder(0.5, 0)})
		p.Close()
		runPool(t, p, []poolOp{{call: "take", at: t0, want: shed}})
		if b.Tokens(t0) != 1 || br.Reject(t0) != 0 {
			t.Fatalf("a closed pool spent a token (%v left) or counted a request (reject %v)", b.Tokens(t0), br.Reject(t0))
		}
	})
	t.Run("idle lending goes before bucket, backoff and breaker", func(t *testing.T) {
		b := NewBucket(1, 1, t0)
		br := NewBreaker(2, 0)
		p := NewPool[int](Limits{}, Ward{Bucket: b, Breaker: br, Backoff: &Backoff{Base: time.Second, Jitter: Rigid}})
		runPool(t, p, []poolOp{
			{call: "made", at: t0, item: 1, live: 1, busy: 1},
			{call: "take", at: t0, want: mk, live: 2, busy: 2},
			{call: "unmade", at: t0, live: 1, busy: 1},
			{call: "give", at: t0, item: 1, want: true, live: 1, idle: 1},
			// Bucket empty, backoff holding, breaker at ½: a Ready still.
			{call: "take", at: t0, want: ready(1), live: 1, busy: 1},
		})
	})
	t.Run("a full pool answers Wait before the ward's makes", func(t *testing.T) {
		b := NewBucket(1, 1, t0)
		b.Take(t0, 1)
		br := NewBreaker(2, 0)
		p := NewPool[int](Limits{Size: 1}, Ward{Bucket: b, Breaker: br})
		runPool(t, p, []poolOp{
			{call: "made", at: t0, item: 1, live: 1, busy: 1},
			{call: "take", at: t0, want: wait, live: 1, busy: 1},
		})
		if br.Reject(t0) != 0 {
			t.Fatal("Wait counted a request at the breaker")
		}
	})
	t.Run("the breaker's Shed goes before the backoff's Later", func(t *testing.T) {
		br := NewBreaker(2, 0)
		p := NewPool[int](Limits{}, Ward{Breaker: br, Backoff: &Backoff{Base: time.Second, Jitter: Rigid}})
		runPool(t, p, []poolOp{
			{call: "take", at: t0, want: mk, live: 1, busy: 1},
			{call: "unmade", at: t0, live: 0},
			// Breaker at ½ admits, the backoff holds: Later.
			{call: "take", at: t0, want: later(time.Second), live: 0},
			{call: "take", at: after0(time.Second), want: mk, live: 1, busy: 1},
			{call: "unmade", at: after0(time.Second), live: 0},
			// Debt ½ + ⅔ reaches one: the breaker refuses before the
			// backoff is asked.
			{call: "take", at: after0(time.Second), want: shed, live: 0},
		})
	})
	t.Run("the backoff's Later goes before the bucket, which spends nothing", func(t *testing.T) {
		b := NewBucket(1, 2, t0)
		p := NewPool[int](Limits{}, Ward{Bucket: b, Backoff: &Backoff{Base: time.Second, Jitter: Rigid}})
		runPool(t, p, []poolOp{
			{call: "take", at: t0, want: mk, live: 1, busy: 1},
			{call: "unmade", at: t0, live: 0},
			{call: "take", at: t0, want: later(time.Second), live: 0},
			{call: "take", at: t0, want: later(time.Second), live: 0},
		})
		if got := b.Tokens(t0); got != 1 {
			t.Fatalf("tokens %v after the backoff held makes back, want 1", got)
		}
	})
	t.Run("a make held back costs the breaker no debt", func(t *testing.T) {
		br := NewBreaker(2, 0)
		p := NewPool[int](Limits{}, Ward{Breaker: br, Bucket: NewBucket(1, 1, t0)})
		runPool(t, p, []poolOp{
			{call: "take", at: t0, want: mk, live: 1, busy: 1},
			{call: "unmade", at: t0, live: 0},
			// At ½, three Laters that charged the debt would have refused.
			{call: "take", at: t0, want: later(time.Second), live: 0},
			{call: "take", at: t0, want: later(time.Second), live: 0},
			{call: "take", at: t0, want: later(time.Second), live: 0},
			{call: "take", at: after0(time.Second), want: mk, live: 1, busy: 1},
			{call: "unmade", at: after0(time.Second), live: 0},
			{call: "take", at: after0(time.Second), want: shed, live: 0},
		})
	})
	t.Run("the shedder refuses before an idle one is lent", func(t *testing.T) {
		s := NewShedder(0.5, 10*time.Second)
		p := NewPool[int](Limits{}, Ward{Shedder: s})
		for i := 1; i <= 3; i++ {
			p.Made(i, t0)
		}
		p.Give(1, after0(time.Second/2)) // one at a time, held half a second: a limit of 1
		p.Heat(1, after0(time.Second))
		runPool(t, p, []poolOp{
			{call: "take", at: after0(time.Second), want: shed, live: 3, idle: 1, busy: 2},
			{call: "drop", item: 2, live: 2, idle: 1, busy: 1},
			{call: "take", at: after0(time.Second), want: ready(1), live: 2, busy: 2},
		})
	})
}

// TestWardAllParts runs a pool with every part of the ward through a
// backend outage and its recovery.
func TestWardAllParts(t *testing.T) {
	br := NewBreaker(2, 10*time.Second)
	p := NewPool[int](Limits{Size: 4}, Ward{
		Breaker: br,
		Bucket:  NewBucket(10, 2, t0),
		Backoff: &Backoff{Base: 100 * milli, Factor: 2, Cap: time.Second, Jitter: Rigid},
		Shedder: NewShedder(0.8, 10*time.Second),
	})
	runPool(t, p, []poolOp{
		{call: "take", at: t0, want: mk, live: 1, busy: 1},
		{call: "made", at: t0, item: 1, live: 1, busy: 1},
		{call: "take", at: t0, want: mk, live: 2, busy: 2},
		// The bucket held two; a tenth of a second earns the next.
		{call: "take", at: t0, want: later(100 * milli), live: 2, busy: 2},
		// The backend goes down.
		{call: "unmade", at: t0, live: 1, busy: 1},
		{call: "take", at: after0(100 * milli), want: mk, live: 2, busy: 2},
		{call: "unmade", at: after0(100 * milli), live: 1, busy: 1},
		// Two failures in a row: held 200 milli.
		{call: "take", at: after0(100 * milli), want: later(200 * milli), live: 1, busy: 1},
		// Three requests, one accept: the breaker refuses ¼. The Later
		// above cost no debt; this make costs ¼.
		{call: "take", at: after0(300 * milli), want: mk, live: 2, busy: 2},
		{call: "unmade", at: after0(300 * milli), live: 1, busy: 1},
		// Four and one: ⅖, a debt of .65 after this make.
		{call: "take", at: after0(700 * milli), want: mk, live: 2, busy: 2},
		{call: "unmade", at: after0(700 * milli), live: 1, busy: 1},
		// Five and one: ½ takes the debt past one, and the breaker refuses
		// at the very instant the backoff's hold of 800 milli ends.
		{call: "take", at: after0(1500 * milli), want: shed, live: 1, busy: 1},
		// The lent one comes back and is lent again whatever the ward says.
		{call: "give", at: after0(1500 * milli), item: 1, want: true, live: 1, idle: 1},
		{call: "take", at: after0(1500 * milli), want: ready(1), live: 1, busy: 1},
		// Ten quiet seconds: the breaker has forgotten, the backoff's hold
		// has long passed, the bucket is full again.
		{call: "take", at: after0(12 * time.Second), want: mk, live: 2, busy: 2},
		{call: "made", at: after0(12 * time.Second), item: 2, live: 2, busy: 2},
		{call: "take", at: after0(12 * time.Second), want: mk, live: 3, busy: 3},
	})
	if r := br.Reject(after0(12 * time.Second)); r != 0 {
		t.Fatalf("Reject after the recovery: %v, want 0", r)
	}
}
