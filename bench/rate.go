package main

import (
	"time"

	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"golang.org/x/time/rate"
)

// Both limiters earn a billion tokens a second and hold as many, so
// (almost) every call is allowed: what is measured is the cost of asking,
// not of being refused. The row reports the share allowed to show it.
const (
	rateLimit = 1e9
	rateBurst = 1e9
)

// rateRows are the Rate suite: Allow on one shared limiter from every
// caller at once. The Bucket's row also holds failsafe-go's two rate
// limiters, asked with TryAcquirePermit: they are shown beside it, and its
// targets stay against x/time/rate.
func rateRows(eng *engine.Engine, cfg config) []row {
	return []row{{
		suite:   "Rate",
		name:    "Allow",
		callers: cfg.callers,
		sides: []side{
			{name: "moonpool", ours: true, build: func(int) (contender, error) { return oursRate(eng) }},
			{name: "x/time/rate", build: func(int) (contender, error) { return theirRate(), nil }},
			{name: failsafeSmooth, build: func(int) (contender, error) { return failsafeRate(failsafeSmooth), nil }},
			{name: failsafeBursty, build: func(int) (contender, error) { return failsafeRate(failsafeBursty), nil }},
		},
		batch: 4,
		every: 16,
		count: countAllowed,
	}, {
		suite:   "Rate",
		name:    "Window Allow",
		callers: cfg.callers,
		sides: []side{
			{name: "moonpool", ours: true, build: func(int) (contender, error) { return oursWindow(eng) }},
			{name: "x/time/rate", build: func(int) (contender, error) { return theirRate(), nil }},
		},
		batch: 4,
		every: 16,
		count: countAllowed,
	}}
}

// The window allows a million events a millisecond: more than any caller
// count asks, and few enough stamps to hold.
const (
	windowAllow = 1_000_000
	windowSpan  = time.Millisecond
)

// oursWindow is a client.Window.
func oursWindow(eng *engine.Engine) (contender, error) {
	w, err := client.NewWindow(eng, windowAllow, windowSpan)
	if err != nil {
		return contender{}, err
	}
	return allowing(w.Allow, func() { closeWithin(w.Close) }), nil
}

// oursRate is a client.Bucket.
func oursRate(eng *engine.Engine) (contender, error) {
	b, err := client.NewBucket(eng, rateLimit, rateBurst)
	if err != nil {
		return contender{}, err
	}
	return allowing(b.Allow, func() { closeWithin(b.Close) }), nil
}

// allowing is a contender calling allow, counting what it lets through.
func allowing(allow func() bool, close func()) contender {
	var allowed tally
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if allow() {
					a++
				}
			}
			allowed.Add(int64(a))
		},
		close: close,
		count: allowed.Load,
	}
}

// theirRate is an x/time/rate Limiter.
func theirRate() contender {
	l := rate.NewLimiter(rateLimit, rateBurst)
	return allowing(l.Allow, func() {})
}

// The names of failsafe-go's sides.
const (
	failsafeSmooth  = "failsafe-go smooth"
	failsafeBursty  = "failsafe-go bursty"
	failsafeBulk    = "failsafe-go bulkhead"
	failsafeBreaker = "failsafe-go breaker"
)

// failsafeRate is one of failsafe-go's rate limiters at the same rate,
// asked with TryAcquirePermit, which answers at once like Allow. The
// smooth one spaces permits evenly, one a nanosecond here; the bursty one
// hands out a second's worth of permits at the start of each second.
func failsafeRate(kind string) contender {
	l := ratelimiter.NewSmooth[any](rateLimit, time.Second)
	if kind == failsafeBursty {
		l = ratelimiter.NewBursty[any](rateBurst, time.Second)
	}
	return allowing(l.TryAcquirePermit, func() {})
}
