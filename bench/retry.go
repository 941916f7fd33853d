package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moongrpc"
	"github.com/moonpool-go/moonpool/moonhttp"
	"github.com/moonpool-go/moonpool/moontest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The Retry suite puts retries in front of a simulated backend that fails
// for a while, and hedged requests in front of one with a heavy tail.
//
// The outage scenarios ask what retries do to a backend in trouble. The
// backend serves a fixed rate of first attempts and has room for half as
// much again. During the outage it fails a share of attempts. Past its
// room it thrashes: an attempt succeeds with probability (room/load)²,
// the load being the attempts of the last second. So retries that pile
// up during the outage can keep it down after the outage ends, as in a
// real retry storm. It recovers once its load falls back within its room.
//
// On the virtual clock (moontest) the scenarios run long, the same way
// every time, with client.Retry sleeping on the clock. On the real clock
// they run short, every side at once, each with its own backend, and the
// other libraries join: failsafe-go's retrypolicy with its budget, and
// gRPC's own retries with retryThrottling over a gRPC server on loopback.

// retryConfig is how the Retry suite runs in one configuration.
type retryConfig struct {
	virtual retryPlan // long outages on the virtual clock
	real    retryPlan // short outages on the real clock
	// realWindow is the budget's window on the real clock. The default
	// window, ten seconds, is half the virtual clock's outage. The real
	// clock's outages last a second or two, so its window is half of one.
	realWindow time.Duration
	hedge      hedgePlan
	// healthy are the callers of the healthy path's row, rounds its rounds.
	// Its calls take nanoseconds, and a neighbour on the machine can slow
	// one slice of them by a tenth: the ratio is the median of many rounds.
	healthy       []int
	healthyRounds int
}

// retryPlan is one clock's outage scenarios.
type retryPlan struct {
	rate    int           // first attempts a second, evenly spaced
	warm    time.Duration // healthy, before the outage
	outage  time.Duration // how long the backend fails
	after   time.Duration // healthy again, to see it recover
	latency time.Duration // one attempt, ±20 %
	shares  []float64     // the share of attempts failing, one scenario each
	healthy bool          // also a scenario with no outage at all
}

// hedgePlan is the heavy-tail scenario.
type hedgePlan struct {
	rate int // requests a second, evenly spaced
	// warm is sent to each side before it is measured: the quantiles fill
	// up. Hedging by quantile starts once a side has seen enough requests
	// to tell it: 167 at p97, five of them at or above it.
	warm   time.Duration
	span   time.Duration // measured, per side
	rounds int           // the span cut in slices, the sides taking turns in each
	// base is a fast request's latency, ±20 %. It is tens of
	// milliseconds, as a call to a database or another service is, and
	// not one or two: on a shared machine a Go timer of 2 ms rings 2 ms
	// late about one time in a hundred, and a backend that fast would have
	// a second tail, the machine's, as long as its requests. (The smoke
	// run, which only checks that every side runs, keeps 2 ms.)
	base     time.Duration
	delay    time.Duration // the fixed hedge delay: past every fast request
	quantile float64       // the other rule: hedge past this quantile
	// ladder are the quantiles failsafe-go's rule is run at, quantile
	// among them. Each estimator sends its own share of hedges at one
	// quantile. The target reads failsafe-go's p99 between these runs
	// at the extra requests ours sent: the same extra load.
	ladder []float64
}

// perRound is how many requests one side sends in one measured round.
func (p hedgePlan) perRound() int {
	return max(int(p.span.Seconds()*float64(p.rate))/max(p.rounds, 1), 1)
}

var retryConfigs = map[string]retryConfig{
	"smoke": {
		virtual:    retryPlan{rate: 40, warm: 10 * time.Second, outage: 20 * time.Second, after: 10 * time.Second, latency: 5 * time.Millisecond, shares: []float64{0.5, 1}, healthy: true},
		real:       retryPlan{rate: 100, warm: 200 * time.Millisecond, outage: 400 * time.Millisecond, after: 300 * time.Millisecond, latency: 2 * time.Millisecond, shares: []float64{1}},
		realWindow: 200 * time.Millisecond,
		hedge:      hedgePlan{rate: 200, warm: 100 * time.Millisecond, span: 200 * time.Millisecond, rounds: 2, base: 2 * time.Millisecond, delay: 5 * time.Millisecond, quantile: 0.97, ladder: []float64{0.96, 0.97}},
		healthy:    []int{1, 2}, healthyRounds: 2,
	},
	"quick": {
		virtual:    retryPlan{rate: 200, warm: 10 * time.Second, outage: 20 * time.Second, after: 10 * time.Second, latency: 5 * time.Millisecond, shares: []float64{0.5, 1}, healthy: true},
		real:       retryPlan{rate: 300, warm: 500 * time.Millisecond, outage: time.Second, after: time.Second, latency: 2 * time.Millisecond, shares: []float64{1}},
		realWindow: 500 * time.Millisecond,
		hedge:      hedgePlan{rate: 600, warm: 600 * time.Millisecond, span: 1500 * time.Millisecond, rounds: 3, base: 20 * time.Millisecond, delay: 30 * time.Millisecond, quantile: 0.97, ladder: []float64{0.96, 0.97, 0.98}},
		healthy:    []int{1}, healthyRounds: 3,
	},
	"default": {
		virtual:    retryPlan{rate: 400, warm: 10 * time.Second, outage: 20 * time.Second, after: 10 * time.Second, latency: 5 * time.Millisecond, shares: []float64{0.5, 1}, healthy: true},
		real:       retryPlan{rate: 400, warm: 500 * time.Millisecond, outage: time.Second, after: 1200 * time.Millisecond, latency: 2 * time.Millisecond, shares: []float64{0.5, 1}},
		realWindow: 500 * time.Millisecond,
		hedge:      hedgePlan{rate: 800, warm: 600 * time.Millisecond, span: 4 * time.Second, rounds: 5, base: 20 * time.Millisecond, delay: 30 * time.Millisecond, quantile: 0.97, ladder: []float64{0.95, 0.96, 0.97, 0.98}},
		healthy:    []int{1, 8}, healthyRounds: 15,
	},
	"full": {
		virtual:    retryPlan{rate: 1000, warm: 10 * time.Second, outage: 40 * time.Second, after: 20 * time.Second, latency: 5 * time.Millisecond, shares: []float64{0.5, 1}, healthy: true},
		real:       retryPlan{rate: 500, warm: time.Second, outage: 2 * time.Second, after: 3 * time.Second, latency: 2 * time.Millisecond, shares: []float64{0.5, 1}},
		realWindow: time.Second,
		hedge:      hedgePlan{rate: 800, warm: time.Second, span: 8 * time.Second, rounds: 10, base: 20 * time.Millisecond, delay: 30 * time.Millisecond, quantile: 0.97, ladder: []float64{0.95, 0.96, 0.97, 0.98}},
		healthy:    []int{1, 8, 64}, healthyRounds: 25,
	},
}

// retryConfigOf is the Retry suite's part of cfg.
func retryConfigOf(cfg config) retryConfig {
	if rc, ok := retryConfigs[cfg.name]; ok {
		return rc
	}
	return retryConfigs["default"]
}

// retryBackoff is every retrying side's schedule: client.DefaultBackoff,
// three attempts, 100 ms doubling to 1 s.
var retryBackoff = client.DefaultBackoff

// retrySeed makes the backend's draws and the jitter the same in every
// run, and the same for every side.
const retrySeed = 0x6d6f6f6e706f6f6c

// ---- the backend ----

const (
	// retrySlot is how finely the backend keeps its books.
	retrySlot = 100 * time.Millisecond
	// retryLoadSlots is how far back its load is counted: one second.
	retryLoadSlots = 10
	// retryRoom is its room, as a multiple of the first attempts' rate.
	retryRoom = 1.5
	// retryServed is the share of a slot's attempts a healthy backend
	// serves. Recovery is the first slot from which every slot does.
	retryServed = 0.99
)

// retryBackend is the simulated service. Time is an argument, so the
// same backend runs on either clock.
type retryBackend struct {
	mu     sync.Mutex
	origin int64   // where slot 0 begins
	start  int64   // when the outage begins
	end    int64   // and ends
	share  float64 // of attempts failing during it
	room   float64 // attempts a second it serves without thrashing
	tries  []int64 // attempts per slot
	served []int64 // of those, served
	perReq []int32 // attempts per request
}

func newRetryBackend(origin int64, p retryPlan, share float64, requests int) *retryBackend {
	start := origin + int64(p.warm)
	return &retryBackend{
		origin: origin,
		start:  start,
		end:    start + int64(p.outage),
		share:  share,
		room:   retryRoom * float64(p.rate),
		perReq: make([]int32, requests),
	}
}

// attempt takes one attempt of request req at now. It says whether the
// backend serves it, and which attempt of the request this is.
func (b *retryBackend) attempt(now int64, req int) (served bool, k int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if req >= 0 && req < len(b.perReq) {
		k = int(b.perReq[req])
		b.perReq[req]++
	}
	i := max(int((now-b.origin)/int64(retrySlot)), 0)
	for len(b.tries) <= i {
		b.tries = append(b.tries, 0)
		b.served = append(b.served, 0)
	}
	var load int64
	for j := max(i-retryLoadSlots, 0); j < i; j++ {
		load += b.tries[j]
	}
	perSecond := float64(load) / (retryLoadSlots * retrySlot.Seconds())
	p := 1.0
	if now >= b.start && now < b.end {
		p = 1 - b.share
	}
	if perSecond > b.room {
		r := b.room / perSecond
		p *= r * r
	}
	served = retryDraw(uint64(req), uint64(k), 0) < p
	b.tries[i]++
	if served {
		b.served[i]++
	}
	return served, k
}

// retryLatency is how long attempt k of req takes: base ±20 %.
func retryLatency(base time.Duration, req, k int) time.Duration {
	return time.Duration(float64(base) * (0.8 + 0.4*retryDraw(uint64(req), uint64(k), 1)))
}

// retryDraw is a number in [0, 1) fixed by its arguments: splitmix64 over
// them and the seed.
func retryDraw(a, b, c uint64) float64 {
	x := retrySeed ^ a*0x9e3779b97f4a7c15 ^ b*0xbf58476d1ce4e5b9 ^ c*0x94d049bb133111eb
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// recovery is how long after the outage's end the backend served at
// least retryServed of every slot's attempts until slot last (excluded).
// ok is false when it never did.
func (b *retryBackend) recovery(last int) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := int((b.end - b.origin) / int64(retrySlot))
	good := func(i int) bool {
		return i >= len(b.tries) || float64(b.served[i]) >= retryServed*float64(b.tries[i])
	}
	j := last
	for j > from && good(j-1) {
		j--
	}
	if j == last && last > from {
		return 0, false // the last slot still failed
	}
	return time.Duration(j-from) * retrySlot, true
}

// loads are the attempts a second that reached the backend, per slot,
// up to slot last (excluded).
func (b *retryBackend) loads(last int) []float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]float64, last)
	for i := range min(last, len(b.tries)) {
		out[i] = float64(b.tries[i]) / retrySlot.Seconds()
	}
	return out
}

// ---- the sides of the outage ----

// retryEnv is what a side's calls run against.
type retryEnv struct {
	be      *retryBackend
	clock   client.Clock // attempts and sleeps wait on it
	eng     *client.Engine
	latency time.Duration
	window  time.Duration // the budget's; zero is its default
}

// try is one attempt of request req, direct: it takes the attempt's
// latency, then fails with errDown if the backend did not serve it.
func (e *retryEnv) try(req int) error {
	ok, k := e.be.attempt(e.clock.Now(), req)
	retrySleep(e.clock, retryLatency(e.latency, req, k))
	if !ok {
		return errDown
	}
	return nil
}

// retrySleep waits d on c.
func retrySleep(c client.Clock, d time.Duration) {
	if d <= 0 {
		return
	}
	done := make(chan struct{})
	c.AfterFunc(d, func() { close(done) })
	<-done
}

// retryCaller is a side built for one scenario: call makes request req,
// retries and all; refused counts retries its budget refused; close lets
// go of what it holds.
type retryCaller struct {
	call    func(req int) error
	refused func() int64
	close   func()
}

// retrySide is one way of retrying, on the clocks it runs on.
type retrySide struct {
	name    string
	ours    bool
	virtual bool // runs on the virtual clock; every side runs on the real one
	build   func(e *retryEnv) (retryCaller, error)
}

// Side names.
const (
	sideNoRetry     = "no retries"
	sideRetry       = "moonpool Retry"
	sideRetryBudget = "moonpool Retry+budget"
	sideCounting    = "moonpool Retry+budget, counting"
	sideFailsafe    = "failsafe-go retrypolicy+budget"
	sideGRPC        = "gRPC retry+throttling"
	sideGRPCBudget  = "moongrpc+budget"
)

func retrySides() []retrySide {
	return []retrySide{
		{name: sideNoRetry, virtual: true, build: func(e *retryEnv) (retryCaller, error) {
			return retryCaller{call: e.try}, nil
		}},
		{name: sideRetry, virtual: true, build: func(e *retryEnv) (retryCaller, error) {
			return oursRetry(e, false)
		}},
		{name: sideRetryBudget, ours: true, virtual: true, build: func(e *retryEnv) (retryCaller, error) {
			return oursRetry(e, true)
		}},
		{name: sideFailsafe, build: theirRetry},
		{name: sideGRPC, build: grpcRetry},
		{name: sideGRPCBudget, build: grpcBudget},
	}
}

// oursRetry is client.Retry with the default backoff, with a budget of
// its own or without.
func oursRetry(e *retryEnv, withBudget bool) (retryCaller, error) {
	var b *client.Budget
	if withBudget {
		var err error
		if b, err = client.NewBudget(e.eng, client.BudgetConfig{Window: e.window}); err != nil {
			return retryCaller{}, err
		}
	}
	ctx := context.Background()
	sleep := client.SleepOn(e.clock)
	spend := client.WithBudget(b)
	refused := func() int64 { return b.Stats().RefusedRetries }
	if b == nil {
		refused = nil
	}
	return retryCaller{
		call: func(req int) error {
			fn := func(context.Context) error { return e.try(req) }
			// A source of its own per request: the jitter is the same in
			// every run, whichever goroutine runs first.
			src := client.WithSource(rand.New(rand.NewPCG(retrySeed, uint64(req))))
			err := client.Retry(ctx, retryBackoff, fn, sleep, src, spend)
			if err != nil && !errors.Is(err, errDown) {
				return fmt.Errorf("moonpool Retry: %w", err)
			}
			return err
		},
		refused: refused,
		close: func() {
			if b != nil {
				closeWithin(b.Close)
			}
		},
	}, nil
}

// theirRetry is failsafe-go's retrypolicy with its budget, both at their
// defaults but for the schedule: three attempts, 100 ms doubling to 1 s,
// ±50 % jitter. Its budget lets retries be at most a fifth of the
// executions in flight, and always three at once.
func theirRetry(e *retryEnv) (retryCaller, error) {
	var refused atomic.Int64
	bud := budget.NewBuilder().OnBudgetExceeded(func(budget.ExceededEvent) { refused.Add(1) }).Build()
	rp := retrypolicy.NewBuilder[any]().
		WithMaxAttempts(retryBackoff.Attempts).
		WithBackoff(retryBackoff.Base, retryBackoff.Cap).
		WithJitterFactor(0.5).
		WithBudget(bud).
		ReturnLastFailure().
		Build()
	ex := failsafe.With(rp)
	return retryCaller{
		call: func(req int) error {
			err := ex.Run(func() error { return e.try(req) })
			if err != nil && !errors.Is(err, errDown) && !errors.Is(err, budget.ErrExceeded) {
				return fmt.Errorf("failsafe-go: %w", err)
			}
			if err != nil {
				return errDown
			}
			return nil
		},
		refused: refused.Load,
		close:   func() {},
	}, nil
}

// ---- the virtual clock ----

// simClock is the virtual clock of one simulation, which knows when every
// goroutine of it waits on the clock: then, and only then, it may move.
// busy counts the goroutines running; one that asks for a timer is about
// to wait for it, and runs again when it fires.
type simClock struct {
	*moontest.Clock
	busy atomic.Int64
}

// AfterFunc registers the timer before it counts its caller as waiting:
// the other way round, the clock could see nobody running and nothing
// pending, in between.
func (s *simClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	t := simTimer{s: s, t: s.Clock.AfterFunc(d, func() {
		s.busy.Add(1)
		f()
	})}
	s.busy.Add(-1)
	return t
}

type simTimer struct {
	s *simClock
	t engine.Timer
}

// Stop of a timer that had not fired: its goroutine is running again.
func (t simTimer) Stop() bool {
	if t.t.Stop() {
		t.s.busy.Add(1)
		return true
	}
	return false
}

// engineClock is the same virtual clock as the engine sees it. A timer of
// the engine's (a budget's alarm) hands its actor work to do; fired says
// one did, so the simulation gives the actor a moment before moving on.
type engineClock struct {
	*moontest.Clock
	fired atomic.Bool
}

func (e *engineClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	return e.Clock.AfterFunc(d, func() {
		e.fired.Store(true)
		f()
	})
}

// retryRun is one side through one scenario.
type retryRun struct {
	side     string
	ours     bool
	share    float64 // failing during the outage; 0 for the healthy scenario
	requests int
	failed   int
	// Requests whose first attempt fell in the outage, and the attempts
	// that reached the backend for them.
	outageReqs, outageTries int64
	recovery                time.Duration
	recovered               bool
	p50, p99                float64 // ns, every request
	refused                 int64   // retries its budget refused; -1: not known
	loads                   []float64
	errs                    int64 // failures of the wrong kind
	firstErr                error
}

func (r retryRun) perRequest() float64 {
	if r.outageReqs == 0 {
		return math.NaN()
	}
	return float64(r.outageTries) / float64(r.outageReqs)
}

// retryRequest is what one request did.
type retryRequest struct {
	start, took int64
	err         error
}

// summarise folds a run's requests and backend into a retryRun.
func (r *retryRun) summarise(be *retryBackend, reqs []retryRequest, last int) {
	r.requests = len(reqs)
	lat := make([]float64, 0, len(reqs))
	for i, q := range reqs {
		lat = append(lat, float64(q.took))
		if q.err != nil {
			r.failed++
			if !errors.Is(q.err, errDown) && !isUnavailable(q.err) {
				r.errs++
				if r.firstErr == nil {
					r.firstErr = q.err
				}
			}
		}
		if q.start >= be.start && q.start < be.end && be.share > 0 {
			r.outageReqs++
			r.outageTries += int64(be.perReq[i])
		}
	}
	slices.Sort(lat)
	r.p50, r.p99 = quantile(lat, 0.5), quantile(lat, 0.99)
	if be.share > 0 {
		r.recovery, r.recovered = be.recovery(last)
	}
	r.loads = be.loads(last)
}

// virtualRun runs side s through one scenario on a virtual clock of its
// own, and reports what it did. It takes as long as the goroutines need,
// not as long as the scenario: the clock moves whenever all of them wait.
func virtualRun(s retrySide, p retryPlan, share float64) (retryRun, error) {
	sim := &simClock{Clock: moontest.NewClock(nil)}
	ec := &engineClock{Clock: sim.Clock}
	eng := client.NewEngine(client.WithClock(ec))
	defer retryShutdown(eng)
	total := p.warm + p.outage + p.after
	n := int(total.Seconds() * float64(p.rate))
	origin := sim.Now()
	be := newRetryBackend(origin, p, share, n)
	env := &retryEnv{be: be, clock: sim, eng: eng, latency: p.latency}
	c, err := s.build(env)
	if err != nil {
		return retryRun{}, err
	}
	if c.close != nil {
		defer c.close()
	}

	reqs := make([]retryRequest, n)
	interval := time.Second / time.Duration(p.rate)
	var live atomic.Int64
	live.Add(1)
	sim.busy.Add(1)
	go func() {
		defer func() {
			live.Add(-1)
			sim.busy.Add(-1)
		}()
		for i := range n {
			retrySleep(sim, time.Duration(origin+int64(i)*int64(interval)-sim.Now()))
			live.Add(1)
			sim.busy.Add(1)
			go func() {
				defer func() {
					live.Add(-1)
					sim.busy.Add(-1)
				}()
				t := sim.Now()
				err := c.call(i)
				reqs[i] = retryRequest{start: t, took: sim.Now() - t, err: err}
			}()
		}
	}()
	for {
		for sim.busy.Load() > 0 {
			runtime.Gosched()
		}
		if live.Load() == 0 {
			break
		}
		if _, ok := sim.AdvanceNext(); !ok {
			return retryRun{}, fmt.Errorf("%s: %d requests wait, and no timer is pending", s.name, live.Load())
		}
		if ec.fired.Swap(false) {
			// The engine's actors run on goroutines the simulation does
			// not count: let them take in what the timer sent before the
			// clock moves on.
			time.Sleep(100 * time.Microsecond)
		}
	}
	run := retryRun{side: s.name, ours: s.ours, share: share, refused: -1}
	if c.refused != nil {
		run.refused = c.refused()
	}
	run.summarise(be, reqs, int(total/retrySlot))
	return run, nil
}

// retryShutdown shuts eng down, warning when it takes too long.
func retryShutdown(eng *client.Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		warn("Retry: engine shutdown: %v", err)
	}
}

// ---- the real clock ----

// realRuns runs every side through one scenario at once, each with its
// own backend, on the real clock.
func realRuns(eng *client.Engine, sides []retrySide, p retryPlan, window time.Duration, share float64) ([]retryRun, error) {
	total := p.warm + p.outage + p.after
	n := int(total.Seconds() * float64(p.rate))
	clock := eng.Clock()
	type built struct {
		be   *retryBackend
		c    retryCaller
		reqs []retryRequest
	}
	bs := make([]built, len(sides))
	defer func() {
		for _, b := range bs {
			if b.c.close != nil {
				b.c.close()
			}
		}
	}()
	// A little ahead, so every side has been built when the first request
	// is due.
	origin := clock.Now() + int64(50*time.Millisecond)
	for i, s := range sides {
		be := newRetryBackend(origin, p, share, n)
		c, err := s.build(&retryEnv{be: be, clock: clock, eng: eng, latency: p.latency, window: window})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		bs[i] = built{be: be, c: c, reqs: make([]retryRequest, n)}
		origin = max(origin, clock.Now()) // building a gRPC client takes a moment
	}
	for i := range bs {
		bs[i].be.origin, bs[i].be.start, bs[i].be.end = origin, origin+int64(p.warm), origin+int64(p.warm+p.outage)
	}
	interval := int64(time.Second) / int64(p.rate)
	var wg sync.WaitGroup
	for i := range bs {
		b := &bs[i]
		wg.Go(func() {
			var reqs sync.WaitGroup
			for j := range n {
				if d := origin + int64(j)*interval - clock.Now(); d > 0 {
					time.Sleep(time.Duration(d))
				}
				reqs.Go(func() {
					t := clock.Now()
					err := b.c.call(j)
					b.reqs[j] = retryRequest{start: t, took: clock.Now() - t, err: err}
				})
			}
			reqs.Wait()
		})
	}
	wg.Wait()
	var runs []retryRun
	for i, s := range sides {
		run := retryRun{side: s.name, ours: s.ours, share: share, refused: -1}
		if bs[i].c.refused != nil {
			run.refused = bs[i].c.refused()
		}
		run.summarise(bs[i].be, bs[i].reqs, int(total/retrySlot))
		runs = append(runs, run)
	}
	return runs, nil
}

// ---- the rows ----

// retryOutage is an outage row's facts: every scenario, every side.
type retryOutage struct {
	clock string // "virtual" or "real"
	plan  retryPlan
	runs  []retryRun
}

// retryOutages and retryHedges keep what the Retry suite's scenarios
// measured, for the tables, the targets and the plots of the same run.
var (
	retryOutages byRow[retryOutage]
	retryHedges  byRow[retryHedge]
)

func retryOutageOf(r result) *retryOutage { return retryOutages.of(r, "Retry") }

func retryHedgeOf(r result) *retryHedge { return retryHedges.of(r, "Retry") }

func outagePlanName(clock string, p retryPlan) string {
	return fmt.Sprintf("outage, %s clock: %d requests/s, %v healthy, %v failing, %v after", clock, p.rate, p.warm, p.outage, p.after)
}

// retryRows are the Retry suite's rows.
func retryRows(eng *engine.Engine, cfg config) []row {
	rc := retryConfigOf(cfg)
	vName := outagePlanName("virtual", rc.virtual)
	rName := outagePlanName("real", rc.real)
	hName := hedgeName(rc.hedge)
	return []row{
		{suite: "Retry", name: vName, scenario: func(say progress) (result, error) {
			return result{}, virtualRow(vName, rc.virtual, say)
		}},
		{suite: "Retry", name: rName, scenario: func(say progress) (result, error) {
			return result{}, realRow(eng, rName, rc, say)
		}},
		{suite: "Retry", name: hName, scenario: func(say progress) (result, error) {
			return result{}, hedgeRow(eng, hName, rc.hedge, say)
		}},
		healthyRetryRow(eng, rc),
	}
}

// scenarios are a plan's failing shares, the healthy one (0) first.
func (p retryPlan) scenarios() []float64 {
	var s []float64
	if p.healthy {
		s = append(s, 0)
	}
	return append(s, p.shares...)
}

func virtualRow(name string, p retryPlan, say progress) error {
	o := &retryOutage{clock: "virtual", plan: p}
	for _, share := range p.scenarios() {
		for _, s := range retrySides() {
			if !s.virtual {
				continue
			}
			say(fmt.Sprintf("Retry outage virtual-clock %s %s", dashed(shareName(share)), dashed(s.name)))
			run, err := virtualRun(s, p, share)
			if err != nil {
				return fmt.Errorf("virtual clock, %s: %w", shareName(share), err)
			}
			o.runs = append(o.runs, run)
		}
	}
	retryOutages.keep(name, o)
	return nil
}

func realRow(eng *engine.Engine, name string, rc retryConfig, say progress) error {
	o := &retryOutage{clock: "real", plan: rc.real}
	for _, share := range rc.real.scenarios() {
		say(fmt.Sprintf("Retry outage real-clock %s every-side-at-once", dashed(shareName(share))))
		runs, err := realRuns(eng, retrySides(), rc.real, rc.realWindow, share)
		if err != nil {
			return fmt.Errorf("real clock, %s: %w", shareName(share), err)
		}
		o.runs = append(o.runs, runs...)
	}
	retryOutages.keep(name, o)
	return nil
}

// dashed is s with dashes for spaces, for the progress line, which reads
// the last word as the side's name.
func dashed(s string) string { return strings.ReplaceAll(s, " ", "-") }

// shareName names a scenario by its failing share.
func shareName(share float64) string {
	if share == 0 {
		return "healthy"
	}
	return fmt.Sprintf("%.0f%% failing", 100*share)
}

// ---- the healthy path ----

// healthyRetryRow is Retry around a call that succeeds at once: what the
// budget costs when nothing is wrong.
//
// A budget counts first attempts only while retries are asked, and for a
// window after the last. The first side's budget has had a quiet window,
// as a healthy service's has: each call then costs it one atomic load.
// Its window is short, so that the bench need not wait ten seconds for
// it. The counting side's budget counts every first attempt, as in the
// window after a retry: one atomic add a call.
func healthyRetryRow(eng *engine.Engine, rc retryConfig) row {
	ok := func(context.Context) error { return nil }
	ctx := context.Background()
	budgetSide := func(name string, ours bool, cfg client.BudgetConfig, quiet bool) side {
		return side{name: name, ours: ours, build: func(int) (contender, error) {
			b, err := client.NewBudget(eng, cfg)
			if err != nil {
				return contender{}, err
			}
			if quiet {
				// Two windows with no retry asked. The first attempt
				// after them wakes the budget's actor, which stops the
				// count: the attempts after it are not counted.
				time.Sleep(2 * cfg.Window)
				deadline := time.Now().Add(time.Second)
				for {
					f := b.Stats().Firsts
					b.First()
					if b.Stats().Firsts == f {
						break
					}
					if time.Now().After(deadline) {
						closeWithin(b.Close)
						return contender{}, errors.New("the budget kept counting after a quiet window")
					}
					time.Sleep(time.Millisecond)
				}
			}
			var errs atomic.Int64
			spend := client.WithBudget(b)
			return contender{
				run: func(n int) {
					for range n {
						if client.Retry(ctx, retryBackoff, ok, spend) != nil {
							errs.Add(1)
						}
					}
				},
				close: func() { closeWithin(b.Close) },
				errs:  errs.Load,
			}, nil
		}}
	}
	return row{
		suite:   "Retry",
		name:    "healthy path: Retry around a call that succeeds at once",
		callers: rc.healthy,
		batch:   16,
		every:   64,
		rounds:  rc.healthyRounds,
		sides: []side{
			budgetSide(sideRetryBudget, true, client.BudgetConfig{Window: 50 * time.Millisecond}, true),
			budgetSide(sideCounting, false, client.BudgetConfig{}, false),
			{name: sideRetry, build: func(int) (contender, error) {
				var errs atomic.Int64
				return contender{
					run: func(n int) {
						for range n {
							if client.Retry(ctx, retryBackoff, ok) != nil {
								errs.Add(1)
							}
						}
					},
					close: func() {},
					errs:  errs.Load,
				}, nil
			}},
			{name: sideFailsafe, build: func(int) (contender, error) {
				rp := retrypolicy.NewBuilder[any]().
					WithMaxAttempts(retryBackoff.Attempts).
					WithBackoff(retryBackoff.Base, retryBackoff.Cap).
					WithJitterFactor(0.5).
					WithBudget(budget.New()).
					ReturnLastFailure().
					Build()
				ex := failsafe.With(rp)
				var errs atomic.Int64
				run := func() error { return nil }
				return contender{
					run: func(n int) {
						for range n {
							if ex.Run(run) != nil {
								errs.Add(1)
							}
						}
					},
					close: func() {},
					errs:  errs.Load,
				}, nil
			}},
		},
	}
}

// ---- the table ----

// retryTable is the table of an outage or hedging row.
func retryTable(r result) (head []string, body [][]string, ok bool) {
	if o := retryOutageOf(r); o != nil {
		head, body = outageRetryTable(o)
		return head, body, true
	}
	if h := retryHedgeOf(r); h != nil {
		head, body = hedgeTable(h)
		return head, body, true
	}
	return nil, nil, false
}

func outageRetryTable(o *retryOutage) (head []string, body [][]string) {
	head = []string{"scenario", "side", "requests", "failed", "attempts/request in the outage", "backend recovered", "p50", "p99", "retries refused", "note"}
	last := -1.0
	for _, r := range o.runs {
		cells := []string{"", r.side, fmt.Sprint(r.requests), pct(float64(r.failed) / float64(r.requests)), "–", "–", nsText(r.p50), nsText(r.p99), "–", ""}
		if r.share != last {
			cells[0] = shareName(r.share)
			last = r.share
		}
		if r.share > 0 {
			cells[4] = fmt.Sprintf("%.3f", r.perRequest())
			cells[5] = recoveryText(r)
		}
		if r.refused >= 0 {
			cells[8] = fmt.Sprint(r.refused)
		}
		if r.errs > 0 {
			cells[9] = fmt.Sprintf("%d FAILED: %v", r.errs, shorten(r.firstErr.Error(), 80))
		}
		body = append(body, cells)
	}
	return head, body
}

func recoveryText(r retryRun) string {
	if !r.recovered {
		return "not by the end"
	}
	return fmt.Sprintf("after %v", r.recovery)
}

// ---- the targets ----

// retryTargets checks the Retry suite's rows; none when it did not run.
func retryTargets(results []result) []check {
	var virtual, real *retryOutage
	var hedge *retryHedge
	var healthy *result
	for i := range results {
		r := results[i]
		if o := retryOutageOf(r); o != nil {
			if o.clock == "virtual" {
				virtual = o
			} else {
				real = o
			}
		}
		if h := retryHedgeOf(r); h != nil {
			hedge = h
		}
		if r.row.suite == "Retry" && len(r.levels) > 0 {
			healthy = &results[i]
		}
	}
	if virtual == nil && real == nil && hedge == nil && healthy == nil {
		return nil
	}
	const group = "retry budget"
	at := func(o *retryOutage, share float64, side string) *retryRun {
		if o == nil {
			return nil
		}
		for i := range o.runs {
			if o.runs[i].share == share && o.runs[i].side == side {
				return &o.runs[i]
			}
		}
		return nil
	}
	attempts := check{group: group, target: "Retry: attempts per request during the outage at most 1.1 with the budget (virtual clock)", met: true}
	recovery := check{group: group, target: "Retry: the backend recovers after the outage no later with the budget than with no retries (virtual clock)", met: true}
	if virtual != nil {
		var as, rs []string
		for _, share := range virtual.plan.shares {
			ours, none, plain := at(virtual, share, sideRetryBudget), at(virtual, share, sideNoRetry), at(virtual, share, sideRetry)
			if ours == nil || none == nil || plain == nil {
				continue
			}
			x := ours.perRequest()
			attempts.known = true
			attempts.met = attempts.met && x <= 1.1
			as = append(as, fmt.Sprintf("%s: %.3f (without the budget %.2f)", shareName(share), x, plain.perRequest()))
			recovery.known = true
			recovery.met = recovery.met && ours.recovered && (!none.recovered || ours.recovery <= none.recovery)
			rs = append(rs, fmt.Sprintf("%s: %s against %s (without the budget %s)", shareName(share), recoveryText(*ours), recoveryText(*none), recoveryText(*plain)))
		}
		attempts.measured, recovery.measured = strings.Join(as, "; "), strings.Join(rs, "; ")
	}
	// The real clock's, for comparison with the other libraries: the
	// verdict stays with the virtual clock's long outages.
	if real != nil && len(real.plan.shares) > 0 {
		share := slices.Max(real.plan.shares)
		var as, rs []string
		for _, side := range []string{sideRetryBudget, sideGRPCBudget, sideGRPC, sideFailsafe, sideRetry} {
			if r := at(real, share, side); r != nil {
				as = append(as, fmt.Sprintf("%s %.3f", side, r.perRequest()))
				rs = append(rs, fmt.Sprintf("%s %s", side, recoveryText(*r)))
			}
		}
		if len(as) > 0 {
			what := fmt.Sprintf("; real clock, %s: ", shareName(share))
			attempts.measured += what + strings.Join(as, ", ")
			recovery.measured += what + strings.Join(rs, ", ")
		}
	}
	cs := []check{attempts, recovery}
	cs = append(cs, hedgeTargets(hedge)...)
	cost := check{group: group, target: "Retry: healthy path, Retry+budget at most 1.1× Retry alone (median of each round's ratio)"}
	if healthy != nil {
		s, worst, ok := pairedRatios(healthy, sideRetryBudget, sideRetry)
		cost.measured, cost.met, cost.known = s, worst <= 1.1, ok
		if c, _, ok := pairedRatios(healthy, sideCounting, sideRetry); ok {
			// Not the target's: what the budget costs while it counts.
			cost.measured += "; while the budget counts, " + c
		}
	}
	return append(cs, cost)
}

// ---- gRPC ----

// retryServiceConfig turns on gRPC's own retries for the health service:
// the same three attempts and schedule as the other sides, and gRFC A6's
// retry throttling with the numbers of its example (maxTokens 10,
// tokenRatio 0.1).
const retryServiceConfig = `{
  "methodConfig": [{
    "name": [{"service": "grpc.health.v1.Health"}],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}`

// retryReqKey carries a request's number to the backend, in metadata a
// retry sends again.
const retryReqKey = "bench-req"

// retryGRPCServer serves the health service on loopback, each call an
// attempt on e's backend: it takes the attempt's latency, then fails with
// Unavailable when the backend does not serve it.
func retryGRPCServer(e *retryEnv) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		id := -1
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get(retryReqKey); len(v) > 0 {
				id, _ = strconv.Atoi(v[0])
			}
		}
		if err := e.try(id); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		return handler(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	return lis.Addr().String(), func() {
		srv.Stop()
		<-done
	}, nil
}

// grpcCaller dials addr with opts and calls the health service's Check,
// one request a call.
func grpcCaller(addr string, stop func(), opts ...grpc.DialOption) (retryCaller, error) {
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		stop()
		return retryCaller{}, err
	}
	hc := healthpb.NewHealthClient(conn)
	return retryCaller{
		call: func(req int) error {
			ctx := metadata.AppendToOutgoingContext(context.Background(), retryReqKey, strconv.Itoa(req))
			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		},
		close: func() {
			conn.Close()
			stop()
		},
	}, nil
}

// grpcRetry is gRPC's own retry with retry throttling, from the service
// config.
func grpcRetry(e *retryEnv) (retryCaller, error) {
	addr, stop, err := retryGRPCServer(e)
	if err != nil {
		return retryCaller{}, err
	}
	return grpcCaller(addr, stop, grpc.WithDefaultServiceConfig(retryServiceConfig))
}

// grpcBudget is moongrpc's client interceptor with the default backoff
// and a budget of its own, retrying Unavailable only, as the service
// config of gRPC's side does.
func grpcBudget(e *retryEnv) (retryCaller, error) {
	b, err := client.NewBudget(e.eng, client.BudgetConfig{Window: e.window})
	if err != nil {
		return retryCaller{}, err
	}
	addr, stop, err := retryGRPCServer(e)
	if err != nil {
		closeWithin(b.Close)
		return retryCaller{}, err
	}
	ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
		Engine:  e.eng,
		Backoff: retryBackoff,
		RetryOn: []codes.Code{codes.Unavailable},
		Budget:  b,
	})
	c, err := grpcCaller(addr, stop, grpc.WithUnaryInterceptor(ic))
	if err != nil {
		closeWithin(b.Close)
		return retryCaller{}, err
	}
	c.refused = func() int64 { return b.Stats().RefusedRetries }
	closeConn := c.close
	c.close = func() {
		closeConn()
		closeWithin(b.Close)
	}
	return c, nil
}

// isUnavailable is whether err is a gRPC status of Unavailable: the
// backend's failure, as a gRPC client sees it.
func isUnavailable(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable
}

// ---- hedging ----

// retryHedge is the heavy-tail row's facts.
type retryHedge struct {
	plan  hedgePlan
	sides []hedgeStat
}

// hedgeStat is one side through the heavy-tail scenario.
type hedgeStat struct {
	side     string
	ours     bool
	rule     string  // when it hedges
	q        float64 // the quantile it hedges past, for rule quantile
	requests int64   // measured
	tries    int64   // attempts the backend saw for them
	p50      float64
	// p99 is the median round's. A moment the machine stalls slows every
	// request sent in it, enough of them to move a p99 of them all. The
	// sides take turns, so the stall lands in one side's round; the
	// median round leaves it out, as ns/op does elsewhere in the bench.
	p99  float64
	p999 float64 // over every round: the worst, stalls and all
	// roundExtra is the median round's extra requests, for the same
	// reason as p99: a stall in one side's round sends hedges for every
	// request it slows, and that is the machine's doing, not the side's.
	roundExtra float64
	lat        []float64 // every measured request's, sorted
	note       string    // the side's own counts, over the whole run
	errs       int64
	firstErr   error
}

func (h hedgeStat) extra() float64 {
	if h.requests == 0 {
		return math.NaN()
	}
	return float64(h.tries)/float64(h.requests) - 1
}

// Hedging sides.
const (
	sideNoHedge    = "no hedging"
	sideHedgeFixed = "moonhttp hedge+budget, fixed delay"
	sideHedgeQuant = "moonhttp hedge+budget, quantile"
	ruleNone       = "none"
	ruleFixed      = "fixed"
	ruleQuant      = "quantile"
)

// hedgeSide is one way of sending the heavy-tail requests.
type hedgeSide struct {
	name string
	ours bool
	rule string
	q    float64 // the quantile it hedges past, for rule quantile
	// build wraps base, which sends one attempt, in the side's hedging.
	build func(eng *client.Engine, base http.RoundTripper, p hedgePlan) (hedgeClient, error)
}

// hedgeClient is a hedging side built: its round tripper, how to let go
// of it, and what its own counts say (hedges sent and refused).
type hedgeClient struct {
	rt    http.RoundTripper
	close func()
	note  func() string
}

func hedgeSides(p hedgePlan) []hedgeSide {
	sides := []hedgeSide{
		{name: sideNoHedge, rule: ruleNone, build: func(_ *client.Engine, base http.RoundTripper, _ hedgePlan) (hedgeClient, error) {
			return hedgeClient{rt: base, close: func() {}, note: func() string { return "" }}, nil
		}},
		{name: sideHedgeFixed, ours: true, rule: ruleFixed, build: func(eng *client.Engine, base http.RoundTripper, p hedgePlan) (hedgeClient, error) {
			return oursHedge(eng, base, client.Hedge{Delay: p.delay})
		}},
		{name: "failsafe-go hedgepolicy+budget, fixed delay", rule: ruleFixed, build: func(_ *client.Engine, base http.RoundTripper, p hedgePlan) (hedgeClient, error) {
			return theirHedge(base, hedgepolicy.NewBuilderWithDelay[*http.Response](p.delay)), nil
		}},
	}
	for _, q := range p.ladder {
		sides = append(sides, hedgeSide{name: fmt.Sprintf("failsafe-go hedgepolicy+budget, past p%g", 100*q), rule: ruleQuant, q: q,
			build: func(_ *client.Engine, base http.RoundTripper, _ hedgePlan) (hedgeClient, error) {
				// Remember about a thousand requests, as our budget's
				// window holds several thousand; hedge once a hundred are
				// seen.
				return theirHedge(base, hedgepolicy.NewBuilderWithDelayQuantile[*http.Response](q, 1000, 100)), nil
			}})
	}
	return append(sides, hedgeSide{name: sideHedgeQuant, ours: true, rule: ruleQuant, q: p.quantile,
		build: func(eng *client.Engine, base http.RoundTripper, p hedgePlan) (hedgeClient, error) {
			return oursHedge(eng, base, client.Hedge{Quantile: p.quantile})
		}})
}

// theirHedge is failsafe-go's hedgepolicy built by b, with a budget at its
// defaults (hedges at most a fifth of the executions in flight, and always
// three at once), around base.
func theirHedge(base http.RoundTripper, b hedgepolicy.Builder[*http.Response]) hedgeClient {
	var sent, refused atomic.Int64
	bud := budget.NewBuilder().OnBudgetExceeded(func(budget.ExceededEvent) { refused.Add(1) }).Build()
	hp := b.WithBudget(bud).OnHedge(func(failsafe.ExecutionEvent[*http.Response]) { sent.Add(1) }).Build()
	return hedgeClient{
		rt:    failsafehttp.NewRoundTripper(base, hp),
		close: func() {},
		note: func() string {
			return fmt.Sprintf("hedges sent %d, refused %d", sent.Load(), refused.Load())
		},
	}
}

// oursHedge is moonhttp's Transport hedging by h, under a budget of its
// own at the defaults.
func oursHedge(eng *client.Engine, base http.RoundTripper, h client.Hedge) (hedgeClient, error) {
	b, err := client.NewBudget(eng, client.BudgetConfig{})
	if err != nil {
		return hedgeClient{}, err
	}
	return hedgeClient{
		rt:    &moonhttp.Transport{Base: base, Engine: eng, Budget: b, Hedge: &h},
		close: func() { closeWithin(b.Close) },
		note: func() string {
			st := b.Stats()
			n := fmt.Sprintf("hedges sent %d, refused %d; retries %d", st.Hedges, st.RefusedHedges, st.Retries)
			if d, ok := h.DelayFrom(b); ok && h.Delay <= 0 {
				n += fmt.Sprintf("; delay now %v", d.Round(time.Microsecond))
			}
			return n
		},
	}, nil
}

func hedgeName(p hedgePlan) string {
	return fmt.Sprintf("heavy tail, hedged HTTP GETs: %d requests/s, %v each ±20 %%, 3 in 200 %d× slower", p.rate, p.base, hedgeSlow)
}

// hedgeSlow is how much slower the tail's requests are.
const hedgeSlow = 20

// hedgeSlowAt is whether attempt k of request req is one of the slow.
// First attempts are slow three in every two hundred, evenly. Exactly one
// in a hundred would put the p99 of requests that are not hedged on the
// edge between fast and slow, flipping from run to run; a hair more puts
// it in the tail. A hedge (k of 1 or more) is slow with the same odds,
// drawn from req and k. Every side sends the same requests, so every side
// meets the same slow first attempts and the same slow hedges: the p99s
// of two sides differ by when they hedge, not by which requests happened
// to be slow in their runs.
func hedgeSlowAt(req, k int) bool {
	if k > 0 {
		return retryDraw(uint64(req), uint64(k), 2) < 3.0/200
	}
	switch req % 200 {
	case 0, 67, 133:
		return true
	}
	return false
}

// hedgeBackend is an HTTP server on loopback whose requests take their
// latency, or twenty times it for the tail, unless cancelled first.
type hedgeBackend struct {
	srv    *http.Server
	url    string
	done   chan struct{}
	mu     sync.Mutex
	perReq []int32
}

func startHedgeBackend(p hedgePlan, requests int) (*hedgeBackend, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &hedgeBackend{url: "http://" + lis.Addr().String() + "/", done: make(chan struct{}), perReq: make([]int32, requests)}
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.Atoi(r.Header.Get(retryReqKey))
		k := 0
		b.mu.Lock()
		if id >= 0 && id < len(b.perReq) {
			k = int(b.perReq[id])
			b.perReq[id]++
		}
		b.mu.Unlock()
		d := retryLatency(p.base, id, k)
		if hedgeSlowAt(id, k) {
			d *= hedgeSlow
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			w.Write([]byte("ok"))
		case <-r.Context().Done():
		}
	})}
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(lis)
	}()
	return b, nil
}

func (b *hedgeBackend) close() {
	b.srv.Close()
	<-b.done
}

// hedgeRow runs every hedging side, each on a backend of its own: a
// warm-up each, then p.rounds rounds in which every side runs a slice in
// turn. Each round draws its order afresh, so neither a moment the
// machine is busy nor the side that ran just before favours one side.
func hedgeRow(eng *engine.Engine, name string, p hedgePlan, say progress) error {
	sides := hedgeSides(p)
	rigs := make([]*hedgeRig, 0, len(sides))
	defer func() {
		for _, r := range rigs {
			r.close()
		}
	}()
	warm := int(p.warm.Seconds() * float64(p.rate))
	per := p.perRound()
	for _, s := range sides {
		r, err := newHedgeRig(eng, s, p, warm+per*max(p.rounds, 1))
		if err != nil {
			return fmt.Errorf("hedging, %s: %w", s.name, err)
		}
		rigs = append(rigs, r)
		// One side at a time: all at once, the machine would stall, and
		// the stall would spend the budgets and skew the quantiles.
		say(fmt.Sprintf("Retry hedging heavy-tail %s warm-up", dashed(s.name)))
		r.send(warm, p.rate)
	}
	for round, order := range hedgeOrders(len(rigs), max(p.rounds, 1)) {
		for _, k := range order {
			r := rigs[k]
			say(fmt.Sprintf("Retry hedging heavy-tail %s round %d/%d", dashed(r.side.name), round+1, p.rounds))
			r.rounds = append(r.rounds, r.next)
			r.send(per, p.rate)
		}
	}
	h := &retryHedge{plan: p}
	for _, r := range rigs {
		h.sides = append(h.sides, r.stat(warm))
	}
	retryHedges.keep(name, h)
	return nil
}

// hedgeOrders are the orders n sides take their turns in, one a round:
// each drawn afresh, from a fixed seed so every run has the same.
func hedgeOrders(n, rounds int) [][]int {
	r := rand.New(rand.NewPCG(uint64(n), uint64(rounds)))
	orders := make([][]int, rounds)
	for i := range orders {
		orders[i] = r.Perm(n)
	}
	return orders
}

// hedgeRig is one hedging side with its backend and its requests so far.
type hedgeRig struct {
	side   hedgeSide
	be     *hedgeBackend
	base   *http.Transport
	hc     *http.Client
	client hedgeClient
	lat    []float64
	errs   []error
	next   int   // the next request's number
	rounds []int // where each measured round begins
}

func newHedgeRig(eng *engine.Engine, s hedgeSide, p hedgePlan, n int) (*hedgeRig, error) {
	be, err := startHedgeBackend(p, n)
	if err != nil {
		return nil, err
	}
	base := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, DisableCompression: true}
	c, err := s.build(eng, base, p)
	if err != nil {
		base.CloseIdleConnections()
		be.close()
		return nil, err
	}
	return &hedgeRig{side: s, be: be, base: base, hc: &http.Client{Transport: c.rt}, client: c,
		lat: make([]float64, n), errs: make([]error, n)}, nil
}

// send makes the next n requests, rate a second, and waits for them.
func (r *hedgeRig) send(n, rate int) {
	interval := int64(time.Second) / int64(rate)
	origin := mono()
	var wg sync.WaitGroup
	for j := range min(n, len(r.lat)-r.next) {
		i := r.next + j
		if d := origin + int64(j)*interval - mono(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		wg.Go(func() {
			t := mono()
			r.errs[i] = hedgeGet(r.hc, r.be.url, i)
			r.lat[i] = float64(mono() - t)
		})
	}
	wg.Wait()
	r.next = min(r.next+n, len(r.lat))
}

// stat sums up the requests from number from on.
func (r *hedgeRig) stat(from int) hedgeStat {
	st := hedgeStat{side: r.side.name, ours: r.side.ours, rule: r.side.rule, q: r.side.q, note: r.client.note()}
	r.be.mu.Lock()
	defer r.be.mu.Unlock()
	for i := from; i < r.next; i++ {
		st.requests++
		st.tries += int64(r.be.perReq[i])
		st.lat = append(st.lat, r.lat[i])
		if r.errs[i] != nil {
			st.errs++
			if st.firstErr == nil {
				st.firstErr = r.errs[i]
			}
		}
	}
	slices.Sort(st.lat)
	st.p50, st.p999 = quantile(st.lat, 0.5), quantile(st.lat, 0.999)
	var p99s, extras []float64
	for i, start := range r.rounds {
		end := r.next
		if i+1 < len(r.rounds) {
			end = r.rounds[i+1]
		}
		round := slices.Clone(r.lat[start:end])
		slices.Sort(round)
		p99s = append(p99s, quantile(round, 0.99))
		var tries int64
		for i := start; i < end; i++ {
			tries += int64(r.be.perReq[i])
		}
		if end > start {
			extras = append(extras, float64(tries)/float64(end-start)-1)
		}
	}
	st.p99 = median(p99s)
	st.roundExtra = math.NaN()
	if len(extras) > 0 {
		st.roundExtra = median(extras)
	}
	return st
}

func (r *hedgeRig) close() {
	r.client.close()
	r.base.CloseIdleConnections()
	r.be.close()
}

// hedgeGet sends one GET, request number i, and reads the answer.
func hedgeGet(hc *http.Client, url string, i int) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set(retryReqKey, strconv.Itoa(i))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK || string(body) != "ok":
		return fmt.Errorf("%s: %q", resp.Status, body)
	}
	return nil
}

func hedgeTable(h *retryHedge) (head []string, body [][]string) {
	round := fmt.Sprintf("extra (median round of %d)", h.plan.perRound())
	head = []string{"side", "hedges", "requests", "extra requests", round, "p50", "p99 (median round)", "p99.9", "p99 against no hedging", "note"}
	var none *hedgeStat
	for i := range h.sides {
		if h.sides[i].rule == ruleNone {
			none = &h.sides[i]
		}
	}
	for _, s := range h.sides {
		cells := []string{s.side, hedgeRule(h.plan, s), fmt.Sprint(s.requests), pct(s.extra()), pct(s.roundExtra), nsText(s.p50), nsText(s.p99), nsText(s.p999), "", s.note}
		if none != nil && s.rule != ruleNone {
			cells[8] = times(s.p99 / none.p99)
		}
		if s.errs > 0 {
			cells[9] = fmt.Sprintf("%d FAILED: %v", s.errs, shorten(s.firstErr.Error(), 80))
		}
		body = append(body, cells)
	}
	return head, body
}

// hedgeRule says when side s hedges.
func hedgeRule(p hedgePlan, s hedgeStat) string {
	switch s.rule {
	case ruleFixed:
		return fmt.Sprintf("after %v", p.delay)
	case ruleQuant:
		return fmt.Sprintf("past p%g", 100*s.q)
	}
	return "never"
}

// hedgeSlack is how many more extra requests ours may send than
// failsafe-go's runs of its rule: half a point, a few requests of a round.
const hedgeSlack = 0.005

// hedgeAt is failsafe-go's p99 under o's rule at o's extra requests. Its
// runs of the rule, at several quantiles, are points of p99 against
// extra. Between two, the p99 is read on the line joining them. Below
// them all, it is the p99 of the run that sent the fewest: that run sent
// more than o. Above them all, it is the p99 of the run that sent the
// most, if o sent at most hedgeSlack more, and ok is false otherwise.
// from says which runs it was read from.
func hedgeAt(o hedgeStat, sides []hedgeStat, p hedgePlan) (p99 float64, from string, ok bool) {
	var runs []hedgeStat
	for _, t := range sides {
		if !t.ours && t.rule == o.rule && !math.IsNaN(t.roundExtra) {
			runs = append(runs, t)
		}
	}
	if len(runs) == 0 {
		return 0, "", false
	}
	// By extra. Of runs at the same extra only the lower p99 is kept.
	slices.SortFunc(runs, func(a, b hedgeStat) int {
		if c := cmp.Compare(a.roundExtra, b.roundExtra); c != 0 {
			return c
		}
		return cmp.Compare(a.p99, b.p99)
	})
	runs = slices.CompactFunc(runs, func(a, b hedgeStat) bool { return a.roundExtra == b.roundExtra })
	x := o.roundExtra
	if math.IsNaN(x) {
		return 0, "", false
	}
	first, last := runs[0], runs[len(runs)-1]
	switch {
	case x <= first.roundExtra:
		return first.p99, "its " + hedgeRule(p, first), true
	case x >= last.roundExtra:
		return last.p99, "its " + hedgeRule(p, last), x <= last.roundExtra+hedgeSlack
	}
	i := 1
	for runs[i].roundExtra < x {
		i++
	}
	lo, hi := runs[i-1], runs[i]
	if hi.roundExtra == x {
		return hi.p99, "its " + hedgeRule(p, hi), true
	}
	f := (x - lo.roundExtra) / (hi.roundExtra - lo.roundExtra)
	return lo.p99 + f*(hi.p99-lo.p99), "between its " + hedgeRule(p, lo) + " and " + hedgeRule(p, hi), true
}

// hedgeTargets: moonpool's hedging against none and against failsafe-go's,
// for each rule.
func hedgeTargets(h *retryHedge) []check {
	const group = "retry budget"
	half := check{group: group, target: "Hedging: p99 at most 0.5× no hedging's, with at most 5 % extra requests (moonhttp, heavy tail)", met: true}
	theirs := check{group: group, target: "Hedging: p99 at most failsafe-go hedgepolicy's at the same extra requests (its runs of the rule, p99 read between them at ours' extra; half a point of slack)", met: true}
	if h == nil {
		return []check{half, theirs}
	}
	var none *hedgeStat
	for i := range h.sides {
		if h.sides[i].rule == ruleNone {
			none = &h.sides[i]
		}
	}
	round := fmt.Sprintf("median round of %d", h.plan.perRound())
	var hs, ts []string
	for _, o := range h.sides {
		if !o.ours {
			continue
		}
		if none != nil {
			x := o.p99 / none.p99
			half.known = true
			half.met = half.met && x <= 0.5 && o.roundExtra <= 0.05
			hs = append(hs, fmt.Sprintf("%s: %s (%s against %s), %s extra (%s)", hedgeRule(h.plan, o), times(x), nsText(o.p99), nsText(none.p99), pct(o.roundExtra), round))
		}
		p99, from, ok := hedgeAt(o, h.sides, h.plan)
		switch {
		case from == "":
			continue // failsafe-go has no run of the rule
		case !ok:
			theirs.known, theirs.met = true, false
			ts = append(ts, fmt.Sprintf("%s: %s at %s extra (%s), more than half a point above every failsafe-go run of the rule", hedgeRule(h.plan, o), nsText(o.p99), pct(o.roundExtra), round))
			continue
		}
		theirs.known = true
		theirs.met = theirs.met && o.p99 <= p99
		a, b := nsPair(o.p99, p99)
		ts = append(ts, fmt.Sprintf("%s: %s against %s, failsafe-go's read at ours' %s extra (%s), %s", hedgeRule(h.plan, o), a, b, pct(o.roundExtra), from, round))
	}
	half.measured, theirs.measured = strings.Join(hs, "; "), strings.Join(ts, "; ")
	return []check{half, theirs}
}

// nsPair is a and b as nsText writes them, or in whole microseconds when
// nsText would write two different times of a microsecond or more alike:
// a line that compares them then shows which is larger.
func nsPair(a, b float64) (string, string) {
	x, y := nsText(a), nsText(b)
	if x == y && a != b && min(a, b) >= 1e3 {
		return fmt.Sprintf("%.0fµs", a/1e3), fmt.Sprintf("%.0fµs", b/1e3)
	}
	return x, y
}

// ---- the plots ----

// retryColours give each side its own colour, the same in every plot.
var retryColours = map[string]string{
	sideNoRetry:     "#7a7a7a",
	sideRetry:       "#e07b00",
	sideRetryBudget: "#1f5fbf",
	sideFailsafe:    "#2a9d3a",
	sideGRPC:        "#b8336a",
	sideGRPCBudget:  "#5b3fa8",
	sideNoHedge:     "#7a7a7a",
}

// retryColour is s's colour, from its name when the map has none.
func retryColour(s string, i int) string {
	if c, ok := retryColours[s]; ok {
		return c
	}
	more := []string{"#1f5fbf", "#2a9d3a", "#e07b00", "#b8336a", "#5b3fa8", "#8c564b", "#17becf"}
	return more[i%len(more)]
}

// retryPlots writes the Retry suite's plots into dir and returns their
// names: each outage row's load on the backend over time, and the
// hedging row's latency quantiles.
func retryPlots(dir string, results []result) ([]string, error) {
	var names []string
	for _, r := range results {
		var name, svg string
		if o := retryOutageOf(r); o != nil {
			name, svg = "retry-outage-"+o.clock+"-clock.svg", outagePlot(o)
		} else if h := retryHedgeOf(r); h != nil {
			name, svg = "retry-hedging-latency.svg", hedgePlot(h)
		} else {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// svgLegend draws one entry per name, on as many lines as it needs.
func svgLegend(b *strings.Builder, names []string, colour func(string, int) string, x0, y0, width int) int {
	x, y := x0, y0
	for i, n := range names {
		w := 40 + 7*len(n)
		if x > x0 && x+w > width {
			x, y = x0, y+18
		}
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, y-5, colour(n, i), x+20, y, html.EscapeString(n))
		x += w
	}
	return y
}

// outagePlot draws, for each outage scenario, the attempts a second that
// reached the backend against time, a line per side, the outage shaded
// and the backend's room dashed.
func outagePlot(o *retryOutage) string {
	const (
		panelW, panelH = 380, 240
		left, gap      = 70, 70
		bottom         = 50
	)
	var shares []float64
	var sides []string
	for _, r := range o.runs {
		if r.share > 0 && !slices.Contains(shares, r.share) {
			shares = append(shares, r.share)
		}
		if !slices.Contains(sides, r.side) {
			sides = append(sides, r.side)
		}
	}
	width := max(left+max(len(shares), 1)*(panelW+gap), 720) // the panels, or the title
	var legend strings.Builder
	ly := svgLegend(&legend, sides, retryColour, left, 44, width-20)
	top := ly + 40
	height := top + panelH + bottom
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left,
		html.EscapeString(fmt.Sprintf("Retry outage, %s clock: attempts a second reaching the backend", o.clock)))
	b.WriteString(legend.String())
	p := o.plan
	span := p.warm + p.outage + p.after
	room := retryRoom * float64(p.rate)
	for pi, share := range shares {
		x0 := float64(left + pi*(panelW+gap))
		yMax := room
		for _, r := range o.runs {
			if r.share == share {
				for _, v := range r.loads {
					yMax = max(yMax, v)
				}
			}
		}
		step := niceStep(yMax / 4)
		yMax = math.Max(step*math.Ceil(yMax/step), step)
		xAt := func(t time.Duration) float64 { return x0 + float64(t)/float64(span)*panelW }
		yAt := func(v float64) float64 { return float64(top) + panelH - v/yMax*panelH }
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">%s</text>`+"\n", x0, top-8, html.EscapeString(shareName(share)+" during the outage"))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#fbe3e3"/>`+"\n", xAt(p.warm), top, xAt(p.warm+p.outage)-xAt(p.warm), panelH)
		for v := 0.0; v <= yMax+step/2; v += step {
			y := yAt(v)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y, x0+panelW, y)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%g</text>`+"\n", x0-6, y+4, v)
		}
		tStep := niceStep(span.Seconds() / 5)
		for s := 0.0; s <= span.Seconds()*1.0001; s += tStep {
			x := xAt(time.Duration(s * float64(time.Second)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%g</text>`+"\n", x, top+panelH+16, s)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">seconds</text>`+"\n", x0+panelW/2, top+panelH+34)
		yr := yAt(room)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="4 3"/><text x="%.1f" y="%.1f" text-anchor="end" fill="#333">room</text>`+"\n", x0, yr, x0+panelW, yr, x0+panelW-4, yr-4)
		for i, side := range sides {
			for _, r := range o.runs {
				if r.share != share || r.side != side {
					continue
				}
				var pts []string
				for j, v := range r.loads {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(time.Duration(j)*retrySlot+retrySlot/2), yAt(v)))
				}
				w := 1.5
				if r.ours {
					w = 2.5
				}
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" points="%s"/>`+"\n", retryColour(side, i), w, strings.Join(pts, " "))
			}
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// hedgePlot draws each side's latency at quantiles from p50 to p99.9,
// the quantiles spread by their nines, the latency on a log scale.
func hedgePlot(h *retryHedge) string {
	const (
		panelW, panelH = 560, 300
		left           = 80
		bottom         = 50
	)
	qs := []float64{0.5, 0.75, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999}
	var names []string
	for _, s := range h.sides {
		names = append(names, s.side)
	}
	width := left + panelW + 60
	var legend strings.Builder
	ly := svgLegend(&legend, names, retryColour, left, 44, width-20)
	top := ly + 30
	height := top + panelH + bottom
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range h.sides {
		for _, q := range qs {
			if v := quantile(s.lat, q); v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if !(lo < hi) {
		lo, hi = 1e6, 1e7
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	nines := func(q float64) float64 { return -math.Log10(1 - q) }
	xAt := func(q float64) float64 {
		return float64(left) + (nines(q)-nines(qs[0]))/(nines(qs[len(qs)-1])-nines(qs[0]))*panelW
	}
	yAt := func(v float64) float64 {
		return float64(top) + panelH - (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*panelH
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">Hedging a heavy tail: latency of one request at each quantile</text>`+"\n", left)
	b.WriteString(legend.String())
	for v := lo; v <= hi*1.001; v *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if m*v > hi*1.001 {
				break
			}
			y := yAt(m * v)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+panelW, y)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", left-6, y+4, tick(m*v))
		}
	}
	for _, q := range qs {
		x := xAt(q)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x, top, x, top+panelH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">p%g</text>`+"\n", x, top+panelH+16, 100*q)
	}
	for i, s := range h.sides {
		var pts []string
		for _, q := range qs {
			if v := quantile(s.lat, q); v > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(q), yAt(v)))
			}
		}
		w := 1.5
		if s.ours {
			w = 2.5
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" points="%s"/>`+"\n", retryColour(s.side, i), w, strings.Join(pts, " "))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
