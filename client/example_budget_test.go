package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moontest"
)

// A backend is down, and a thousand requests each may make four attempts.
// Without a budget they would make 4,000. Under the default budget, a
// tenth of first attempts may be retried: 1,100 attempts in all. A
// refused retry returns the last error at once, with ErrBudget.
func ExampleBudget() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())

	budget, _ := client.NewBudget(eng, client.BudgetConfig{}) // 10% over 10s, at least 1/s
	defer budget.Close(context.Background())

	backoff := client.Backoff{Attempts: 4} // retry at once, for the example
	errDown := errors.New("503 service unavailable")
	attempts := 0
	var err error
	for range 1000 {
		err = client.Retry(context.Background(), backoff, func(context.Context) error {
			attempts++
			return errDown
		}, client.WithBudget(budget))
	}
	fmt.Println(attempts, "attempts")
	fmt.Println(err)
	fmt.Println(errors.Is(err, client.ErrBudget), errors.Is(err, errDown))
	s := budget.Stats()
	fmt.Printf("firsts %d, retries %d, refused %d\n", s.Firsts, s.Retries, s.RefusedRetries)
	// Output:
	// 1100 attempts
	// moonpool: retry: stopped (moonpool: retry budget spent) after 2 attempts: 503 service unavailable
	// true true
	// firsts 1000, retries 100, refused 997
}

// The hedge delay is a quantile of the latencies observed: here the 95th
// percentile of a hundred requests, five of them slow.
func ExampleBudget_HedgeDelay() {
	eng := client.NewEngine(client.WithClock(moontest.NewClock(nil)))
	defer eng.Shutdown(context.Background())
	budget, _ := client.NewBudget(eng, client.BudgetConfig{})

	for i := range 100 {
		d := 20 * time.Millisecond
		if i%20 == 0 {
			d = 400 * time.Millisecond
		}
		budget.Observe(d)
	}
	d, ok := budget.HedgeDelay(0.95)
	fmt.Println(d.Round(time.Millisecond), ok)
	d, ok = budget.HedgeDelay(0.99)
	fmt.Println(d, ok)
	// Output:
	// 20ms true
	// 0s false
}
