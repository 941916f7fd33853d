package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKneeLatencyFlatThenGrows checks the backend's promise: with up to C
// requests in at once each takes its service time, and past C the queue
// adds whole service times, one for each C ahead.
func TestKneeLatencyFlatThenGrows(t *testing.T) {
	const c, service = 4, 10 * time.Millisecond
	tests := []struct {
		inFlight int
		mean     time.Duration // of the requests let in at the same instant
		slowest  time.Duration
	}{
		{1, service, service},
		{4, service, service},
		{5, 12 * time.Millisecond, 2 * service},
		{8, 15 * time.Millisecond, 2 * service},
		{12, 20 * time.Millisecond, 3 * service},
	}
	for _, tt := range tests {
		k := newKnee(c)
		var total, slowest time.Duration
		for range tt.inFlight {
			lat := time.Duration(k.admit(0, c, service))
			total += lat
			slowest = max(slowest, lat)
		}
		if mean := total / time.Duration(tt.inFlight); mean != tt.mean || slowest != tt.slowest {
			t.Errorf("%d in flight: mean %v, slowest %v; want %v and %v", tt.inFlight, mean, slowest, tt.mean, tt.slowest)
		}
	}
	// A worker that has finished takes the next request at once.
	k := newKnee(c)
	k.admit(0, c, service)
	if got := k.admit(int64(time.Second), c, service); got != int64(time.Second+service) {
		t.Errorf("a request after the backend went idle ends at %v, want %v", time.Duration(got), time.Second+service)
	}
	// A knee that falls leaves the workers past it out.
	k = newKnee(c)
	for i := range 4 {
		if got, want := k.admit(0, 2, service), int64(service)*int64(1+i/2); got != want {
			t.Errorf("request %d on 2 of 4 workers ends at %v, want %v", i, time.Duration(got), time.Duration(want))
		}
	}
}

// TestSimulationOverloadCollapses checks the simulation end to end: at
// three times the capacity without a limit the backend's queue outgrows
// the deadline and almost nothing is answered in time, while a room of C
// answers about the capacity.
func TestSimulationOverloadCollapses(t *testing.T) {
	s := adaptiveScenario{name: "3x", length: 10 * time.Second, phases: []phase{{load: 3, workers: adaptiveWorkers, service: adaptiveService}}}
	reqs := s.arrivals(1)
	if want := 3 * adaptiveCapacity * s.length.Seconds(); math.Abs(float64(len(reqs))-want) > 0.05*want {
		t.Fatalf("%d arrivals, want about %.0f", len(reqs), want)
	}
	none := &adaptiveRun{scenario: &s}
	simulate(&s, reqs, unlimited(), 0, none, time.Second)
	fixed := &adaptiveRun{scenario: &s}
	simulate(&s, reqs, &fixedSim{room: adaptiveWorkers}, 0, fixed, time.Second)
	if g := none.goodput(); g > 0.1*adaptiveCapacity {
		t.Errorf("no limit answers %.0f/s in time at 3x; the backend should drown (capacity %.0f/s)", g, adaptiveCapacity)
	}
	if g := fixed.goodput(); g < 0.9*adaptiveCapacity {
		t.Errorf("a room of %d answers %.0f/s in time, want about the capacity %.0f/s", adaptiveWorkers, g, adaptiveCapacity)
	}
	if fixed.requests != len(reqs) || none.requests != len(reqs) {
		t.Errorf("requests counted %d and %d, want %d each", fixed.requests, none.requests, len(reqs))
	}
	if p99 := quantile(fixed.lat, 0.99); p99 > float64(adaptiveService)*1.2+1 {
		t.Errorf("a room of C has p99 %v: it should never queue at the backend", time.Duration(p99))
	}
}

// TestOracleFindsBestRoom runs the search on a backend simple enough to
// work out by hand: two bursts of 40 requests, 100 ms apart, on 12
// workers of 45 ms. Of a burst only the first 24 can be answered within
// 100 ms. A room over 24 lets in requests that will be late and keep
// workers busy into the second burst, which then answers fewer. So 24 is
// the one best room.
func TestOracleFindsBestRoom(t *testing.T) {
	s := adaptiveScenario{name: "bursts", length: time.Second, phases: []phase{{workers: 12, service: 45 * time.Millisecond}}}
	var reqs []arrival
	for _, at := range []time.Duration{0, adaptiveDeadline} {
		for range 40 {
			reqs = append(reqs, arrival{at: at, service: 45 * time.Millisecond})
		}
	}
	room, run := oracle(&s, reqs)
	if room != 24 || run.good != 48 {
		t.Errorf("oracle: room %d answering %d in time; want 24 answering 48", room, run.good)
	}
	for _, r := range []int{23, 25, 36} {
		other := &adaptiveRun{scenario: &s}
		simulate(&s, reqs, &fixedSim{room: r}, 0, other, time.Second)
		if other.good >= run.good {
			t.Errorf("room %d answers %d in time, no fewer than the oracle's %d", r, other.good, run.good)
		}
	}
}

// TestArrivalsFollowPhases checks that each phase gets its own rate and
// the share of critical requests holds.
func TestArrivalsFollowPhases(t *testing.T) {
	s := adaptiveScenario{name: "two", length: 20 * time.Second, critical: 0.25, phases: []phase{
		{load: 0, workers: 12, service: adaptiveService},
		{at: 10 * time.Second, load: 1, workers: 12, service: adaptiveService},
	}}
	reqs := s.arrivals(7)
	crit := 0
	for _, a := range reqs {
		if a.at < 10*time.Second {
			t.Fatalf("an arrival at %v, in a phase of no load", a.at)
		}
		if a.critical {
			crit++
		}
	}
	if want := 10 * adaptiveCapacity; math.Abs(float64(len(reqs))-want) > 0.05*want {
		t.Errorf("%d arrivals in the loaded phase, want about %.0f", len(reqs), want)
	}
	if share := float64(crit) / float64(len(reqs)); math.Abs(share-0.25) > 0.03 {
		t.Errorf("critical share %.3f, want 0.25", share)
	}
	if !slices.Equal(reqs, s.arrivals(7)) {
		t.Error("the same seed made different arrivals")
	}
	ramp := adaptiveScenario{length: 10 * time.Second, phases: []phase{{service: 10 * time.Millisecond, ramp: 30 * time.Millisecond}}}
	if got := ramp.serviceAt(5 * time.Second); got != 20*time.Millisecond {
		t.Errorf("halfway through a ramp from 10 ms to 30 ms the service time is %v, want 20ms", got)
	}
}

// TestAdaptiveVirtualRepeats checks that our side on the virtual clock
// runs the same way every time: before the simulation moves on, the
// gate's actor has taken in each timer's message, and every request in
// its line has been answered or is still waiting. At this load the gate
// times every call (it times only some past a few hundred a window), so
// what happens at every instant is a function of the arrivals alone.
func TestAdaptiveVirtualRepeats(t *testing.T) {
	all := adaptiveScenarios(0, 0.5)
	for _, s := range []adaptiveScenario{all[1], all[3]} { // the capacity falling, and two classes
		t.Run(s.name, func(t *testing.T) { repeats(t, s) })
	}
}

// repeats runs our side through s three times and compares the runs.
func repeats(t *testing.T, s adaptiveScenario) {
	var first *adaptiveRun
	for i := range 3 {
		lim, stop, err := oursSim(&s)
		if err != nil {
			t.Fatal(err)
		}
		r := &adaptiveRun{scenario: &s}
		simulate(&s, s.arrivals(adaptiveSeed), lim, lim.(interface{ origin() int64 }).origin(), r, 100*time.Millisecond)
		stop()
		if r.good == 0 || len(r.limits) == 0 || r.errs > 0 {
			t.Fatalf("run %d answered %d in time with %d limit samples, %d failures (%v)", i, r.good, len(r.limits), r.errs, r.firstErr)
		}
		if first == nil {
			first = r
			continue
		}
		if r.good != first.good || r.refused != first.refused || r.late != first.late || !slices.Equal(r.limits, first.limits) {
			t.Errorf("run %d: %d in time, %d refused, %d late; run 0: %d, %d, %d (limits equal: %v)",
				i, r.good, r.refused, r.late, first.good, first.refused, first.late, slices.Equal(r.limits, first.limits))
		}
	}
}

// lineSim is a room of one with a line: a request without room waits,
// and a request leaving hands its room to the first in line.
type lineSim struct {
	in      bool
	line    []int
	answers []answer
}

func (l *lineSim) enter(_ int64, ticket int, _ bool, _ int64) entry {
	if !l.in {
		l.in = true
		return entered
	}
	l.line = append(l.line, ticket)
	return waiting
}

func (l *lineSim) leave(int, int64) {
	l.in = false
	if len(l.line) > 0 {
		l.in = true
		l.answers = append(l.answers, answer{ticket: l.line[0], entered: true})
		l.line = l.line[1:]
	}
}

func (l *lineSim) expire(ticket int) {
	if i := slices.Index(l.line, ticket); i >= 0 {
		l.line = slices.Delete(l.line, i, i+1)
		l.answers = append(l.answers, answer{ticket: ticket, timedOut: true})
	}
}

func (l *lineSim) settle() ([]answer, error) {
	out := l.answers
	l.answers = nil
	return out, nil
}

func (l *lineSim) limit() float64 { return 1 }
func (l *lineSim) tick(int64)     {}

// TestSimulationLine checks the simulation of a side with a line: four
// requests at once on one worker of 40 ms, with room for one. The first
// is answered at 40 ms. The second waits for it and is answered at 80 ms.
// The third gets in at 80 ms, too late: its caller gives up at 100 ms. The
// fourth gives up in line at 100 ms.
func TestSimulationLine(t *testing.T) {
	s := adaptiveScenario{name: "line", length: time.Second, phases: []phase{{workers: 1, service: 40 * time.Millisecond}}}
	reqs := make([]arrival, 4)
	for i := range reqs {
		reqs[i] = arrival{service: 40 * time.Millisecond}
	}
	r := &adaptiveRun{scenario: &s}
	simulate(&s, reqs, &lineSim{}, 0, r, time.Second)
	want := []float64{40e6, 80e6, 100e6, 100e6}
	if r.good != 2 || r.late != 2 || r.refused != 0 || !slices.Equal(r.lat, want) {
		t.Errorf("%d in time, %d late, %d refused, latencies %v; want 2, 2, 0 and %v", r.good, r.late, r.refused, r.lat, want)
	}
}

// TestMergeRounds checks that rounds of a scenario add up: counts and
// latencies over all of them, goodput a second of all of them, and the
// time to converge the median round's.
func TestMergeRounds(t *testing.T) {
	s := &adaptiveScenario{name: "step", steps: true, length: 2 * time.Second, phases: []phase{{}, {at: time.Second}}}
	ends := func(from time.Duration) []time.Duration {
		var out []time.Duration
		for at := from; at < 2*time.Second; at += time.Millisecond {
			out = append(out, at)
		}
		return out
	}
	or, ours := []*adaptiveRun{}, []*adaptiveRun{}
	for k, from := range []time.Duration{1100, 1500, 1300} {
		o := &adaptiveRun{scenario: s, goodEnds: ends(time.Second)}
		o.good = len(o.goodEnds)
		r := &adaptiveRun{scenario: s, goodEnds: ends(from * time.Millisecond), requests: 1000, refused: k, lat: []float64{float64(k)}}
		r.good = len(r.goodEnds)
		or, ours = append(or, o), append(ours, r)
	}
	m, mo := merge(ours), merge(or)
	if m.requests != 3000 || m.refused != 3 || m.good != 900+500+700 || !slices.Equal(m.lat, []float64{0, 1, 2}) {
		t.Errorf("merged: %d requests, %d refused, %d in time, latencies %v", m.requests, m.refused, m.good, m.lat)
	}
	if g := m.goodput(); g != 2100.0/6 {
		t.Errorf("goodput %.1f/s, want %.1f/s over three rounds of 2 s", g, 2100.0/6)
	}
	if c := m.convergence(mo); len(c) != 1 || c[0] != 300*time.Millisecond {
		t.Errorf("converged after %v, want the median round's 300ms", c)
	}
}

// TestDriftMedianRound checks the drift: the limit's median over the last
// tenth of the slowdown against its median over the tenth before it, and
// over rounds the median round's.
func TestDriftMedianRound(t *testing.T) {
	s := &adaptiveScenario{name: "slow", drift: true, length: 11 * time.Second, phases: []phase{{}, {at: time.Second}}}
	round := func(before, after float64) *adaptiveRun {
		r := &adaptiveRun{scenario: s}
		for at := time.Duration(0); at < s.length; at += 100 * time.Millisecond {
			v := before
			if at >= 5*time.Second {
				v = after
			}
			r.limits = append(r.limits, sample{at: at, v: v})
		}
		return r
	}
	if b, a, d, ok := round(20, 23).drift(); !ok || b != 20 || a != 23 || math.Abs(d-0.15) > 1e-9 {
		t.Errorf("20 to 23: drift %v, %v, %v, %v; want 20, 23, 0.15", b, a, d, ok)
	}
	m := merge([]*adaptiveRun{round(20, 21), round(20, 26), round(20, 18)})
	if b, a, d, ok := m.drift(); !ok || a != 18 || math.Abs(d-0.1) > 1e-9 {
		t.Errorf("rounds drifting 5 %%, 30 %% and 10 %%: %v, %v, %v, %v; want the 10 %% round (20 to 18)", b, a, d, ok)
	}
}

// failingLimiter answers every request with an error no side should give.
type failingLimiter struct{}

func (failingLimiter) enter(context.Context, bool) (realPass, error) {
	return nil, unexpected{errors.New("broken")}
}
func (failingLimiter) limit() float64 { return 1 }
func (failingLimiter) close()         {}

// TestRealRunCountsFailures checks that a side answering with an
// unexpected error is reported as failing, not as refusing.
func TestRealRunCountsFailures(t *testing.T) {
	s := adaptiveScenario{name: "short", length: 100 * time.Millisecond, phases: []phase{{load: 0.5, workers: adaptiveWorkers, service: adaptiveService}}}
	reqs := s.arrivals(1)
	side := realSide{name: "broken", build: func(*adaptiveScenario, int) (realLimiter, error) { return failingLimiter{}, nil }}
	runs, err := realRun([]realSide{side}, &s, reqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := runs[0]; r.errs != int64(len(reqs)) || r.firstErr == nil || r.good != 0 {
		t.Errorf("%d requests, each failing: counted %d failures (first %v), %d answered", len(reqs), r.errs, r.firstErr, r.good)
	}
}

// adaptiveFakeRun is a run with the given answers in time, latencies of
// its highest class, and limit samples.
func adaptiveFakeRun(s *adaptiveScenario, side string, good int, crit []float64, limits []sample) *adaptiveRun {
	r := &adaptiveRun{side: side, ours: side == adaptiveOurs, scenario: s, good: good, requests: good, criticalLat: crit, limits: limits}
	for i := range good {
		r.goodEnds = append(r.goodEnds, s.length*time.Duration(i)/time.Duration(good))
	}
	return r
}

// TestAdaptiveTargetsArithmetic checks each target's figure and verdict
// against runs made up to land on either side of its bound.
func TestAdaptiveTargetsArithmetic(t *testing.T) {
	steps := &adaptiveScenario{name: "steps", steps: true, length: 4 * time.Second, phases: []phase{{}, {at: 2 * time.Second}}}
	prio := &adaptiveScenario{name: "prio", critical: 0.25, length: time.Second, phases: []phase{{}}}
	slow := &adaptiveScenario{name: "slow", drift: true, length: 11 * time.Second, phases: []phase{{}, {at: time.Second}}}
	flat := func(v float64, to time.Duration) []sample {
		var out []sample
		for at := time.Duration(0); at < to; at += 100 * time.Millisecond {
			out = append(out, sample{at: at, v: v})
		}
		return out
	}
	ms := func(v float64) []float64 { return []float64{v * 1e6} }
	build := func(ourGood, theirGood, oracleGood int, ourP99, theirP99 float64, ourEnd float64) []result {
		// Our slowdown limit goes from 20 to ourEnd.
		slowLimits := append(flat(20, time.Second), flat(ourEnd, 11*time.Second)[10:]...)
		real := &adaptiveFacts{clock: "real", runs: []*adaptiveRun{
			adaptiveFakeRun(steps, adaptiveOurs, ourGood, nil, nil),
			adaptiveFakeRun(steps, adaptiveTheirs, theirGood, nil, nil),
			adaptiveFakeRun(steps, adaptiveOracle, oracleGood, nil, nil),
			adaptiveFakeRun(prio, adaptiveOurs, 100, ms(ourP99), nil),
			adaptiveFakeRun(prio, adaptiveTheirs, 100, ms(theirP99), nil),
			adaptiveFakeRun(prio, adaptiveOracle, 100, nil, nil),
		}}
		virtual := &adaptiveFacts{clock: "virtual", runs: []*adaptiveRun{
			adaptiveFakeRun(slow, adaptiveOurs, 100, nil, slowLimits),
			adaptiveFakeRun(slow, adaptiveOracle, 100, nil, nil),
		}}
		rv := result{row: row{suite: "Adaptive", name: "test virtual"}}
		rr := result{row: row{suite: "Adaptive", name: "test real"}}
		adaptiveRows.keep(rv.row.name, virtual)
		adaptiveRows.keep(rr.row.name, real)
		return []result{rv, rr}
	}
	verdicts := func(rs []result) map[string]check {
		out := map[string]check{}
		for _, c := range adaptiveTargets(rs, false) {
			for _, key := range []string{"failsafe-go's in every", "oracle's in every scenario (real", "highest class", "converged", "drift"} {
				if strings.Contains(c.target, key) {
					out[key] = c
				}
			}
		}
		return out
	}

	good := verdicts(build(100, 100, 110, 10, 20, 21))
	for key, c := range good {
		if !c.known || !c.met {
			t.Errorf("%q: %s (%s), want met", key, c.verdict(), c.measured)
		}
	}
	if c := good["failsafe-go's in every"]; !strings.Contains(c.measured, "steps: 1.00×") {
		t.Errorf("goodput against failsafe-go reads %q, want steps: 1.00×", c.measured)
	}
	if c := good["highest class"]; !strings.Contains(c.measured, "0.50×") {
		t.Errorf("p99 of the highest class reads %q, want 0.50×", c.measured)
	}
	if c := good["drift"]; !strings.Contains(c.measured, "5.0%") {
		t.Errorf("drift reads %q, want 5.0%%", c.measured)
	}

	bad := verdicts(build(99, 100, 111, 10.2, 20, 22.2))
	for _, key := range []string{"failsafe-go's in every", "oracle's in every scenario (real", "highest class", "drift"} {
		if c := bad[key]; !c.known || c.met {
			t.Errorf("%q: %s (%s), want MISSED", key, c.verdict(), c.measured)
		}
	}
	if c := bad["oracle's in every scenario (real"]; !strings.Contains(c.measured, "steps: 0.89×") {
		t.Errorf("goodput against the oracle reads %q, want steps: 0.89×", c.measured)
	}
}

// TestConvergence checks the time to converge after a step: the start of
// the first window from which goodput stays within 10 % of the oracle's.
func TestConvergence(t *testing.T) {
	s := &adaptiveScenario{name: "step", steps: true, length: 2 * time.Second, phases: []phase{{}, {at: time.Second}}}
	or := &adaptiveRun{scenario: s}
	for at := time.Second; at < 2*time.Second; at += time.Millisecond {
		or.goodEnds = append(or.goodEnds, at)
	}
	tests := []struct {
		name string
		skip func(at time.Duration) bool // the oracle's answers this side missed
		want time.Duration
	}{
		{"at once", func(time.Duration) bool { return false }, 0},
		{"after 300 ms", func(at time.Duration) bool { return at < 1300*time.Millisecond }, 300 * time.Millisecond},
		{"a dip late on", func(at time.Duration) bool { return at >= 1800*time.Millisecond && at < 1900*time.Millisecond }, 900 * time.Millisecond},
		{"never", func(at time.Duration) bool { return at >= 1900*time.Millisecond }, time.Second},
		{"a tenth short is still within", func(at time.Duration) bool { return at%(10*time.Millisecond) == 0 }, 0},
	}
	for _, tt := range tests {
		r := &adaptiveRun{scenario: s}
		for _, at := range or.goodEnds {
			if !tt.skip(at) {
				r.goodEnds = append(r.goodEnds, at)
			}
		}
		if got := r.convergence(or); len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s: converged after %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestAdaptiveHotTail: the hot row's p99 line judges 8 callers and more
// against the semaphore's p99, in a quiet run only.
func TestAdaptiveHotTail(t *testing.T) {
	lv := func(callers int, ours, theirs float64) level {
		return level{callers: callers, sides: []measured{
			{side: adaptiveOurs, ours: true, ns: 100, p99: ours},
			{side: "semaphore", ns: 200, p99: theirs},
		}}
	}
	hot := []result{{row: row{suite: "Adaptive", name: adaptiveHotName}, levels: []level{
		lv(1, 300, 100), lv(8, 500, 1000), lv(64, 1500, 1000),
	}}}
	verdict := func() check {
		for _, c := range adaptiveTargets(hot, false) {
			if strings.Contains(c.target, "p99 at most") {
				return c
			}
		}
		t.Fatal("no p99 line for the hot row")
		return check{}
	}
	if c := verdict(); c.met || !c.known || c.measured != "8: 0.50×, 64: 1.50×" {
		t.Errorf("alone: %s (%s), want missed on 64 callers only", c.verdict(), c.measured)
	}
	for _, c := range adaptiveTargets(hot, true) {
		if strings.Contains(c.target, "p99 at most") {
			t.Errorf("a noisy run judged the hot row's p99: %q", c.target)
		}
	}
}

// TestAdaptiveSuite runs the suite in its smallest configuration and
// checks its table, its targets and its plots.
func TestAdaptiveSuite(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(configs["smoke"], "Adaptive", dir, &stdout, &stderr, false); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	table := stdout.String()
	want := []string{"ADAPTIVE", "scenarios, virtual clock", "scenarios, real clock", adaptiveHotName, "TARGETS: adaptive",
		"steps", "capacity 12 to 4", "burst from zero", "2x overload, 25% critical", "20s slowdown",
		adaptiveOurs, adaptiveTheirs, adaptiveOracle, adaptiveNone, "semaphore"}
	for _, w := range want {
		if !strings.Contains(table, w) {
			t.Errorf("the table has no %q:\n%s", w, table)
		}
	}
	if strings.Contains(table, "not measured") || strings.Contains(table, "FAILED") {
		t.Errorf("a target went unmeasured, or a side failed:\n%s", table)
	}
	for _, plot := range []struct {
		name  string
		sides int
	}{
		{"adaptive-virtual-clock.svg", 3},
		{"adaptive-real-clock.svg", 4},
	} {
		b, err := os.ReadFile(filepath.Join(dir, plot.name))
		if err != nil {
			t.Errorf("no plot: %v", err)
			continue
		}
		if err := wellFormed(bytes.NewReader(b)); err != nil {
			t.Errorf("%s is not well-formed XML: %v", plot.name, err)
		}
		legend := regexp.MustCompile(`<rect x="\d+" y="\d+" width="14" height="4" fill="(#[0-9a-f]{6})"/>`).FindAllStringSubmatch(string(b), -1)
		colours := map[string]bool{}
		for _, m := range legend {
			colours[m[1]] = true
		}
		if len(legend) != plot.sides || len(colours) != plot.sides {
			t.Errorf("%s: %d legend entries in %d colours, want %d of each", plot.name, len(legend), len(colours), plot.sides)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"## Targets: adaptive", "## Adaptive", "| scenario | side |", "each side's limit and p99 latency over time"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("results.md has no %q", w)
		}
	}
}
