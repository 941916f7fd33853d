package client

import (
	"sync"
	"time"

	"github.com/moonpool-go/moonpool/engine"
)

// FollowLimit keeps pool's Size at g's limit, with limits as the rest of
// the pool's numbers and limits.Size as the ceiling (0: none). Put the
// gate in front of the pool: Enter, then Get, then Put, then Leave. The
// gate then finds how many connections at once the backend can use, and
// the pool holds no more than that: when the limit falls, the surplus
// idle resources are closed at once and the surplus lent ones as they
// come home (see Pool.SetLimits). So a pool of PostgreSQL connections
// stops adding connections when more stop helping.
//
// FollowLimit reads the gate's limit and sets the pool's limits before it
// returns: a round trip to each actor, which waits for neither callers
// nor resources. It then looks at the gate's limit every every (zero or
// less: 100 ms) on the engine's clock, and sets the pool's limits again
// when the limit moved. Call the returned stop to end it; it also ends by
// itself at the first look after the gate or the pool is closed. A nil g
// or pool follows nothing.
func FollowLimit[T comparable](g *AdaptiveGate, pool *Pool[T], limits Limits, every time.Duration) (stop func()) {
	if g == nil || pool == nil {
		return func() {}
	}
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	f := &follower[T]{g: g, pool: pool, limits: limits, every: every, clock: g.clock}
	f.look()
	return f.stop
}

// follower is one FollowLimit: a timer on the engine's clock that sets
// the pool's limits from the gate's.
type follower[T comparable] struct {
	g      *AdaptiveGate
	pool   *Pool[T]
	limits Limits
	every  time.Duration
	clock  engine.Clock

	mu      sync.Mutex // guards what follows; a look runs on a timer's goroutine
	timer   engine.Timer
	size    int // the Size set last; 0 before any
	stopped bool
}

// look sets the pool's limits if the gate's limit moved, and sets the
// timer for the next look, unless the gate, the pool or the caller ended
// it.
func (f *follower[T]) look() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped || f.pool.closing.Load() {
		f.stopped = true
		return
	}
	limit := f.g.Stats().Limit
	if limit == 0 { // the gate is closed
		f.stopped = true
		return
	}
	size := limit
	if f.limits.Size > 0 {
		size = min(size, f.limits.Size)
	}
	if size != f.size {
		l := f.limits
		l.Size = size
		if err := f.pool.SetLimits(l); err != nil { // closed
			f.stopped = true
			return
		}
		f.size = size
	}
	f.timer = f.clock.AfterFunc(f.every, f.look)
}

// stop ends the looks. A look under way finishes first.
func (f *follower[T]) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.timer != nil {
		f.timer.Stop()
	}
}
