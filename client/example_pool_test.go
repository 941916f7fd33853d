package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

// conns opens fake connections named conn-1, conn-2, ... and says when one
// is closed.
func conns() client.PoolConfig[string] {
	n := 0
	return client.PoolConfig[string]{
		Open: func(ctx context.Context) (string, error) {
			n++ // Opens of one pool may run at once; this one is only ever asked once at a time
			return fmt.Sprintf("conn-%d", n), nil
		},
		Close: func(c string) error {
			fmt.Println("closed", c)
			return nil
		},
		Limits: policy.DefaultLimits,
	}
}

// A pool lends the connection it made once, again and again, and closes it
// when the pool closes.
func ExamplePool() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	pool, err := client.NewPool(eng, conns())
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		c, err := pool.Get(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println("using", c)
		pool.Put(c)
	}
	pool.Close(ctx)
	s := pool.Stats()
	fmt.Println("made", s.Made, "closed", s.Closes)
	// Output:
	// using conn-1
	// using conn-1
	// using conn-1
	// closed conn-1
	// made 1 closed 1
}

// A connection found broken is discarded: the pool closes it and makes a
// new one for the next caller.
func ExamplePool_Discard() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	pool, _ := client.NewPool(eng, conns())
	ctx := context.Background()

	c, _ := pool.Get(ctx)
	pool.Discard(c) // say a ping on it failed
	c, _ = pool.Get(ctx)
	fmt.Println("using", c)
	pool.Put(c)
	fmt.Println("broken", pool.Stats().Broken)
	pool.Close(ctx)
	// Output:
	// closed conn-1
	// using conn-2
	// broken 1
	// closed conn-2
}

// A Get whose ctx ends while it waits returns ctx's error and leaves its
// place in line.
func ExamplePool_Get_cancel() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	cfg := conns()
	cfg.Limits = policy.Limits{Size: 1}
	pool, _ := client.NewPool(eng, cfg)
	held, _ := pool.Get(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client went away
	_, err := pool.Get(ctx)
	fmt.Println(errors.Is(err, context.Canceled), pool.Stats().Waiting)

	pool.Put(held)
	pool.Close(context.Background())
	// Output:
	// true 0
	// closed conn-1
}

// A failed Open comes back as an *OpenError holding the cause; the ward
// hears of it too, so a breaker or backoff sees the backend failing.
func ExampleOpenError() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	refused := errors.New("connection refused")
	pool, _ := client.NewPool(eng, client.PoolConfig[string]{
		Open: func(ctx context.Context) (string, error) { return "", refused },
	})
	defer pool.Close(context.Background())

	_, err := pool.Get(context.Background())
	var oe *client.OpenError
	fmt.Println(errors.As(err, &oe), errors.Is(err, refused))
	fmt.Println(err)
	fmt.Println("make failures", pool.Stats().MakeFailures)
	// Output:
	// true true
	// moonpool: open: connection refused
	// make failures 1
}

// After Close, Get answers ErrClosed.
func ExamplePool_Close() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	pool, _ := client.NewPool(eng, conns())
	c, _ := pool.Get(context.Background())
	pool.Put(c)

	pool.Close(context.Background())
	_, err := pool.Get(context.Background())
	fmt.Println(err, errors.Is(err, client.ErrClosed))
	// Output:
	// closed conn-1
	// moonpool: closed true
}

// TryGet takes what the pool can give now and never waits in line: a
// handler that would rather shed work than queue it answers at once.
func ExamplePool_TryGet() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	cfg := conns()
	cfg.Limits = policy.Limits{Size: 1}
	pool, _ := client.NewPool(eng, cfg)
	ctx := context.Background()

	c, err := pool.TryGet(ctx) // room for one: opened
	fmt.Println(c, err)
	_, err = pool.TryGet(ctx) // the one is lent
	fmt.Println(err, errors.Is(err, client.ErrNoneIdle))
	pool.Put(c)
	pool.Close(ctx)
	// Output:
	// conn-1 <nil>
	// moonpool: no idle resource true
	// closed conn-1
}

// Reuse is asked on every Put: a connection left in a state the next caller
// must not inherit is closed rather than kept.
func ExamplePoolConfig_reuse() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	inTx := map[string]bool{}
	cfg := conns()
	cfg.Reuse = func(c string) bool { return !inTx[c] }
	pool, _ := client.NewPool(eng, cfg)
	ctx := context.Background()

	c, _ := pool.Get(ctx)
	inTx[c] = true // the caller returned early, mid-transaction
	pool.Put(c)
	c, _ = pool.Get(ctx)
	fmt.Println("using", c)
	pool.Put(c)
	fmt.Println("unreused", pool.Stats().Unreused)
	pool.Close(ctx)
	// Output:
	// closed conn-1
	// using conn-2
	// unreused 1
	// closed conn-2
}

// After a failover, Reset closes what the pool holds: the idle now, the
// lent as they come home; the next Get opens a fresh connection.
func ExamplePool_Reset() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	pool, _ := client.NewPool(eng, conns())
	ctx := context.Background()

	c, _ := pool.Get(ctx)
	pool.Reset() // c is lent: it is closed when it comes home
	pool.Put(c)
	c, _ = pool.Get(ctx)
	fmt.Println("using", c)
	pool.Put(c)
	fmt.Println("outdated", pool.Stats().Outdated)
	pool.Close(ctx)
	// Output:
	// closed conn-1
	// using conn-2
	// outdated 1
	// closed conn-2
}

// Check pings a connection that sat idle before Get lends it; a dead one is
// closed and the next one taken, and the caller sees no error.
func ExamplePoolConfig_check() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	cfg := conns()
	cfg.Check = func(ctx context.Context, c string) error {
		if c == "conn-1" {
			return errors.New("connection reset by peer") // the server dropped it
		}
		return nil
	}
	cfg.CheckIdle = 0 // check every one Get takes from the idle
	pool, _ := client.NewPool(eng, cfg)
	ctx := context.Background()

	c, _ := pool.Get(ctx) // opened: fresh ones are not checked
	pool.Put(c)
	c, err := pool.Get(ctx) // conn-1 fails its check: closed, and conn-2 opened
	fmt.Println("using", c, err)
	pool.Put(c)
	fmt.Println("check failures", pool.Stats().CheckFailures)
	pool.Close(ctx)
	// Output:
	// closed conn-1
	// using conn-2 <nil>
	// check failures 1
	// closed conn-2
}

// SetLimits resizes a running pool: the surplus idle are closed at once.
func ExamplePool_SetLimits() {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	pool, _ := client.NewPool(eng, conns())
	ctx := context.Background()

	a, _ := pool.Get(ctx)
	b, _ := pool.Get(ctx)
	pool.Put(a)
	pool.SetLimits(client.Limits{Size: 1, Idle: 1}) // two live for one place: conn-1, idle, goes (closed in the background)
	pool.Put(b)                                     // kept: one live now
	pool.Close(ctx)
	s := pool.Stats()
	fmt.Println("max", s.Max, "surplus", s.Surplus)
	// Output:
	// closed conn-1
	// closed conn-2
	// max 1 surplus 1
}

// LeakAfter reports a connection a caller forgot to put back, once, with
// the stack of its Get, through the engine's logger (engine.WithLogger);
// here the engine's clock is a test's, moved by hand.
func ExamplePoolConfig_leakAfter() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())
	cfg := conns()
	cfg.LeakAfter = time.Minute
	pool, _ := client.NewPool(eng, cfg)
	ctx := context.Background()

	c, _ := pool.Get(ctx) // and forgotten
	clock.Advance(time.Hour)
	fmt.Println("leaked", pool.Stats().Leaked)
	pool.Put(c)
	pool.Close(ctx)
	// Output:
	// leaked 1
	// closed conn-1
}
