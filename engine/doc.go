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
//	hybrid, budget 1     394 / 381 ns  455 / 12.6 µs  462 / 93 µs    530 / 0.56 ms
//	hybrid, budget 4     275 / 341 ns  922 / 43 µs    1119 / 257 µs  966 / 0.92 ms
//	hybrid, budget 16    392 / 431 ns  575 / 33 µs    482 / 189 µs   536 / 3.3 ms
//	dedicated goroutine  1173 / 1.9 µs 701 / 49 µs    606 / 96 µs    523 / 0.60 ms
//	protoactor default   5567 / 31 µs  2669 / 81 µs   466 / 71 µs    448 / 1.1 ms
//	  (stock mailbox)    1113 / 1.5 µs 926 / 71 µs    519 / 86 µs    591 / 2.4 ms
//	synchronized         433 / 541 ns  501 / 30 µs    520 / 153 µs   566 / 2.3 ms
//
// ("protoactor default" is its goroutine dispatcher on this mailbox; the
// stock row is protoactor's own mailbox and dispatcher untouched.) With 64 or
// 512 callers on two cores every dispatch is bound by the same queue of
// callers and costs about the same per round trip; what differs is who
// waits. A larger inline budget lets a lucky sender keep the actor while
// others queue, which shows in the p99. Hybrid with a budget of 1 is within
// noise of the fastest at every level and has the lowest or second-lowest
// p99 at every level, so it is the default; the machine is shared and
// absolute times move with its load.
package engine
