package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// A program needs one moonpool import for a pool, a per-client quota, a
// concurrency gate and retries, with their configuration and errors.
func Example_oneImport() {
	ctx := context.Background()
	eng := client.NewEngine()
	defer eng.Shutdown(ctx)

	next := 0
	pool, _ := client.NewPool(eng, client.PoolConfig[int]{
		Open:   func(context.Context) (int, error) { next++; return next, nil },
		Limits: client.DefaultLimits,
		Ward:   client.Ward{Bucket: client.Rate{PerSecond: 20, Burst: 10}, Backoff: client.DefaultBackoff, Breaker: client.DefaultBreaker},
	})
	quota, _ := client.NewKeyedBucket(eng, 1, 2) // per client: 1/s, bursts of 2
	gate, _ := client.NewGate(eng, 64)

	serve := func(who string) string {
		if d := quota.Try(who); !d.OK {
			return fmt.Sprintf("429, Retry-After: %d", d.RetryAfter())
		}
		if !gate.Enter() {
			return "503"
		}
		defer gate.Leave()
		conn, err := pool.Get(ctx)
		if errors.Is(err, client.ErrShed) {
			return "503"
		}
		defer pool.Put(conn)
		return fmt.Sprintf("200 on conn %d", conn)
	}
	for range 3 {
		fmt.Println(serve("alice"))
	}

	tries := 0
	err := client.Retry(ctx, client.Backoff{Base: time.Millisecond, Factor: 2, Cap: 10 * time.Millisecond, Attempts: 3}, func(context.Context) error {
		tries++
		if tries < 2 {
			return errors.New("connection refused")
		}
		return nil
	})
	fmt.Println(err, "after", tries, "tries")
	// Output:
	// 200 on conn 1
	// 200 on conn 1
	// 429, Retry-After: 1
	// <nil> after 2 tries
}
