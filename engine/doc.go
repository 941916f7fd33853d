// Package engine runs moonpool's actors: it owns the protoactor-go actor
// system, the one clock every actor's timestamps and timers come from, the
// directory of names, the process heat the pools' shedders read, and
// Shutdown.
//
// An Engine is quiet by default (protoactor's log lines go to a discarding
// slog.Logger unless WithLogger is given), reads the real monotonic clock
// unless WithClock hands it another, and supervises every actor with a
// strategy that resumes it after a panic rather than restarting it with a
// fresh, empty state.
//
// # Names and stopping
//
// Every actor has a name, the caller's or a fresh one; fresh names begin
// with ReservedPrefix, which callers may not use, so the two never collide.
// A Spawn publishes its actor only once it is complete, so Lookup, Stop and
// Shutdown never see one half made, and Shutdown waits for Spawns already
// under way (and stops their actors) while refusing new ones.
//
// Stopping runs an actor's shutdown hook within the stopper's ctx, then
// stops it. Whoever stops an actor owns that stop up to its own ctx: a
// Stop or Shutdown that finds another one draining the same actor waits
// for it, and if its ctx ends first stops the actor anyway, which ends the
// other's hook too (its ctx ends with cause ErrStopped). A second Shutdown
// waits for the first and returns its result.
//
// # The dispatch
//
// protoactor-go offers two dispatchers. The default one starts a goroutine
// whenever a mailbox goes from idle to busy, so an uncontended request and
// reply costs two goroutine switches and a goroutine start. The synchronized
// one runs the actor on the sending goroutine, which is fast alone but lets
// one Send run every message other callers keep adding, on the caller's
// stack, for as long as they keep coming.
//
// The engine therefore gives every actor its own protoactor Mailbox (buffered
// channels, a running/idle flag, protoactor's system-message and
// suspend/resume rules) and schedules it by one of four Dispatch values.
// Hybrid is the default: a sender that finds the actor idle runs at most a
// budget of messages (1 by default) on its own goroutine, and past that the
// actor's long-lived goroutine takes over. One caller alone therefore pays a
// function call, and under contention no caller runs other callers'
// messages for more than the budget.
//
// Measured with BenchmarkDispatch (a send and a reply on a channel with room
// for one; p99 is of a single call), go test -bench 'Dispatch|Stock'
// -benchtime 200000x -count 3 on the project's 2-core machine, Go 1.26,
// medians of the three runs (ns per round trip across all callers / p99 of
// one call):
//
//	dispatch             1 caller      8 callers      64 callers     512 callers
//	hybrid, budget 1     276 / 251 ns  334 / 10 µs    453 / 111 µs   540 / 0.53 ms
//	hybrid, budget 4     194 / 210 ns  348 / 63 µs    369 / 224 µs   421 / 0.57 ms
//	hybrid, budget 16    267 / 220 ns  306 / 38 µs    325 / 231 µs   571 / 0.97 ms
//	dedicated goroutine  1547 / 2.5 µs 784 / 27 µs    616 / 96 µs    545 / 0.57 ms
//	protoactor default   6032 / 36 µs  2851 / 83 µs   568 / 100 µs   432 / 0.56 ms
//	  (stock mailbox)    1094 / 1.7 µs 770 / 67 µs    528 / 74 µs    493 / 1.5 ms
//	synchronized         279 / 361 ns  472 / 62 µs    446 / 97 µs    427 / 0.48 ms
//
// ("protoactor default" is its goroutine dispatcher on this mailbox; the
// stock row is protoactor's own mailbox and dispatcher untouched.) An idle
// actor under Hybrid runs a sender's message without queueing it, which is
// why one caller costs a quarter of protoactor's stock round trip. With 64
// or 512 callers on two cores every dispatch is bound by the same queue of
// callers and costs about the same per round trip; what differs is who
// waits. A larger inline budget lets a lucky sender keep the actor while
// others queue, which shows in the p99 at 8 and 64 callers (4 to 6 times
// budget 1's at 8). Budget 1 is within noise of the fastest throughput at
// every level and has the lowest p99 at 8 callers and a middling one
// beyond, so it is the default. The machine is shared and absolute times
// move with its load (an earlier run, before the uncontended fast path,
// measured 394 ns at one caller); the ordering held.
package engine
