package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/policy"
)

// quietConns is a pool config of fake connections that close silently.
func quietConns(size int) client.PoolConfig[string] {
	n := 0
	return client.PoolConfig[string]{
		Open: func(ctx context.Context) (string, error) {
			n++
			return fmt.Sprintf("conn-%d", n), nil
		},
		Close:  func(string) error { return nil },
		Limits: policy.Limits{Size: size},
	}
}

// lendable is how many resources pool lends at once now: TryGet until it
// says no, then Put them all back.
func lendable(t *testing.T, pool *client.Pool[string]) int {
	t.Helper()
	var got []string
	for {
		c, err := pool.TryGet(context.Background())
		if errors.Is(err, client.ErrNoneIdle) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
		if len(got) > 100 {
			t.Fatal("more than 100 lent")
		}
	}
	for _, c := range got {
		if err := pool.Put(c); err != nil {
			t.Fatal(err)
		}
	}
	return len(got)
}

// TestFollowLimit: a pool that follows a gate lends as many as the gate's
// limit, never more than its own Size, and stops following when told, or
// when the gate closes.
func TestFollowLimit(t *testing.T) {
	for _, tc := range []struct {
		limit, ceiling, want int
	}{
		{3, 10, 3},  // the limit, under the ceiling
		{20, 5, 5},  // the ceiling
		{20, 0, 20}, // no ceiling
	} {
		t.Run(fmt.Sprintf("limit %d ceiling %d", tc.limit, tc.ceiling), func(t *testing.T) {
			eng, clock := adaptiveEngine(t)
			g := fixedGate(t, eng, tc.limit, 0)
			pool, err := client.NewPool(eng, quietConns(10))
			if err != nil {
				t.Fatal(err)
			}
			stop := client.FollowLimit(g, pool, policy.Limits{Size: tc.ceiling}, 50*time.Millisecond)
			if n := lendable(t, pool); n != tc.want {
				t.Fatalf("%d lent at once, want %d", n, tc.want)
			}
			clock.Advance(time.Second) // looks again, changes nothing
			if n := lendable(t, pool); n != tc.want {
				t.Fatalf("%d lent at once after a second, want %d", n, tc.want)
			}
			stop()
			stop() // a second stop does nothing
			if err := pool.SetLimits(policy.Limits{Size: 7}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second) // stopped: the pool keeps its own
			if n := lendable(t, pool); n != 7 {
				t.Fatalf("%d lent at once after stop, want 7", n)
			}
		})
	}
}

// TestFollowLimitEndsWithTheGate: once the gate is closed, the next look
// ends the following and leaves the pool's limits as they were.
func TestFollowLimitEndsWithTheGate(t *testing.T) {
	eng, clock := adaptiveEngine(t)
	g := fixedGate(t, eng, 3, 0)
	pool, err := client.NewPool(eng, quietConns(10))
	if err != nil {
		t.Fatal(err)
	}
	client.FollowLimit(g, pool, policy.Limits{}, 50*time.Millisecond)
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if n := lendable(t, pool); n != 3 {
		t.Fatalf("%d lent at once, want 3", n)
	}
	if clock.Pending() != 0 {
		t.Fatalf("%d timers pending after the gate closed", clock.Pending())
	}
	stop := client.FollowLimit[string](nil, pool, policy.Limits{}, 0)
	stop()
}

// TestFollowLimitFalls: a gate in front of a dependency whose knee is 3
// brings its limit down from 10, and the pool that follows it lends no
// more than the limit.
func TestFollowLimitFalls(t *testing.T) {
	eng, clock := adaptiveEngine(t)
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Start: 10, Queue: -1})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := client.NewPool(eng, quietConns(10))
	if err != nil {
		t.Fatal(err)
	}
	defer client.FollowLimit(g, pool, policy.Limits{Size: 10}, 50*time.Millisecond)()
	if n := lendable(t, pool); n != 10 {
		t.Fatalf("%d lent at once at the start, want 10", n)
	}
	kneeLoad(t, g, clock, 3, 10*time.Millisecond, 600, 5*time.Second)
	clock.Advance(100 * time.Millisecond) // a look after the last move
	limit := g.Stats().Limit
	if limit > 6 {
		t.Fatalf("limit %d for a knee of 3", limit)
	}
	if n := lendable(t, pool); n != limit {
		t.Fatalf("%d lent at once, want the limit %d", n, limit)
	}
}

// TestFollowLimitInBubble: following works inside a testing/synctest
// bubble, on the bubble's clock, and ends with the engine.
func TestFollowLimitInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := client.NewEngine()
		g := fixedGate(t, eng, 3, 0)
		pool, err := client.NewPool(eng, quietConns(10))
		if err != nil {
			t.Fatal(err)
		}
		client.FollowLimit(g, pool, policy.Limits{Size: 10}, time.Second)
		if n := lendable(t, pool); n != 3 {
			t.Fatalf("%d lent at once, want 3", n)
		}
		_ = eng.Sleep(context.Background(), time.Hour) // an hour of looks, in no real time
		if n := lendable(t, pool); n != 3 {
			t.Fatalf("%d lent at once after an hour, want 3", n)
		}
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-time.After(2 * time.Second) // the bubble's clock: the next look finds the gate gone and ends
	})
}

// TestFollowLimitEndsWithThePool: with a limit that never moves, closing
// the pool still ends the following: no timer is left on the clock.
func TestFollowLimitEndsWithThePool(t *testing.T) {
	eng, clock := adaptiveEngine(t)
	g := fixedGate(t, eng, 3, 0)
	pool, err := client.NewPool(eng, quietConns(10))
	if err != nil {
		t.Fatal(err)
	}
	client.FollowLimit(g, pool, policy.Limits{}, 50*time.Millisecond)
	if err := pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if clock.Pending() != 0 {
		t.Fatalf("%d timers pending after the pool closed", clock.Pending())
	}
}
