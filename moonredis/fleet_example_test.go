package moonredis_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonredis"
	"github.com/redis/go-redis/v9"
)

// A pool of database connections whose ward the same pool shares in every
// replica of the service: here an embedded Redis and one replica.
func ExampleNewFleet() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())

	// Three replicas failing within two seconds hold every replica; one
	// probe for the fleet each 50 ms; a recovery ramps the whole fleet up.
	fleet, err := moonredis.NewFleet(eng, moonredis.FleetConfig{Client: rdb, Name: "orders-db"})
	if err != nil {
		fmt.Println(err)
		return
	}
	pool, err := client.NewPool(eng, client.PoolConfig[net.Conn]{
		Open: func(ctx context.Context) (net.Conn, error) {
			d := net.Dialer{Timeout: time.Second}
			return d.DialContext(ctx, "tcp", "db.internal:5432")
		},
		Close:  func(c net.Conn) error { return c.Close() },
		Limits: client.DefaultLimits,
		Ward:   client.Ward{Backoff: client.DefaultBackoff, Breaker: client.DefaultBreaker},
		Fleet:  fleet,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close(context.Background())
	fmt.Println(pool.Stats().Fleet, fleet.Stats().State)
	// Output: open open
}
