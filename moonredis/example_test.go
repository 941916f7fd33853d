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

// A quota per API key shared by every process that reaches the same Redis:
// here an embedded one, in a program a *redis.Client of your own.
func ExampleNewBucket() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	// ContextTimeoutEnabled lets a caller make its own call (see Config.Client).
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())

	// Per key: bursts of 2, then a token every 1,000 seconds. Without
	// Redis, each of the 4 processes sharing it allows a quarter.
	quota, err := moonredis.NewBucket(eng, moonredis.Config{
		Client:            rdb,
		Prefix:            "quota:",
		FailMode:          moonredis.FailLocal,
		ExpectedProcesses: 4,
	}, 0.001, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	var limit client.KeyedLimiter = quota // what a middleware takes
	fmt.Println(limit.Allow("alice"), limit.Allow("alice"), limit.Allow("bob"))
	d := limit.Try("alice")
	fmt.Println(d.OK, d.Wait.Round(time.Second), d.RetryAfter())
	// Output:
	// true true true
	// false 16m40s 1000
}
