// Package actors runs moonpool's policy types as actors on an engine: one
// per pool (its ward inside it), per limiter, per keyed limiter and per
// gate. Each owns its policy state outright, so nothing is locked. Most
// programs use package client, which speaks this protocol for them.
//
// The protocol is in messages.go: a request carries the caller's Now and a
// reply channel (or slot) with room for one, and gets exactly one answer —
// when the actor has stopped, and when handling it panicked, too (the
// actor then goes on with its state). Refusals are the sentinels in
// errors.go, the same values package client returns.
//
// An actor only decides: it never blocks, sleeps or runs user code. Waiting
// lives here because it needs a runtime: a caller told to wait is parked in
// a FIFO line (queue.go), withdrawn in O(1) when it gives up, and woken by a
// timer asked of the engine's clock for the exact instant its turn comes.
package actors
