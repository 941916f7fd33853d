package policy

import "time"

// Limits are the four numbers a pool holds itself to.
type Limits struct {
	Size int           // most live at once (idle, lent and being made); 0 is no limit
	Idle int           // most sitting idle; 0 is no limit
	Keep time.Duration // how long an idle one may sit; Forever is no limit
	Life time.Duration // how long one may live at all; Forever is no limit
}

// DefaultLimits is the preset.
var DefaultLimits = Limits{Size: 10, Idle: 10, Keep: 30 * time.Minute, Life: Forever}

// Verdict is what Take tells the caller to do.
type Verdict uint8

// The six verdicts.
const (
	Ready Verdict = iota
	Stale
	Make
	Wait
	Later
	Shed
)

// Taken is Take's answer.
type Taken[T any] struct {
	Verdict Verdict
	Item    T
	After   time.Duration
}

// Ward guards a pool's backend.
type Ward struct {
	Breaker *Breaker
	Bucket  *Bucket
	Backoff *Backoff
	Shedder *Shedder
}

// Pool is the bookkeeping of holding a limited number of things.
type Pool[T comparable] struct{}

// NewPool returns an empty pool.
func NewPool[T comparable](limits Limits, ward Ward) *Pool[T] { return &Pool[T]{} }

// Take decides.
func (p *Pool[T]) Take(now int64) Taken[T] { return Taken[T]{} }

// Made registers.
func (p *Pool[T]) Made(item T, now int64) {}

// Unmade frees.
func (p *Pool[T]) Unmade(now int64) {}

// Give returns.
func (p *Pool[T]) Give(item T, now int64) bool { return false }

// Drop forgets.
func (p *Pool[T]) Drop(item T) {}

// Evict retires.
func (p *Pool[T]) Evict(now int64) []T { return nil }

// Close empties.
func (p *Pool[T]) Close() []T { return nil }

// Live counts.
func (p *Pool[T]) Live() int { return 0 }

// Idle counts.
func (p *Pool[T]) Idle() int { return 0 }

// Busy counts.
func (p *Pool[T]) Busy() int { return 0 }
