// Package hedgetest checks when the clients of moonhttp and moongrpc send
// their hedges, on a virtual clock whose timers ring late.
package hedgetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// Backend answers on a virtual clock. An attempt takes 20ms, plus how
// late the clock's timers ring. While it is slow, a request's
// first attempt never answers, until it is cancelled, and its hedge
// answers at once. It says when each attempt of the current request was
// sent.
type Backend struct {
	clock *vclock.Virtual
	mu    sync.Mutex
	slow  bool
	at    []int64
}

// Attempt is one attempt at the backend: nil once it answers, ctx's
// error if ctx ends first.
func (k *Backend) Attempt(ctx context.Context) error {
	k.mu.Lock()
	k.at = append(k.at, k.clock.Now())
	n, slow := len(k.at), k.slow
	k.mu.Unlock()
	switch {
	case slow && n == 1:
		<-ctx.Done()
		return ctx.Err()
	case !slow:
		ring := make(chan struct{})
		k.clock.AfterFunc(20*time.Millisecond, func() { close(ring) })
		select {
		case <-ring:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// start begins a request, slow or not.
func (k *Backend) start(slow bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.slow, k.at = slow, nil
}

// sent is when each attempt of the current request went out.
func (k *Backend) sent() []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.at)
}

// Client builds the client under test on eng, hedging by h under b, in
// front of k: it returns one request, which fails the test if it does
// not succeed.
type Client func(t *testing.T, eng *client.Engine, b *client.Budget, h *client.Hedge, k *Backend) (request func())

// Lead checks, on a clock whose timers ring 700µs late, that the hedges
// of a fixed Delay learn to go out on time, while hedges past a latency
// quantile go out as late as their timers ring, every time: the
// quantile is the share of requests hedged, and alarms set early would
// hedge more.
func Lead(t *testing.T, c Client) {
	const late = 700 * time.Microsecond
	for _, tc := range []struct {
		name   string
		hedge  client.Hedge
		lo, hi time.Duration // how long after its due time the last hedge goes out
		every  bool          // every hedge, not only the last
	}{
		{"fixed delay", client.Hedge{Delay: 30 * time.Millisecond}, -20 * time.Microsecond, 20 * time.Microsecond, false},
		{"quantile", client.Hedge{Quantile: 0.9}, late, late, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := vclock.NewVirtual(vclock.WithLateness(late))
				eng := client.NewEngine(client.WithClock(clock))
				defer eng.Shutdown(context.Background())
				b, err := client.NewBudget(eng, client.BudgetConfig{Ratio: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close(context.Background())
				k := &Backend{clock: clock}
				request := c(t, eng, b, &tc.hedge, k)
				send := func(slow bool) []int64 {
					k.start(slow)
					done := make(chan struct{})
					go func() {
						defer close(done)
						request()
					}()
					// A request sets a timer or two; a thousand means
					// it never ends.
					for range 1000 {
						synctest.Wait()
						select {
						case <-done:
							return k.sent()
						default:
						}
						if _, ok := clock.AdvanceNext(); !ok {
							t.Fatal("a request waits on no timer")
						}
					}
					t.Fatal("a request outlasted a thousand timers")
					return nil
				}
				// Answered in 20ms (and the timer's lateness), unhedged:
				// latencies for the quantile.
				for range 100 {
					if s := send(false); len(s) != 1 {
						t.Fatalf("a fast request was sent %d times", len(s))
					}
				}
				var off time.Duration
				for i := range 40 {
					due, ok := tc.hedge.DelayFrom(b) // as the request reads it
					if !ok {
						t.Fatal("no hedge delay after 100 requests")
					}
					s := send(true)
					if len(s) != 2 {
						t.Fatalf("slow request %d was sent %d times, want once and a hedge", i, len(s))
					}
					off = time.Duration(s[1]-s[0]) - due
					if tc.every && (off < tc.lo || off > tc.hi) {
						t.Fatalf("hedge %d went out %v after its due time, want %v to %v", i, off, tc.lo, tc.hi)
					}
				}
				if off < tc.lo || off > tc.hi {
					t.Fatalf("the last hedge went out %v after its due time, want %v to %v", off, tc.lo, tc.hi)
				}
			})
		})
	}
}
