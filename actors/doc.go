// Package actors runs moonpool's policy types as protoactor-go actors: one
// actor per pool (its ward inside it), per limiter, per keyed limiter and per
// gate. Each actor owns its policy state outright, so nothing is locked:
// ownership is the synchronisation.
//
// The protocol is in messages.go. An actor only decides: it never blocks,
// never sleeps, never reads a clock (every message carries the caller's Now)
// and never runs user code. Waiting lives here, because waiting needs a
// runtime: a caller told to wait is parked in a FIFO and answered when its
// turn comes, and timers for eviction and for Later are asked of the engine's
// clock at the exact instant they are due.
package actors
