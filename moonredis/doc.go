// Package moonredis keeps moonpool's keyed limits in Redis, so one limit
// holds across every process that shares it: "100 a minute per API key" on
// ten machines is 100, not 1,000. Bucket is a token bucket per key (GCRA,
// as go-redis/redis_rate computes it) and Window a sliding-window quota per
// key, exact (NewWindow) or approximate (NewApproxWindow). Both are
// client.KeyedLimiters, so a handler or middleware takes either in place
// of client.KeyedBucket or client.KeyedWindow.
//
// Each limiter is one actor on a moonpool engine. A request goes to Redis
// at once while fewer than Config.MaxCalls calls are out. Requests that
// come while every call is out wait for one to land, and go together in
// the next call: a key's in one script run that answers each in the order
// they came, and up to Config.MaxKeys keys in one round trip. So a hot key
// costs one round trip per batch, not per request, once its load fills the
// calls, and Stats says how many calls each admitted request cost. A key
// may be in several calls at once, but a Wait goes only when no call the
// actor sent carries its key, and the actor sends nothing of its key
// beside it, so a key's waiters keep their order. Through a *redis.Client
// that call is one script run for all their keys; through a
// *redis.ClusterClient, one run per hash slot; through other clients, one
// run per key. A run of many keys costs Redis about half as much a key as
// a run of one.
//
// The actor never waits on Redis. A call that carries an Allow, Try,
// Delay or Tokens is made by one of those callers on its own goroutine
// when the client ends calls at their ctx's deadline (a *redis.Client or
// *redis.Ring with ContextTimeoutEnabled). That caller reads its own
// answer from the reply, without waiting for the actor, so set it: it
// saves a few goroutine switches a call. In a quiet limiter (a call slot
// free, nothing waiting for one, no failed call counted, the key not
// refused of late) such a caller does not ask the actor at all: it takes
// a call slot with one compare-and-swap, makes its call, and tells the
// actor only what the actor must hear: a failure, a refusal to remember,
// or a success while failures are counted. Every other call (of Waits
// alone) runs on a goroutine of its own, which a timer on the engine's
// clock answers by the FailMode once Config.Timeout has passed, whatever
// the client does with a ctx's deadline. A caller making its own call is
// answered when the client gives up, at the call's deadline: between
// Config.Timeout and a sixteenth of it more on the real clock, since
// calls begun that close together share one ctx, and one timer. So a
// request waits for Redis at most about twice Config.Timeout: the call in
// flight before it (for its key, or one of the calls out when it came)
// and its own; longer only when more than MaxCalls×MaxKeys keys wait at
// once. Every script reads Redis's own TIME, the one clock all processes
// share, so machines whose clocks disagree still share one limit.
//
// # Consistency
//
// While Redis answers, a limiter never lets through more than its limit
// across all processes sharing it: every decision is one script run on the
// key's state in Redis. Leased credit (Config.Lease) is taken from that
// state too, ahead of time; see Leases for the bound it keeps. A batch that go-redis sends again after a network
// error is known by its name and counted once (a bucket keeps, per key, the
// last batch each limiter sent through each of its MaxCalls call slots,
// and its answer; a window finds the batch's events by name), since a key
// is kept at least twice Config.Timeout, past the last resend go-redis
// starts within the call's Timeout (an exact window's events, though, only
// a window long). One resend can still count twice: one already on the
// wire when the Timeout ended, that Redis runs only after a later batch of
// the limiter's for the key through the same call slot (in a bucket or an
// approximate window). It can let through fewer: a Wait whose ctx ends
// after its slot was taken, whose answer arrives after its caller gave
// up, or whose answer comes back too late to wake at its slot before
// ctx's deadline, leaves that slot unused; and a call that timed out may
// still have counted in Redis what its callers were told (by the FailMode)
// went another way. A waiter wakes on this process's clock at its slot as
// measured from when its answer came back: late by the answer's way back,
// never early, and a key's waiters in the order they asked. When Redis
// does not answer within Config.Timeout, or the breaker in front of it
// is tripped, the FailMode decides: FailClosed lets nothing more
// through, FailOpen lets everything through (but a key refused a moment
// before: see below), and FailLocal lets each
// process through up to its share of the limit, counted apart from Redis,
// so the fleet admits about the limit while the processes number
// ExpectedProcesses (more if more; see below for the bound). An
// exact Window is exact; an approximate one errs as NewApproxWindow
// states.
//
// A refusal is remembered: once Redis refuses an Allow or Try of one for a
// key, later Allows and Trys of that key in this process are refused at
// once, with the rest of the wait Redis gave, until that wait has passed,
// without a call (Stats.Remembered counts them; Envoy's rate limit
// service keeps a local cache of over-limit keys for the same reason).
// That refuses nothing Redis would let through while Redis keeps its state
// and its clock keeps time with the engine's: a key's limit only grows
// tighter from a refusal until its wait has passed, whatever other callers
// and processes do, and the wait is counted from when the call was sent,
// no later than Redis ran it. It refuses what Redis would let through when
// Redis loses the key's state meanwhile (a restart without persistence,
// an eviction, a failover to a replica behind, FLUSHDB), when Redis's
// clock steps forward, or when the engine runs on a virtual clock against
// a real Redis; and it refuses under FailOpen and FailLocal too, while
// Redis is out, until the remembered wait has passed. Requests of less
// than one, Wait, Delay and Tokens always ask Redis. At most 65,536 keys
// are remembered at once.
//
// # Leases
//
// With Config.Lease set, a Bucket leases the tokens of a key this process
// asks often (above Config.LeaseAbove requests a second): one script run
// takes about a Lease of the process's demand from the key's state in
// Redis, and the process lets requests through from it with an atomic
// draw, without a call. A quiet key goes to Redis one request at a time,
// exact to the request. The rules:
//   - A lease is taken on the same GCRA state the requests sent one by
//     one use, so leases and requests together never take more than the
//     limit from Redis.
//   - A lease lasts Config.Lease from the last call that took or renewed
//     it. A renewal asks for the lease less what is held, and the tokens
//     left over join it, with its end. Nothing is drawn after the end.
//     What is left goes back to Redis then, and at Close: Redis moves the
//     key's state back by those tokens, never past full. Nothing is drawn
//     once Close has begun; a grant that lands after it goes back too.
//   - A lease is about a Lease of the key's demand here, at most growth
//     (8) times the requests seen since the last grant, and at most the
//     process's share of the burst: the burst over the processes that
//     took a lease of the key within the last Lease. A grant is what the
//     key holds, up to that.
//   - A lease is renewed when a quarter of it is left, so steady demand
//     never waits on a round trip. An Allow or Try that finds it dry
//     waits for the call in flight, or sends the next one at once and
//     waits for it, then draws. It waits for at most three calls in a
//     row. If they bring nothing for it, or one takes longer than
//     Config.Timeout, it goes to Redis alone.
//   - When Redis grants less than asked, the process calls again only
//     once the key holds the grant times the lessees, or half its share
//     if more. Until then a dry lease refuses with that wait, and the
//     tokens stay in Redis for whoever asks first. So at the limit the
//     processes share it about evenly, each with a call per share.
//   - Wait takes from a lease that holds enough, and asks Redis
//     otherwise. Delay and Tokens always ask Redis, and count leased
//     tokens as taken.
//   - A failed lease call grants nothing. The key goes one request at a
//     time, answered by the FailMode when Redis fails, for a Timeout.
//     No lease call goes while the breaker is tripped.
//
// What leases cost in exactness: Redis counts a leased token when the
// lease is taken, and the process lets it through within the lease. So
// over any span the fleet lets through at most what the limit gives over
// the span, plus the leases held when it began: at most a burst each, and
// about a burst between them once each process has renewed. Over a long
// run the fleet lets through no more than the limit. Tokens a process
// holds and does not spend are lost to the others while it holds them:
// at most one lease per process per key at a time, so bounded in amount.
// While renewals go on they roll over into the next lease; they go back
// a Lease after the last renewal, or at Close. A process killed holding
// a lease loses that lease: its tokens come back only as the key
// refills. A lease call that go-redis sends again is known by its name
// and counted once, as a batch is; so is a give-back.
//
// # When Redis fails
//
// When Redis fails, the first calls each wait out Config.Timeout. Once
// Config.BreakerFailures calls in a row have failed (3 by default), the
// breaker in front of Redis trips, however many calls worked before. From
// then on the FailMode answers every request at once, in microseconds,
// and no request goes to Redis. So a dead Redis costs each process a few
// timeouts, whatever the client's retries. While the breaker is tripped,
// one probe at a time looks whether Redis is back, at most one each
// Timeout: a look at one key, which takes nothing and which no caller
// waits for. Stats counts probes as calls. The first call that works
// closes the breaker. A process that sent no request meanwhile finds Redis
// back with its next one: that request is answered by the FailMode, and
// sends the probe.
//
// Under FailLocal, what Redis lets through must pass the local share too
// from the first failed call on. The hold lasts while the breaker is
// tripped, then for a recovery span after it closes or after the last
// failed call: the larger of 2 s and four Timeouts. So a Redis that fails
// now and then, never enough in a row to trip the breaker, holds each
// process to its share as well: the share answers each failed call, and
// Redis counts none of those. A request that Redis lets through
// and the local share refuses is refused, and its place in Redis goes
// unused. The span is the time every process needs to find Redis back:
// each probes once a Timeout, and go-redis, once it gives up dialling a
// server, dials it again once a second. Until all are back, some answer
// from their shares while others call Redis, which counts nothing the
// shares let through. Held to its share, each process lets through no more
// than its share meanwhile.
//
// So from the moment Redis fails, across the outage and after it returns,
// the fleet lets through at most the limit plus one burst (for a Window,
// one allow more). The shares start full, and Redis may come back full,
// having lost its state or refilled meanwhile. That holds while the
// processes number Config.ExpectedProcesses and each finds Redis back
// within the span. A process idle through the span finds Redis back with
// its next request: until its probe comes back, it may let its share
// through on top of the limit. So may a process that cannot reach Redis
// while others can, all the while.
//
// # Fleet
//
// A Fleet shares a pool's ward with the same pool in other processes
// (give it to client.PoolConfig.Fleet). What the replicas share lives in
// Redis: which of them saw makes fail within the Window, whether the
// fleet is held, and who holds its probe lease. Once Quorum replicas
// have failed within the Window (3, or every live one if fewer), every
// replica's pool holds its makes. One replica at a time takes the lease
// and makes the fleet's probe, once a ProbeEvery for the whole fleet.
// When a probe works, Redis publishes it and every replica hears at once.
// Each then ramps its makes up along one curve shared by the fleet
// (FleetConfig.Ramp). Each replica decides the rest alone. Its local ward
// still spaces, backs off, throttles and sheds its own makes. A replica
// whose makes fail while others' work holds only itself, by its ward. A
// ramp ends on each replica's clock, without a word to Redis. A healthy
// pool sends Redis nothing: each replica runs one script a Heartbeat (1 s
// by default), to stay a member and to read the state in case a message
// was lost. When a call fails or takes longer than Timeout (100 ms), the
// replica is alone, and Stats says since when. Its pools then follow their
// local wards, as if it had no fleet. It tries Redis again from
// ProbeEvery, doubling up to a Heartbeat apart. When Redis answers, it
// takes the state Redis has then; a hold whose Hold ran out meanwhile is
// over, so a replica never comes back to a hold that has ended.
package moonredis
