package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/moonpool-go/moonpool/engine"
)

// The Adaptive suite puts an adaptive concurrency limit in front of a
// backend with a knee (see adaptive_sim.go), through stories of load and
// capacity: load stepping from half the capacity to three times it, the
// capacity falling from 12 to 4 mid-run, a burst from zero, two times the
// capacity with a quarter of the requests critical, and (virtual clock
// only) ten minutes of the dependency slowing down. Every request has a
// deadline of five service times. Goodput is the requests answered
// within it.
//
// Sides:
//   - client.AdaptiveGate at its defaults, entered with Enter, so a
//     request may wait in its line. A request that times out still
//     Leaves: it reached the backend.
//   - failsafe-go's adaptivelimiter at its defaults, with its prioritizer
//     where there are classes. It runs on the real clock only: it reads
//     the machine's clock itself, so it cannot run on virtual time. A
//     request that times out Drops its permit, as failsafe-go's executor
//     does.
//   - A fixed room, refusing when full: the room from 1 to three times the
//     knee that answers the most in time, searched for each scenario on
//     the virtual clock over the same arrivals (the oracle).
//   - No limit.
//
// Each scenario runs a few rounds: counts and latencies are over all of
// them. The virtual clock's rounds differ only in what the gate makes of
// them: past a few hundred calls a window it times some calls, not all,
// and which depends on the goroutine's stack.
//
// Converged after a step means: from the start of a tenth of the phase
// on, every tenth answers in time at least 90 % as many requests as the
// oracle answered in it. Over rounds, it is the median round's.

// Side names.
const (
	adaptiveOurs   = "moonpool"
	adaptiveTheirs = "failsafe-go"
	adaptiveOracle = "fixed (oracle)"
	adaptiveNone   = "no limit"
)

// adaptiveConfig is how the suite runs in one configuration: how long its
// scenarios last on each clock, as a multiple of their base length.
type adaptiveConfig struct {
	virtual, real float64
	rounds        int           // of each real-clock scenario
	virtualRounds int           // of each virtual-clock scenario
	slowdown      time.Duration // the slowdown's length (virtual clock)
}

var adaptiveConfigs = map[string]adaptiveConfig{
	"smoke":   {virtual: 0.25, real: 0.05, rounds: 2, virtualRounds: 2, slowdown: 20 * time.Second},
	"quick":   {virtual: 1, real: 0.25, rounds: 1, virtualRounds: 1, slowdown: 10 * time.Minute},
	"default": {virtual: 4, real: 0.5, rounds: 3, virtualRounds: 3, slowdown: 10 * time.Minute},
	"full":    {virtual: 10, real: 1, rounds: 5, virtualRounds: 5, slowdown: 10 * time.Minute},
}

func adaptiveConfigOf(cfg config) adaptiveConfig {
	if c, ok := adaptiveConfigs[cfg.name]; ok {
		return c
	}
	return adaptiveConfigs["default"]
}

// adaptiveSeed makes the arrivals the same in every run and for every
// side.
const adaptiveSeed = 0x6b6e6565

// adaptiveFacts is a scenario row's facts: every scenario, every side.
type adaptiveFacts struct {
	clock string
	runs  []*adaptiveRun
}

// adaptiveRows keeps what the suite's scenario rows measured, for the
// tables, the targets and the plots of the same run.
var adaptiveRows byRow[adaptiveFacts]

func adaptiveFactsOf(r result) *adaptiveFacts { return adaptiveRows.of(r, "Adaptive") }

// adaptiveSuiteRows are the suite's rows: the scenarios on each clock,
// and Enter+Leave with room against a semaphore.
func adaptiveSuiteRows(eng *engine.Engine, cfg config) []row {
	ac := adaptiveConfigOf(cfg)
	vName := fmt.Sprintf("scenarios, virtual clock (%gx the base lengths, %d rounds)", ac.virtual, ac.virtualRounds)
	rName := fmt.Sprintf("scenarios, real clock (%gx the base lengths, %d rounds)", ac.real, ac.rounds)
	return []row{
		{suite: "Adaptive", name: vName, scenario: func(say progress) (result, error) {
			return result{}, adaptiveVirtualRow(vName, ac, say)
		}},
		{suite: "Adaptive", name: rName, scenario: func(say progress) (result, error) {
			return result{}, adaptiveRealRow(eng, rName, ac, say)
		}},
		adaptiveHotRow(eng, cfg),
	}
}

func adaptiveVirtualRow(name string, ac adaptiveConfig, say progress) error {
	f := &adaptiveFacts{clock: "virtual"}
	for _, s := range adaptiveScenarios(ac.slowdown, ac.virtual) {
		reqs := s.arrivals(adaptiveSeed)
		say(fmt.Sprintf("Adaptive virtual-clock %s oracle-search", dashed(s.name)))
		room, _ := oracle(&s, reqs)
		every := max(s.length/2000, 10*time.Millisecond)
		for _, side := range []struct {
			name string
			ours bool
			lim  func() (simLimiter, func(), error)
		}{
			{adaptiveOurs, true, func() (simLimiter, func(), error) { return oursSim(&s) }},
			{adaptiveOracle, false, func() (simLimiter, func(), error) { return &fixedSim{room: room}, func() {}, nil }},
			{adaptiveNone, false, func() (simLimiter, func(), error) { return unlimited(), func() {}, nil }},
		} {
			var runs []*adaptiveRun
			for round := range max(ac.virtualRounds, 1) {
				say(fmt.Sprintf("Adaptive virtual-clock %s %s round %d", dashed(s.name), dashed(side.name), round+1))
				lim, stop, err := side.lim()
				if err != nil {
					return fmt.Errorf("virtual clock, %s, %s: %w", s.name, side.name, err)
				}
				r := &adaptiveRun{side: side.name, ours: side.ours, clock: "virtual", scenario: &s}
				if side.name == adaptiveOracle {
					r.fixed = room
				}
				origin := int64(0)
				if o, ok := lim.(interface{ origin() int64 }); ok {
					origin = o.origin()
				}
				simulate(&s, reqs, lim, origin, r, every)
				stop()
				if side.name == adaptiveNone {
					r.limits = nil
				}
				runs = append(runs, r)
			}
			f.runs = append(f.runs, merge(runs))
		}
	}
	adaptiveRows.keep(name, f)
	return nil
}

func adaptiveRealRow(eng *engine.Engine, name string, ac adaptiveConfig, say progress) error {
	f := &adaptiveFacts{clock: "real"}
	sides := []realSide{
		{name: adaptiveOurs, ours: true, build: func(s *adaptiveScenario, _ int) (realLimiter, error) { return oursReal(eng, s) }},
		{name: adaptiveTheirs, build: theirAdaptive},
		{name: adaptiveOracle, build: func(_ *adaptiveScenario, room int) (realLimiter, error) { return fixedRealSide(room), nil }},
		{name: adaptiveNone, build: func(*adaptiveScenario, int) (realLimiter, error) { return fixedRealSide(0), nil }},
	}
	for _, s := range adaptiveScenarios(0, ac.real) {
		reqs := s.arrivals(adaptiveSeed)
		// The oracle's room is searched on the virtual clock, over the
		// same requests: the real clock has time for one run.
		room, _ := oracle(&s, reqs)
		each := make([][]*adaptiveRun, len(sides))
		for round := range max(ac.rounds, 1) {
			say(fmt.Sprintf("Adaptive real-clock %s every-side-at-once round %d", dashed(s.name), round+1))
			runs, err := realRun(sides, &s, reqs, room)
			if err != nil {
				return fmt.Errorf("real clock, %s: %w", s.name, err)
			}
			for i, r := range runs {
				if r.side == adaptiveNone {
					r.limits = nil
				}
				each[i] = append(each[i], r)
			}
		}
		for _, runs := range each {
			f.runs = append(f.runs, merge(runs))
		}
	}
	adaptiveRows.keep(name, f)
	return nil
}

// ---- what the runs say ----

// convergenceBins is how many windows each phase is cut into to judge
// convergence.
const convergenceBins = 10

// convergence is how long after each step of its scenario the run took to
// answer in time at least 90 % as many requests as the oracle did in the
// same window, and keep doing so in every window to the phase's end: the
// start of the first window from which it held, or the phase's length if
// it did not hold in its last window. Each phase is cut into ten windows.
//
// Of a run of several rounds, it is each step's median over the rounds.
func (r *adaptiveRun) convergence(or *adaptiveRun) []time.Duration {
	s := r.scenario
	if !s.steps || or == nil {
		return nil
	}
	if len(r.rounds) > 0 && len(r.rounds) == len(or.rounds) {
		var each [][]time.Duration
		for k := range r.rounds {
			each = append(each, r.rounds[k].convergence(or.rounds[k]))
		}
		out := make([]time.Duration, len(each[0]))
		for i := range out {
			var xs []float64
			for _, c := range each {
				xs = append(xs, float64(c[i]))
			}
			out[i] = time.Duration(median(xs))
		}
		return out
	}
	var out []time.Duration
	for i := 1; i < len(s.phases); i++ {
		from, to := s.phases[i].at, s.end(i)
		w := (to - from) / convergenceBins
		at := to - from
		for k := convergenceBins - 1; k >= 0; k-- {
			lo, hi := from+time.Duration(k)*w, from+time.Duration(k+1)*w
			if float64(r.goodIn(lo, hi)) < 0.9*float64(or.goodIn(lo, hi)) {
				break
			}
			at = time.Duration(k) * w
		}
		out = append(out, at)
	}
	return out
}

// drift is how far the limit moved over the scenario's last phase: the
// median over its last tenth against the median over the tenth before
// it began, as a share of the latter. ok is false without samples.
//
// Of a run of several rounds, it is the round with the median drift.
func (r *adaptiveRun) drift() (before, after, moved float64, ok bool) {
	if len(r.rounds) > 0 {
		type d struct{ before, after, moved float64 }
		var ds []d
		for _, x := range r.rounds {
			if b, a, m, ok := x.drift(); ok {
				ds = append(ds, d{b, a, m})
			}
		}
		if len(ds) == 0 {
			return 0, 0, 0, false
		}
		slices.SortFunc(ds, func(x, y d) int { return cmp.Compare(x.moved, y.moved) })
		m := ds[len(ds)/2]
		return m.before, m.after, m.moved, true
	}
	s := r.scenario
	if !s.drift || len(r.limits) == 0 || len(s.phases) < 2 {
		return 0, 0, 0, false
	}
	last := len(s.phases) - 1
	from, to := s.phases[last].at, s.end(last)
	span := (to - from) / 10
	var b, a []float64
	for _, x := range r.limits {
		switch {
		case x.at >= from-span && x.at < from:
			b = append(b, x.v)
		case x.at >= to-span:
			a = append(a, x.v)
		}
	}
	if len(b) == 0 || len(a) == 0 {
		return 0, 0, 0, false
	}
	before, after = median(b), median(a)
	return before, after, math.Abs(after-before) / before, true
}

// finalLimit is the median of the run's limit over its last tenth; of a
// run of several rounds, the median over the rounds.
func (r *adaptiveRun) finalLimit() float64 {
	if len(r.rounds) > 0 {
		var xs []float64
		for _, x := range r.rounds {
			xs = append(xs, x.finalLimit())
		}
		return median(xs)
	}
	var v []float64
	for _, x := range r.limits {
		if x.at >= r.scenario.length-r.scenario.length/10 {
			v = append(v, x.v)
		}
	}
	return median(v)
}

// runOf is the run of side in the scenario named scenario.
func (f *adaptiveFacts) runOf(scenario, side string) *adaptiveRun {
	for _, r := range f.runs {
		if r.scenario.name == scenario && r.side == side {
			return r
		}
	}
	return nil
}

// scenarioNames are the facts' scenarios in their order.
func (f *adaptiveFacts) scenarioNames() []string {
	var names []string
	for _, r := range f.runs {
		if !slices.Contains(names, r.scenario.name) {
			names = append(names, r.scenario.name)
		}
	}
	return names
}

// ---- the table ----

// adaptiveTable is the table of a scenario row.
func adaptiveTable(r result) (head []string, body [][]string, ok bool) {
	f := adaptiveFactsOf(r)
	if f == nil {
		return nil, nil, false
	}
	head = []string{"scenario", "side", "goodput/s", "vs oracle", "refused", "late", "p50", "p99", "top class p99", "limit at end", "converged after", "note"}
	for _, name := range f.scenarioNames() {
		or := f.runOf(name, adaptiveOracle)
		first := true
		for _, run := range f.runs {
			if run.scenario.name != name {
				continue
			}
			cells := []string{"", run.side, fmt.Sprintf("%.0f", run.goodput()), "", percentOf(run.refused, run.requests), percentOf(run.late, run.requests),
				nsText(quantile(run.lat, 0.5)), nsText(quantile(run.lat, 0.99)), "", "", "", ""}
			if first {
				cells[0] = name
				first = false
			}
			if or != nil && or.good > 0 {
				cells[3] = times(float64(run.good) / float64(or.good))
			}
			if run.scenario.critical > 0 {
				cells[8] = nsText(quantile(run.criticalLat, 0.99))
			}
			if run.fixed > 0 {
				cells[9] = fmt.Sprint(run.fixed)
			} else if len(run.limits) > 0 {
				cells[9] = fmt.Sprintf("%.0f", run.finalLimit())
			}
			if c := run.convergence(or); c != nil {
				cells[10] = durations(c)
			}
			var notes []string
			if run.scenario.critical > 0 {
				notes = append(notes, fmt.Sprintf("top class: %d of %d in time, %s refused", run.criticalGood, run.critical, percentOf(run.criticalRefused, run.critical)))
			}
			if b, a, d, ok := run.drift(); ok {
				notes = append(notes, fmt.Sprintf("limit %.1f before the slowdown, %.1f at its end: drift %.1f%%", b, a, 100*d))
			}
			if run.errs > 0 {
				notes = append(notes, fmt.Sprintf("%d FAILED (%v)", run.errs, run.firstErr))
			}
			cells[11] = strings.Join(notes, "; ")
			body = append(body, cells)
		}
	}
	return head, body, true
}

// percentOf is n of of as a percentage.
func percentOf(n, of int) string {
	if of == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// durations lists spans for a table cell, "–" for none.
func durations(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		if d < 0 {
			parts = append(parts, "–")
			continue
		}
		parts = append(parts, d.Round(10*time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}

// ---- the targets ----

// adaptiveTargets checks the Adaptive suite's rows; none when it did not
// run. The hot row's p99 is judged only in a quiet run: the suite's noise
// targets are its peers' (Pool, Rate and Gate).
func adaptiveTargets(results []result, noise bool) []check {
	var virtual, real *adaptiveFacts
	var hot *result
	for i := range results {
		r := results[i]
		if f := adaptiveFactsOf(r); f != nil {
			if f.clock == "virtual" {
				virtual = f
			} else {
				real = f
			}
		}
		if r.row.suite == "Adaptive" && r.row.name == adaptiveHotName {
			hot = &results[i]
		}
	}
	if virtual == nil && real == nil && hot == nil {
		return nil
	}
	const group = "adaptive"
	var cs []check

	// Goodput against failsafe-go, on the real clock where it runs.
	c := check{group: group, target: "Adaptive: goodput at least failsafe-go's in every scenario (real clock)"}
	if real != nil {
		c.measured, c.met, c.known = goodputRatios(real, adaptiveTheirs, 1)
	}
	cs = append(cs, c)
	for _, f := range []*adaptiveFacts{virtual, real} {
		c := check{group: group}
		if f == nil {
			continue
		}
		c.target = fmt.Sprintf("Adaptive: goodput at least 0.9× the oracle's in every scenario (%s clock)", f.clock)
		c.measured, c.met, c.known = goodputRatios(f, adaptiveOracle, 0.9)
		cs = append(cs, c)
	}

	c = check{group: group, target: "Adaptive: p99 of the highest class at 2× overload at most 0.5× failsafe-go's (real clock)"}
	if real != nil {
		for _, name := range real.scenarioNames() {
			o, t := real.runOf(name, adaptiveOurs), real.runOf(name, adaptiveTheirs)
			if o == nil || t == nil || o.scenario.critical == 0 || len(o.criticalLat) == 0 || len(t.criticalLat) == 0 {
				continue
			}
			a, b := quantile(o.criticalLat, 0.99), quantile(t.criticalLat, 0.99)
			c.known, c.met = true, a <= 0.5*b
			c.measured = fmt.Sprintf("%s (%s against %s)", times(a/b), nsText(a), nsText(b))
		}
	}
	cs = append(cs, c)

	c = check{group: group, target: "Adaptive: converged after each step no later than failsafe-go (goodput within 10 % of the oracle's; real clock)"}
	if real != nil {
		c.measured, c.met, c.known = convergenceVs(real)
	}
	cs = append(cs, c)

	c = check{group: group, target: "Adaptive: limit drift over a slowdown of the dependency at most 10 % (virtual clock, the median round)"}
	if virtual != nil {
		for _, r := range virtual.runs {
			if !r.ours {
				continue
			}
			if b, a, d, ok := r.drift(); ok {
				c.known, c.met = true, d <= 0.10
				c.measured = fmt.Sprintf("%s: %.1f%% (%.1f before, %.1f at the end)", r.scenario.name, 100*d, b, a)
			}
		}
	}
	cs = append(cs, c)

	eight := func(c int) bool { return c >= 8 }
	s, worst, ok := vsAt(hot, "semaphore", eight, ns)
	cs = append(cs, check{group: group, target: "Adaptive: Enter+Leave with room at most 1.0× semaphore at 8 callers and more", measured: s, met: worst <= 1, known: ok})
	if !noise {
		s, worst, ok = vsAt(hot, "semaphore", eight, p99)
		cs = append(cs, check{group: group, target: "Adaptive: Enter+Leave with room, p99 at most semaphore's at 8 callers and more", measured: s, met: worst <= 1, known: ok})
	}
	c = check{group: group, target: "Adaptive: no allocations per Enter+Leave"}
	if hot != nil {
		most := 0.0
		for _, lv := range hot.levels {
			if o := oursOf(lv); o != nil {
				most = max(most, o.allocs)
				c.known = true
			}
		}
		c.measured, c.met = fmt.Sprintf("at most %.2f", most), most < 0.01
	}
	return append(cs, c)
}

// goodputRatios lists ours/theirs goodput in every scenario where both
// ran, as "steps: 1.02×, ...", met when the smallest is at least least.
func goodputRatios(f *adaptiveFacts, theirs string, least float64) (string, bool, bool) {
	var parts []string
	worst := math.Inf(1)
	for _, name := range f.scenarioNames() {
		o, t := f.runOf(name, adaptiveOurs), f.runOf(name, theirs)
		if o == nil || t == nil || t.good == 0 {
			continue
		}
		x := float64(o.good) / float64(t.good)
		worst = min(worst, x)
		parts = append(parts, fmt.Sprintf("%s: %s", name, times(x)))
	}
	return strings.Join(parts, ", "), worst >= least, len(parts) > 0
}

// convergenceVs lists ours and failsafe-go's times to converge after each
// step of every scenario with steps, met when ours is never the later.
func convergenceVs(f *adaptiveFacts) (string, bool, bool) {
	var parts []string
	met, known := true, false
	for _, name := range f.scenarioNames() {
		o, t := f.runOf(name, adaptiveOurs), f.runOf(name, adaptiveTheirs)
		if o == nil || t == nil {
			continue
		}
		or := f.runOf(name, adaptiveOracle)
		co, ct := o.convergence(or), t.convergence(or)
		if len(co) == 0 || len(co) != len(ct) {
			continue
		}
		known = true
		for i := range co {
			if co[i] > ct[i] {
				met = false
			}
		}
		parts = append(parts, fmt.Sprintf("%s: %s against %s", name, durations(co), durations(ct)))
	}
	return strings.Join(parts, "; "), met, known
}
