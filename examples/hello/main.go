// Command hello is the first program of the README: a pool of TCP
// connections and a per-client quota, with nothing to set up.
package main

import (
	"context"
	"fmt"
	"net"

	"github.com/moonpool-go/moonpool/client"
)

func main() {
	ctx := context.Background()
	backend, err := net.Listen("tcp", "127.0.0.1:0") // stands in for a database
	if err != nil {
		panic(err)
	}
	defer backend.Close()
	go func() {
		for {
			if _, err := backend.Accept(); err != nil {
				return
			}
		}
	}()

	eng := client.NewEngine()
	defer eng.Shutdown(ctx) // closes the pool and stops the limiter

	var dialer net.Dialer
	pool, err := client.NewPool(eng, client.PoolConfig[net.Conn]{
		Open: func(ctx context.Context) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", backend.Addr().String())
		},
		Close:  func(c net.Conn) error { return c.Close() },
		Limits: client.DefaultLimits, // ten live, idle ones closed after thirty minutes
	})
	if err != nil {
		panic(err)
	}
	quota, err := client.NewKeyedBucket(eng, 1, 3) // per client: 1 a second, bursts of 3
	if err != nil {
		panic(err)
	}

	for i := 1; i <= 4; i++ {
		if d := quota.Try("alice"); !d.OK {
			fmt.Printf("request %d: 429, Retry-After: %d\n", i, d.RetryAfter())
			continue
		}
		conn, err := pool.Get(ctx) // idle, opened, or waited for
		if err != nil {
			fmt.Printf("request %d: 503, %v\n", i, err)
			continue
		}
		fmt.Printf("request %d: 200, %d connection(s) opened\n", i, pool.Stats().Made)
		pool.Put(conn) // or pool.Discard(conn) if it broke
	}
}
