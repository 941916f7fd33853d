package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
)

// What each suite's rows do to each side, for the reader of the table.
var suiteWhat = map[string]string{
	"Pool":    "Get and Put back on a pool kept full (resources made up front); ratio against each other side",
	"Rate":    "Allow on one shared limiter, 1e9 tokens/s and a burst of 1e9, so (almost) every call is allowed; failsafe-go's smooth and bursty limiters (TryAcquirePermit) at the same rate beside the Bucket",
	"Gate":    "Enter and Leave (semaphore: TryAcquire(1) and Release(1); failsafe-go's bulkhead: TryAcquirePermit and ReleasePermit) on one gate with room for 1,024",
	"Breaker": "a backend that fails every call; a fixed number of attempts from a fresh breaker, each library's defaults (failsafe-go's through its Executor's Get); note: calls that reached the backend",
	"Core":    "the pure core alone, one goroutine, time handed in; Pool against a buffered channel, Bucket and Window against rate.Limiter.AllowN(t, 1)",
	"Keyed":   "one Allow per distinct key on a limiter that starts empty (note: live heap grown per key); and Allow of one key from every caller, among a thousand held, on a limit that lets every call through",
	"Postgres": "one request on a real PostgreSQL through pgx: wait for a connection, query, hand it back; pools of the same size on every side; " +
		"req/s over every caller, latency of one request including the wait, connections opened by the side at that level (warm-up included)",
	"Redis": "Allow on a keyed limit (1/s, bursts of 100, per key) kept in a real redis-server, each call the next key, both sides built afresh (full) for each slice of a fixed number of calls; " +
		"note: Redis commands per call and per call let through, how many were let through in the slice, and redis-server's CPU time (user and system) per call over the slice, which includes its own work in the background, such as deleting expired keys",
	"Fleet": "N replicas, each its own engine and pool of 10, in front of one TCP backend that dies and comes back; each request takes a connection, sends a byte and reads it back; " +
		"sides: the README's ward per replica, the same joined to a fleet ward in a real redis-server, gobreaker per replica around a puddle pool, gobreaker's DistributedCircuitBreaker over the same redis-server; " +
		"dials are the connections that reached the backend, counted there",
	"Retry": "retries in front of a simulated backend that fails for a while and thrashes past its room, and hedged HTTP GETs in front of one with a heavy tail; " +
		"sides: client.Retry with a retry budget and without, failsafe-go's retrypolicy and hedgepolicy with its budget, gRPC's own retries with retryThrottling; " +
		"attempts are counted at the backend",
	"Adaptive": "an adaptive concurrency limit in front of a simulated backend with a knee (12 workers of 20 ms: latency flat up to 12 in flight, then growing with the queue), requests with a 100 ms deadline, Poisson arrivals; " +
		"sides: client.AdaptiveGate, failsafe-go's adaptivelimiter (real clock only), a fixed room searched for the most goodput (the oracle), no limit; goodput is the requests answered within their deadline",
}

// check is one target and how this run did against it.
type check struct {
	group    string // the targets it is listed with: "hot path", "core", ...
	target   string
	measured string
	met      bool
	known    bool // false when this run did not measure it
}

func (c check) verdict() string {
	switch {
	case !c.known:
		return "not measured"
	case c.met:
		return "met"
	}
	return "MISSED"
}

func find(results []result, suite, name string) *result {
	for i := range results {
		if results[i].row.suite == suite && results[i].row.name == name {
			return &results[i]
		}
	}
	return nil
}

func sideOf(lv level, name string) *measured {
	for i := range lv.sides {
		if lv.sides[i].side == name {
			return &lv.sides[i]
		}
	}
	return nil
}

func oursOf(lv level) *measured {
	for i := range lv.sides {
		if lv.sides[i].ours {
			return &lv.sides[i]
		}
	}
	return nil
}

// vsAt lists ours/theirs for levels chosen by want, as "8: 0.91×, ...",
// with the largest ratio. value picks what is compared.
func vsAt(r *result, theirs string, want func(int) bool, value func(*measured) float64) (string, float64, bool) {
	if r == nil {
		return "", 0, false
	}
	var parts []string
	worst := math.Inf(-1)
	for _, lv := range r.levels {
		if !want(lv.callers) {
			continue
		}
		o, t := oursOf(lv), sideOf(lv, theirs)
		if o == nil || t == nil {
			continue
		}
		x := value(o) / value(t)
		worst = max(worst, x)
		parts = append(parts, fmt.Sprintf("%d: %s", lv.callers, times(x)))
	}
	if len(parts) == 0 {
		return "", 0, false
	}
	return strings.Join(parts, ", "), worst, true
}

func ns(m *measured) float64  { return m.ns }
func p99(m *measured) float64 { return m.p99 }

// targets checks this run against the targets: the hot path's, the pure
// core's, and those of the PostgreSQL and Redis suites. Beside a noisy
// neighbour the hot path's p99 may be up to twice its peer's; alone, at
// most its peer's.
func targets(results []result, noise bool) []check {
	var cs []check
	// tail words a p99 target and tailMost is its bound: the peer's p99
	// alone, twice it beside the neighbour that burns every core.
	tail, tailMost := func(theirs string) string { return "at most " + theirs + " at every level" }, 1.0
	if noise {
		tail, tailMost = func(theirs string) string {
			return "at most 2× " + theirs + " at every level beside a CPU-burning neighbour"
		}, 2
	}
	at := func(levels ...int) func(int) bool {
		return func(c int) bool { return slices.Contains(levels, c) }
	}
	every := func(int) bool { return true }
	// ratio adds a check that ours/theirs is at most most at the levels
	// picked; a level the run did not measure (the quick run has no 512)
	// is left out of it.
	ratio := func(r *result, theirs, target string, pick func(int) bool, value func(*measured) float64, most float64) {
		s, worst, ok := vsAt(r, theirs, pick, value)
		cs = append(cs, check{target: target, measured: s, met: worst <= most, known: ok})
	}
	for _, size := range []int{10, 1000} {
		r := find(results, "Pool", fmt.Sprintf("size=%d", size))
		label := fmt.Sprintf("Pool size=%d", size)
		ratio(r, "puddle", label+": Get+Put at most 0.8× puddle at 1 caller", at(1), ns, 0.8)
		ratio(r, "puddle", label+": at most 1.0× puddle at 8 callers", at(8), ns, 1)
		ratio(r, "puddle", label+": at most 0.7× puddle at 64 and 512 callers", at(64, 512), ns, 0.7)
		c := check{target: label + ": no allocations per Get+Put"}
		if r != nil {
			most := 0.0
			for _, lv := range r.levels {
				if o := oursOf(lv); o != nil {
					most = max(most, o.allocs)
					c.known = true
				}
			}
			// A process-wide count: the harness's goroutines and timers
			// leave a trace well below one in a hundred.
			c.measured, c.met = fmt.Sprintf("at most %.2f", most), most < 0.01
		}
		cs = append(cs, c)
		ratio(r, "puddle", label+": p99 "+tail("puddle's"), every, p99, tailMost)
	}
	rate := find(results, "Rate", "Allow")
	ratio(rate, "x/time/rate", "Rate: Bucket.Allow at most 0.25× x/time/rate at every level", every, ns, 0.25)
	ratio(rate, "x/time/rate", "Rate: Bucket.Allow p99 "+tail("x/time/rate's"), every, p99, tailMost)
	window := find(results, "Rate", "Window Allow")
	ratio(window, "x/time/rate", "Rate: Window.Allow at most 1.0× x/time/rate", every, ns, 1)
	ratio(window, "x/time/rate", "Rate: Window.Allow p99 "+tail("x/time/rate's"), every, p99, tailMost)
	gate := find(results, "Gate", "Enter+Leave")
	ratio(gate, "semaphore", "Gate: Enter+Leave at most 2× semaphore at 1 caller", at(1), ns, 2)
	ratio(gate, "semaphore", "Gate: at most 1.0× semaphore at 8 callers and more", func(c int) bool { return c >= 8 }, ns, 1)
	ratio(gate, "semaphore", "Gate: p99 "+tail("semaphore's"), every, p99, tailMost)
	var keyed *result // of new keys: its name depends on the config
	for i := range results {
		if results[i].row.suite == "Keyed" && results[i].row.name != keyedHotRow {
			keyed = &results[i]
		}
	}
	ratio(keyed, "map+rate", "Keyed: Allow of new keys at most 1.0× the map+mutex", every, ns, 1)
	hot := find(results, "Keyed", keyedHotRow)
	ratio(hot, "map+rate", "Keyed: Allow of a hot key at most 1.0× the map+mutex", every, ns, 1)
	ratio(hot, "map+rate", "Keyed: Allow of a hot key, p99 "+tail("the map+mutex's"), every, p99, tailMost)

	c := check{target: "Core: zero allocations"}
	most := 0.0
	for _, r := range results {
		if r.row.suite != "Core" {
			continue
		}
		for _, lv := range r.levels {
			if o := oursOf(lv); o != nil {
				most = max(most, o.allocs)
				c.known = true
			}
		}
	}
	// Mallocs are counted for the whole process, so the harness's own
	// goroutines and timers leave a trace far below one per thousand.
	c.measured, c.met = fmt.Sprintf("at most %.4f per op (process-wide count)", most), most < 0.001
	cs = append(cs, c)

	s, worst, ok := vsAt(find(results, "Core", "Bucket.Take"), "x/time/rate", func(int) bool { return true }, ns)
	cs = append(cs, check{target: "Core: Bucket.Take at most a quarter of AllowN(t, 1)", measured: strings.TrimPrefix(s, "1: "), met: worst <= 0.25, known: ok})

	c = check{target: "Core: Window.Take at allow 1,000,000 within 2× of allow 10"}
	w10, w1m := find(results, "Core", "Window.Take allow=10"), find(results, "Core", "Window.Take allow=1000000")
	if w10 != nil && w1m != nil && len(w10.levels) > 0 && len(w1m.levels) > 0 {
		a, b := oursOf(w10.levels[0]), oursOf(w1m.levels[0])
		if a != nil && b != nil {
			x := b.ns / a.ns
			c.known, c.met = true, x <= 2
			c.measured = fmt.Sprintf("%s (%s against %s)", times(x), nsText(b.ns), nsText(a.ns))
		}
	}
	cs = append(cs, c)
	for i := range cs {
		cs[i].group = "hot path"
		if strings.HasPrefix(cs[i].target, "Core: ") {
			cs[i].group = "pure core"
		}
	}
	cs = append(cs, pgTargets(results)...)
	cs = append(cs, redisTargets(results)...)
	cs = append(cs, retryTargets(results)...)
	cs = append(cs, adaptiveTargets(results, noise)...)
	return append(cs, fleetTargets(results)...)
}

// times formats a ratio.
func times(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "–"
	case x < 0.1:
		return fmt.Sprintf("%.3f×", x)
	case x < 10:
		return fmt.Sprintf("%.2f×", x)
	}
	return fmt.Sprintf("%.0f×", x)
}

// nsText formats nanoseconds for a person.
func nsText(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v < 10:
		return fmt.Sprintf("%.1fns", v)
	case v < 1e3:
		return fmt.Sprintf("%.0fns", v)
	case v < 1e4:
		return fmt.Sprintf("%.2fµs", v/1e3)
	case v < 1e6:
		return fmt.Sprintf("%.0fµs", v/1e3)
	case v < 1e7:
		return fmt.Sprintf("%.2fms", v/1e6)
	}
	return fmt.Sprintf("%.0fms", v/1e6)
}

// note is a side's extra column: its count, its memory, its failures.
func note(r row, m *measured) string {
	var parts []string
	switch r.count {
	case countAllowed:
		if m.ops > 0 {
			parts = append(parts, fmt.Sprintf("allowed %.0f%%", 100*m.count/m.ops))
		}
	case countBackend:
		parts = append(parts, fmt.Sprintf("backend %.0f of %.0f", m.count, m.ops))
	case countFleet:
		parts = append(parts, fleetNote(m))
	case countRedis:
		if m.ops > 0 && m.extra > 0 {
			parts = append(parts, fmt.Sprintf("%.3f cmd/call, %.2f cmd/admitted, admitted %.0f of %.0f", m.count/m.ops, m.count/m.extra, m.extra, m.ops))
		}
		if m.ops > 0 && m.cpu > 0 {
			parts = append(parts, fmt.Sprintf("Redis CPU %.1fµs/call", m.cpu/m.ops))
		}
	}
	if r.heap {
		parts = append(parts, fmt.Sprintf("%.0f B/key", m.heap))
	}
	if m.errs > 0 {
		parts = append(parts, fmt.Sprintf("%d FAILED", m.errs))
	}
	return strings.Join(parts, ", ")
}

// line is one row of any table: a side at a level.
type line struct {
	callers          string
	side             string
	ns, allocs       string
	p50, p99         string
	ratioNs, ratio99 string
	note             string
}

func lines(r result) []line {
	var ls []line
	for _, lv := range r.levels {
		o := oursOf(lv)
		for i := range lv.sides {
			m := &lv.sides[i]
			l := line{
				side:   m.side,
				ns:     fmt.Sprintf("%.1f", m.ns),
				allocs: fmt.Sprintf("%.2f", m.allocs),
				p50:    nsText(m.p50),
				p99:    nsText(m.p99),
				note:   note(r.row, m),
			}
			if m.ns >= 100 {
				l.ns = fmt.Sprintf("%.0f", m.ns)
			}
			if i == 0 {
				l.callers = fmt.Sprint(lv.callers)
			}
			if !m.ours && o != nil {
				l.ratioNs, l.ratio99 = times(o.ns/m.ns), times(o.p99/m.p99)
			}
			ls = append(ls, l)
		}
	}
	return ls
}

// writeTable prints the results for a terminal.
func writeTable(w io.Writer, m machine, results []result, checks []check) {
	fmt.Fprintln(w, m.line())
	if notOnly(results, "Postgres") {
		fmt.Fprintf(w, "Each pair alternates its sides for %d rounds; ns/op is the median round, p50/p99 the latency of one call\n", m.config.plan.rounds)
		fmt.Fprintf(w, "(every k-th call timed, the clock's own %.0fns taken off), ours/theirs compares ns/op and p99 within the row.\n", m.clockCost)
	}
	if line := pgPlanLine(m, results); line != "" {
		fmt.Fprintln(w, line+".")
	}
	suite := ""
	for _, r := range results {
		if r.row.suite != suite {
			suite = r.row.suite
			fmt.Fprintf(w, "\n%s: %s\n", strings.ToUpper(suite), suiteWhat[suite])
		}
		fmt.Fprintf(w, "\n  %s %s\n", r.row.suite, r.row.name)
		if head, body, ok := anyTable(r); ok {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			for _, cells := range append([][]string{head}, body...) {
				last := len(cells) - 1 // the note, left to run on
				fmt.Fprintf(tw, "%s\t  %s\n", strings.Join(cells[:last], "\t"), cells[last])
			}
			tw.Flush()
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "callers\tside\tns/op\tallocs/op\tp50\tp99\tours/theirs\tp99 ratio\t")
		for _, l := range lines(r) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t  %s\n", l.callers, l.side, l.ns, l.allocs, l.p50, l.p99, l.ratioNs, l.ratio99, l.note)
		}
		tw.Flush()
	}
	for _, g := range groups(checks) {
		fmt.Fprintf(w, "\nTARGETS: %s\n", g[0].group)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range g {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.verdict(), c.target, c.measured)
		}
		tw.Flush()
	}
}

// anyTable is the table of a row that does not print the common columns.
func anyTable(r result) (head []string, body [][]string, ok bool) {
	if head, body, ok := retryTable(r); ok {
		return head, body, true
	}
	if head, body, ok := adaptiveTable(r); ok {
		return head, body, true
	}
	return tableOf(r)
}

// notOnly says whether results hold a row of a suite other than suite.
func notOnly(results []result, suite string) bool {
	return slices.ContainsFunc(results, func(r result) bool { return r.row.suite != suite })
}

// groups splits checks by group, leaving out a group none of whose
// targets this run measured.
func groups(checks []check) [][]check {
	var out [][]check
	for i := 0; i < len(checks); {
		j, known := i, false
		for ; j < len(checks) && checks[j].group == checks[i].group; j++ {
			known = known || checks[j].known
		}
		if known {
			out = append(out, checks[i:j])
		}
		i = j
	}
	return out
}

// writeOut writes results.md and the plots into dir.
func writeOut(dir string, m machine, results []result, checks []check) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var plots []string
	for _, r := range results {
		if len(r.levels) < 2 {
			continue
		}
		name := slug(r.row.suite+" "+r.row.name) + ".svg"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(plot(r)), 0o644); err != nil {
			return err
		}
		plots = append(plots, name)
	}
	more, err := fleetPlots(dir, results)
	if err != nil {
		return err
	}
	plots = append(plots, more...)
	if more, err = retryPlots(dir, results); err != nil {
		return err
	}
	plots = append(plots, more...)
	if more, err = adaptivePlots(dir, results); err != nil {
		return err
	}
	plots = append(plots, more...)
	var b strings.Builder
	writeMarkdown(&b, m, results, checks, plots)
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(b.String()), 0o644)
}

// slug makes a file name of a row's name.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

func writeMarkdown(w io.Writer, m machine, results []result, checks []check, plots []string) {
	cmd := "go run ./bench"
	if m.config.name != "default" {
		cmd += " -" + m.config.name
	}
	if m.config.noise {
		cmd += " -noise"
	}
	fmt.Fprintf(w, "# moonpool bench results\n\n")
	fmt.Fprintf(w, "Written by `%s -out DIR` on %s.\n\n", cmd, m.date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- Machine: %s, %d cores, GOMAXPROCS=%d, %s\n", m.cpu, m.cores, m.maxprocs, m.platform)
	fmt.Fprintf(w, "- Go: %s; one engine per suite, `engine.New()` as it comes (real clock, default dispatch)\n", m.goVersion)
	if notOnly(results, "Postgres") {
		fmt.Fprintf(w, "- Each pair alternates its sides in one process, %d rounds of %v slices per side and level (Breaker: %d attempts a slice; Keyed: %d rounds of %d keys); ns/op is the median round.\n",
			m.config.plan.rounds, m.config.plan.slice, m.config.attempts, m.config.keyedRounds, m.config.keys)
		fmt.Fprintf(w, "- p50/p99: the latency of one call, every k-th call timed (at most %d samples per side and level), the clock's own %.0f ns taken off.\n", m.config.plan.samples, m.clockCost)
		fmt.Fprintf(w, "- allocs/op: heap allocations counted for the whole process during the slices, divided by the operations.\n")
		fmt.Fprintf(w, "- ours/theirs: moonpool's ns/op (and p99) over the other side's, in the same row of the same run: below 1 is faster.\n")
	}
	if line := pgPlanLine(m, results); line != "" {
		fmt.Fprintf(w, "- %s. req/s is the median round; p50/p99/p999 the latency of one request, every k-th timed, the clock's own %.0f ns taken off; "+
			"ours/theirs req/s is moonpool's throughput over the other side's (above 1 is faster), ours/theirs p99 its p99 over theirs (below 1 is shorter).\n", line, m.clockCost)
	}
	fmt.Fprintln(w)

	for i, g := range groups(checks) {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "## Targets: %s\n\n| | target | measured (ours/theirs) |\n|---|---|---|\n", g[0].group)
		for _, c := range g {
			fmt.Fprintf(w, "| %s | %s | %s |\n", c.verdict(), c.target, c.measured)
		}
	}
	suite := ""
	for _, r := range results {
		if r.row.suite != suite {
			suite = r.row.suite
			fmt.Fprintf(w, "\n## %s\n\n%s.\n", suite, suiteWhat[suite])
		}
		fmt.Fprintf(w, "\n### %s %s\n\n", r.row.suite, r.row.name)
		if head, body, ok := anyTable(r); ok {
			fmt.Fprintf(w, "| %s |\n|", strings.Join(head, " | "))
			for _, h := range head {
				if h == "side" || h == "note" {
					fmt.Fprint(w, "---|")
				} else {
					fmt.Fprint(w, "---:|")
				}
			}
			fmt.Fprintln(w)
			for _, cells := range body {
				fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
			}
			continue
		}
		fmt.Fprintln(w, "| callers | side | ns/op | allocs/op | p50 | p99 | ours/theirs ns/op | ours/theirs p99 | note |")
		fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---|")
		for _, l := range lines(r) {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", l.callers, l.side, l.ns, l.allocs, l.p50, l.p99, l.ratioNs, l.ratio99, l.note)
		}
	}
	if len(plots) > 0 {
		fmt.Fprintf(w, "\n## Plots\n\nThe same run wrote one SVG per pair, ns/op and p99 against callers, into the -out directory beside results.md: %s.\n", "`"+strings.Join(plots, "`, `")+"`")
		if slices.Contains(plots, fleetCurveFile) {
			fmt.Fprintf(w, "`%s` is the Fleet outage's instead: the connections reaching the backend after its return, against the time since, a panel per fleet size.\n", fleetCurveFile)
		}
		if slices.ContainsFunc(plots, func(p string) bool { return strings.HasPrefix(p, "adaptive-") && strings.HasSuffix(p, "-clock.svg") }) {
			fmt.Fprintf(w, "`adaptive-virtual-clock.svg` and `adaptive-real-clock.svg` are the Adaptive scenarios' instead: each side's limit and p99 latency over time, a row per scenario.\n")
		}
	}
}

// byRow keeps what a suite measured beyond the harness's timed slices, by
// row name, for the tables, the targets and the plots of the same run.
type byRow[T any] struct {
	mu sync.Mutex
	m  map[string]*T
}

// keep notes v as what the row named name measured.
func (k *byRow[T]) keep(name string, v *T) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]*T{}
	}
	k.m[name] = v
}

// of is what r measured, or nil when r is not of suite or kept nothing.
func (k *byRow[T]) of(r result, suite string) *T {
	if r.row.suite != suite {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[r.row.name]
}

// pairedRatios lists, at each level of r, the median over rounds of a's
// ns/op over b's in the same round, as "1: 1.01×, 8: 0.99×", with the
// largest. The sides of a round run back to back, so a machine busy for a
// moment slows both: the ratio of each round is steadier than the ratio
// of the medians, on a machine shared with other work.
func pairedRatios(r *result, a, b string) (string, float64, bool) {
	var parts []string
	worst := math.Inf(-1)
	for _, lv := range r.levels {
		x, y := sideOf(lv, a), sideOf(lv, b)
		if x == nil || y == nil {
			continue
		}
		var xs []float64
		for i := range min(len(x.rounds), len(y.rounds)) {
			xs = append(xs, x.rounds[i]/y.rounds[i])
		}
		if len(xs) == 0 {
			continue
		}
		m := median(xs)
		worst = max(worst, m)
		parts = append(parts, fmt.Sprintf("%d: %s", lv.callers, times(m)))
	}
	return strings.Join(parts, ", "), worst, len(parts) > 0
}
