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
// budget of messages (16) on its own goroutine, and past that the actor's
// long-lived goroutine takes over. One caller alone therefore pays a function
// call, and under contention no caller runs more than 16 other callers'
// messages.
//
// Measured with BenchmarkDispatch (a send and a reply on a channel with room
// for one), go test -bench Dispatch -benchtime 200000x -count 3 on the 2-core
// machine this project is built on, Go 1.26, medians of three runs:
//
//	dispatch            callers:   1      8     64    512
//	hybrid (budget 16)  ns/op      316    266    300    547
//	                    p99 ns     401    291    361    1.0 ms
//	dedicated goroutine ns/op      930    916   1012   1557
//	                    p99 ns    1.5 µs  1.5 µs  0.1 ms  6.8 ms
//	protoactor default  ns/op     1169   1115   2184    765
//	                    p99 ns    2.0 µs  3.6 µs  0.1 ms  7.8 ms
//	synchronized        ns/op      330    480    736   1018
//	                    p99 ns     421    601   3.3 µs  3.9 ms
//
// Budgets of 1 and 4 were measured too; they hand off to the actor's
// goroutine sooner and cost 2 to 3 times as much at 8 and 64 callers.
// Hybrid is at least as fast as every other choice at every level and has the
// lowest p99 at every level. The absolute times move with the machine's
// load; the order did not.
package engine
