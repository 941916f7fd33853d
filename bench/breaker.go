package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
	"github.com/sony/gobreaker/v2"
)

// errDown is the backend's answer all through the outage.
var errDown = errors.New("backend down")

// breakerRows are the Breaker suite: a backend that fails every call, and
// a fixed number of attempts against it through each breaker, starting
// from one that has seen nothing. What matters most is how many attempts
// reached the backend; the row reports it beside the time per attempt.
//
// moonpool's side is a pool whose Open is the failing call, warded by a
// breaker of policy.Throttle{K: 2, Period: time.Minute}: the SRE book's
// K = 2 over a minute, with DefaultBreaker's floor (ten requests) and cap
// (nine in ten refused at most, so one attempt in ten still reaches the
// backend, by design: it is how the breaker notices a recovery).
// gobreaker's side is its defaults: trip after more than five failures in
// a row, then refuse everything for sixty seconds. Both windows are longer
// than a row runs, so neither side recovers during it.
// failsafe-go's side is its defaults too: open after one failure, then
// refuse everything for a minute. It is shown beside gobreaker's; the
// targets stay against gobreaker.
func breakerRows(eng *engine.Engine, cfg config) []row {
	return []row{{
		suite:   "Breaker",
		name:    "outage",
		callers: cfg.breakerCallers,
		sides: []side{
			{name: "moonpool", ours: true, build: func(int) (contender, error) { return oursBreaker(eng) }},
			{name: "gobreaker", build: func(int) (contender, error) { return theirBreaker(), nil }},
			{name: failsafeBreaker, build: func(int) (contender, error) { return failsafeCircuit(), nil }},
		},
		batch: 1,
		every: 1,
		fixed: cfg.attempts,
		count: countBackend,
	}}
}

// oursBreaker is a client.Pool whose every Open fails, behind a breaker.
func oursBreaker(eng *engine.Engine) (contender, error) {
	var hits atomic.Int64
	p, err := client.NewPool(eng, client.PoolConfig[*conn]{
		Open: func(context.Context) (*conn, error) {
			hits.Add(1)
			return nil, errDown
		},
		Limits: policy.DefaultLimits,
		Ward:   policy.Ward{Breaker: policy.Throttle{K: 2, Period: time.Minute}},
	})
	if err != nil {
		return contender{}, err
	}
	ctx := context.Background()
	var errs atomic.Int64
	return contender{
		run: func(n int) {
			for range n {
				c, err := p.Get(ctx)
				switch {
				case err == nil: // the backend is down: no Get can succeed
					errs.Add(1)
					_ = p.Put(c)
				case errors.Is(err, client.ErrShed), errors.Is(err, errDown):
				default:
					errs.Add(1)
				}
			}
		},
		close: func() { closeWithin(p.Close) },
		count: hits.Load,
		errs:  errs.Load,
	}, nil
}

// theirBreaker is a gobreaker CircuitBreaker with its default settings
// around the same failing call.
func theirBreaker() contender {
	cb := gobreaker.NewCircuitBreaker[*conn](gobreaker.Settings{Name: "bench"})
	return peerBreaker(cb.Execute, gobreaker.ErrOpenState, gobreaker.ErrTooManyRequests)
}

// failsafeCircuit is a failsafe-go CircuitBreaker with its defaults,
// around the same failing call through an Executor built once. The call
// goes through the Executor's Get, not TryAcquirePermit and RecordFailure
// by hand: that is how failsafe-go's docs wrap a call, and it is the same
// shape as gobreaker's Execute and moonpool's Get, so the time per
// attempt includes what wrapping costs each library.
func failsafeCircuit() contender {
	exec := failsafe.With[*conn](circuitbreaker.NewWithDefaults[*conn]())
	return peerBreaker(exec.Get, circuitbreaker.ErrOpen)
}

// peerBreaker is a peer's breaker around the failing call: execute runs
// the call through it. An answer other than the call's own error or one
// of refusals is an error here.
func peerBreaker(execute func(func() (*conn, error)) (*conn, error), refusals ...error) contender {
	var hits, errs atomic.Int64
	call := func() (*conn, error) {
		hits.Add(1)
		return nil, errDown
	}
	return contender{
		run: func(n int) {
			for range n {
				_, err := execute(call)
				if !peerRefused(err, refusals) {
					errs.Add(1)
				}
			}
		},
		close: func() {},
		count: hits.Load,
		errs:  errs.Load,
	}
}

// peerRefused reports whether err is the failing call's own error or one of
// refusals.
func peerRefused(err error, refusals []error) bool {
	if err == nil || errors.Is(err, errDown) {
		return err != nil
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}
