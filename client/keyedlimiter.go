package client

import (
	"context"
	"time"
)

// KeyedLimiter is a limit per key, as a handler or a middleware uses one,
// whether it lives in this process (KeyedBucket, KeyedWindow) or in a store
// shared by many (moonredis.Bucket and moonredis.Window). Code that takes a
// KeyedLimiter does not care which it has.
//
// What each method promises, whatever the implementation:
//   - Allow never blocks on the limiter's callers (a shared store's may wait
//     for its round trip, bounded by its timeout), takes what one request
//     costs if it is there, and says whether it did. It says no while
//     callers of the same key wait in line, and after Close.
//   - Try is Allow with the whole answer (see Decision) from one decision,
//     for a 429 and its Retry-After: a refusal's Wait is never 0. After
//     Close its refusal has Closed set.
//   - Wait blocks until a request for key is let through for the caller, in
//     line behind the callers of the same key in this process, or ctx is
//     done. It never sleeps towards a deadline it cannot meet: it returns a
//     *WaitError (ErrExceedsDeadline) at once instead. After Close it
//     returns ErrClosed.
//   - Delay is how long a caller wanting one request would wait now: 0 when
//     it would pass, policy.Never when it never would or after Close. It
//     takes nothing.
//   - Close stops the limiter within ctx; a second Close returns nil.
//
// Every method is safe for concurrent use.
type KeyedLimiter interface {
	Allow(key string) bool
	Try(key string) Decision
	Wait(ctx context.Context, key string) error
	Delay(key string) time.Duration
	Close(ctx context.Context) error
}

// The in-process keyed limiters are KeyedLimiters.
var (
	_ KeyedLimiter = (*KeyedBucket)(nil)
	_ KeyedLimiter = (*KeyedWindow)(nil)
)
