package main

import (
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"golang.org/x/sync/semaphore"
)

// gateLimit is both gates' limit: above the most callers any row runs, so
// every Enter is let in and what is measured is the cost of entering and
// leaving, not of being turned away.
const gateLimit = 1024

// gateRows are the Gate suite: enter and, when let in, leave again, on one
// gate shared by every caller. failsafe-go's bulkhead is shown beside the
// two; the targets stay against the semaphore.
func gateRows(eng *engine.Engine, cfg config) []row {
	return []row{{
		suite:   "Gate",
		name:    "Enter+Leave",
		callers: cfg.callers,
		sides: []side{
			{name: "moonpool", ours: true, build: func(int) (contender, error) { return oursGate(eng) }},
			{name: "semaphore", build: func(int) (contender, error) { return theirGate(), nil }},
			{name: failsafeBulk, build: func(int) (contender, error) { return failsafeGate(), nil }},
		},
		batch: 4,
		every: 16,
		count: countAllowed,
	}}
}

// oursGate is a client.Gate.
func oursGate(eng *engine.Engine) (contender, error) {
	g, err := client.NewGate(eng, gateLimit)
	if err != nil {
		return contender{}, err
	}
	var in tally
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if g.Enter() {
					g.Leave()
					a++
				}
			}
			in.Add(int64(a))
		},
		close: func() { closeWithin(g.Close) },
		count: in.Load,
	}, nil
}

// theirGate is an x/sync semaphore.Weighted, entered with TryAcquire(1):
// like the Gate it answers at once and never queues.
func theirGate() contender {
	s := semaphore.NewWeighted(gateLimit)
	var in tally
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if s.TryAcquire(1) {
					s.Release(1)
					a++
				}
			}
			in.Add(int64(a))
		},
		close: func() {},
		count: in.Load,
	}
}

// failsafeGate is a failsafe-go Bulkhead of the same limit, entered with
// TryAcquirePermit and left with ReleasePermit: it too answers at once
// and never queues.
func failsafeGate() contender {
	b := bulkhead.New[any](gateLimit)
	var in tally
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if b.TryAcquirePermit() {
					b.ReleasePermit()
					a++
				}
			}
			in.Add(int64(a))
		},
		close: func() {},
		count: in.Load,
	}
}
