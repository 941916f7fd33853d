package bubble_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// TestBudget: in a bubble, forty callers each send a request a second to
// a backend that is down for a minute, each request allowed four attempts
// a second apart. The budget holds them to 1.1 attempts per request, and
// once the window has passed it is back to its floor.
func TestBudget(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		budget, err := client.NewBudget(eng, client.BudgetConfig{})
		must(t, err)
		backoff := policy.Backoff{Base: time.Second, Factor: 1, Attempts: 4, Jitter: policy.Rigid}
		var mu sync.Mutex
		requests, attempts, refused := 0, 0, 0
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				for range 60 {
					start := time.Now()
					err := client.Retry(context.Background(), backoff, func(context.Context) error {
						mu.Lock()
						attempts++
						mu.Unlock()
						return errFlaky
					}, client.WithBudget(budget))
					mu.Lock()
					requests++
					if errors.Is(err, client.ErrBudget) && errors.Is(err, errFlaky) {
						refused++
					}
					mu.Unlock()
					time.Sleep(time.Second - time.Since(start)%time.Second)
				}
			})
		}
		wg.Wait()
		per := float64(attempts) / float64(requests)
		if per > 1.1 {
			t.Fatalf("%d requests made %d attempts: %.3f per request, want at most 1.1", requests, attempts, per)
		}
		if refused < requests/2 {
			t.Fatalf("%d of %d requests were refused a retry, want most", refused, requests)
		}
		if s := budget.Stats(); s.Firsts != int64(requests) || s.Retries != int64(attempts-requests) {
			t.Fatalf("Stats = %+v after %d requests and %d attempts", s, requests, attempts)
		}
		time.Sleep(11 * time.Second)
		if s := budget.Stats(); s.Left != 10 {
			t.Fatalf("a window after the traffic, Left = %d, want the floor of 10", s.Left)
		}
		for range 100 {
			budget.Observe(5 * time.Millisecond)
		}
		if d, ok := budget.HedgeDelay(0.9); !ok || d < 4*time.Millisecond || d > 6*time.Millisecond {
			t.Fatalf("HedgeDelay(0.9) = %v, %v; want about 5ms", d, ok)
		}
		must(t, budget.Close(context.Background()))
	})
}
