package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// TestBreakerRefusalAllocatesNothing: once the ward's breaker refuses
// Opens to a dead backend, a Get it refuses allocates nothing, and
// neither does one of the few it lets through to find the backend still
// down: a server shedding load in an outage makes no garbage for it.
func TestBreakerRefusalAllocatesNothing(t *testing.T) {
	eng := engine.New(engine.WithClock(vclock.NewVirtual()), engine.WithHeatEvery(0))
	t.Cleanup(func() {
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	down := errors.New("backend down")
	p, err := client.NewPool(eng, client.PoolConfig[*int]{
		Open:   func(context.Context) (*int, error) { return nil, down },
		Limits: policy.DefaultLimits,
		Ward:   policy.Ward{Breaker: policy.Throttle{K: 2, Period: time.Minute}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 100 { // enough failures for the breaker to refuse most
		_, _ = p.Get(ctx)
	}
	refused, failed := 0, 0
	allocs := testing.AllocsPerRun(1000, func() {
		switch _, err := p.Get(ctx); {
		case errors.Is(err, client.ErrBreaker):
			refused++
		case errors.Is(err, down):
			failed++
		default:
			t.Errorf("Get from a dead backend: %v", err)
		}
	})
	if refused < 500 {
		t.Fatalf("the breaker refused %d Gets of %d, want most", refused, refused+failed)
	}
	if allocs != 0 {
		t.Fatalf("%.2f allocations per Get (%d refused, %d failed), want none", allocs, refused, failed)
	}
}
