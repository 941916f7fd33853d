package client

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/policy"
)

// Sentinel errors. Each is a refusal a caller may want to tell apart with
// errors.Is; the details, when there are any, travel in a typed error that
// unwraps to the sentinel or to the cause. They are package actors' own
// values, so one sentinel means one thing whichever layer answered.
var (
	// ErrShed says the call was turned away rather than queued. Each cause
	// has a sentinel of its own that also matches ErrShed under errors.Is:
	// ErrBreaker, ErrOverloaded, ErrTooManyWaiting. Retrying at once is
	// unlikely to help.
	ErrShed = actors.ErrShed
	// ErrBreaker says the pool's ward breaker refused to open a resource: the
	// backend has been failing. It matches ErrShed.
	ErrBreaker = actors.ErrBreaker
	// ErrOverloaded says the pool's ward shedder refused to lend: the process
	// is too hot, with more in flight than it has shown it can finish. It
	// matches ErrShed.
	ErrOverloaded = actors.ErrOverloaded
	// ErrTooManyWaiting says PoolConfig.MaxWaiting callers were in line
	// already. It matches ErrShed.
	ErrTooManyWaiting = actors.ErrTooManyWaiting
	// ErrClosed says the pool or limiter has been closed (or its engine
	// shut down); nothing more will be handed out.
	ErrClosed = actors.ErrClosed
	// ErrExceedsBurst says a limiter was asked for more at once than its
	// burst, so no amount of waiting would grant it.
	ErrExceedsBurst = errors.New("moonpool: request exceeds burst")
	// ErrNotLent says Put or Discard was given a resource the pool has not
	// lent out: it was never taken from this pool, or it was returned twice.
	// The pool leaves the resource alone; the caller still owns it.
	ErrNotLent = actors.ErrNotLent
	// ErrDuplicate says a pool's Open returned a resource equal to one the
	// pool already holds, idle or lent. The pool refused it and did not
	// close it: by the pool's identity it is the resource on the books,
	// which is closed once, when it leaves them. An Open that hands out a
	// shared or cached value has a bug.
	ErrDuplicate = actors.ErrDuplicate
	// ErrNoneIdle says TryGet found no idle resource and no room to open
	// one now: every resource is lent, the ward holds opens back, or
	// callers of Get are in line ahead.
	ErrNoneIdle = errors.New("moonpool: no idle resource")
)

// shedError is the client's error for a Shed the policy gave for why.
func shedError(why policy.Reason) error {
	switch why {
	case policy.ReasonBreaker:
		return ErrBreaker
	case policy.ReasonShedder:
		return ErrOverloaded
	case policy.ReasonClosed:
		return ErrClosed
	}
	return ErrShed
}

// PanicError is a panic in a user's function (a pool's Open or Close)
// recovered by the pool, which runs them on goroutines of its own where a
// panic would end the process. Value is what was panicked with; Stack is
// the goroutine's stack at the panic.
type PanicError struct {
	Value any
	Stack []byte
}

func newPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

// Error reports the panic's value with the package prefix.
func (e *PanicError) Error() string { return fmt.Sprintf("moonpool: panic: %v", e.Value) }

// Unwrap returns the panic's value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// OpenError is returned by Get when the pool's Open failed. It unwraps to
// the error Open returned, so errors.Is and errors.As see through it.
type OpenError struct {
	Err error // what Open returned
}

// Error reports the Open failure with the package prefix.
func (e *OpenError) Error() string { return "moonpool: open: " + errText(e.Err) }

// Unwrap returns the error Open returned.
func (e *OpenError) Unwrap() error { return e.Err }

// CloseError is returned by Put, Discard and Close when the pool's Close
// function failed for one or more resources. The resources are gone from
// the pool either way; the error is only reported. Count says how many
// closes failed; Err is the first failure (Close collects them all with
// errors.Join).
type CloseError struct {
	Count int   // how many closes failed
	Err   error // the failure, or several joined
}

// Error reports the Close failure with the package prefix.
func (e *CloseError) Error() string {
	if e.Count > 1 {
		return fmt.Sprintf("moonpool: close: %d failures: %s", e.Count, errText(e.Err))
	}
	return "moonpool: close: " + errText(e.Err)
}

// Unwrap returns the error Close returned.
func (e *CloseError) Unwrap() error { return e.Err }

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// waitText is a *WaitError's message for a wait of d held by by.
func waitText(d time.Duration, by string) string {
	if by != "" {
		by = " for " + by
	}
	if d >= policy.Never {
		return "moonpool: a wait" + by + " would never end"
	}
	return fmt.Sprintf("moonpool: a wait of %v%s would pass the deadline", rounded(d), by)
}

// rounded is d to three significant digits, for a message a person reads:
// 1.999913886s reads 2s. The exact figure stays in the error's field.
func rounded(d time.Duration) time.Duration {
	unit := time.Duration(1)
	for rest := d / 1000; rest > 0; rest /= 10 {
		unit *= 10
	}
	return d.Round(unit)
}
