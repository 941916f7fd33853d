package actors

import (
	"errors"

	"github.com/moonpool-go/moonpool/engine"
)

// The refusals, one sentinel each, shared by every layer: package client
// returns these same values (client.ErrClosed is ErrClosed), so errors.Is
// matches whether a caller talks to an actor or goes through the client.
var (
	// ErrShed says a call was turned away rather than queued. Each cause
	// has a sentinel of its own that also matches ErrShed under errors.Is:
	// ErrBreaker, ErrOverloaded, ErrTooManyWaiting. Retrying at once is
	// unlikely to help.
	ErrShed = errors.New("moonpool: shed")
	// ErrBreaker says a pool's ward breaker refused to open a resource: the
	// backend has been failing (a Shed answer's Why, ReasonBreaker). It
	// matches ErrShed.
	ErrBreaker error = &shed{"moonpool: shed: the breaker refuses opens to a failing backend"}
	// ErrOverloaded says a pool's ward shedder refused to lend: the process
	// is too hot, with more in flight than it has shown it can finish (a
	// Shed answer's Why, ReasonShedder). It matches ErrShed.
	ErrOverloaded error = &shed{"moonpool: shed: the process is overloaded"}
	// ErrTooManyWaiting answers a waiting Take turned away because
	// PoolConfig.MaxWaiting callers were in line already. It matches ErrShed.
	ErrTooManyWaiting error = &shed{"moonpool: shed: too many callers waiting"}
	// ErrClosed answers a Take on a closed pool, and every waiter a Close
	// finds; the client returns it for any pool or limiter closed.
	ErrClosed = errors.New("moonpool: closed")
	// ErrStopped answers a request that reached a stopped actor. It matches
	// engine.ErrStopped, and ErrClosed, since an actor stops for good.
	ErrStopped error = &stopped{}
	// ErrNotLent answers a strict Give or Drop of a resource the pool has
	// not lent: never taken from it, or returned twice.
	ErrNotLent = errors.New("moonpool: resource is not lent out")
	// ErrDuplicate answers a Made of a resource the pool already holds (idle
	// or lent): taking it on would lend one resource to two holders.
	ErrDuplicate = errors.New("moonpool: open returned a resource the pool already holds")
	// ErrOutdated answers a Made or Filled of a make begun before a Reset
	// (its Gen is not the pool's): the pool does not take it on, since the
	// Reset said every connection to the backend as it was is suspect, and
	// the caller closes it. A caller's Get takes again.
	ErrOutdated = errors.New("moonpool: opened before a Reset")
	// ErrCancelled answers a parked request withdrawn by Cancel or Withdraw.
	ErrCancelled = errors.New("moonpool: request withdrawn")
	// ErrDeadline answers a limiter wait that would end after its Deadline.
	ErrDeadline = errors.New("moonpool: wait would pass the deadline")
	// ErrHeld answers a waiting Take whose Deadline the ward's hold on makes
	// would pass while nothing is lent that could come back sooner; After
	// carries the rest of the hold. It matches ErrDeadline.
	ErrHeld error = &held{}
)

// shed is a refusal with its own cause that also matches ErrShed.
type shed struct{ msg string }

func (e *shed) Error() string        { return e.msg }
func (e *shed) Is(target error) bool { return target == ErrShed }

// held is ErrHeld, a wait past the deadline for a reason of its own.
type held struct{}

func (*held) Error() string        { return "moonpool: makes held back past the deadline" }
func (*held) Is(target error) bool { return target == ErrDeadline }

// stopped is ErrStopped, which matches ErrClosed, and engine.ErrStopped:
// it is the engine's condition, seen by a request.
type stopped struct{}

func (*stopped) Error() string { return "moonpool: closed: actor stopped" }
func (*stopped) Is(target error) bool {
	return target == ErrClosed || target == engine.ErrStopped
}
