package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// ErrBudget says a retry was refused by its retry budget: retries were
// already the share of first attempts the budget allows. Retry returns it
// in a *RetryError with the last failure, so errors.Is finds both.
var ErrBudget = errors.New("moonpool: retry budget spent")

// BudgetConfig sets a Budget's numbers. The zero BudgetConfig is the
// defaults: a tenth of first attempts, at least one a second, over ten
// seconds.
type BudgetConfig struct {
	// Ratio is the share of first attempts that may be retried or hedged.
	// Zero or less, or NaN, is 0.1 (gRFC A6's tokenRatio).
	Ratio float64
	// MinPerSecond lets a quiet client retry a little: the budget always
	// allows MinPerSecond × Window over the window. Zero is 1; below
	// zero is none.
	MinPerSecond float64
	// Window is how far back the budget counts. Zero or less is ten
	// seconds (Finagle's). The latencies HedgeDelay reads are counted
	// over the same window.
	Window time.Duration
}

// Budget is a retry budget shared by many callers. It lets retries and
// hedges through while, over the last Window, they stay within
// max(Ratio × first attempts, MinPerSecond × Window). So a backend that
// fails sees at most Ratio more requests than callers send, whatever
// their Attempts say: with the defaults, an outage costs it at most 1.1
// attempts per request once traffic passes ten requests a second.
//
// Give it to Retry with WithBudget, or to the HTTP and gRPC clients of
// moonhttp and moongrpc. A refused retry returns the last error at once.
// A refused hedge is not sent.
//
// A Budget is safe for concurrent use. A nil *Budget bounds nothing:
// Retry and Hedge say yes. Build one with NewBudget.
type Budget struct {
	eng    *engine.Engine
	mu     sync.Mutex
	b      *policy.Budget
	q      *policy.Quantile
	closed atomic.Bool
	counts budgetCounts
}

// budgetCounts are a Budget's counts, ever.
type budgetCounts struct {
	firsts, retries, hedges, refusedRetries, refusedHedges atomic.Int64
}

// BudgetStats are a Budget's counts since NewBudget.
type BudgetStats struct {
	Firsts         int64 // first attempts counted by First
	Retries        int64 // retries allowed
	Hedges         int64 // hedges allowed
	RefusedRetries int64 // retries refused
	RefusedHedges  int64 // hedges refused
}

// NewBudget starts a retry budget on eng, reading cfg as BudgetConfig
// says. It returns an error if eng is nil or shut down.
func NewBudget(eng *Engine, cfg BudgetConfig) (*Budget, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewBudget: nil engine")
	}
	ratio, floor, window := cfg.numbers()
	return &Budget{
		eng: eng,
		b:   policy.NewBudget(ratio, floor, window),
		q:   policy.NewQuantile(window),
	}, nil
}

// numbers are the policy's numbers for c, as BudgetConfig reads them.
func (c BudgetConfig) numbers() (ratio, minPerSecond float64, window time.Duration) {
	ratio, minPerSecond, window = c.Ratio, c.MinPerSecond, c.Window
	if !(ratio > 0) {
		ratio = policy.DefaultBudgetRatio
	}
	switch {
	case minPerSecond == 0:
		minPerSecond = policy.DefaultBudgetMin
	case !(minPerSecond > 0):
		minPerSecond = 0
	}
	if window <= 0 {
		window = policy.DefaultBudgetWindow
	}
	return ratio, minPerSecond, window
}

// First counts one first attempt. Call it once per request, before or as
// its first attempt goes out.
func (b *Budget) First() {
	if b == nil || b.closed.Load() {
		return
	}
	b.counts.firsts.Add(1)
	b.mu.Lock()
	b.b.First(b.eng.Now(), 1)
	b.mu.Unlock()
}

// Retry is whether a retry may go now, counting it if so.
func (b *Budget) Retry() bool {
	if b == nil {
		return true
	}
	ok := b.spend()
	if ok {
		b.counts.retries.Add(1)
	} else {
		b.counts.refusedRetries.Add(1)
	}
	return ok
}

// Hedge is whether a hedge may go now, counting it if so.
func (b *Budget) Hedge() bool {
	if b == nil {
		return true
	}
	ok := b.spend()
	if ok {
		b.counts.hedges.Add(1)
	} else {
		b.counts.refusedHedges.Add(1)
	}
	return ok
}

func (b *Budget) spend() bool {
	if b.closed.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Spend(b.eng.Now())
}

// Observe counts the latency of a first attempt, for HedgeDelay.
func (b *Budget) Observe(d time.Duration) {
	if b == nil || b.closed.Load() {
		return
	}
	b.mu.Lock()
	b.q.Add(d, b.eng.Now())
	b.mu.Unlock()
}

// HedgeDelay is the p-quantile of the latencies Observe counted over the
// window.
func (b *Budget) HedgeDelay(p float64) (time.Duration, bool) {
	if b == nil || b.closed.Load() {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.q.At(p, b.eng.Now())
}

// Stats are the budget's counts since NewBudget.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{}
	}
	return BudgetStats{
		Firsts:         b.counts.firsts.Load(),
		Retries:        b.counts.retries.Load(),
		Hedges:         b.counts.hedges.Load(),
		RefusedRetries: b.counts.refusedRetries.Load(),
		RefusedHedges:  b.counts.refusedHedges.Load(),
	}
}

// Close stops the budget. Afterwards Retry and Hedge say no.
func (b *Budget) Close(ctx context.Context) error {
	if b == nil {
		return nil
	}
	if ctx == nil {
		return fmt.Errorf("moonpool: Budget.Close: %w", errNilContext)
	}
	b.closed.Store(true)
	return nil
}
