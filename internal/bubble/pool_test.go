package bubble_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// conn is a resource that knows whether the pool closed it.
type conn struct {
	id     int64
	closed atomic.Bool
}

// TestPool: Get and Put hand resources over, a Get on a full pool waits
// until its deadline or a Put, and Keep closes what sat idle a minute.
func TestPool(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		ctx := context.Background()
		var opened atomic.Int64
		p, err := client.NewPool(eng, client.PoolConfig[*conn]{
			Open: func(context.Context) (*conn, error) {
				return &conn{id: opened.Add(1)}, nil
			},
			Close: func(c *conn) error {
				c.closed.Store(true)
				return nil
			},
			Limits: policy.Limits{Size: 2, Idle: 2, Keep: time.Minute, Life: policy.Forever},
		})
		must(t, err)
		a, err := p.Get(ctx)
		must(t, err)
		b, err := p.Get(ctx)
		must(t, err)

		full, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if got := took(func() { _, err = p.Get(full) }); got != time.Second || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get on a full pool = %v after %v, want the deadline after 1s", err, got)
		}

		got := make(chan *conn, 1)
		go func() {
			c, err := p.Get(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- c
		}()
		synctest.Wait() // the Get is parked
		must(t, p.Put(a))
		if c := <-got; c != a {
			t.Fatalf("a parked Get was handed conn %d, want the one Put, %d", c.id, a.id)
		}
		must(t, p.Put(a))
		must(t, p.Put(b))

		time.Sleep(59 * time.Second)
		synctest.Wait()
		if a.closed.Load() || b.closed.Load() || p.Stats().Idle != 2 {
			t.Fatalf("after 59s idle: closed %v %v, %d idle; want both kept", a.closed.Load(), b.closed.Load(), p.Stats().Idle)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !a.closed.Load() || !b.closed.Load() {
			t.Fatalf("after 61s idle: closed %v %v; Keep of 1m should have closed both", a.closed.Load(), b.closed.Load())
		}
		if s := p.Stats(); s.Idle != 0 || s.Evicted != 2 {
			t.Fatalf("after Keep: %d idle, %d evicted; want 0 and 2", s.Idle, s.Evicted)
		}
		if opened.Load() != 2 {
			t.Fatalf("%d opened, want 2", opened.Load())
		}
		must(t, p.Close(ctx))
	})
}
