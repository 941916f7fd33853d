package moonredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonredis"
	"github.com/redis/go-redis/v9"
)

// A hot key leased: after its first few requests, this process takes its
// tokens from Redis ahead of time and lets requests through without a
// call. Close gives back what it did not spend.
func ExampleConfig_lease() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())

	// Per key: bursts of 2,000, then a token every 1,000 seconds.
	cfg := moonredis.Config{Client: rdb, Prefix: "quota:", Lease: 50 * time.Millisecond}
	quota, err := moonredis.NewBucket(eng, cfg, 0.001, 2000)
	if err != nil {
		fmt.Println(err)
		return
	}
	let := 0
	for range 1000 {
		if quota.Allow("hot") {
			let++
		}
	}
	calls := quota.Stats().Calls
	quota.Close(context.Background())
	ls := quota.LeaseStats()
	fmt.Println("let through:", let)
	fmt.Println("under 20 calls to Redis:", calls < 20)
	fmt.Println("unspent given back:", ls.Returned > 0 && ls.Given == ls.Returned)

	cfg.Lease = 0
	look, _ := moonredis.NewBucket(eng, cfg, 0.001, 2000)
	defer look.Close(context.Background())
	fmt.Println("Redis holds:", look.Tokens("hot"))
	// Output:
	// let through: 1000
	// under 20 calls to Redis: true
	// unspent given back: true
	// Redis holds: 1000
}
