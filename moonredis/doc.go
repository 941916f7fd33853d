// Package moonredis keeps moonpool's keyed limits in Redis, so one limit
// holds across every process that shares it: "100 a minute per API key" on
// ten machines is 100, not 1,000. Bucket is a token bucket per key (GCRA,
// as go-redis/redis_rate computes it) and Window a sliding-window quota per
// key, exact (NewWindow) or approximate (NewApproxWindow). Both are
// client.KeyedLimiters, so a handler or middleware takes either in place
// of client.KeyedBucket or client.KeyedWindow.
//
// Each limiter is one actor on a moonpool engine. Requests for a key that
// arrive while a call for that key is in flight wait in the actor and go to
// Redis together in the next call, one script run that answers each in the
// order they came; so a hot key costs one round trip per batch, not per
// request, and Stats says how many calls each admitted request cost. While
// Config.MaxCalls calls are in flight, the batches of other keys wait too,
// and go in one pipeline, one script run per key, in one round trip. The
// calls are made off the actor, by the goroutine of a caller that waits
// for the answer anyway, or one of their own: the actor never waits on
// Redis. Every script reads Redis's own TIME, the one clock all processes
// share, so machines whose clocks disagree still share one limit.
//
// # Consistency
//
// While Redis answers, a limiter never lets through more than its limit
// across all processes sharing it: every decision is one script run on the
// key's state in Redis. A batch that go-redis sends again after a network
// error is known by its name and counted once (a bucket keeps, per key, the
// last batch of each limiter and its answer; a window finds the batch's
// events by name). It can let through fewer: a Wait whose ctx ends after
// its slot was taken, or whose answer arrives after its caller gave up,
// leaves that slot unused; a call that timed out may still have counted in
// Redis what its callers were told (by the FailMode) went another way; and
// a bucket's batch resent by go-redis so late that the limiter's next batch
// for the key ran first is counted twice. A waiter wakes on this
// process's clock at its slot as measured from when its call was sent, so
// up to the call's way there early; this never admits more in Redis's
// books, since the slot was taken there. When Redis does not answer within
// Config.Timeout, or the breaker in front of it refuses the call, the
// FailMode decides: FailClosed lets nothing more through, FailOpen lets
// everything through, and FailLocal lets each process through up to its
// share of the limit, counted apart from Redis, so the fleet admits about
// the limit while the processes number ExpectedProcesses (more if more,
// and each local limit starts full). An exact Window is exact; an
// approximate one errs as NewApproxWindow states.
//
// When Redis fails, the first calls each wait out the timeout; once the
// breaker (the project's policy.Breaker, the SRE book's adaptive throttle)
// refuses, most calls are answered by the FailMode in microseconds, and
// only one call at a time still tries Redis, so the limiter notices when it
// is back.
package moonredis
