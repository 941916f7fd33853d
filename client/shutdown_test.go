package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// TestShutdownBoundsAPoolClose: while a pool's Close with no deadline waits
// for a lent resource, a Shutdown whose ctx has ended stops the pool's
// actor anyway and returns ctx's error; the waiting Close then returns
// too, since the actor answers its Drained as it stops; and the resource
// still lent is closed when it comes home, once. (Issue 9, defect 6.)
func TestShutdownBoundsAPoolClose(t *testing.T) {
	clock := vclock.NewVirtual()
	eng := engine.New(engine.WithClock(clock), engine.WithHeatEvery(0))
	var made, closed atomic.Int64
	draining := make(chan struct{}, 8)
	p, err := NewPool(eng, PoolConfig[*int]{
		Open: func(context.Context) (*int, error) {
			n := int(made.Add(1))
			return &n, nil
		},
		Close: func(*int) error {
			closed.Add(1)
			draining <- struct{}{}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	net, cancelNet := context.WithTimeout(context.Background(), safety)
	defer cancelNet()
	lent, err := p.Get(net)
	if err != nil {
		t.Fatal(err)
	}
	idle, err := p.Get(net)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Put(idle); err != nil {
		t.Fatal(err)
	}

	first := make(chan error, 1)
	go func() { first <- p.Close(context.Background()) }()
	select {
	case <-draining: // Close has begun: it closed the idle one
	case <-net.Done():
		t.Fatal("step 1: Close never closed the idle resource")
	}

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := eng.Shutdown(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("step 2: Shutdown with its ctx ended = %v, want context.Canceled", err)
	}
	if !p.ref.Stopped() {
		t.Fatal("step 3: the pool's actor outlived Shutdown")
	}
	select {
	case err := <-first:
		t.Logf("the waiting Close returned %v", err)
	case <-net.Done():
		t.Fatal("step 4: the waiting Close never returned")
	}
	if err := p.Put(lent); err != nil {
		t.Fatalf("step 5: Put after Shutdown = %v", err)
	}
	if got, want := closed.Load(), made.Load(); got != want {
		t.Fatalf("step 6: %d closed of %d made", got, want)
	}
	if _, err := p.Get(net); !errors.Is(err, ErrClosed) {
		t.Fatalf("step 7: Get after Shutdown = %v, want ErrClosed", err)
	}
}
