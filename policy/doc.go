// Package policy is moonpool's pure core: the bookkeeping of a resource pool,
// a retry backoff, a token bucket, a sliding-window quota, a concurrency gate,
// an adaptive breaker and a load shedder.
//
// A Pool's Ward puts a bucket, a backoff, a breaker and a shedder in front of
// its backend. The Ward is configuration only (Rate, Backoff, Throttle,
// Overload, with presets DefaultBackoff, DefaultBreaker and DefaultShedder):
// each Pool builds state of its own from it, so one Ward may serve many
// pools. Take's Shed and Later answers carry a Reason saying which part
// refused or held back. Bucket, Breaker and Shedder are also usable alone.
// A FleetView, set with Pool.SetFleet, lays a fleet's hold, probe and ramp
// over the Ward.
//
// Budget bounds retries and hedges to a share of first attempts, and
// Quantile tracks the latency a hedge waits for.
//
// Nothing here opens, closes, sleeps, reads a clock, draws a random number,
// locks or does I/O. The pool says what to do with a resource, the backoff
// says how long, the limiter says whether; the caller does it. Time is passed
// in as int64 nanoseconds from the caller's own clock (only differences
// matter) and spans are time.Duration, so an hour of traffic is a test that
// runs in microseconds and the same calls always give the same answers.
//
// The types with state (Pool, Bucket, Window, Gate, Breaker, Shedder) are not
// safe for concurrent use: each value has one owner. In moonpool that owner
// is an actor (package actors), which is what makes the absence of locks
// here safe. The configuration types (Limits, Ward, Rate, Backoff, Throttle,
// Overload) are plain values, safe to copy and share.
//
// Every input has an answer. A negative, NaN or infinite number, an n of
// zero, a clock that steps back or a zero value declared without its
// constructor gets a documented clamp or refusal: nothing here panics, no
// count goes below zero, and no limiter lets more through than it promised.
// The hot paths — Bucket.Take, Window.Take after its ring has grown,
// Gate.Enter and Leave, Backoff.Delay — allocate nothing.
package policy

import (
	"math"
	"time"
)

// Forever is the span that means "no limit": a Keep or Life of Forever never
// retires a resource. It is zero, so a zero Limits field means no limit too.
const Forever time.Duration = 0

// Never is a wait that no amount of time ends: what Next answers when the
// thing asked for can never be had (more tokens than the burst, a bucket with
// no rate).
const Never time.Duration = math.MaxInt64
