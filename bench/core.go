package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/policy"
	"golang.org/x/time/rate"
)

// The Core suite runs the pure core alone on one goroutine, with time
// handed in: nothing between the caller and the bookkeeping. Bucket.Take
// and Window.Take are set against x/time/rate's AllowN(t, 1), the same
// question asked with the time handed in. Pool Take+Give is set against
// the buffered channel, the floor of the Pool suite, since x/time/rate
// has no pool.

// stamps is how many instants a core contender steps through before it
// starts over on a fresh limiter: time must only move forward, and
// instants worked out ahead keep the clock (and arithmetic on time.Time)
// out of the measured loop. x/time/rate's fresh limiter is one allocation
// per 65,536 calls, which shows as 0.00 allocs/op.
const stamps = 1 << 16

// coreRows are the Core suite.
func coreRows(cfg config) []row {
	one := []int{1}
	rows := []row{{
		suite: "Core", name: "Pool Take+Give", callers: one,
		sides: []side{
			{name: "policy", ours: true, build: func(int) (contender, error) { return corePool(), nil }},
			{name: "chan", build: func(int) (contender, error) { return chanPool(10), nil }},
		},
	}, {
		suite: "Core", name: "Bucket.Take", callers: one,
		sides: []side{
			{name: "policy", ours: true, build: func(int) (contender, error) { return coreBucket(), nil }},
			{name: "x/time/rate", build: func(int) (contender, error) { return coreAllowN(), nil }},
		},
		count: countAllowed,
	}}
	for _, allow := range []int{10, 1_000_000} {
		rows = append(rows, row{
			suite: "Core", name: fmt.Sprintf("Window.Take allow=%d", allow), callers: one,
			sides: []side{
				{name: "policy", ours: true, build: func(int) (contender, error) { return coreWindow(allow), nil }},
				{name: "x/time/rate", build: func(int) (contender, error) { return coreAllowN(), nil }},
			},
			count: countAllowed,
		})
	}
	for i := range rows {
		rows[i].batch, rows[i].every = 256, 1024
	}
	return rows
}

// corePool is a policy.Pool of ten, all idle, lent and given back. It is
// not safe for concurrent use, and the suite runs it on one goroutine.
func corePool() contender {
	const size = 10
	p := policy.NewPool[*conn](policy.Limits{Size: size, Idle: size}, policy.Ward{})
	var now int64
	made := make([]*conn, 0, size)
	for i := range size {
		if p.Take(now).Verdict == policy.Make {
			c := &conn{id: i}
			p.Made(c, now)
			made = append(made, c)
		}
	}
	for _, c := range made {
		p.Give(c, now)
	}
	var errs atomic.Int64
	return contender{
		run: func(n int) {
			for range n {
				now++
				t := p.Take(now)
				if t.Verdict != policy.Ready || !p.Give(t.Item, now) {
					errs.Add(1)
				}
			}
		},
		close: func() {},
		errs:  errs.Load,
	}
}

// coreBucket is a policy.Bucket earning one token a nanosecond and asked
// for one each nanosecond, as coreAllowN's limiter is.
func coreBucket() contender {
	var ns [stamps]int64
	for i := range ns {
		ns[i] = int64(i + 1)
	}
	// Starting over copies a full bucket in place: no allocation, so the
	// core's zero is measured as zero.
	full := *policy.NewBucket(rateLimit, rateBurst, 0)
	b, i := full, 0
	var allowed atomic.Int64
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if i == stamps {
					b, i = full, 0
				}
				if b.Take(ns[i], 1) {
					a++
				}
				i++
			}
			allowed.Add(int64(a))
		},
		close: func() {},
		count: allowed.Load,
	}
}

// coreAllowN is an x/time/rate Limiter asked AllowN(t, 1) at instants a
// nanosecond apart, worked out ahead.
func coreAllowN() contender {
	base := time.Now()
	ts := make([]time.Time, stamps)
	for i := range ts {
		ts[i] = base.Add(time.Duration(i + 1))
	}
	fresh := func() *rate.Limiter { return rate.NewLimiter(rateLimit, rateBurst) }
	l, i := fresh(), 0
	var allowed atomic.Int64
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if i == stamps {
					l, i = fresh(), 0
				}
				if l.AllowN(ts[i], 1) {
					a++
				}
				i++
			}
			allowed.Add(int64(a))
		},
		close: func() {},
		count: allowed.Load,
	}
}

// coreWindow is a full policy.Window in its steady state: each call comes
// as the oldest counted event leaves, so each Take drops one stamp and
// counts one. A quota of a million must cost what a quota of ten does.
func coreWindow(allow int) contender {
	const step = int64(time.Microsecond)
	w := policy.NewWindow(allow, time.Duration(int64(allow)*step))
	var now int64
	for range 2 * allow {
		now += step
		w.Take(now)
	}
	var allowed atomic.Int64
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				now += step
				if w.Take(now) {
					a++
				}
			}
			allowed.Add(int64(a))
		},
		close: func() {},
		count: allowed.Load,
	}
}
