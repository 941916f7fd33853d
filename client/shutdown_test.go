package client

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// TestShutdownBoundsAPoolClose: while a pool's Close with no deadline waits
// for a lent resource, a Shutdown whose ctx has ended stops the pool's
// actor anyway and returns ctx's error; the waiting Close then returns
// too, since the actor answers its Drained as it stops; and the resource
// still lent is closed when it comes home, once.
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

// TestNewRacingShutdown: pools, limiters and gates made on other goroutines
// while Shutdown runs either fail (the engine is shut down) or are closed
// by it; nothing crashes and nothing is left running.
func TestNewRacingShutdown(t *testing.T) {
	net, cancelNet := context.WithTimeout(context.Background(), safety)
	defer cancelNet()
	for round := range 10 {
		eng := engine.New(engine.WithHeatEvery(0))
		type made struct {
			allow func() bool // false once closed
			get   func() error
		}
		makers := []func() (made, error){
			func() (made, error) {
				b, err := NewBucket(eng, 10, 10)
				if err != nil {
					return made{}, err
				}
				return made{allow: b.Allow}, nil
			},
			func() (made, error) {
				k, err := NewKeyedWindow(eng, 10, time.Second)
				if err != nil {
					return made{}, err
				}
				return made{allow: func() bool { return k.Allow("k") }}, nil
			},
			func() (made, error) {
				g, err := NewGate(eng, 10)
				if err != nil {
					return made{}, err
				}
				return made{allow: g.Enter}, nil
			},
			func() (made, error) {
				p, err := NewPool(eng, PoolConfig[*int]{Open: func(context.Context) (*int, error) { return new(int), nil }})
				if err != nil {
					return made{}, err
				}
				return made{get: func() error { _, err := p.Get(context.Background()); return err }}, nil
			},
		}
		var count atomic.Int64
		results := make(chan []made, len(makers))
		for _, mk := range makers {
			go func() {
				var out []made
				for {
					m, err := mk()
					if err != nil {
						if !errors.Is(err, engine.ErrShutdown) {
							t.Errorf("round %d: made with %v, want ErrShutdown", round, err)
						}
						break
					}
					out = append(out, m)
					count.Add(1)
				}
				results <- out
			}()
		}
		for count.Load() < 8 {
			if net.Err() != nil {
				_ = eng.Shutdown(context.Background()) // the makers end on ErrShutdown
				t.Fatalf("round %d: gave up waiting for eight limiters, gates and pools (made %d)", round, count.Load())
			}
			runtime.Gosched()
		}
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Fatalf("round %d: Shutdown: %v", round, err)
		}
		for range makers {
			var out []made
			select {
			case out = <-results:
			case <-net.Done():
				t.Fatalf("round %d: a maker never saw ErrShutdown", round)
			}
			for _, m := range out {
				if m.allow != nil && m.allow() {
					t.Fatalf("round %d: a limiter made during Shutdown still allows", round)
				}
				if m.get != nil {
					if err := m.get(); !errors.Is(err, ErrClosed) {
						t.Fatalf("round %d: a pool made during Shutdown: Get = %v, want ErrClosed", round, err)
					}
				}
			}
		}
	}
}
