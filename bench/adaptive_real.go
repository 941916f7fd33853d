package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/priority"
	"golang.org/x/sync/semaphore"
)

// On the real clock every side runs at once, each in front of a backend
// of its own, with a goroutine per request that waits on the machine's
// timers as a server's handler would.

// realLimiter is a side's limit as a request's goroutine uses it: enter
// may wait; an error is a refusal, or the request's deadline passing
// while it waited.
type realLimiter interface {
	enter(ctx context.Context, critical bool) (realPass, error)
	limit() float64
	close()
}

// unexpected is an error a side should never answer with: neither a
// refusal nor the request's deadline. The run counts it as a failure.
type unexpected struct{ err error }

func (u unexpected) Error() string { return u.err.Error() }
func (u unexpected) Unwrap() error { return u.err }

// realPass is a request let in: done gives its room back, timedOut when
// the caller gave up at its deadline.
type realPass interface {
	done(timedOut bool)
}

// realSide is one side of the real-clock scenarios: build makes its
// limit for a scenario (priorities: the scenario has classes).
type realSide struct {
	name  string
	ours  bool
	build func(s *adaptiveScenario, oracle int) (realLimiter, error)
}

// outcome is what became of one request on the real clock.
type outcome struct {
	start    time.Duration // when its goroutine began, from the origin
	end      time.Duration // its answer, deadline or refusal, from the origin
	admitted bool
	inTime   bool
	queued   bool  // it waited in the side's queue until its deadline
	failed   error // the side answered with an unexpected error
}

// realRun runs every side through s at once, each with its own backend.
func realRun(sides []realSide, s *adaptiveScenario, reqs []arrival, oracle int) ([]*adaptiveRun, error) {
	lims := make([]realLimiter, len(sides))
	defer func() {
		for _, l := range lims {
			if l != nil {
				l.close()
			}
		}
	}()
	for i, sd := range sides {
		l, err := sd.build(s, oracle)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sd.name, err)
		}
		lims[i] = l
	}
	outs := make([][]outcome, len(sides))
	limits := make([][]sample, len(sides))
	origin := time.Now().Add(50 * time.Millisecond)
	stop := make(chan struct{})
	var looker sync.WaitGroup
	looker.Go(func() {
		// The limits, every 50 ms.
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tk.C:
				at := now.Sub(origin)
				if at < 0 {
					continue
				}
				for i, l := range lims {
					limits[i] = append(limits[i], sample{at: at, v: l.limit()})
				}
			}
		}
	})
	var wg sync.WaitGroup
	for i := range sides {
		outs[i] = make([]outcome, len(reqs))
		be := newKnee(s.mostWorkers())
		var mu sync.Mutex // the backend's
		lim := lims[i]
		wg.Go(func() {
			var reqWG sync.WaitGroup
			for j, a := range reqs {
				if d := time.Until(origin.Add(a.at)); d > 0 {
					time.Sleep(d)
				}
				reqWG.Go(func() {
					outs[i][j] = realRequest(s, a, lim, be, &mu, origin)
				})
			}
			reqWG.Wait()
		})
	}
	wg.Wait()
	close(stop)
	looker.Wait()
	var runs []*adaptiveRun
	for i, sd := range sides {
		r := &adaptiveRun{side: sd.name, ours: sd.ours, clock: "real", scenario: s}
		if sd.name == adaptiveOracle {
			r.fixed = oracle
		}
		r.limits = limits[i]
		replay(r, reqs, outs[i], 250*time.Millisecond)
		runs = append(runs, r)
	}
	return runs, nil
}

// realRequest is one request's goroutine: the limit, the backend, the
// caller's deadline.
func realRequest(s *adaptiveScenario, a arrival, lim realLimiter, be *knee, mu *sync.Mutex, origin time.Time) outcome {
	start := time.Now()
	from := start.Sub(origin)
	deadline := start.Add(adaptiveDeadline)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	p, err := lim.enter(ctx, a.critical)
	if err != nil {
		if errors.As(err, new(unexpected)) {
			return outcome{start: from, end: time.Since(origin), failed: err}
		}
		if ctx.Err() != nil {
			return outcome{start: from, end: deadline.Sub(origin), queued: true}
		}
		return outcome{start: from, end: time.Since(origin)}
	}
	now := time.Now()
	mu.Lock()
	doneAt := be.admit(now.UnixNano(), s.workersAt(now.Sub(origin)), a.service)
	mu.Unlock()
	inTime := doneAt <= deadline.UnixNano()
	until := min(doneAt, deadline.UnixNano())
	if d := time.Duration(until - time.Now().UnixNano()); d > 0 {
		time.Sleep(d)
	}
	p.done(!inTime)
	// The request ends when the backend answers or the caller gives up,
	// not when this goroutine wakes: a busy machine's late timers are the
	// harness's, not the side's.
	return outcome{start: from, end: time.Unix(0, until).Sub(origin), admitted: true, inTime: inTime}
}

// replay records the outcomes in the order they ended.
func replay(r *adaptiveRun, reqs []arrival, outs []outcome, window time.Duration) {
	idx := make([]int, len(outs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(outs[a].end - outs[b].end) })
	rc := newRecorder(r, window)
	for _, i := range idx {
		o := outs[i]
		if o.failed != nil {
			r.errs++
			if r.firstErr == nil {
				r.firstErr = o.failed
			}
		}
		switch {
		case o.admitted:
			rc.answer(reqs[i], o.start, o.end, o.inTime)
		case o.queued:
			rc.answer(reqs[i], o.start, o.end, false)
		default:
			rc.refuse(reqs[i])
		}
	}
	rc.done()
}

// ---- failsafe-go ----

// theirAdaptive is failsafe-go's adaptivelimiter at its defaults (limits
// 1 to 200 from 20, no queue); in a scenario with classes, the prioritized
// limiter (which queues two to three times its limit) and a prioritizer
// calibrated every 100 ms, the highest class VeryHigh, the other Low.
// A request that times out drops its permit, as failsafe-go's own
// executor does for a cancelled execution.
func theirAdaptive(s *adaptiveScenario, _ int) (realLimiter, error) {
	if s.critical > 0 {
		p := adaptivelimiter.NewPrioritizer()
		cancel := p.ScheduleCalibrations(context.Background(), 100*time.Millisecond)
		l := adaptivelimiter.NewBuilder[any]().BuildPrioritized(p)
		return &failsafeSide{lim: l, prio: l, cancel: cancel}, nil
	}
	return &failsafeSide{lim: adaptivelimiter.NewBuilder[any]().Build(), cancel: func() {}}, nil
}

type failsafeSide struct {
	lim    adaptivelimiter.Metrics
	prio   adaptivelimiter.PriorityLimiter[any]
	cancel func()
}

func (f *failsafeSide) enter(ctx context.Context, critical bool) (realPass, error) {
	var p adaptivelimiter.Permit
	var err error
	if f.prio != nil {
		class := priority.Low
		if critical {
			class = priority.VeryHigh
		}
		p, err = f.prio.AcquirePermitWithPriority(ctx, class)
	} else {
		// No wait, as failsafe-go's executor asks of a limiter built
		// without queueing.
		p, err = f.lim.(adaptivelimiter.AdaptiveLimiter[any]).AcquirePermitWithMaxWait(ctx, 0)
	}
	if err != nil {
		if !errors.Is(err, adaptivelimiter.ErrExceeded) && ctx.Err() == nil {
			return nil, unexpected{fmt.Errorf("failsafe-go: %w", err)}
		}
		return nil, err
	}
	return failsafePass{p}, nil
}

func (f *failsafeSide) limit() float64 { return float64(f.lim.Limit()) }
func (f *failsafeSide) close()         { f.cancel() }

type failsafePass struct{ p adaptivelimiter.Permit }

func (p failsafePass) done(timedOut bool) {
	if timedOut {
		p.p.Drop()
		return
	}
	p.p.Record()
}

// ---- fixed gates ----

// fixedReal is x/sync's semaphore entered with TryAcquire: a fixed room,
// no queue. With no room at all it is the side without a limit.
type fixedReal struct {
	sem  *semaphore.Weighted
	room int
}

func fixedRealSide(room int) *fixedReal {
	if room <= 0 {
		return &fixedReal{}
	}
	return &fixedReal{sem: semaphore.NewWeighted(int64(room)), room: room}
}

var errFull = errors.New("full")

func (f *fixedReal) enter(context.Context, bool) (realPass, error) {
	if f.sem == nil {
		return fixedPass{}, nil
	}
	if !f.sem.TryAcquire(1) {
		return nil, errFull
	}
	return fixedPass{f.sem}, nil
}

func (f *fixedReal) limit() float64 { return float64(f.room) }
func (f *fixedReal) close()         {}

type fixedPass struct{ sem *semaphore.Weighted }

func (p fixedPass) done(bool) {
	if p.sem != nil {
		p.sem.Release(1)
	}
}
