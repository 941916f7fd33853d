package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// arrival is a batch of Allows at one instant, offset from the start.
type arrival struct {
	at    time.Duration
	calls int
}

// creditPatterns are the traffic shapes a lent batch of tokens could be
// caught out by, for a bucket of rate per second and burst.
func creditPatterns(rate, burst float64) map[string][]arrival {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	fill := burst / rate // seconds for an empty bucket to fill
	p := map[string][]arrival{}
	var at time.Duration
	var tqf []arrival
	for range 20 { // a trickle, a quiet spell, a flood
		for range 10 {
			at += sec(2 / rate)
			tqf = append(tqf, arrival{at, 1})
		}
		at += sec(3 * fill)
		tqf = append(tqf, arrival{at, int(3 * burst)})
	}
	p["trickle-quiet-flood"] = tqf
	var steady []arrival
	for i := range 4000 {
		steady = append(steady, arrival{sec(float64(i) / (1.5 * rate)), 1})
	}
	p["steady"] = steady
	var bursts []arrival
	for i := range 10 {
		bursts = append(bursts, arrival{sec(float64(i) * fill), int(2 * burst)})
	}
	p["burst"] = bursts
	rng := rand.New(rand.NewPCG(1, 2))
	var random []arrival
	at = 0
	for range 4000 {
		at += sec(rng.ExpFloat64() * fill / 20)
		random = append(random, arrival{at, 1 + rng.IntN(int(min(burst/4, 64))+1)})
	}
	p["random"] = random
	return p
}

// TestCreditNeverOverAdmits drives a client.Bucket, whose actor lends
// tokens to its callers, through trickle-quiet-flood, steady, burst and
// random traffic on the virtual clock. What it lets through must pass an
// exact policy.Bucket of the same rate and burst fed only those calls,
// which is to say it never let more through over any stretch of time than
// the bucket allows; and it may let fewer through than an exact bucket fed
// every call, by at most a lease per time the bucket filled up.
//
// The last bucket lets ten million a second through, so it lends a
// millisecond of its rate at a time (10,000 tokens: a sixteenth of its
// burst) where the others lend at most 1,024.
func TestCreditNeverOverAdmits(t *testing.T) {
	for _, c := range []struct{ rate, burst float64 }{
		{1000, 16}, {1000, 64}, {1000, 1000}, {1000, 10000}, {1e7, 160000},
	} {
		rate, burst := c.rate, c.burst
		for name, pattern := range creditPatterns(rate, burst) {
			t.Run(fmt.Sprintf("rate=%v/burst=%v/%s", rate, burst, name), func(t *testing.T) {
				clock := vclock.NewVirtual()
				eng := engine.New(engine.WithClock(clock))
				defer eng.Shutdown(context.Background())
				start := clock.Now()
				b, err := client.NewBucket(eng, rate, burst)
				if err != nil {
					t.Fatal(err)
				}
				shadow := policy.NewBucket(rate, burst, start) // fed what b let through
				exact := policy.NewBucket(rate, burst, start)  // fed every call
				var ours, theirs, fills int
				full := true
				for i, a := range pattern {
					clock.Advance(time.Duration(start + int64(a.at) - clock.Now()))
					now := clock.Now()
					if f := exact.Tokens(now) >= burst; f && !full {
						fills++
					}
					for range a.calls {
						if b.Allow() {
							ours++
							if !shadow.Take(now, 1) {
								t.Fatalf("arrival %d at +%v: let through more than the bucket allows (%d so far)", i, a.at, ours)
							}
						}
						if exact.Take(now, 1) {
							theirs++
						}
					}
					full = exact.Tokens(now) >= burst
				}
				lease := int(min(burst/16, max(1024, rate/1000)))
				if short := theirs - ours; short > (fills+1)*lease {
					t.Fatalf("let %d through against the exact bucket's %d: %d short, more than a lease (%d) per fill (%d)", ours, theirs, short, lease, fills)
				}
				t.Logf("burst %v %s: %d against the exact %d (%.2f%% under; lease %d, %d fills)",
					burst, name, ours, theirs, 100*float64(theirs-ours)/float64(theirs), lease, fills)
			})
		}
	}
}

// TestGateRoomExact: a gate that lends room fills to exactly its limit,
// reports exactly how many are inside, ignores Leaves of nobody, and never
// has more than its limit inside under concurrent use.
func TestGateRoomExact(t *testing.T) {
	const limit = 64 // lends four at a time
	g, err := client.NewGate(gateEngine(t), limit)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		n := 0
		for g.Enter() {
			n++
			if h := g.Held(); h != n {
				t.Fatalf("round %d: Held %d with %d inside", round, h, n)
			}
		}
		if n != limit {
			t.Fatalf("round %d: %d got in, limit %d", round, n, limit)
		}
		for range limit {
			g.Leave()
		}
		for range 10 { // nobody is inside: these must change nothing
			g.Leave()
		}
		if h := g.Held(); h != 0 {
			t.Fatalf("round %d: Held %d after everyone left", round, h)
		}
	}
	var inside, most atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 2000 {
				if !g.Enter() {
					continue
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if n%3 == 0 { // hold some while others come and go
					inside.Add(-1)
					g.Leave()
					continue
				}
				inside.Add(-1)
				g.Leave()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Fatalf("%d inside at once, limit %d", m, limit)
	}
	if h := g.Held(); h != 0 {
		t.Fatalf("Held %d once everyone left", h)
	}
}

// TestWindowCreditNeverOverAdmits is TestCreditNeverOverAdmits for a
// client.Window big enough to lend: what it lets through must pass an
// exact policy.Window fed only those calls, at the instants they were
// made; and against an exact window fed every call it may fall short only
// by what counting a lease's events up to a 256th of the window late
// costs, which the test bounds at 2% of the calls the exact window let
// through (and logs).
func TestWindowCreditNeverOverAdmits(t *testing.T) {
	for _, allow := range []int{1024, 10000} {
		const window = time.Second
		for name, pattern := range creditPatterns(float64(allow), float64(allow)) {
			t.Run(fmt.Sprintf("allow=%d/%s", allow, name), func(t *testing.T) {
				clock := vclock.NewVirtual()
				eng := engine.New(engine.WithClock(clock))
				defer eng.Shutdown(context.Background())
				start := clock.Now()
				w, err := client.NewWindow(eng, allow, window)
				if err != nil {
					t.Fatal(err)
				}
				shadow := policy.NewWindow(allow, window) // fed what w let through
				exact := policy.NewWindow(allow, window)  // fed every call
				var ours, theirs int
				for i, a := range pattern {
					clock.Advance(time.Duration(start + int64(a.at) - clock.Now()))
					now := clock.Now()
					for range a.calls {
						if w.Allow() {
							ours++
							if !shadow.Take(now) {
								t.Fatalf("arrival %d at +%v: let through more than the window allows (%d so far)", i, a.at, ours)
							}
						}
						if exact.Take(now) {
							theirs++
						}
					}
				}
				if got := w.Stats().Allowed; got != int64(ours) {
					t.Fatalf("Stats().Allowed = %d, let through %d", got, ours)
				}
				if short := theirs - ours; float64(short) > 0.02*float64(theirs) {
					t.Fatalf("let %d through against the exact window's %d: %d short, more than 2%%", ours, theirs, short)
				}
				t.Logf("allow %d %s: %d against the exact %d (%.2f%% under)",
					allow, name, ours, theirs, 100*float64(theirs-ours)/float64(theirs))
			})
		}
	}
}

// TestWindowCreditConcurrent: eight callers Allow at once on a window that
// lends, in rounds; the clock stands still within a round and moves between
// rounds by random steps, some inside a lease's span and some past it, so
// leases are lent, drawn, outlived and taken back while callers draw. What
// each round let through, fed to an exact window at the round's instant,
// must fit it.
func TestWindowCreditConcurrent(t *testing.T) {
	const allow, window = 2048, time.Second
	clock := vclock.NewVirtual()
	eng := engine.New(engine.WithClock(clock))
	defer eng.Shutdown(context.Background())
	w, err := client.NewWindow(eng, allow, window)
	if err != nil {
		t.Fatal(err)
	}
	shadow := policy.NewWindow(allow, window)
	rng := rand.New(rand.NewPCG(3, 4))
	total := 0
	for round := range 200 {
		var got atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 64 {
					if w.Allow() {
						got.Add(1)
					}
				}
			})
		}
		wg.Wait()
		now := clock.Now()
		for range got.Load() {
			if !shadow.Take(now) {
				t.Fatalf("round %d: let %d through, more than the window allows", round, got.Load())
			}
		}
		total += int(got.Load())
		clock.Advance(time.Duration(rng.Int64N(int64(window / 64))))
	}
	if got := w.Stats().Allowed; got != int64(total) {
		t.Fatalf("Stats().Allowed = %d, let through %d", got, total)
	}
}

// TestBucketCreditConcurrent: eight callers spend a bucket that earns
// nothing, drawing from its lent stripes and asking its actor at once; they
// get exactly the burst between them, and Stats counts exactly that.
func TestBucketCreditConcurrent(t *testing.T) {
	for _, burst := range []float64{16, 100, 5000} {
		clock := vclock.NewVirtual()
		eng := engine.New(engine.WithClock(clock))
		b, err := client.NewBucket(eng, 0, burst)
		if err != nil {
			t.Fatal(err)
		}
		var got atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range int(burst) {
					if b.Allow() {
						got.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got.Load() != int64(burst) {
			t.Errorf("burst %v: %d allowed between eight callers, want the burst", burst, got.Load())
		}
		if s := b.Stats().Allowed; s != got.Load() {
			t.Errorf("burst %v: Stats().Allowed = %d, allowed %d", burst, s, got.Load())
		}
		eng.Shutdown(context.Background())
	}
}

// TestKeyedCreditNeverOverAdmits is TestCreditNeverOverAdmits for a keyed
// bucket: one hot key takes each pattern, after 64 calls at once that make
// it hot, while thirty cold keys take a call in turn after each of its
// arrivals, each too rare to be hot. Every
// key's grants must pass an exact bucket of its own fed only them; the hot
// key must have drawn from lent tokens, and fall short of an exact bucket
// fed every call by at most a lease per time it filled; the cold keys,
// answered by their actor, let through exactly what an exact bucket
// does.
func TestKeyedCreditNeverOverAdmits(t *testing.T) {
	const rate = 1000.0
	for _, burst := range []float64{16, 64, 1000, 10000} {
		for name, pattern := range creditPatterns(rate, burst) {
			pattern = append([]arrival{{0, 64}}, pattern...)
			t.Run(fmt.Sprintf("burst=%v/%s", burst, name), func(t *testing.T) {
				clock := vclock.NewVirtual()
				eng := engine.New(engine.WithClock(clock))
				defer eng.Shutdown(context.Background())
				start := clock.Now()
				k, err := client.NewKeyedBucket(eng, rate, burst)
				if err != nil {
					t.Fatal(err)
				}
				keys := []string{"hot"}
				for i := range 30 {
					keys = append(keys, fmt.Sprint("cold-", i))
				}
				shadow := map[string]*policy.Bucket{} // fed what k let through
				exact := map[string]*policy.Bucket{}  // fed every call
				ours, theirs := map[string]int{}, map[string]int{}
				for _, key := range keys {
					shadow[key] = policy.NewBucket(rate, burst, start)
					exact[key] = policy.NewBucket(rate, burst, start)
				}
				call := func(key string, now int64) {
					if k.Allow(key) {
						ours[key]++
						if !shadow[key].Take(now, 1) {
							t.Fatalf("%s: let through more than its bucket allows (%d so far)", key, ours[key])
						}
					}
					if exact[key].Take(now, 1) {
						theirs[key]++
					}
				}
				fills, full := 0, true
				for i, a := range pattern {
					clock.Advance(time.Duration(start + int64(a.at) - clock.Now()))
					now := clock.Now()
					if f := exact["hot"].Tokens(now) >= burst; f && !full {
						fills++
					}
					for range a.calls {
						call("hot", now)
					}
					full = exact["hot"].Tokens(now) >= burst
					call(keys[1+i%30], now)
				}
				// A burst of 16 lends one token at a time, and none once
				// a steady flow above the rate keeps it empty.
				if burst > 16 && client.HotDrawn(k) == 0 {
					t.Fatal("the hot key never drew from lent tokens")
				}
				lease := int(min(burst/16, max(1024, rate/1000)))
				if short := theirs["hot"] - ours["hot"]; short > (fills+1)*lease {
					t.Fatalf("hot: let %d through against the exact bucket's %d: %d short, more than a lease (%d) per fill (%d)", ours["hot"], theirs["hot"], short, lease, fills)
				}
				for _, key := range keys[1:] {
					if ours[key] != theirs[key] {
						t.Fatalf("%s: let %d through against the exact bucket's %d", key, ours[key], theirs[key])
					}
				}
				all := 0
				for _, n := range ours {
					all += n
				}
				if s := k.Stats().Allowed; s != int64(all) {
					t.Fatalf("Stats().Allowed = %d, let through %d", s, all)
				}
				if d := client.HotDrawn(k); d > int64(ours["hot"]) {
					t.Fatalf("%d drawn from lent tokens, more than the hot key's %d: a cold key was lent to", d, ours["hot"])
				}
				t.Logf("burst %v %s: hot %d against the exact %d (%.2f%% under; lease %d, %d fills; %d drawn)",
					burst, name, ours["hot"], theirs["hot"], 100*float64(theirs["hot"]-ours["hot"])/float64(theirs["hot"]), lease, fills, client.HotDrawn(k))
			})
		}
	}
}

// TestKeyedCreditConcurrent: eight callers spend one key of a keyed bucket
// that earns nothing, drawing from the key's lent tokens and asking its
// actor at once, with a cold key asked between; they get exactly the burst
// of each between them, and the hot key's Tokens is then exactly none.
func TestKeyedCreditConcurrent(t *testing.T) {
	for _, burst := range []float64{16, 100, 5000} {
		clock := vclock.NewVirtual()
		eng := engine.New(engine.WithClock(clock))
		k, err := client.NewKeyedBucket(eng, 0, burst)
		if err != nil {
			t.Fatal(err)
		}
		var hot, cold atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 2 * int(burst) {
					if k.Allow("hot") {
						hot.Add(1)
					}
					if i%16 == g && k.Allow("cold") {
						cold.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if hot.Load() != int64(burst) || cold.Load() > int64(burst) {
			t.Errorf("burst %v: hot let through %d, cold %d, between eight callers; want the burst, and at most it", burst, hot.Load(), cold.Load())
		}
		if tok := k.Tokens("hot"); tok != 0 {
			t.Errorf("burst %v: Tokens(hot) = %v after the burst was spent", burst, tok)
		}
		// A key is hot after 32 asks: a burst of 16 is spent by then.
		if burst > 32 && client.HotDrawn(k) == 0 {
			t.Errorf("burst %v: the hot key never drew from lent tokens", burst)
		}
		if s := k.Stats().Allowed; s != hot.Load()+cold.Load() {
			t.Errorf("burst %v: Stats().Allowed = %d, let through %d", burst, s, hot.Load()+cold.Load())
		}
		eng.Shutdown(context.Background())
	}
}
