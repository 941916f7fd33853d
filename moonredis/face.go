package moonredis

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// local is the in-process limit FailLocal answers from: a
// client.KeyedBucket or client.KeyedWindow, with n for a bucket.
type local interface {
	client.KeyedLimiter
	tryN(key string, n float64) client.Decision
	waitN(ctx context.Context, key string, n float64) error
}

// try asks Redis for n of key without waiting: the Decision, from one
// call, or the FailMode's.
func (l *limiter) try(key string, n float64, fb local) client.Decision {
	v := l.now(key, n, false)
	switch {
	case v.closed:
		return client.Decision{Wait: client.Never, Closed: true}
	case v.fallback:
		l.stats.fallbacks.Add(1)
		switch l.cfg.FailMode {
		case FailOpen:
			return client.Decision{OK: true}
		case FailLocal:
			return fb.tryN(key, n)
		}
		return client.Decision{Wait: UnavailableWait}
	case v.ok && l.heldLocal(fb):
		if d := fb.tryN(key, n); !d.OK {
			l.stats.refused.Add(1)
			return d
		}
		fallthrough
	case v.ok:
		l.stats.admitted.Add(1)
		return client.Decision{OK: true, Left: whole(v.left)}
	}
	l.stats.refused.Add(1)
	return client.Decision{Wait: max(v.wait, time.Microsecond), Left: whole(v.left)}
}

// heldLocal reports whether what Redis lets through must pass the local
// share too. Under FailLocal it does from a failed call on: while the
// breaker is tripped, then for a recovery span after it closes or after
// the last failed call. Meanwhile some requests, here or in other
// processes, are answered by local shares, and Redis counts none of
// them. Holding every process to its share keeps the fleet within the
// limit plus the one burst a share or Redis may start with (see the
// package documentation). The limiter's actor sets the span. A caller
// that finds it past clears it, so the usual case is one atomic load.
func (l *limiter) heldLocal(fb local) bool {
	if fb == nil {
		return false
	}
	until := l.held.Load()
	if until == 0 {
		return false
	}
	if until == math.MaxInt64 || l.eng.Now() < until {
		return true
	}
	l.held.CompareAndSwap(until, 0) // unless the actor set it again meanwhile
	return false
}

// wait asks Redis for a slot for n of key no later than ctx's deadline,
// then sleeps until the slot on the engine's clock.
func (l *limiter) wait(ctx context.Context, key string, n float64, fb local) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("moonredis: wait: %w", err)
	}
	if l.closed.Load() {
		return client.ErrClosed
	}
	now := l.eng.Now()
	deadline := deadlineOf(ctx, now)
	if deadline != 0 && deadline < now {
		return fmt.Errorf("moonredis: wait: %w", context.DeadlineExceeded)
	}
	v, answered := l.await(ctx, key, n, deadline)
	switch {
	case !answered:
		// The call goes on; if it takes a slot, the slot goes unused:
		// fewer let through, never more.
		return fmt.Errorf("moonredis: wait: %w", ctx.Err())
	case v.closed:
		return client.ErrClosed
	case v.fallback:
		l.stats.fallbacks.Add(1)
		switch l.cfg.FailMode {
		case FailOpen:
			return nil
		case FailLocal:
			return fb.waitN(ctx, key, n)
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, v.cause)
	case !v.ok:
		l.stats.refused.Add(1)
		return &client.WaitError{Wait: v.wait}
	case l.heldLocal(fb):
		// Redis gave a slot; the local share must give one too. The
		// Redis slot goes unused if it does not: fewer, never more.
		if err := fb.waitN(ctx, key, n); err != nil {
			l.stats.refused.Add(1)
			return err
		}
	}
	l.stats.admitted.Add(1)
	// The slot is v.wait after Redis read its clock, which was before the
	// answer landed: waking v.wait after the landing is late by the way
	// back, never early. Every answer of a batch lands at one instant, and
	// a key's next batch later, so a key's waiters still wake in order.
	// The script kept the slot within the deadline as seen from the
	// sending; seen from the landing it may fall past it, and then the
	// caller cannot have it in time.
	wake := v.landed + int64(v.wait)
	if deadline != 0 && wake > deadline {
		return fmt.Errorf("moonredis: wait: its slot came back too late for ctx: %w", context.DeadlineExceeded)
	}
	d := time.Duration(wake - l.eng.Now())
	if d <= 0 {
		return nil
	}
	if err := l.eng.Sleep(ctx, d); err != nil {
		return fmt.Errorf("moonredis: wait: %w", err)
	}
	return nil
}

// look asks what one request of key would face now, taking nothing.
func (l *limiter) look(key string) (verdict, bool) {
	v := l.now(key, 1, true)
	if v.fallback {
		l.stats.fallbacks.Add(1)
	}
	return v, !v.closed && !v.fallback
}

// delay is look's wait, or the FailMode's.
func (l *limiter) delay(key string, fb local) time.Duration {
	v, ok := l.look(key)
	switch {
	case ok:
		return v.wait
	case v.closed:
		return client.Never
	case l.cfg.FailMode == FailOpen:
		return 0
	case l.cfg.FailMode == FailLocal:
		return fb.Delay(key)
	}
	return UnavailableWait
}

// close stops the actor, then the local limit.
func (l *limiter) close(ctx context.Context, fb local) error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := l.ref.Stop(ctx)
	if fb != nil {
		if err2 := fb.Close(ctx); err == nil {
			err = err2
		}
	}
	return err
}

// whole is x rounded down to an int, 0 for NaN or less.
func whole(x float64) int {
	if !(x > 0) {
		return 0
	}
	if x >= 1<<62 {
		return 1 << 62
	}
	return int(x)
}
