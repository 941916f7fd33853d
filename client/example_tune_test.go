package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moontest"
)

// A running server raises a bucket's rate without dropping what it holds:
// the half token earned at the old rate stays, and the rest comes at the
// new one. (A virtual clock stands in for time.)
func ExampleBucket_SetLimit() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())

	b, _ := client.NewBucket(eng, 1, 2)
	b.AllowN(2) // empty
	clock.Advance(500 * time.Millisecond)
	fmt.Println("held at 1/s:", b.Tokens())
	b.SetLimit(10)
	fmt.Println("wait at 10/s:", b.Delay())
	clock.Advance(50 * time.Millisecond)
	fmt.Println(b.Allow())
	q, w := b.Quota()
	fmt.Println("quota:", q, "per", w)
	// Output:
	// held at 1/s: 0.5
	// wait at 10/s: 50ms
	// true
	// quota: 2 per 200ms
}

// Reserve takes tokens for work that may turn out not to need them; Cancel
// gives back what the bucket would hold had they never been taken. Here the
// bucket fills up in the meantime, so only part of the reservation comes
// back: giving all of it back would let more through than the rate allows.
func ExampleBucket_Reserve() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())

	b, _ := client.NewBucket(eng, 1, 10)
	r := b.Reserve(5)
	fmt.Println("reserved:", r.OK(), "left:", r.Decision().Left)
	fmt.Println("given back at once:", b.Reserve(2).Cancel())

	clock.Advance(3 * time.Second) // 8 held; 10 without the reservation
	b.AllowN(8)
	fmt.Println("given back later:", r.Cancel())
	fmt.Println("held:", b.Tokens())
	// Output:
	// reserved: true left: 5
	// given back at once: 2
	// given back later: 2
	// held: 2
}
