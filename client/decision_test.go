package client

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// TestDecisionRetryAfter: the header's value, for every kind of wait: 0
// only when allowed; whole seconds rounded up, at least 1, for a refusal;
// and MaxRetryAfter for a wait that never ends, rather than 9223372037.
func TestDecisionRetryAfter(t *testing.T) {
	tests := []struct {
		d    Decision
		want int
	}{
		{Decision{OK: true}, 0},
		{Decision{OK: true, Left: 5}, 0},
		{Decision{Wait: 1}, 1},
		{Decision{Wait: 0}, 1}, // a Decision built by hand: still never 0
		{Decision{Wait: -time.Second}, 1},
		{Decision{Wait: 500 * time.Millisecond}, 1},
		{Decision{Wait: time.Second}, 1},
		{Decision{Wait: time.Second + 1}, 2},
		{Decision{Wait: 59 * time.Minute}, 3540},
		{Decision{Wait: 24*time.Hour - time.Second}, MaxRetryAfter - 1},
		{Decision{Wait: 24*time.Hour - time.Second + 1}, MaxRetryAfter},
		{Decision{Wait: 24 * time.Hour}, MaxRetryAfter},
		{Decision{Wait: 48 * time.Hour}, MaxRetryAfter},
		{Decision{Wait: policy.Never}, MaxRetryAfter},
	}
	for i, tc := range tests {
		if got := tc.d.RetryAfter(); got != tc.want {
			t.Errorf("step %d: %+v.RetryAfter() = %d, want %d", i, tc.d, got, tc.want)
		}
	}
}

// TestTrySteps walks Try on each limiter through fixed instants: the
// decision, the wait and what is left come from one turn. After Close, or
// on a shut engine, the answer is a refusal that never ends, marked Closed,
// whose header is a day. A quota of nothing refuses for ever too, but is
// not Closed. The header is never 0, and never past a day.
func TestTrySteps(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 2, 3)
	w, _ := NewWindow(r.eng, 2, time.Minute)
	kb, _ := NewKeyedBucket(r.eng, 2, 3)
	kw, _ := NewKeyedWindow(r.eng, 2, time.Minute)
	tb, _ := NewTieredBucket(r.eng, nil, map[string]Rate{"": {PerSecond: 1, Burst: 1}})
	never, _ := NewBucket(r.eng, 0, 1)
	nothing, _ := NewBucket(r.eng, 1, 1)
	ms := time.Millisecond
	steps := []struct {
		at   time.Duration
		try  func() Decision
		want Decision
	}{
		{0, b.Try, Decision{OK: true, Left: 2}},
		{0, func() Decision { return b.TryN(2) }, Decision{OK: true}},
		{0, b.Try, Decision{Wait: 500 * ms}},
		{0, func() Decision { return b.TryN(0) }, Decision{OK: true}},
		{0, func() Decision { return b.TryN(4) }, Decision{Wait: policy.Never}},
		{250 * ms, b.Try, Decision{Wait: 250 * ms}},
		{500 * ms, b.Try, Decision{OK: true}},
		{2 * time.Second, b.Try, Decision{OK: true, Left: 2}},
		{2 * time.Second, func() Decision { return kb.Try("a") }, Decision{OK: true, Left: 2}},
		{2 * time.Second, func() Decision { return kb.Try("a") }, Decision{OK: true, Left: 1}},
		{2 * time.Second, func() Decision { return kb.Try("a") }, Decision{OK: true}},
		{2 * time.Second, func() Decision { return kb.Try("a") }, Decision{Wait: 500 * ms}},
		{2 * time.Second, func() Decision { return kb.Try("b") }, Decision{OK: true, Left: 2}},
		{2 * time.Second, w.Try, Decision{OK: true, Left: 1}},
		{3 * time.Second, w.Try, Decision{OK: true}},
		{4 * time.Second, w.Try, Decision{Wait: 58 * time.Second}},
		{4 * time.Second, func() Decision { return kw.Try("x") }, Decision{OK: true, Left: 1}},
		{4 * time.Second, func() Decision { return kw.Try("x") }, Decision{OK: true}},
		{5 * time.Second, func() Decision { return kw.Try("x") }, Decision{Wait: 59 * time.Second}},
		{5 * time.Second, never.Try, Decision{OK: true}},
		{5 * time.Second, never.Try, Decision{Wait: policy.Never}},
	}
	for i, s := range steps {
		r.to(s.at)
		if got := s.try(); got != s.want {
			t.Fatalf("step %d at +%v: %+v, want %+v", i, s.at, got, s.want)
		}
	}
	for _, c := range []interface{ Close(context.Context) error }{b, w, kb, kw, tb} {
		if err := c.Close(r.ctx); err != nil {
			t.Fatal(err)
		}
	}
	closed := Decision{Wait: policy.Never, Closed: true}
	for i, try := range []func() Decision{
		b.Try, w.Try,
		func() Decision { return kb.Try("a") },
		func() Decision { return kw.Try("x") },
		func() Decision { return tb.Try("t") },
		func() Decision { return b.Reserve(1).Decision() },
	} {
		d := try()
		if d != closed || d.RetryAfter() != MaxRetryAfter {
			t.Fatalf("closed %d: %+v, Retry-After %d; want %+v, Retry-After %d", i, d, d.RetryAfter(), closed, MaxRetryAfter)
		}
	}
	// Shut down under them, without Close: the same answer.
	if err := r.eng.Shutdown(r.ctx); err != nil {
		t.Fatal(err)
	}
	if d := never.Try(); d != closed {
		t.Fatalf("on a shut engine: %+v, want %+v", d, closed)
	}
	if d := nothing.Reserve(1).Decision(); d != closed {
		t.Fatalf("Reserve on a shut engine: %+v, want %+v", d, closed)
	}
}

// TestAllowNNothingWithWaiters: AllowN of nothing is allowed even while a
// caller waits in Wait, since it takes nothing from it; Allow of one is
// not.
func TestAllowNNothingWithWaiters(t *testing.T) {
	r := newLimitRig(t)
	b, err := NewBucket(r.eng, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Allow()
	waiting := waitAsync(r.ctx, b.Wait)
	r.awaitParked(&b.l, "", 1)
	if !b.AllowN(0) || !b.AllowN(-1) || !b.TryN(0).OK {
		t.Fatal("AllowN of nothing refused while a caller waits")
	}
	if b.Allow() {
		t.Fatal("Allow overtook the caller in Wait")
	}
	r.to(time.Second)
	if err := r.result(waiting, "the Wait"); err != nil {
		t.Fatalf("the Wait = %v", err)
	}
	if err := b.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	if b.AllowN(0) {
		t.Fatal("AllowN(0) after Close allowed")
	}
}

// TestTryRefusalsAlwaysWait: many callers trying at once, beside callers
// in Wait, on a clock whose timers fire late, so parked callers' turns keep
// coming before their Ticks: every refusal says a positive wait, and a
// Retry-After of at least 1 and no more than the wait rounded up.
func TestTryRefusalsAlwaysWait(t *testing.T) {
	kinds := []struct {
		name string
		try  func(eng *engine.Engine) (try func() Decision, wait func(context.Context) error, close func(context.Context) error)
	}{
		{"bucket", func(eng *engine.Engine) (func() Decision, func(context.Context) error, func(context.Context) error) {
			b, _ := NewBucket(eng, 1000, 5)
			return b.Try, b.Wait, b.Close
		}},
		{"keyed window", func(eng *engine.Engine) (func() Decision, func(context.Context) error, func(context.Context) error) {
			k, _ := NewKeyedWindow(eng, 5, 5*time.Millisecond)
			return func() Decision { return k.Try("k") }, func(ctx context.Context) error { return k.Wait(ctx, "k") }, k.Close
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			clock := vclock.NewVirtual(vclock.WithRandomLateness(2*time.Millisecond, 3))
			eng := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
			defer eng.Shutdown(context.Background())
			try, wait, closer := kind.try(eng)

			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var waited atomic.Int64
			for range 4 { // callers in Wait keep a line
				wg.Go(func() {
					for wait(ctx) == nil {
						waited.Add(1)
					}
				})
			}
			var stop atomic.Bool
			wg.Go(func() { // time moves, in steps shorter than the timers
				for !stop.Load() {
					clock.Advance(100 * time.Microsecond)
					runtime.Gosched()
				}
			})
			const tryers, tries = 16, 500
			var refusals, grants atomic.Int64
			bad := make(chan Decision, tryers*tries)
			var tw sync.WaitGroup
			for range tryers {
				tw.Go(func() {
					for range tries {
						runtime.Gosched() // on one processor too, let the line and the clock move between tries
						d := try()
						if d.OK {
							grants.Add(1)
							continue
						}
						refusals.Add(1)
						if ra := d.RetryAfter(); d.Wait <= 0 || ra < 1 || time.Duration(ra)*time.Second < d.Wait {
							bad <- d
						}
					}
				})
			}
			tw.Wait()
			stop.Store(true)
			cancel()
			wg.Wait()
			close(bad)
			for d := range bad {
				t.Errorf("a refusal %+v says Retry-After %d", d, d.RetryAfter())
			}
			// The tryers may never be granted: with callers in Wait the line
			// is seldom empty, and they do not overtake it.
			if refusals.Load() == 0 || waited.Load() == 0 {
				t.Fatalf("%d refusals, %d granted to Wait: the test tested nothing", refusals.Load(), waited.Load())
			}
			if err := closer(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d := try(); d.OK || d.RetryAfter() != MaxRetryAfter {
				t.Fatalf("after Close: %+v, Retry-After %d", d, d.RetryAfter())
			}
			t.Logf("%d refusals, %d grants to Try, %d to Wait", refusals.Load(), grants.Load(), waited.Load())
		})
	}
}
