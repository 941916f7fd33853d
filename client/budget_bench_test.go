package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// BenchmarkRetryBudget: Retry of a call that succeeds at once, alone and
// with a budget, on one goroutine and on many. The budget's cost on this
// path is one atomic add (Budget.First): no message, no clock reading, no
// allocation.
func BenchmarkRetryBudget(b *testing.B) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	eng := client.NewEngine()
	defer eng.Shutdown(ctx)
	budget, err := client.NewBudget(eng, client.BudgetConfig{})
	if err != nil {
		b.Fatal(err)
	}
	for _, side := range []struct {
		name string
		opts []client.RetryOption
	}{
		{"alone", nil},
		{"budget", []client.RetryOption{client.WithBudget(budget)}},
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
