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
// # What goes through protoactor, and what does not
//
// protoactor-go is the runtime: Spawn builds every actor from protoactor
// Props and registers it under its name in protoactor's process registry,
// which gives it its PID; every system message (Started, Stopping,
// Stopped, suspend and resume, failures) is delivered by protoactor's
// invoker to the actor's Receive; a panic goes to protoactor's supervision,
// whose strategy (here: resume) decides what happens; Stop and Shutdown
// stop actors and the actor system through it; and the cluster, later,
// will route through its PIDs. Messages sent the protoactor way, with
// RootContext.Send to a PID, arrive in the same mailbox as everyone
// else's.
//
// What does not go through protoactor is the path of one user message:
// how it is queued, who runs it, how it reaches the actor, and how its
// answer comes back. The engine gives every actor its own protoactor
// Mailbox: one atomic status word for "somebody runs it"
// and the count of messages queued, and a lock-free ring for the queue.
// An actor that implements Handler gets its user messages straight from
// the mailbox instead of through protoactor's invoker and actor.Context
// (protoactor's own envelopes, poison pills and auto-responders still go
// through the invoker, which knows what to do with them). Answers go to
// a Reply, a slot the caller spins on and then parks on, rather than a
// channel or a protoactor future. Why: on the 2-core machine the project
// is measured on, protoactor's stock round trip costs 340-530 ns (a
// goroutine start or wake per message, a channel, a future), and a pool's
// own bookkeeping costs 30; moonpool's pools, limiters and gates answer
// in a round trip of the latter's order, which is the only way a library
// of actors can be as cheap as one of mutexes.
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
// The engine runs every mailbox the same way: a sender that finds the
// status word at zero (nobody running the actor, nothing queued, nobody half
// way through queueing, since senders count before they queue) runs its own
// message at once, on its own goroutine, without queueing it; it then runs
// what other senders queued meanwhile, up to a budget of 16 messages in all
// (combining: on two processors, the other one's callers are answered by
// whoever holds the actor, without a goroutine switch), and hands the rest
// to the actor's long-lived goroutine; until that goroutine starts on them,
// any sender or waiting caller passing by may take the mailbox over and run
// the next budget's worth itself. So one caller alone pays a function call
// and a few atomic operations, and no caller runs others' work for more than
// the budget at a time.
//
// A sender that finds the actor busy queues its message and waits on its
// Reply (Reply.Ask). It spins while its message is still in line and the
// line moves, since then the actor is running on another processor and will
// get to it; it takes the mailbox over when the line stands still because
// it waits for the actor's goroutine; and it parks once the line has stood
// still for a while (how long adapts, doubling with each spin answered and
// halving with each stall), or soon after the actor has taken its message
// without answering it (the actor parked the request itself, as a pool does
// a Take that waits for a resource). With one processor nobody spins.
//
// DESIGN.md has the measurements behind these choices.
package engine
