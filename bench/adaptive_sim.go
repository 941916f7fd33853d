package main

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// The Adaptive suite's backend is a service with a concurrency knee: C
// workers taking requests in arrival order, each request busy for its
// service time. Up to C in flight a request waits for nobody, so latency
// is flat. Past C it queues, and latency grows with the queue. Time is an
// argument, so the same backend runs on either clock.

// adaptiveBase is the backend's knee and its service time when healthy.
const (
	adaptiveWorkers = 12
	adaptiveService = 20 * time.Millisecond
	// adaptiveDeadline is how long a client waits for an answer: five
	// service times, as a caller with a timeout of a few times the usual
	// latency would.
	adaptiveDeadline = 5 * adaptiveService
)

// adaptiveCapacity is the healthy backend's requests a second.
const adaptiveCapacity = float64(adaptiveWorkers) / (float64(adaptiveService) / float64(time.Second))

// knee is the backend: free holds the instant each worker is next free.
type knee struct {
	free []int64
}

func newKnee(most int) *knee { return &knee{free: make([]int64, most)} }

// admit hands a request arriving at now to the first free of the first
// workers, for service: it answers when the request is done.
func (k *knee) admit(now int64, workers int, service time.Duration) int64 {
	workers = min(max(workers, 1), len(k.free))
	best := 0
	for i := 1; i < workers; i++ {
		if k.free[i] < k.free[best] {
			best = i
		}
	}
	start := max(now, k.free[best])
	k.free[best] = start + int64(service)
	return k.free[best]
}

// ---- scenarios ----

// phase is a stretch of a scenario from its start (at) on.
type phase struct {
	at      time.Duration
	load    float64 // arrivals as a share of the healthy capacity
	workers int
	service time.Duration // at the phase's start
	ramp    time.Duration // if set, the service time at its end, reached in a straight line
}

// adaptiveScenario is one story of load and capacity.
type adaptiveScenario struct {
	name     string
	length   time.Duration
	phases   []phase
	critical float64 // the share of requests of the highest class; 0: one class
	steps    bool    // each phase boundary is a step to converge after
	drift    bool    // measure the limit's drift over the last phase
}

// phaseAt is the phase in force at offset t, and its index.
func (s *adaptiveScenario) phaseAt(t time.Duration) (phase, int) {
	i := 0
	for j, p := range s.phases {
		if p.at <= t {
			i = j
		}
	}
	return s.phases[i], i
}

// end is the end of phase i.
func (s *adaptiveScenario) end(i int) time.Duration {
	if i+1 < len(s.phases) {
		return s.phases[i+1].at
	}
	return s.length
}

// serviceAt is the backend's service time at offset t.
func (s *adaptiveScenario) serviceAt(t time.Duration) time.Duration {
	p, i := s.phaseAt(t)
	if p.ramp == 0 {
		return p.service
	}
	f := float64(t-p.at) / float64(s.end(i)-p.at)
	return p.service + time.Duration(f*float64(p.ramp-p.service))
}

// workersAt is the backend's knee at offset t.
func (s *adaptiveScenario) workersAt(t time.Duration) int {
	p, _ := s.phaseAt(t)
	return p.workers
}

// mostWorkers is the largest knee of the scenario.
func (s *adaptiveScenario) mostWorkers() int {
	most := 1
	for _, p := range s.phases {
		most = max(most, p.workers)
	}
	return most
}

// arrivals makes the scenario's requests: Poisson arrivals at each
// phase's rate, each a class drawn with the scenario's critical share,
// the same for every side of a run.
func (s *adaptiveScenario) arrivals(seed uint64) []arrival {
	rng := rand.New(rand.NewPCG(seed, 0x6164617074697665))
	var out []arrival
	t := time.Duration(0)
	for t < s.length {
		p, i := s.phaseAt(t)
		rate := p.load * adaptiveCapacity
		if rate <= 0 {
			t = s.end(i)
			continue
		}
		gap := time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if t+gap >= s.end(i) {
			// The next phase's rate takes over at its start; the draw is
			// memoryless, so starting afresh there is exact.
			t = s.end(i)
			continue
		}
		t += gap
		critical := s.critical > 0 && rng.Float64() < s.critical
		// The service time is fixed per request, ±20 % around the phase's.
		jitter := 0.8 + 0.4*rng.Float64()
		out = append(out, arrival{at: t, critical: critical, service: time.Duration(jitter * float64(s.serviceAt(t)))})
	}
	return out
}

// arrival is one request of a scenario.
type arrival struct {
	at       time.Duration
	critical bool
	service  time.Duration
}

// adaptiveScenarios are the suite's stories, their base lengths times
// scale, and with a slowdown that long if it is above zero.
func adaptiveScenarios(slowdown time.Duration, scale float64) []adaptiveScenario {
	d := func(sec float64) time.Duration { return time.Duration(sec * scale * float64(time.Second)) }
	w, l := adaptiveWorkers, adaptiveService
	steps := adaptiveScenario{name: "steps", steps: true, length: d(16), phases: []phase{
		{at: 0, load: 0.5, workers: w, service: l},
		{at: d(4), load: 1, workers: w, service: l},
		{at: d(8), load: 2, workers: w, service: l},
		{at: d(12), load: 3, workers: w, service: l},
	}}
	fall := adaptiveScenario{name: "capacity 12 to 4", steps: true, length: d(12), phases: []phase{
		{at: 0, load: 1.5, workers: w, service: l},
		{at: d(6), load: 1.5, workers: w / 3, service: l},
	}}
	burst := adaptiveScenario{name: "burst from zero", steps: true, length: d(8), phases: []phase{
		{at: 0, load: 0, workers: w, service: l},
		{at: d(2), load: 3, workers: w, service: l},
	}}
	prio := adaptiveScenario{name: "2x overload, 25% critical", critical: 0.25, length: d(10), phases: []phase{
		{at: 0, load: 2, workers: w, service: l},
	}}
	out := []adaptiveScenario{steps, fall, burst, prio}
	if slowdown > 0 {
		// A dependency slowing down: its service time doubles, its knee
		// stays where it was. A tenth of the slowdown's length before it
		// sets the limit the drift is measured from.
		out = append(out, adaptiveScenario{name: slowdownName(slowdown), drift: true, length: slowdown + slowdown/10, phases: []phase{
			{at: 0, load: 1.5, workers: w, service: l},
			{at: slowdown / 10, load: 1.5, workers: w, service: l, ramp: 2 * l},
		}})
	}
	return out
}

// ---- what a run measured ----

// adaptiveRun is one side through one scenario.
type adaptiveRun struct {
	side     string
	ours     bool
	clock    string
	scenario *adaptiveScenario
	fixed    int // the oracle's limit; 0 for other sides

	requests, good, late, refused int
	critical, criticalGood        int
	criticalRefused               int
	lat                           []float64 // ns, every request let in, to its answer or its deadline
	criticalLat                   []float64
	goodEnds                      []time.Duration // when each request answered in time was, in order
	limits                        []sample
	p99s                          []sample // p99 per window of the requests answered in it
	errs                          int64
	firstErr                      error
	// rounds, when the scenario ran more than once, are each round's run:
	// the counts and latencies above are over all of them, the samples
	// over time the first round's.
	rounds []*adaptiveRun
}

// merge folds runs of one side through the same scenario into one.
func merge(runs []*adaptiveRun) *adaptiveRun {
	first := runs[0]
	m := &adaptiveRun{side: first.side, ours: first.ours, clock: first.clock, scenario: first.scenario, fixed: first.fixed,
		goodEnds: first.goodEnds, limits: first.limits, p99s: first.p99s, rounds: runs}
	for _, r := range runs {
		m.requests += r.requests
		m.good += r.good
		m.late += r.late
		m.refused += r.refused
		m.critical += r.critical
		m.criticalGood += r.criticalGood
		m.criticalRefused += r.criticalRefused
		m.lat = append(m.lat, r.lat...)
		m.criticalLat = append(m.criticalLat, r.criticalLat...)
		m.errs += r.errs
		if m.firstErr == nil {
			m.firstErr = r.firstErr
		}
	}
	slices.Sort(m.lat)
	slices.Sort(m.criticalLat)
	return m
}

// sample is a value at an offset into the scenario.
type sample struct {
	at time.Duration
	v  float64
}

// goodput is the run's answers in time a second.
func (r *adaptiveRun) goodput() float64 {
	return float64(r.good) / r.scenario.length.Seconds() / float64(max(len(r.rounds), 1))
}

// goodIn counts the answers in time from from to to.
func (r *adaptiveRun) goodIn(from, to time.Duration) int {
	i, _ := slices.BinarySearch(r.goodEnds, from)
	j, _ := slices.BinarySearch(r.goodEnds, to)
	return j - i
}

// recorder gathers a run's facts as its requests end.
type recorder struct {
	run    *adaptiveRun
	window time.Duration
	cur    int       // the window being filled
	inWin  []float64 // latencies answered in it
}

func newRecorder(run *adaptiveRun, window time.Duration) *recorder {
	return &recorder{run: run, window: window}
}

// refuse notes a request turned away.
func (rc *recorder) refuse(a arrival) {
	rc.run.requests++
	rc.run.refused++
	if a.critical {
		rc.run.critical++
		rc.run.criticalRefused++
	}
}

// answer notes a request that began at start and ended at end (offsets),
// within its deadline or not.
func (rc *recorder) answer(a arrival, start, end time.Duration, inTime bool) {
	r := rc.run
	r.requests++
	lat := float64(end - start)
	r.lat = append(r.lat, lat)
	if a.critical {
		r.critical++
		r.criticalLat = append(r.criticalLat, lat)
	}
	if inTime {
		r.good++
		if a.critical {
			r.criticalGood++
		}
		r.goodEnds = append(r.goodEnds, end)
	} else {
		r.late++
	}
	w := int(end / rc.window)
	if w != rc.cur {
		rc.flush()
		rc.cur = w
	}
	rc.inWin = append(rc.inWin, lat)
}

// flush ends the window being filled.
func (rc *recorder) flush() {
	if len(rc.inWin) == 0 {
		return
	}
	slices.Sort(rc.inWin)
	rc.run.p99s = append(rc.run.p99s, sample{at: time.Duration(rc.cur) * rc.window, v: quantile(rc.inWin, 0.99)})
	rc.inWin = rc.inWin[:0]
}

// done ends the run: the last window, and the latencies sorted.
func (rc *recorder) done() {
	rc.flush()
	slices.Sort(rc.run.lat)
	slices.Sort(rc.run.criticalLat)
}

// ---- the virtual clock ----

// simLimiter is a side's limit as the discrete-event simulation uses it.
// Each request is known by its ticket, its index among the arrivals.
type simLimiter interface {
	// enter lets the request in at once, refuses it, or puts it in line,
	// to be answered by settle later.
	enter(now int64, ticket int, critical bool, deadline int64) entry
	// leave gives a request's room back: it was answered, or its caller
	// gave up at its deadline.
	leave(ticket int, now int64)
	// expire ends the wait of a request in line whose deadline passed.
	expire(ticket int)
	// settle waits until every request in line has been answered or is
	// still waiting, and returns the answers since the last call, in
	// ticket order.
	settle() ([]answer, error)
	limit() float64
	// tick runs what is due on the side's clock by now.
	tick(now int64)
}

// entry is what enter did with a request.
type entry int

const (
	entered entry = iota
	refused
	waiting
)

// answer is a wait that ended: let in, given up at the deadline, or
// refused.
type answer struct {
	ticket   int
	entered  bool
	timedOut bool
	err      error // an answer no side should give
}

// event is a request let in, due to end, or a request in line, due to
// give up.
type event struct {
	at     int64
	seq    int // events at the same instant run in the order they were made
	ticket int
	expire bool
	inTime bool
}

type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulate runs the requests through lim and a fresh backend, every
// instant an offset from origin on the side's clock, and records what
// happened into run. The loop is the clock: it moves only when the side
// has settled what the last step started.
func simulate(s *adaptiveScenario, reqs []arrival, lim simLimiter, origin int64, run *adaptiveRun, every time.Duration) {
	be := newKnee(s.mostWorkers())
	rc := newRecorder(run, time.Second)
	var due events
	seq := 0
	push := func(e event) {
		e.seq = seq
		seq++
		heap.Push(&due, e)
	}
	inLine := map[int]bool{}
	nextLook := time.Duration(0)
	look := func(t time.Duration) {
		for nextLook <= t {
			run.limits = append(run.limits, sample{at: nextLook, v: lim.limit()})
			nextLook += every
		}
	}
	fail := func(err error) {
		run.errs++
		if run.firstErr == nil {
			run.firstErr = err
		}
	}
	// admit hands request i to the backend at now.
	admit := func(i int, now int64) {
		a := reqs[i]
		done := be.admit(now, s.workersAt(time.Duration(now-origin)), a.service)
		deadline := origin + int64(a.at+adaptiveDeadline)
		e := event{at: done, ticket: i, inTime: done <= deadline}
		if !e.inTime {
			// The caller gives up at its deadline; the backend works on.
			e.at = deadline
		}
		push(e)
	}
	settle := func(now int64) {
		answers, err := lim.settle()
		if err != nil {
			fail(err)
		}
		for _, ans := range answers {
			delete(inLine, ans.ticket)
			a := reqs[ans.ticket]
			switch {
			case ans.err != nil:
				fail(ans.err)
				rc.refuse(a)
			case ans.entered:
				admit(ans.ticket, now)
			case ans.timedOut:
				rc.answer(a, a.at, time.Duration(now-origin), false)
			default:
				rc.refuse(a)
			}
		}
	}
	step := func(now int64) {
		lim.tick(now)
		settle(now)
		look(time.Duration(now - origin))
	}
	run1 := func(e event) {
		step(e.at)
		if e.expire {
			if inLine[e.ticket] {
				lim.expire(e.ticket)
				settle(e.at)
			}
			return
		}
		lim.leave(e.ticket, e.at)
		a := reqs[e.ticket]
		rc.answer(a, a.at, time.Duration(e.at-origin), e.inTime)
		settle(e.at)
	}
	for i, a := range reqs {
		now := origin + int64(a.at)
		for len(due) > 0 && due[0].at <= now {
			run1(heap.Pop(&due).(event))
		}
		step(now)
		switch lim.enter(now, i, a.critical, now+int64(adaptiveDeadline)) {
		case entered:
			admit(i, now)
		case refused:
			rc.refuse(a)
		case waiting:
			inLine[i] = true
			push(event{at: now + int64(adaptiveDeadline), ticket: i, expire: true})
			settle(now)
		}
	}
	for len(due) > 0 {
		run1(heap.Pop(&due).(event))
	}
	step(origin + int64(s.length))
	rc.done()
}

// fixedSim is a gate of a fixed room, refusing when full: the oracle's
// side, and, with room for all, the side without a limit.
type fixedSim struct {
	room, in int
}

func (f *fixedSim) enter(int64, int, bool, int64) entry {
	if f.in >= f.room {
		return refused
	}
	f.in++
	return entered
}
func (f *fixedSim) leave(int, int64)          { f.in-- }
func (f *fixedSim) expire(int)                {}
func (f *fixedSim) settle() ([]answer, error) { return nil, nil }
func (f *fixedSim) limit() float64            { return float64(f.room) }
func (f *fixedSim) tick(int64)                {}

// unlimited is the side without a limit.
func unlimited() *fixedSim { return &fixedSim{room: math.MaxInt} }

// oracle finds the fixed room from 1 to three times the scenario's
// largest knee that answers the most requests in time on the virtual
// clock; the smallest such room when several tie.
func oracle(s *adaptiveScenario, reqs []arrival) (best int, run *adaptiveRun) {
	for room := 1; room <= 3*s.mostWorkers(); room++ {
		r := &adaptiveRun{side: adaptiveOracle, clock: "virtual", scenario: s, fixed: room}
		simulate(s, reqs, &fixedSim{room: room}, 0, r, s.length)
		if run == nil || r.good > run.good {
			best, run = room, r
		}
	}
	return best, run
}

// slowdownName names the slowdown scenario by its length.
func slowdownName(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d-minute slowdown", d/time.Minute)
	}
	return fmt.Sprintf("%v slowdown", d)
}
