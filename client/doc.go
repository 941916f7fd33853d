// Package client is what a server author types: moonpool's pools and
// limiters as ordinary blocking calls that honour context.Context.
//
// The layers below decide; this one acts. policy says what to do (lend
// this, open one, wait, try later, refuse) and never waits; the actors own
// that state on an engine and answer messages. client sends the messages,
// and does the opening, closing and sleeping the layers below refuse to do.
//
// # Using a pool
//
// Start one engine per process and build a Pool on it with an Open and a
// Close for your resource:
//
//	eng := client.NewEngine()
//	defer eng.Shutdown(ctx) // closes every pool still open
//
//	dialer := &net.Dialer{Timeout: 5 * time.Second} // Open's own timeout
//	pool, err := client.NewPool(eng, client.PoolConfig[net.Conn]{
//		Open:   func(ctx context.Context) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) },
//		Close:  func(c net.Conn) error { return c.Close() },
//		Limits: client.DefaultLimits,
//	})
//
// Then, per request:
//
//	c, err := pool.Get(ctx) // idle, freshly opened, or waited for
//	if err != nil {
//		return err // ctx's error, ErrShed, ErrClosed, or an *OpenError
//	}
//	if err := use(c); isBroken(err) {
//		pool.Discard(c) // it broke: closed, and its room freed
//		return err
//	}
//	pool.Put(c) // back for the next caller
//
// Get lends the most recently returned resource first: a warm connection is
// likelier to still be good, and the ones nobody needs sit until Keep runs
// out and are closed, which is how a pool that grew in a burst shrinks
// again. Callers that find the pool full wait in line, first come first
// served; a resource coming back goes to the one who waited longest.
//
// # What cancellation does
//
// Every call that can block takes ctx first. When ctx ends, the call returns
// promptly with an error that errors.Is matches to ctx.Err(), and leaves
// nothing behind: no goroutine, no place in line, no room reserved, no
// resource lost or lent twice. One thing it does not do is cancel an Open
// already under way: the connection half made is finished and goes to the
// pool for the next caller, instead of being thrown away or leaked.
//
// # The ward
//
// PoolConfig.Ward stands in front of the backend. A bucket spaces opens out,
// so a reconnection storm arrives as a queue instead of a spike; a backoff
// holds opens back after one fails, longer after each failure in a row, and
// then lets one Open through as a probe before the rest; a breaker refuses
// opens (ErrBreaker) at the rate a failing backend deserves, never all of
// them, so it notices when the backend is back; a shedder stops lending
// (ErrOverloaded) while the process is too hot. A failed or panicking Open
// is reported to the ward on its own, so the breaker and backoff see the
// backend failing. A Get whose ctx ends before a hold would is answered at
// once with a *WaitError carrying the rest of the hold. Stats counts every
// refusal and hold by its reason.
//
// # Limiters, a gate, and retries
//
// The limiters have the same shape, after golang.org/x/time/rate: Allow
// answers now and takes; Try does the same and also says, from the same
// decision, how long a refused caller must wait and what is left, for the
// Retry-After and remaining-count headers; Wait blocks in line (first
// come, first served) until granted, and fails at once, without waiting,
// when the wait would pass ctx's deadline. Bucket is a token bucket (a
// rate with a burst), Window a sliding-window quota ("a thousand a day"
// exactly), and KeyedBucket and KeyedWindow hold one of each per key in
// one actor, forgetting a key once it is full again or empty, so a million
// keys that came once do not stay. Gate is a concurrency limit whose Enter
// answers rather than queues.
//
// The limits can change while the server runs, keeping what each limiter
// holds: SetLimit and SetBurst on buckets (as x/time/rate's), SetAllow on
// windows, for every key of a keyed one at once; TieredBucket holds keys
// to the limits of their tier (free, paid), each tier retuned on its own.
// Bucket.Reserve takes tokens that Cancel can give back, as many as the
// bucket would hold without them. Stats counts what each limiter allowed,
// refused and made wait, for moonotel and moonprom to report.
//
//	limit, _ := client.NewKeyedBucket(eng, 10, 20) // per client: 10/s, bursts of 20
//	if d := limit.Try(clientID); !d.OK {
//		// Whole seconds, rounded up: at least 1, at most a day (also
//		// after Close, whose wait is Never).
//		w.Header().Set("Retry-After", strconv.Itoa(d.RetryAfter()))
//		w.WriteHeader(http.StatusTooManyRequests)
//		return
//	}
//
// Retry runs a function under a Backoff, sleeping between attempts (on the
// real clock, or an engine's or a test's with SleepOn) with draws from a
// source that can be seeded; it
// stops at once on an error marked Permanent, and honours a server's
// retry-after hint (RetryAfter) spread by jitter, never earlier than the
// hint, so a crowd told "in five seconds" does not return all at once.
//
// # Errors
//
// Refusals a caller may want to tell apart are sentinels with a "moonpool:"
// prefix: ErrShed (refused, not queued; ErrBreaker, ErrOverloaded and
// ErrTooManyWaiting say why, and match it), ErrClosed, ErrDuplicate (an Open
// that returned a resource the pool holds), ErrNotLent (a Put of
// something the pool did not lend), ErrExceedsBurst, ErrExceedsDeadline (a
// wait that would pass ctx's deadline), ErrNoAttempts. Details travel in
// typed errors that unwrap to their cause: *OpenError for a failed Open,
// *CloseError for a failed Close, *PanicError for a recovered panic in Open
// or Close, *WaitError with the wait that was refused,
// *RetryError with the attempts made and the last failure. Misuse is an
// error, never silent damage.
//
// # Closing
//
// Close stops new Gets at once, closes idle resources, and waits within its
// ctx for lent ones to come home, closing each as it does. The engine's
// Shutdown closes every pool the same way, within its own ctx: a pool whose
// Close is still waiting is stopped anyway when that ctx ends.
//
// # Time
//
// Everything here reads time from the engine's clock and sleeps on it. Tests
// hand the engine a moontest.Clock (WithClock), so an hour of pool traffic, or a
// thirty-second outage with five hundred callers, runs in milliseconds and
// the same way every time.
package client
