package policy_test

import (
	"fmt"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// conn stands in for a connection: a pointer, so the pool knows it by
// identity on its way back.
type conn struct{ id int }

// The seed README's pool: it hands out what it has and says when to make
// or wait for more; the caller does the opening, closing and queueing.
// Time is whatever the caller's clock reads; here it is a number we move.
func ExamplePool() {
	limits := policy.DefaultLimits
	limits.Size = 20
	pool := policy.NewPool[*conn](limits, policy.Ward{})

	opened := 0
	open := func() *conn { opened++; return &conn{id: opened} }

	var now int64 // the caller's clock, in nanoseconds
	take := func() *conn {
		for {
			switch taken := pool.Take(now); taken.Verdict {
			case policy.Ready:
				fmt.Println("ready", taken.Item.id)
				return taken.Item
			case policy.Stale:
				fmt.Println("stale", taken.Item.id, "- close it and take again")
			case policy.Make:
				c := open()
				pool.Made(c, now)
				fmt.Println("made", c.id)
				return c
			case policy.Wait:
				fmt.Println("wait")
				return nil
			}
		}
	}

	a := take()
	b := take()
	pool.Give(a, now)
	pool.Drop(b) // it broke
	now += int64(10 * time.Minute)
	c := take() // a comes back: it was returned, and is warm
	pool.Give(c, now)
	now += int64(time.Hour) // past Keep: a has sat an hour
	take()
	fmt.Println("live", pool.Live(), "idle", pool.Idle(), "busy", pool.Busy())
	// Output:
	// made 1
	// made 2
	// ready 1
	// stale 1 - close it and take again
	// made 3
	// live 1 idle 0 busy 1
}

// Give tells the caller whether to close what it handed back: false when
// enough are idle already.
func ExamplePool_Give() {
	pool := policy.NewPool[*conn](policy.Limits{Size: 3, Idle: 1}, policy.Ward{})
	a, b := &conn{1}, &conn{2}
	pool.Made(a, 0)
	pool.Made(b, 0)
	fmt.Println(pool.Give(a, 0))
	fmt.Println(pool.Give(b, 0), "- close it")
	fmt.Println(pool.Give(&conn{9}, 0), "- never lent: misuse")
	// Output:
	// true
	// false - close it
	// false - never lent: misuse
}

// Evict on a timer retires what has sat too long; Deadline says when the
// timer should next fire, so the owner need not poll.
func ExamplePool_Evict() {
	pool := policy.NewPool[string](policy.Limits{Keep: time.Minute}, policy.Ward{})
	pool.Made("a", 0)
	pool.Made("b", 0)
	pool.Give("a", 0)
	pool.Give("b", int64(30*time.Second))
	at, _ := pool.Deadline()
	fmt.Println("next eviction at", time.Duration(at))
	fmt.Println(pool.Evict(at))
	at, _ = pool.Deadline()
	fmt.Println("next eviction at", time.Duration(at))
	// Output:
	// next eviction at 1m0s
	// [a]
	// next eviction at 1m30s
}

// A ward in front of the backend, configured by value: after a failed make,
// makes are held back for a growing delay, then one goes ahead as a probe
// while the rest wait for its outcome; a bucket spaces makes out. Lending
// an idle resource is never held back. Every Later says which part held it.
func ExampleWard() {
	pool := policy.NewPool[string](policy.DefaultLimits, policy.Ward{
		Backoff: policy.Backoff{Base: 100 * time.Millisecond, Factor: 2, Cap: time.Second, Jitter: policy.Rigid},
		Bucket:  policy.Rate{PerSecond: 5, Burst: 1}, // five makes a second
	})
	var now int64
	step := func(d time.Duration) { now += int64(d) }
	show := func(t policy.Taken[string]) {
		if t.Verdict == policy.Later {
			fmt.Println(t.Verdict, t.After, "by the", t.Why)
			return
		}
		fmt.Println(t.Verdict)
	}

	show(pool.Take(now)) // Make: the connect fails
	pool.Unmade(now)
	show(pool.Take(now)) // held back by the backoff
	step(100 * time.Millisecond)
	show(pool.Take(now)) // the backoff is over, the bucket not yet
	step(100 * time.Millisecond)
	show(pool.Take(now))   // Make: the probe
	show(pool.Take(now))   // the others wait for its outcome
	pool.Made("conn", now) // it worked: the backend is back
	pool.Give("conn", now)
	show(pool.Take(now)) // the idle one, though the bucket is empty
	// Output:
	// Make
	// Later 100ms by the backoff
	// Later 100ms by the bucket
	// Make
	// Later 100ms by the probe
	// Ready
}

// One Ward for two pools: it is configuration, and each pool builds its own
// bucket, backoff and breaker from it, so neither spends the other's tokens.
func ExampleWard_shared() {
	ward := policy.Ward{
		Bucket:  policy.Rate{PerSecond: 20, Burst: 2},
		Backoff: policy.DefaultBackoff,
		Breaker: policy.DefaultBreaker,
	}
	primary := policy.NewPool[string](policy.DefaultLimits, ward)
	replica := policy.NewPool[string](policy.DefaultLimits, ward)
	for range 3 {
		fmt.Println(primary.Take(0).Verdict, replica.Take(0).Verdict)
	}
	// Output:
	// Make Make
	// Make Make
	// Later Later
}

// The breaker alone, in front of any call: ask Allow, report the outcome.
// It refuses nothing until the period holds ten requests, and never more
// than nine in ten.
func ExampleBreaker() {
	b := policy.NewBreaker(2, 2*time.Minute)
	var now int64
	fail := func(attempts int) {
		for range attempts {
			if b.Allow(now) {
				b.Failure(now) // the backend is down
			}
		}
	}
	fail(4)
	fmt.Printf("after 4 failures, refusing %.2f of attempts\n", b.Reject(now))
	fail(96)
	fmt.Printf("after 100 attempts, refusing %.2f of attempts\n", b.Reject(now))
	now += int64(2 * time.Minute) // two quiet minutes
	fmt.Printf("after a quiet period, refusing %.2f of attempts\n", b.Reject(now))
	// Output:
	// after 4 failures, refusing 0.00 of attempts
	// after 100 attempts, refusing 0.90 of attempts
	// after a quiet period, refusing 0.00 of attempts
}

// The shedder alone: report heat, count completions, ask before starting.
func ExampleShedder() {
	s := policy.NewShedder(0.8, 10*time.Second)
	var now int64
	for range 20 { // twenty calls in the first second, each held 200 ms
		s.Done(now, 200*time.Millisecond)
	}
	now += int64(time.Second)
	s.Heat(0.95, now) // the process is hot
	limit, _ := s.Limit(now)
	fmt.Println("limit", limit)
	fmt.Println(s.Allow(now, 4), s.Allow(now, 5))
	// Output:
	// limit 4
	// true false
}
