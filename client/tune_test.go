package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// tuneStep is one step of a retune table: at instant at, take n tokens
// with AllowN (n > 0), or retune to rate and burst (n == 0).
type tuneStep struct {
	at          time.Duration
	n           float64
	rate, burst float64
}

// runTune plays steps on a Bucket of rate and burst and on a policy.Bucket
// retuned at the same instants, and asks that every AllowN answer as the
// policy's Take does and that Tokens agree after each step.
func runTune(t *testing.T, rate, burst float64, steps []tuneStep) {
	t.Helper()
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	exact := policy.NewBucket(rate, burst, r.t0)
	for i, s := range steps {
		r.to(s.at)
		now := r.t0 + int64(s.at)
		if s.n == 0 {
			if s.rate != b.Limit() {
				if err := b.SetLimit(s.rate); err != nil {
					t.Fatalf("step %d: SetLimit: %v", i, err)
				}
			}
			if s.burst != b.Burst() {
				if err := b.SetBurst(s.burst); err != nil {
					t.Fatalf("step %d: SetBurst: %v", i, err)
				}
			}
			exact.Retune(now, s.rate, s.burst)
		} else if got, want := b.AllowN(s.n), exact.Take(now, s.n); got != want {
			t.Fatalf("step %d: AllowN(%v) at %v = %v, the exact bucket says %v", i, s.n, s.at, got, want)
		}
		if got, want := b.Tokens(), exact.Tokens(now); got != want {
			t.Fatalf("step %d at %v: Tokens = %v, the exact bucket holds %v", i, s.at, got, want)
		}
	}
}

// TestBucketSetLimitExact: SetLimit and SetBurst keep what was earned,
// apply from the instant they are made, and the bucket answers as
// policy.Bucket retuned at the same instants, on the virtual clock.
func TestBucketSetLimitExact(t *testing.T) {
	ms := time.Millisecond
	steps := []tuneStep{
		{at: 0, n: 10}, // empty
		{at: 100 * ms, n: 1},
		{at: 100 * ms, n: 1},                 // earned only one at 10/s
		{at: 150 * ms, rate: 100, burst: 10}, // half a token earned at the old rate
		{at: 155 * ms, n: 1},                 // .5 + .5 at the new one
		{at: 155 * ms, n: 1},
		{at: 2 * time.Second, burst: 3, rate: 100}, // full at 10, cut to 3
		{at: 2 * time.Second, n: 3},
		{at: 2 * time.Second, n: 1},
		{at: 2 * time.Second, rate: 0, burst: 3}, // earns nothing from here
		{at: time.Hour, n: 1},
		{at: time.Hour, rate: 1, burst: 0}, // a second's worth of 1/s: 1
		{at: time.Hour + time.Second, n: 1},
		{at: time.Hour + time.Second, n: 1},
	}
	runTune(t, 10, 10, steps)
}

// TestBucketRetuneTakesCreditBack: a bucket that lends tokens ahead of
// time (burst 64) takes the lent ones back before it retunes, so a burst
// cut to 2 lets exactly 2 more through at that instant, and the credit
// lent afterwards follows the new numbers.
func TestBucketRetuneTakesCreditBack(t *testing.T) {
	ms := time.Millisecond
	steps := []tuneStep{
		{at: 0, n: 1}, // from the lent batch of four
		{at: 0, n: 1},
		{at: 0, rate: 100, burst: 2},
		{at: 0, n: 1},
		{at: 0, n: 1},
		{at: 0, n: 1}, // refused: the lent tokens did not survive the cut
		{at: 15 * ms, n: 1},
		{at: 15 * ms, n: 1},
		{at: time.Second, rate: 1000, burst: 64},
		{at: time.Second, n: 2},
		{at: time.Second + 10*ms, n: 10},
	}
	runTune(t, 100, 64, steps)
	// And under the real traffic of many Allows: never more than exact.
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 1000, 64)
	exact := policy.NewBucket(1000, 64, r.t0)
	var got, want int
	for i := range 400 {
		r.to(time.Duration(i) * ms)
		now := r.t0 + int64(i)*int64(ms)
		if i%50 == 25 {
			rate, burst := float64(200+i), float64(16+i%64)
			b.SetLimit(rate)
			b.SetBurst(burst)
			exact.Retune(now, rate, burst)
		}
		for range 3 {
			if b.Allow() {
				got++
			}
			if exact.Take(now, 1) {
				want++
			}
			if got > want {
				t.Fatalf("at %dms the lending bucket let %d through, the exact one %d", i, got, want)
			}
		}
	}
}

// TestBucketSetLimitServesParked: a caller parked in Wait keeps its place
// and is served at the new rate from the retune on.
func TestBucketSetLimitServesParked(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 1, 1)
	b.Allow()
	ch := waitAsync(r.ctx, b.Wait)
	r.awaitParked(&b.l, "", 1)
	r.to(500 * time.Millisecond) // half a token at 1/s
	if err := b.SetLimit(10); err != nil {
		t.Fatal(err)
	}
	r.to(549 * time.Millisecond)
	if r.parked(&b.l, "") != 1 {
		t.Fatal("granted before its token was there at the new rate")
	}
	r.to(550 * time.Millisecond) // .5 + .05s at 10/s
	if err := r.result(ch, "Wait"); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	// A burst cut below what a parked caller wants ends its wait.
	b2, _ := NewBucket(r.eng, 1, 5)
	b2.AllowN(5)
	ch = waitAsync(r.ctx, func(ctx context.Context) error { return b2.WaitN(ctx, 4) })
	r.awaitParked(&b2.l, "", 1)
	if err := b2.SetBurst(2); err != nil {
		t.Fatal(err)
	}
	var we *WaitError
	if err := r.result(ch, "WaitN"); !errors.As(err, &we) || we.Wait != policy.Never {
		t.Fatalf("WaitN(4) under a burst cut to 2 = %v, want a *WaitError of Never", err)
	}
	if !errors.Is(b2.WaitN(r.ctx, 4), ErrExceedsBurst) {
		t.Error("WaitN(4) after the cut did not refuse the burst")
	}
}

// TestBucketReserveCancel: Cancel gives back what the bucket would hold
// had the reservation never been made: all of it at once, less what the
// burst cut off once the bucket filled meanwhile (golang/go#69419's case:
// giving all back there over-admits).
func TestBucketReserveCancel(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 1, 10)
	res := b.Reserve(5)
	if !res.OK() || res.Decision().Left != 5 {
		t.Fatalf("Reserve(5) = %+v", res.Decision())
	}
	r.to(3 * time.Second) // 8 held; without the reservation 10, at the burst
	for i := range 8 {
		if !b.Allow() {
			t.Fatalf("Allow %d refused", i)
		}
	}
	if got := res.Cancel(); got != 2 {
		t.Errorf("Cancel gave back %v, want 2: without the reservation 10-8 are left", got)
	}
	if got := b.Tokens(); got != 2 {
		t.Errorf("Tokens after Cancel = %v, want 2", got)
	}
	if got := res.Cancel(); got != 0 {
		t.Errorf("a second Cancel gave back %v", got)
	}

	// Cancelled before the bucket could have filled: all of it.
	res = b.Reserve(2)
	r.to(4 * time.Second) // 1 held, 3 without it
	if got := res.Cancel(); got != 2 {
		t.Errorf("Cancel before any cap gave back %v, want 2", got)
	}
	if got := b.Tokens(); got != 3 {
		t.Errorf("Tokens = %v, want 3", got)
	}

	// A refusal takes nothing and gives nothing back.
	res = b.Reserve(9)
	if res.OK() || res.Decision().Wait != 6*time.Second {
		t.Errorf("Reserve(9) with 3 held = %+v, want a refusal of 6s", res.Decision())
	}
	if res.Cancel() != 0 {
		t.Error("Cancel of a refusal gave something back")
	}

	// A burst lowered meanwhile bounds what comes back.
	res = b.Reserve(3) // 0 held, 3 without it
	if err := b.SetBurst(2); err != nil {
		t.Fatal(err)
	}
	if got := res.Cancel(); got != 2 {
		t.Errorf("Cancel after the burst was cut to 2 gave back %v, want 2", got)
	}
}

// TestBucketReserveCancelOthersTake: other callers' takes of tokens that
// were there anyway cost a reservation nothing; only the burst's cap does.
func TestBucketReserveCancelOthersTake(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 1, 10)
	b.AllowN(7)         // 3 held
	res := b.Reserve(2) // 1 held, 3 without it
	b.AllowN(1)         // 0, and 2 without it
	r.to(7 * time.Second)
	b.AllowN(1) // 6 held, 8 without it: under the burst, nothing lost
	if got := res.Cancel(); got != 2 {
		t.Errorf("Cancel with others' takes between gave back %v, want 2", got)
	}
	b.AllowN(8)
	r.to(8 * time.Second)
	res = b.Reserve(1) // 0 held, 1 without it
	r.to(16 * time.Second)
	b.AllowN(1)            // 7 held, 8 without it
	r.to(19 * time.Second) // 10 held, and 10 without it: the cap took the difference
	if got := res.Cancel(); got != 0 {
		t.Errorf("Cancel once the bucket without it was full gave back %v, want 0", got)
	}
	if got := b.Tokens(); got != 10 {
		t.Errorf("Tokens = %v, want 10", got)
	}
}

// TestBucketReserveCancelServesParked: tokens given back go to the caller
// in line.
func TestBucketReserveCancelServesParked(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 1, 4)
	res := b.Reserve(4)
	ch := waitAsync(r.ctx, func(ctx context.Context) error { return b.WaitN(ctx, 3) })
	r.awaitParked(&b.l, "", 1)
	if got := res.Cancel(); got != 4 {
		t.Fatalf("Cancel = %v, want 4", got)
	}
	if err := r.result(ch, "WaitN"); err != nil {
		t.Fatalf("WaitN = %v", err)
	}
}

// TestWindowSetAllow: the window keeps its counted events across SetAllow.
func TestWindowSetAllow(t *testing.T) {
	r := newLimitRig(t)
	w, _ := NewWindow(r.eng, 2, time.Second)
	w.Allow()
	w.Allow()
	if err := w.SetAllow(3); err != nil {
		t.Fatal(err)
	}
	if !w.Allow() || w.Allow() {
		t.Error("raised to 3 over 2 counted: want one more and no more")
	}
	if err := w.SetAllow(1); err != nil {
		t.Fatal(err)
	}
	if q, win := w.Quota(); q != 1 || win != time.Second {
		t.Errorf("Quota = %d, %v", q, win)
	}
	r.to(time.Second - 1)
	if w.Allow() {
		t.Error("lowered to 1 under 3 counted: allowed before they left")
	}
	r.to(time.Second)
	if !w.Allow() {
		t.Error("refused once the window emptied")
	}
}

// TestLimiterStats: a bucket counts what it allowed, refused and made wait,
// and how long the waiters waited, on the engine's clock.
func TestLimiterStats(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 10, 32) // lends: Allows from credit count too
	for range 40 {
		b.Allow()
	}
	b.Try()
	ch := waitAsync(r.ctx, b.Wait)
	r.awaitParked(&b.l, "", 1)
	r.to(100 * time.Millisecond)
	if err := r.result(ch, "Wait"); err != nil {
		t.Fatal(err)
	}
	s := b.Stats()
	if s.Allowed != 33 || s.Refused != 9 || s.Waited != 1 || s.WaitTime != 100*time.Millisecond {
		t.Errorf("Stats = allowed %d refused %d waited %d for %v; want 33, 9, 1, 100ms",
			s.Allowed, s.Refused, s.Waited, s.WaitTime)
	}
}

// TestKeyedBucketSetLimit: a keyed bucket retunes every key at once,
// keeping what each holds; a key seen later starts full under the new
// numbers; a key's parked caller is served at the new rate.
func TestKeyedBucketSetLimit(t *testing.T) {
	r := newLimitRig(t)
	k, _ := NewKeyedBucket(r.eng, 1, 4)
	if !k.AllowN("a", 4) || k.AllowN("a", 1) {
		t.Fatal("AllowN(a, 4) then 1: want yes, no")
	}
	ch := waitAsync(r.ctx, func(ctx context.Context) error { return k.WaitN(ctx, "a", 2) })
	r.awaitParked(&k.l, "a", 1)
	r.to(time.Second) // a holds 1
	if err := k.SetLimit(10); err != nil {
		t.Fatal(err)
	}
	if err := k.SetBurst(8); err != nil {
		t.Fatal(err)
	}
	r.to(time.Second + 99*time.Millisecond)
	if r.parked(&k.l, "a") != 1 {
		t.Fatal("a's waiter granted before its second token")
	}
	r.to(time.Second + 100*time.Millisecond)
	if err := r.result(ch, "WaitN"); err != nil {
		t.Fatalf("WaitN = %v", err)
	}
	if got := k.Tokens("b"); got != 8 {
		t.Errorf("a new key holds %v, want the new burst 8", got)
	}
	if q, w := k.Quota(); q != 8 || w != 800*time.Millisecond {
		t.Errorf("Quota = %d, %v; want 8, 800ms", q, w)
	}
	if !errors.Is(k.WaitN(r.ctx, "a", 9), ErrExceedsBurst) {
		t.Error("WaitN above the new burst did not refuse it")
	}
	if d := k.TryN("b", 8); !d.OK || d.Left != 0 {
		t.Errorf("TryN(b, 8) = %+v", d)
	}
}

// TestKeyedWindowSetAllow: every key keeps its counted events.
func TestKeyedWindowSetAllow(t *testing.T) {
	r := newLimitRig(t)
	k, _ := NewKeyedWindow(r.eng, 2, time.Second)
	k.Allow("a")
	k.Allow("a")
	if err := k.SetAllow(3); err != nil {
		t.Fatal(err)
	}
	if !k.Allow("a") || k.Allow("a") {
		t.Error("a: raised to 3 over 2 counted: want one more and no more")
	}
	if got := k.Left("new"); got != 3 {
		t.Errorf("a new key has %d left, want 3", got)
	}
	if q, w := k.Quota(); q != 3 || w != time.Second {
		t.Errorf("Quota = %d, %v", q, w)
	}
}

// TestLimiterStatsConcurrent: Allowed counts every granted Allow, those
// drawn from the lent credit among them, however many callers race.
func TestLimiterStatsConcurrent(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 1, 5000) // lends 312 at a time
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if b.Allow() {
					granted.Add(1)
				}
				if s := b.Stats(); s.Allowed > granted.Load()+8 {
					t.Errorf("Stats counts %d allowed, more than were granted", s.Allowed)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := b.Stats()
	if s.Allowed != granted.Load() || s.Allowed+s.Refused != 8000 || s.Allowed != 5000 {
		t.Errorf("Stats: allowed %d, refused %d; granted %d of 8000 against a burst of 5000",
			s.Allowed, s.Refused, granted.Load())
	}
}

// TestKeyedWindowAllowNothingKeepsEvents: a keyed window retuned to allow
// nothing and back does not forget a key's counted events meanwhile.
func TestKeyedWindowAllowNothingKeepsEvents(t *testing.T) {
	r := newLimitRig(t)
	k, _ := NewKeyedWindow(r.eng, 2, time.Minute)
	k.Allow("a")
	k.Allow("a")
	if err := k.SetAllow(0); err != nil {
		t.Fatal(err)
	}
	r.to(time.Second) // the actor sweeps idle keys on a Tick and on calls
	for range 4 {
		k.Allow("b")
	}
	if err := k.SetAllow(2); err != nil {
		t.Fatal(err)
	}
	if k.Allow("a") {
		t.Error("a's two events were forgotten while it allowed nothing")
	}
}

// TestRetuneAfterClose: a closed limiter, or one whose engine shut down,
// answers a retune with ErrClosed, a Reserve with a refusal of Never, and
// a Cancel with nothing, never blocking.
func TestRetuneAfterClose(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 1, 4)
	res := b.Reserve(1)
	w, _ := NewWindow(r.eng, 1, time.Second)
	k, _ := NewKeyedBucket(r.eng, 1, 1)
	if err := b.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLimit(2); !errors.Is(err, ErrClosed) {
		t.Errorf("SetLimit after Close = %v", err)
	}
	if d := b.Reserve(1).Decision(); d.OK || d.Wait != policy.Never {
		t.Errorf("Reserve after Close = %+v", d)
	}
	if got := res.Cancel(); got != 0 {
		t.Errorf("Cancel after Close gave back %v", got)
	}
	if err := r.eng.Shutdown(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.SetAllow(2); !errors.Is(err, ErrClosed) {
		t.Errorf("SetAllow after Shutdown = %v", err)
	}
	if err := k.SetBurst(2); !errors.Is(err, ErrClosed) {
		t.Errorf("SetBurst after Shutdown = %v", err)
	}
	if k.Burst() != 1 {
		t.Errorf("a refused SetBurst changed Burst to %v", k.Burst())
	}
}
