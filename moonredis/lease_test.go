package moonredis

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// leasePeriod is the Lease the tests use.
const leasePeriod = 50 * time.Millisecond

// leased is a bucket of cfg with leases of leasePeriod on f.
func leased(t *testing.T, f *fake, cfg Config, rate, burst float64) *Bucket {
	t.Helper()
	cfg.Lease = leasePeriod
	b, err := NewBucket(f.eng, cfg, rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// settled waits until none of bs has a lease call in flight.
func settled(t *testing.T, bs ...*Bucket) {
	t.Helper()
	waitFor(t, "lease calls to land", func() bool {
		for _, b := range bs {
			if b.ls.flying.Load() != 0 {
				return false
			}
		}
		return true
	})
}

// oneByOne is how many calls of b's went to Redis one request at a time,
// leaving out lease calls.
func oneByOne(b *Bucket) int64 { return b.Stats().Calls - b.LeaseStats().Calls }

// redisTokens is what Redis holds of key for a bucket of prefix, rate and
// burst, read through a bucket without leases: leases taken count as
// spent, and tokens given back as held again.
func redisTokens(t *testing.T, f *fake, prefix, key string, rate, burst float64) float64 {
	t.Helper()
	cfg := f.cfg()
	cfg.Prefix = prefix
	look, err := NewBucket(f.eng, cfg, rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	defer look.Close(context.Background())
	return look.Tokens(key)
}

// TestLeaseHotKey: a key asked 800 times a second, under its limit of
// 1,000, is served from leases after its first few requests: about one
// call per lease (about 40 ms of demand, renewed at a quarter left),
// every request let through, and almost none sent to Redis alone.
func TestLeaseHotKey(t *testing.T) {
	f := newFake(t)
	b := leased(t, f, f.cfg(), 1000, 1000)
	const steps = 500 // 2 s, four requests each 5 ms
	for range steps {
		for range 4 {
			if !b.Allow("hot") {
				t.Fatal("Allow refused a key under its limit")
			}
		}
		settled(t, b)
		f.advance(5 * time.Millisecond)
	}
	ls, alone := b.LeaseStats(), oneByOne(b)
	t.Logf("%+v, %d calls one by one", ls, alone)
	if ls.Draws < 4*steps-20 {
		t.Errorf("%d of %d requests drawn from leases, want all but the first few", ls.Draws, 4*steps)
	}
	if alone > 10 {
		t.Errorf("%d requests went to Redis one by one, want only the first few", alone)
	}
	// A lease lasts 50 ms and is renewed at a quarter left: about one
	// call each 37.5 ms, 53 over 2 s.
	if ls.Calls < 20 || ls.Calls > 80 {
		t.Errorf("%d lease calls over 2 s, want about one each 40 ms", ls.Calls)
	}
	if got := b.Stats().Admitted; got != 4*steps {
		t.Errorf("Stats.Admitted = %d, want %d", got, 4*steps)
	}
}

// TestLeaseQuietKey: a key asked below LeaseAbove goes to Redis one
// request at a time and is exact to the request: a burst of 3 lets
// through 3, refuses the fourth with Redis's wait, and no lease is taken.
func TestLeaseQuietKey(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.LeaseAbove = 1000 // 50 a period
	b := leased(t, f, cfg, 1, 3)
	for i, want := range []bool{true, true, true, false} {
		if got := b.Allow("quiet"); got != want {
			t.Fatalf("Allow %d = %v, want %v", i, got, want)
		}
	}
	if d := b.Try("quiet"); d.OK || d.Wait != time.Second {
		t.Errorf("Try after the burst = %+v, want a refusal of 1s", d)
	}
	settled(t, b)
	if ls := b.LeaseStats(); ls.Calls != 0 {
		t.Errorf("a quiet key took leases: %+v", ls)
	}
	if got := b.Stats().Calls; got != 4 {
		t.Errorf("%d calls for 5 requests, want 4 (the fifth is a remembered refusal)", got)
	}
}

// TestLeaseWithinLimit: two buckets, two processes on one Redis, each
// asking twice the limit of 1,000 a second, are let through between them
// no more than the limit allows (the burst and a token a millisecond), and
// nearly all of it, each a fair part.
func TestLeaseWithinLimit(t *testing.T) {
	f := newFake(t)
	a := leased(t, f, f.cfg(), 1000, 100)
	b := leased(t, f, f.cfg(), 1000, 100)
	const ms = 3000
	var got [2]int
	for range ms {
		for range 2 {
			for i, x := range []*Bucket{a, b} {
				if x.Allow("shared") {
					got[i]++
				}
			}
		}
		settled(t, a, b)
		f.advance(time.Millisecond)
	}
	most := 100 + ms
	t.Logf("let through %v of at most %d; leases %+v and %+v", got, most, a.LeaseStats(), b.LeaseStats())
	if sum := got[0] + got[1]; sum > most {
		t.Errorf("let through %d, above the limit's %d", sum, most)
	} else if sum < most*97/100 {
		t.Errorf("let through %d, below 97%% of the limit's %d", sum, most)
	}
	for i, n := range got {
		if n < most/4 {
			t.Errorf("process %d let through %d of %d: not its part", i, n, most)
		}
	}
	if calls := a.LeaseStats().Calls + b.LeaseStats().Calls + oneByOne(a) + oneByOne(b); calls > ms/2 {
		t.Errorf("%d calls for %d requests let through: leases should save most", calls, got[0]+got[1])
	}
}

// TestLeaseGivesBack: a lease's unspent tokens go back to Redis when the
// lease ends, and at Close, and are drawn from no more: Redis holds the
// burst less what was let through.
func TestLeaseGivesBack(t *testing.T) {
	for _, how := range []string{"end", "close"} {
		t.Run(how, func(t *testing.T) {
			f := newFake(t)
			const rate, burst = 1e-6, 100 // nothing refills
			b := leased(t, f, f.cfg(), rate, burst)
			taken := 0
			for range 10 {
				if b.Allow("k") {
					taken++
				}
				settled(t, b)
			}
			ls := b.LeaseStats()
			if ls.Held == 0 {
				t.Fatalf("no lease held after 10 requests: %+v", ls)
			}
			if got := redisTokens(t, f, "moonredis:bucket:", "k", rate, burst); got != float64(burst-taken)-float64(ls.Held) {
				t.Fatalf("Redis holds %v with a lease of %d out, want %d", got, ls.Held, burst-taken-int(ls.Held))
			}
			switch how {
			case "end":
				f.advance(leasePeriod)
				settled(t, b)
				if d := b.Try("k"); d.OK && b.LeaseStats().Draws != ls.Draws {
					t.Error("drew from a lease after its end")
				} else if d.OK {
					taken++ // from Redis, one by one
				}
				settled(t, b)
			case "close":
				if err := b.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				if b.Allow("k") {
					t.Error("Allow after Close said yes")
				}
			}
			after := b.LeaseStats()
			if after.Returned != ls.Held || after.Given != ls.Held {
				t.Errorf("returned %d and gave back %d, want the %d held", after.Returned, after.Given, ls.Held)
			}
			if got := redisTokens(t, f, "moonredis:bucket:", "k", rate, burst); got != float64(burst-taken) {
				t.Errorf("Redis holds %v after the give-back, want the burst less the %d let through: %d", got, taken, burst-taken)
			}
		})
	}
}

// TestLeaseDemandMoves: one bucket asks twice the limit for a second and
// stops; another starts then. From two lease periods on, the second is
// let through at least 90% of the limit: the first's lease ends and goes
// back, and the second's grows to the key's demand.
func TestLeaseDemandMoves(t *testing.T) {
	f := newFake(t)
	const rate = 1000
	a := leased(t, f, f.cfg(), rate, 100)
	b := leased(t, f, f.cfg(), rate, 100)
	run := func(x *Bucket, ms int) (per []int) {
		per = make([]int, ms)
		for i := range ms {
			for range 2 {
				if x.Allow("moving") {
					per[i]++
				}
			}
			settled(t, a, b)
			f.advance(time.Millisecond)
		}
		return per
	}
	run(a, 1000)
	per := run(b, 700)
	p := int(leasePeriod / time.Millisecond)
	sum := func(s []int) (n int) {
		for _, v := range s {
			n += v
		}
		return n
	}
	for i := 0; i+p <= len(per); i += p {
		t.Logf("period %d after the move: %d let through", i/p+1, sum(per[i:i+p]))
	}
	// At the limit a lease comes in grants of half a share (50 here), so
	// one period may hold one grant or two: the rate is measured over
	// twelve, where a grant more or less is less than a tenth.
	if got, want := sum(per[2*p:14*p]), rate*12*p/1000*9/10; got < want {
		t.Errorf("from two periods after the move, the new process let through %d in twelve, want at least 90%% of the limit: %d", got, want)
	}
}

// TestLeaseDroppedReply: a lease call whose reply is lost after Redis ran
// it, sent again as go-redis does, is counted once: Redis holds the burst
// less the one grant.
func TestLeaseDroppedReply(t *testing.T) {
	f := newFake(t)
	var resent atomic.Int32
	f.rdb.AddHook(hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			err := next(ctx, cmd)
			if err == nil && isLease(cmd) && resent.CompareAndSwap(0, 1) {
				return next(ctx, cmd) // the first reply is lost: the call again
			}
			return err
		}
	}})
	const rate, burst = 1e-6, 100
	b := leased(t, f, f.cfg(), rate, burst)
	taken := 0
	for range 5 {
		if b.Allow("k") {
			taken++
		}
		settled(t, b)
	}
	ls := b.LeaseStats()
	if resent.Load() != 1 || ls.Leased == 0 {
		t.Fatalf("resent %d, leased %+v: the test did not resend a grant", resent.Load(), ls)
	}
	if got, want := redisTokens(t, f, "moonredis:bucket:", "k", rate, burst), float64(burst-taken)-float64(ls.Held); got != want {
		t.Errorf("Redis holds %v after a lease of %d sent twice, want %v", got, ls.Leased, want)
	}
}

// isLease is whether cmd runs the lease script.
func isLease(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 || !strings.HasPrefix(cmd.Name(), "eval") {
		return false
	}
	s, _ := args[1].(string)
	return s == leaseScript.Hash() || strings.Contains(s, "lessees")
}

// TestLeaseDryCallerAsksAgain: a caller that waited for a lease call and
// found its grant drained by others, with no call in flight, sends the
// next lease call itself and draws from it, rather than going to Redis
// alone.
func TestLeaseDryCallerAsksAgain(t *testing.T) {
	f := newFake(t)
	b := leased(t, f, f.cfg(), 1000, 1000)
	e := b.ls.entry("hot")
	// The call it waited for has landed (its signal is done), nothing
	// is in flight, and the credit is dry.
	done := make(chan struct{})
	close(done)
	e.sig.Store(&callSig{done: done, late: make(chan struct{})})
	d, ok := b.ls.await(e, 1)
	if !ok || !d.OK {
		t.Fatalf("await = %+v, %v: want a draw from a lease it asked for", d, ok)
	}
	settled(t, b)
	if ls := b.LeaseStats(); ls.Leases < 1 || ls.Draws != 1 {
		t.Errorf("LeaseStats = %+v: want a lease granted and one draw from it", ls)
	}
	if n := oneByOne(b); n != 0 {
		t.Errorf("%d calls went to Redis one by one, want none", n)
	}
}
