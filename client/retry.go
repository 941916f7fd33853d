package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// ErrNoAttempts is returned by Retry when its backoff allows no attempt at
// all (Attempts <= 0, as in the zero Backoff): fn was never run. A field
// left out of a Backoff reads as "none", not as the preset; start from
// policy.DefaultBackoff.
var ErrNoAttempts = errors.New("moonpool: backoff allows no attempt")

// RetryError is what Retry returns when it gives up on an fn that kept
// failing: the attempts ran out (Cause is nil), ctx ended (Cause is ctx's
// error), or the next sleep would have passed ctx's deadline (Cause is a
// *WaitError). errors.Is and errors.As reach both the last failure and the
// cause.
type RetryError struct {
	Attempts int   // how many times fn ran
	Err      error // what the last run returned; nil if fn never ran
	Cause    error // why Retry stopped before the attempts ran out; nil if they did
}

// Error says how many attempts were made, why Retry stopped and what the
// last failure was.
func (e *RetryError) Error() string {
	why := "gave up"
	if e.Cause != nil {
		why = "stopped (" + e.Cause.Error() + ")"
	}
	if e.Err == nil {
		return fmt.Sprintf("moonpool: retry: %s after %d attempts", why, e.Attempts)
	}
	return fmt.Sprintf("moonpool: retry: %s after %d attempts: %v", why, e.Attempts, e.Err)
}

// Unwrap returns the last failure and the cause, those that are not nil.
func (e *RetryError) Unwrap() []error {
	var errs []error
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// RetryOption changes how Retry runs. Make one with WithBudget, SleepOn
// or WithSource. The zero RetryOption changes nothing. An option is a
// plain value: Retry reads it without allocating, so one made once can be
// passed to every call.
type RetryOption struct {
	budget *Budget        // asked before each retry; nil: none
	clock  Clock          // what the sleeps are slept on; nil: the real clock
	draw   func() float64 // in [0, 1); nil: math/rand/v2's
}

// WithBudget makes Retry spend retries from b: the call counts as one
// first attempt (Budget.First), and each retry asks b.Retry first. A retry
// b refuses is not made: Retry returns at once a *RetryError with the last
// failure and ErrBudget as its Cause, so errors.Is finds both. A nil b is
// ignored.
func WithBudget(b *Budget) RetryOption { return RetryOption{budget: b} }

// SleepOn makes Retry sleep on c: an engine's clock (Engine.Clock), so the
// sleeps follow the same time as the pools and limiters, or a
// moontest.Clock in a test. Without it Retry sleeps on the real clock; a nil
// c is ignored.
func SleepOn(c Clock) RetryOption { return RetryOption{clock: c} }

// WithSource makes Retry draw its jitter from r, one Float64 per retry, so
// a seeded r gives the same sleeps every run. A *rand.Rand is not safe for
// concurrent use: give each concurrent Retry its own. A nil r is ignored.
//
// Without it Retry draws from math/rand/v2's top-level source, which the
// runtime seeds at random: clients in different processes then never draw
// in step, which is what jitter is for.
func WithSource(r *rand.Rand) RetryOption {
	if r == nil {
		return RetryOption{}
	}
	return RetryOption{draw: r.Float64}
}

// Permanent marks err as not worth retrying: Retry returns at once when fn
// returns it, without sleeping. When fn returns the mark itself, Retry
// returns err, unmarked; when fn wraps the mark in an error of its own,
// Retry returns that error as it is. errors.Is and errors.As see through
// the mark either way. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// RetryAfter wraps err with a server's hint of when to come back, such as
// an HTTP Retry-After header or a gRPC RetryInfo. Retry then sleeps at
// least d before the next attempt instead of its computed delay (see Retry
// for how the sleep is spread). A d below zero is read as zero.
// RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: max(d, 0)}
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.err, e.after)
}

func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter is the hint, which is how Retry finds it.
func (e *retryAfterError) RetryAfter() time.Duration { return e.after }

// hinter is any error carrying a retry-after hint: RetryAfter's, or a
// caller's own HTTP error type with the same method.
type hinter interface{ RetryAfter() time.Duration }

// Retry runs fn until it succeeds, as backoff allows: at most
// backoff.Attempts runs in all, sleeping backoff.Delay(retry, draw,
// previous) on the real clock (or SleepOn's) before each retry, with one draw from the
// source (see WithSource) per retry. With a seeded source the sleeps are
// exactly backoff.Schedule of the same draws. ctx is passed to every run.
//
// It returns nil once fn does, and otherwise:
//   - fn's error at once, when it is marked Permanent (see Permanent for
//     which error exactly);
//   - a *RetryError wrapping the last failure when the attempts run out;
//   - a *RetryError wrapping the last failure and ctx's error when ctx ends
//     before or during a sleep: Retry returns promptly, leaving no timer;
//   - a *RetryError wrapping the last failure and a *WaitError
//     (ErrExceedsDeadline) when the next sleep would end after ctx's
//     deadline, at once rather than sleeping towards a certain failure;
//   - a *RetryError wrapping the last failure and ErrBudget when the
//     budget given with WithBudget refuses the next retry, at once;
//   - ErrNoAttempts when backoff allows no attempt; an error for a nil fn.
//
// A retry-after hint carried by the failure — made with RetryAfter, or any
// error in the chain with a RetryAfter() time.Duration method — replaces
// the computed delay. Told "come back in 5 s", a thousand clients that all
// slept exactly 5 s would return as one spike, so Retry sleeps
// hint + draw × spread, where spread is the larger of backoff.Ceiling for
// this retry and a tenth of the hint: never earlier than the server asked,
// and a crowd spread over at least a tenth of the hint. The spread is drawn
// whatever the backoff's jitter, since it is the crowd it is for. The
// hinted sleep is the previous delay a Decorrelated backoff grows from.
//
// ctx's deadline is read on the real clock, as ctx keeps it, or through
// SleepOn's clock when that clock has an Until method (see engine.Clock);
// a sleep on another clock is compared with the real time left. A nil ctx
// is refused with an error.
func Retry(ctx context.Context, backoff Backoff, fn func(ctx context.Context) error, opts ...RetryOption) error {
	if ctx == nil {
		return errNilContext
	}
	if fn == nil {
		return errors.New("moonpool: Retry: nil fn")
	}
	// The options are read field by field, later ones winning, so that
	// nothing escapes to the heap. One option is read in place.
	var merged RetryOption
	s := &merged
	if len(opts) == 1 {
		s = &opts[0]
	} else {
		for i := range opts {
			o := &opts[i]
			if o.budget != nil {
				s.budget = o.budget
			}
			if o.clock != nil {
				s.clock = o.clock
			}
			if o.draw != nil {
				s.draw = o.draw
			}
		}
	}
	if !backoff.More(0) {
		return ErrNoAttempts
	}
	var last error
	var previous time.Duration
	made := 0
	counted := false // the budget counted the first attempt
	for backoff.More(made) {
		if made > 0 {
			r := s.random()
			d := backoff.Delay(made, r, previous)
			var h hinter
			if errors.As(last, &h) {
				d = hinted(h.RetryAfter(), backoff.Ceiling(made), r)
			}
			previous = d
			if dl, ok := ctx.Deadline(); ok && d > until(s.clock, dl) {
				return &RetryError{Attempts: made, Err: last, Cause: &WaitError{Wait: d, By: "the retry's backoff"}}
			}
			if s.budget != nil {
				if !counted {
					// The budget was not watching as the first attempt
					// went out. It is counted now, before the ask.
					s.budget.tally.Count()
					counted = true
				}
				if !s.budget.Retry() {
					return &RetryError{Attempts: made, Err: last, Cause: ErrBudget}
				}
			}
			if err := vclock.Sleep(ctx, s.sleeper(), d); err != nil {
				return &RetryError{Attempts: made, Err: last, Cause: ctx.Err()}
			}
		}
		if ctx.Err() != nil {
			return &RetryError{Attempts: made, Err: last, Cause: ctx.Err()}
		}
		if made == 0 && s.budget != nil && s.budget.tally.Watching() {
			s.budget.tally.Count()
			counted = true
		}
		err := fn(ctx)
		made++
		if err == nil {
			return nil
		}
		var p *permanentError
		if errors.As(err, &p) {
			if err == error(p) {
				return p.err
			}
			return err
		}
		last = err
	}
	return &RetryError{Attempts: made, Err: last}
}

// random is one draw from the option's source, or math/rand/v2's.
func (o *RetryOption) random() float64 {
	if o.draw == nil {
		return rand.Float64()
	}
	return o.draw()
}

// sleeper is the clock the option sleeps on, the real one by default.
func (o *RetryOption) sleeper() Clock {
	if o.clock == nil {
		return vclock.Real()
	}
	return o.clock
}

// hinted is the sleep for a retry-after hint h: h plus r × the larger of
// ceiling and h/10, never less than h, saturating at policy.Never.
func hinted(h, ceiling time.Duration, r float64) time.Duration {
	h = max(h, 0)
	span := max(ceiling, h/10)
	extra := time.Duration(r * float64(span))
	if extra > span || extra < 0 { // a float rounding past span
		extra = span
	}
	if h > policy.Never-extra {
		return policy.Never
	}
	return h + extra
}
