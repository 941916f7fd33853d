package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moontest"
)

// BenchmarkRetryBudget: Retry of a call that succeeds at once, alone and
// with a budget, on one goroutine and on many. A budget that counts first
// attempts costs one atomic add (Budget.First); a quiet one, no retry
// asked for a window, one atomic load. No message, no clock reading, no
// allocation.
func BenchmarkRetryBudget(b *testing.B) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(ctx)
	counting, err := client.NewBudget(eng, client.BudgetConfig{})
	if err != nil {
		b.Fatal(err)
	}
	quiet, err := client.NewBudget(eng, client.BudgetConfig{Window: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	quiet.First() // wakes the actor, which stops the count
	quiet.Stats()
	if quiet.First(); quiet.Stats().Firsts != 1 {
		b.Fatal("the quiet budget counts")
	}
	for _, side := range []struct {
		name string
		opts []client.RetryOption
	}{
		{"alone", nil},
		{"quiet", []client.RetryOption{client.WithBudget(quiet)}},
		{"counting", []client.RetryOption{client.WithBudget(counting)}},
	} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = client.Retry(ctx, client.DefaultBackoff, ok, side.opts...)
			}
		})
		b.Run(side.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = client.Retry(ctx, client.DefaultBackoff, ok, side.opts...)
				}
			})
		})
	}
}

// BenchmarkBudget: the budget's own calls. First and Observe are atomic
// adds; HedgeDelay reads what the actor published; Retry asks the actor.
func BenchmarkBudget(b *testing.B) {
	ctx := context.Background()
	eng := client.NewEngine()
	defer eng.Shutdown(ctx)
	budget, err := client.NewBudget(eng, client.BudgetConfig{Ratio: 1e9})
	if err != nil {
		b.Fatal(err)
	}
	for range 1000 {
		budget.First()
		budget.Observe(time.Millisecond)
	}
	budget.HedgeDelay(0.95) // published from here on
	b.Run("First", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			budget.First()
		}
	})
	b.Run("Observe", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			budget.Observe(time.Millisecond)
		}
	})
	b.Run("HedgeDelay", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			budget.HedgeDelay(0.95)
		}
	})
	b.Run("Retry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			budget.Retry()
		}
	})
}
