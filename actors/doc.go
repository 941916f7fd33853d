// Package actors runs moonpool's policy types as protoactor-go actors: one
// actor per pool (its ward inside it), per limiter, per keyed limiter and per
// gate. Each actor owns its policy state outright, so nothing is locked:
// ownership is the synchronisation.
//
// The protocol is in messages.go. An actor only decides: it never blocks,
// never sleeps and never runs user code. Its time comes with its messages
// (every message carries the caller's Now), except where reading it is
// cheaper than carrying it: a pool whose answers do not depend on the time
// gets unstamped Takes and Gives and reads the clock itself only to time a
// parked caller's wait, and a bucket that lends tokens reads it to settle
// what was drawn (see SpawnPool and SpawnBucketCredit). Waiting lives
// here, because waiting needs a runtime: a caller told to wait is parked in
// a FIFO and answered when its turn comes, and timers for eviction and for
// Later are asked of the engine's clock at the exact instant they are due.
package actors
