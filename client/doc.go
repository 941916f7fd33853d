// Package client is the one import a server needs: moonpool's pools,
// limiters, gate and retries as blocking calls that honour
// context.Context, with their configuration and errors.
//
// Start one Engine per process with NewEngine, then build on it:
//
//   - Pool lends resources made by its Open and closed by its Close: Get,
//     Put, Discard. Its Ward stands in front of the backend (a bucket of
//     opens, a backoff, a breaker, a shedder). A Fleet shares the ward
//     with the pool's replicas in other processes.
//   - Bucket and Window limit a rate or a quota; KeyedBucket, KeyedWindow
//     and TieredBucket keep one limit per key. Allow takes or refuses, Try
//     also says how long to wait (for Retry-After), Wait blocks in line.
//   - Gate limits how many run at once, and answers rather than queues.
//   - Retry runs a function under a Backoff; it needs no engine. A
//     Budget caps its retries, and hedges, at a share of first attempts.
//
// Every call that can block takes ctx first. When ctx ends, the call
// returns an error matching ctx.Err() and leaves nothing behind: no place
// in line, no room held, no resource lost or lent twice.
//
// Refusals are sentinels (ErrShed and its causes, ErrClosed, ErrNotLent,
// ...) shared with package actors, so errors.Is works across the layers;
// details travel in typed errors (*OpenError, *WaitError, *RetryError).
//
// Time comes from the engine's clock. A test hands the engine a
// moontest.Clock (WithClock) and moves time itself. README.md walks through
// a server; DESIGN.md says why the layers are as they are.
package client
