package client

import (
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// The configuration a program hands to pools, limiters and Retry, named here
// so that one import serves it. Each is the policy (or engine) type itself,
// not a copy: the documentation of the original explains it, and a value
// built with either name is the same value.
type (
	// Limits bound a pool (policy.Limits): Size, Idle, Keep, Life,
	// LifeJitter and MinIdle. A Pool keeps MinIdle idle by opening in the
	// background, through its Ward (see PoolConfig.Limits). It draws each
	// resource's share of LifeJitter from its own source, seeded by
	// PoolConfig.Seed: the Ward's Draw is ignored.
	Limits = policy.Limits
	// Ward stands between a pool and its backend (policy.Ward).
	Ward = policy.Ward
	// Rate is a bucket's numbers, PerSecond tokens a second up to Burst
	// (policy.Rate): the ward's bucket, or a tier's in a TieredBucket.
	Rate = policy.Rate
	// Throttle configures the ward's breaker (policy.Throttle).
	Throttle = policy.Throttle
	// Overload configures the ward's shedder (policy.Overload).
	Overload = policy.Overload
	// Backoff says how long to wait before a retry, and whether to retry
	// (policy.Backoff).
	Backoff = policy.Backoff
	// Jitter is how much randomness goes into a backoff's delay
	// (policy.Jitter).
	Jitter = policy.Jitter
	// Reason says which part of a pool or its ward refused or held back a
	// Get (policy.Reason). Stats counts each in a field of its own.
	Reason = policy.Reason

	// Engine runs the actors behind pools and limiters, with the one clock
	// they read (engine.Engine). Build one with NewEngine; Shutdown stops it.
	Engine = engine.Engine
	// EngineOption configures an Engine made by NewEngine.
	EngineOption = engine.Option
	// Clock is an engine's clock (engine.Clock): the real one by default, a
	// moontest.Clock in tests. A Clock with an Until(time.Time)
	// time.Duration method reads contexts' deadlines (see engine.Clock).
	Clock = engine.Clock
)

// until is how far off t is on c: through c's Until when it has one, else
// on the machine's clock. A nil c is the machine's clock.
func until(c Clock, t time.Time) time.Duration {
	if u, ok := c.(interface{ Until(time.Time) time.Duration }); ok {
		return u.Until(t)
	}
	return time.Until(t)
}

// The jitters (see policy.Jitter).
const (
	Rigid        = policy.Rigid
	Full         = policy.Full
	Equal        = policy.Equal
	Decorrelated = policy.Decorrelated
)

// The reasons (see policy.Reason).
const (
	ReasonClosed  = policy.ReasonClosed
	ReasonShedder = policy.ReasonShedder
	ReasonBreaker = policy.ReasonBreaker
	ReasonBackoff = policy.ReasonBackoff
	ReasonProbe   = policy.ReasonProbe
	ReasonBucket  = policy.ReasonBucket
)

const (
	// Forever, as a Keep or Life, is no limit (policy.Forever).
	Forever = policy.Forever
	// Never is the wait that does not end (policy.Never): what Delay
	// answers for a limiter that will never grant.
	Never = policy.Never
)

// The presets, as policy has them: DefaultLimits (ten live, ten idle, thirty
// minutes idle), DefaultBackoff (three attempts, 100 ms doubling to 1 s, full
// jitter), DefaultBreaker (the SRE book's K = 2 over two minutes, with a
// floor of ten requests and a cap of nine in ten) and DefaultShedder (Kratos
// BBR's 80% over ten seconds). They are values: changing a copy changes
// nothing else.
var (
	DefaultLimits  = policy.DefaultLimits
	DefaultBackoff = policy.DefaultBackoff
	DefaultBreaker = policy.DefaultBreaker
	DefaultShedder = policy.DefaultShedder
)

// NewEngine starts an engine (see engine.New); it does not block. One per
// process is the usual shape; Shutdown closes every pool and limiter on it.
func NewEngine(opts ...EngineOption) *Engine { return engine.New(opts...) }

// WithClock makes c the engine's clock; the default is the real, monotonic
// clock, and tests hand in a moontest.Clock. A nil c is ignored.
func WithClock(c Clock) EngineOption { return engine.WithClock(c) }
