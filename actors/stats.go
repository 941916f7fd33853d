package actors

import (
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// reasons is how many policy.Reason values there are, for counts by reason.
const reasons = int(policy.ReasonRamp) + 1

// Stats is a snapshot of a pool's books and of what its actor has decided.
// Counts of closes are by reason: the actor decides to retire a resource,
// and the client closes it.
type Stats struct {
	Live, Idle, Busy int // as policy.Pool counts them: Busy is lent plus being made
	Opening          int // of Busy, room reserved for makes under way
	Waiting          int // callers parked in the FIFO
	Max              int // the Size limit now; 0 is none

	Gets      int64 // Takes
	EmptyGets int64 // of Gets, those parked or answered Make: nothing idle for them

	Made         int64 // resources registered after a Make
	MakeFailures int64 // Unmade: makes that failed
	Duplicates   int64 // Made of a resource the pool already held, refused

	Stale    int64 // retired by Take: idle past Keep or Life
	Evicted  int64 // retired by the eviction timer
	Surplus  int64 // given back when the idle limit was full or past Life, or over a Size SetLimits shrank
	Broken   int64 // dropped by their holder
	Unreused int64 // dropped on their way back: the holder's Reuse said no
	// CheckFailures are dropped because a check failed, before a loan or
	// in the background.
	CheckFailures int64
	Shutdown      int64 // retired by Close, idle or coming home after it
	Outdated      int64 // retired by Reset: idle at the call, coming home after it, or made across it
	Resets        int64 // Reset calls on an open pool

	Shed        int64          // Takes answered Shed, for any reason: the sum of ShedBy and ShedWaiting
	ShedBy      [reasons]int64 // of Shed, by the policy's reason: ReasonClosed, ReasonShedder, ReasonBreaker
	ShedWaiting int64          // of Shed, turned away by the waiter cap (ErrTooManyWaiting)
	HeldBy      [reasons]int64 // makes the ward held back (Later), by reason: ReasonBackoff, ReasonProbe, ReasonBucket, ReasonFleet, ReasonRamp; a parked caller is counted again each time it is first in line and held
	Held        int64          // waiting Takes answered ErrHeld: the ward's hold would outlast their deadline
	Cancelled   int64          // parked Takes withdrawn
	Waited      int64          // parked Takes answered
	WaitTime    time.Duration  // total time parked Takes spent waiting, by their own clocks
	Closed      bool

	// The ward now, as of the Inspect's Now.
	Refusal float64       // the share of makes the breaker refuses (0 without one)
	Holding time.Duration // how much longer the backoff holds makes back after a failure; 0 when it does not
	Probing bool          // a make is out as the probe after a failure; others wait for its outcome

	// The fleet, if the pool has one (PoolConfig.Fleet).
	Fleet        policy.FleetState // the fleet's view as of the Inspect's Now: FleetOpen without a fleet
	FleetReports int64             // reports sent to the fleet
}
