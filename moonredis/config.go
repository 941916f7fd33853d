package moonredis

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// FailMode is what a limiter answers when Redis cannot: it is down, slower
// than Config.Timeout, or the breaker in front of it refuses the call. The
// zero FailMode is FailClosed.
type FailMode uint8

const (
	// FailClosed refuses: Allow says no, Try refuses with a Wait of
	// UnavailableWait, Wait returns an error matching ErrUnavailable. It
	// never lets through more than the limit, and lets nothing through
	// while Redis is gone.
	FailClosed FailMode = iota
	// FailOpen lets everything through: Allow says yes and Wait returns
	// nil at once. The limit is off while Redis is gone.
	FailOpen
	// FailLocal answers from a limit in this process of the shared limit
	// divided by Config.ExpectedProcesses, each key on its own: a bucket's
	// rate and burst (a burst of at least 1), a window's allow rounded
	// down (so 0, refusing everything, when the processes outnumber it).
	// With that many processes alive the fleet together stays near the
	// limit. It starts full, so a process may let through its share of
	// the burst again when Redis goes.
	FailLocal
)

var failNames = [...]string{"closed", "open", "local"}

// String is the mode's name in lower case: "closed", "open" or "local".
func (m FailMode) String() string {
	if int(m) < len(failNames) {
		return failNames[m]
	}
	return fmt.Sprintf("FailMode(%d)", uint8(m))
}

// ErrUnavailable is what a Wait under FailClosed returns, wrapping the
// cause (Redis's error, a timeout, or ErrBreaker), when Redis could not
// answer.
var ErrUnavailable = errors.New("moonredis: redis unavailable")

// ErrBreaker is the cause given when the breaker in front of Redis refused
// the call rather than Redis failing it.
var ErrBreaker = errors.New("moonredis: breaker refused the call")

// UnavailableWait is the Wait a refusal under FailClosed carries (so
// Retry-After says 1): Redis's state says nothing about when a caller
// would pass.
const UnavailableWait = time.Second

// Config is how a limiter reaches Redis and what it does without it. Only
// Client is required; every other zero field means its documented default.
type Config struct {
	// Client runs the scripts: a *redis.Client, *redis.ClusterClient
	// (each key's state is one Redis key, so one hash slot), *redis.Ring
	// or a failover client. Its retries are harmless: a batch sent twice
	// is counted once (see the package documentation). A *redis.Client or
	// *redis.Ring with ContextTimeoutEnabled (and no read or write timeout
	// of -2, which turns deadlines off) ends a call at its ctx's deadline;
	// with one, the first caller a call carries makes it itself and reads
	// its own answer, which is faster (see the package documentation). With any
	// other client each call runs on a goroutine of its own, so that
	// Timeout bounds every caller whatever the client does.
	Client redis.UniversalClient
	// Prefix begins every key the limiter writes; the empty Prefix is
	// "moonredis:bucket:" or "moonredis:window:". Two limiters with
	// different numbers must not share one.
	Prefix string
	// Timeout bounds each call to Redis, retries included; <= 0 is 100 ms.
	// A call that takes longer is answered by the FailMode when it ends on
	// the engine's clock, by the limiter's own timer; the call is cut short
	// through its ctx, and what it brings back later is dropped. A caller
	// that makes its own call (see Client) is answered when the client ends
	// it at its ctx's deadline: Timeout on the real clock, or up to a
	// sixteenth of it more, as calls begun that close together share one.
	Timeout time.Duration
	// FailMode is what to answer when Redis cannot; the zero value is
	// FailClosed.
	FailMode FailMode
	// ExpectedProcesses is how many processes share the limit, for
	// FailLocal; <= 0 is 1.
	ExpectedProcesses int
	// BreakerFailures is how many calls in a row must fail to trip the
	// breaker in front of Redis; <= 0 is 3. While it is tripped, requests
	// are answered by the FailMode at once, and one probe at a time, at
	// most one each Timeout, looks whether Redis is back (see the package
	// documentation).
	BreakerFailures int
	// MaxBatch is the most requests of one key sent in one call; <= 0 is
	// 512.
	MaxBatch int
	// MaxCalls is the most calls to Redis in flight at once; <= 0 is 4,
	// or the client's PoolSize if that is less, so no call waits for a
	// connection; more than 64 is 64. A request goes at once while fewer
	// are out (a Wait, once no call carries its key). While MaxCalls calls
	// are out, requests wait for one to land and go together in the next
	// call, up to MaxKeys keys in one round trip: one script run for them
	// all through a *redis.Client, one per hash slot through a
	// *redis.ClusterClient, one per key through other clients. So at low
	// load no request waits for another's call, and as load grows, calls
	// fill by themselves: a run of many keys costs Redis about half as
	// much a key as a run per key.
	MaxCalls int
	// MaxKeys is the most keys in one call; <= 0 is 64 (see MaxCalls).
	MaxKeys int
	// Lease is how long a Bucket's lease of a hot key's tokens lasts; 0
	// (or less) is off, and every request goes to Redis. 50 ms suits
	// most services. With it on, this process takes tokens of a key it
	// asks often from Redis ahead of time, about a Lease of its demand,
	// and lets requests through from them without a call (see the
	// package documentation). One below a millisecond is a millisecond.
	// A Window ignores it.
	Lease time.Duration
	// LeaseAbove is the requests a second of one key, in this process,
	// above which the key is leased; <= 0, NaN or infinite is four a
	// Lease (80 a second with a Lease of 50 ms). A key asked less often
	// goes to Redis one request at a time, exact to the request.
	LeaseAbove float64
}

// normal is c with its defaults filled in.
func (c Config) normal(kind string) (Config, error) {
	if c.Client == nil {
		return c, errors.New("moonredis: Config.Client is nil")
	}
	if c.FailMode > FailLocal {
		return c, fmt.Errorf("moonredis: unknown %v", c.FailMode)
	}
	if c.Prefix == "" {
		c.Prefix = "moonredis:" + kind + ":"
	}
	if c.Timeout <= 0 {
		c.Timeout = 100 * time.Millisecond
	}
	if c.ExpectedProcesses <= 0 {
		c.ExpectedProcesses = 1
	}
	if c.BreakerFailures <= 0 {
		c.BreakerFailures = 3
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 512
	}
	if c.MaxCalls <= 0 {
		c.MaxCalls = min(4, poolSize(c.Client))
	}
	c.MaxCalls = min(c.MaxCalls, maxCalls)
	if c.MaxKeys <= 0 {
		c.MaxKeys = 64
	}
	if c.Lease < 0 {
		c.Lease = 0
	} else if c.Lease > 0 && c.Lease < time.Millisecond {
		c.Lease = time.Millisecond
	}
	if !(c.LeaseAbove > 0) || math.IsInf(c.LeaseAbove, 1) {
		c.LeaseAbove = 4 / max(c.Lease.Seconds(), 1e-9)
	}
	return c, nil
}

// recovery is how long after Redis answers again FailLocal holds what
// Redis lets through to the local share as well: time for every process
// to find Redis back. Each probes at most one Timeout apart, a probe takes
// at most a Timeout, and go-redis, once it gives up dialling a server,
// tries it again once a second. So the span is the larger of 2 s and four
// Timeouts.
func (c Config) recovery() time.Duration { return max(2*time.Second, 4*c.Timeout) }

// The largest numbers a limiter takes. A script answers with whole numbers
// of microseconds and of thousandths of a token, which Go reads as int64s
// (up to 9.2e18): a count of maxCount in thousandths, and a wait of
// maxSpan plus a century of queued waiters, fit with room to spare.
const (
	maxCount = 1e15 // tokens in a burst, events in a window
	maxSpan  = 1e18 // microseconds a bucket takes to fill: 31,700 years
)
