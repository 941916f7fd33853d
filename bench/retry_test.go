package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// retryTestPlan is a short outage on the virtual clock: a second of
// traffic is 40 requests, so each run takes a moment.
var retryTestPlan = retryPlan{rate: 40, warm: 10 * time.Second, outage: 20 * time.Second, after: 10 * time.Second, latency: 5 * time.Millisecond}

// TestRetryBackendStory steps the simulated backend through fixed
// instants: healthy, failing during the outage, thrashing past its room,
// and healthy again once the load is back within it.
func TestRetryBackendStory(t *testing.T) {
	const origin = 1_000_000_000
	p := retryPlan{rate: 100, warm: time.Second, outage: time.Second, after: 3 * time.Second}
	sec := int64(time.Second)
	share := func(b *retryBackend, at int64, n, from int) float64 {
		served := 0
		for i := range n {
			if ok, _ := b.attempt(at, from+i); ok {
				served++
			}
		}
		return float64(served) / float64(n)
	}
	tests := []struct {
		name      string
		share     float64 // failing during the outage
		load      int     // attempts in each of the ten slots before at
		at        int64   // since origin
		low, high float64 // the share served
	}{
		{"step 0: healthy before the outage", 1, 0, sec / 2, 1, 1},
		{"step 1: a total outage serves nothing", 1, 0, sec + sec/2, 0, 0},
		{"step 2: half failing serves about half", 0.5, 0, sec + sec/2, 0.45, 0.55},
		{"step 3: healthy after the outage, within its room", 1, 15, 3 * sec, 1, 1},
		// Three times its rate is twice its room: (1/2)² served.
		{"step 4: past its room it thrashes", 1, 30, 3 * sec, 0.2, 0.3},
		{"step 5: thrashing adds to the outage", 0.5, 30, sec + sec/2, 0.1, 0.15},
	}
	for i, tc := range tests {
		b := newRetryBackend(origin, p, tc.share, 100_000)
		for s := range retryLoadSlots {
			at := origin + tc.at - int64(retryLoadSlots-s)*int64(retrySlot)
			for j := range tc.load {
				b.attempt(at, 50_000+s*tc.load+j)
			}
		}
		got := share(b, origin+tc.at, 4000, i*4000)
		if got < tc.low || got > tc.high {
			t.Errorf("%s: served %.3f, want within [%.2f, %.2f]", tc.name, got, tc.low, tc.high)
		}
	}
}

// TestRetryBackendRecovery checks what recovery reads from the slots
// after the outage.
func TestRetryBackendRecovery(t *testing.T) {
	const origin = 0
	p := retryPlan{rate: 10, warm: time.Second, outage: time.Second, after: time.Second}
	end := 20 // the outage's end, in slots
	tests := []struct {
		name string
		bad  []int // slots after the end that fail
		want time.Duration
		ok   bool
	}{
		{"step 0: every slot served", nil, 0, true},
		{"step 1: two slots failing, then served", []int{0, 1}, 2 * retrySlot, true},
		{"step 2: a slot failing after a good one", []int{0, 3}, 4 * retrySlot, true},
		{"step 3: the last slot still failing", []int{9}, 0, false},
	}
	for _, tc := range tests {
		b := newRetryBackend(origin, p, 1, 0)
		for s := end; s < end+10; s++ {
			b.tries = append(b.tries, make([]int64, s+1-len(b.tries))...)
			b.served = append(b.served, make([]int64, s+1-len(b.served))...)
			b.tries[s], b.served[s] = 100, 100
		}
		for _, s := range tc.bad {
			b.served[end+s] = 98 // below 99 %
		}
		got, ok := b.recovery(end + 10)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: recovery = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func sideNamed(t *testing.T, name string) retrySide {
	t.Helper()
	for _, s := range retrySides() {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no side %q", name)
	return retrySide{}
}

// TestVirtualRunRepeats runs client.Retry through a total outage on the
// virtual clock twice: the same attempts and failures both times, every
// request made three attempts, and the backend, kept down by them, took
// a while to recover.
func TestVirtualRunRepeats(t *testing.T) {
	s := sideNamed(t, sideRetry)
	a, err := virtualRun(s, retryTestPlan, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := virtualRun(s, retryTestPlan, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a.outageTries != b.outageTries || a.failed != b.failed || a.p99 != b.p99 {
		t.Errorf("two runs differ: %d and %d attempts, %d and %d failed, p99 %v and %v",
			a.outageTries, b.outageTries, a.failed, b.failed, a.p99, b.p99)
	}
	if want := int(retryTestPlan.outage.Seconds()) * retryTestPlan.rate; a.outageReqs != int64(want) {
		t.Errorf("%d requests began in the outage, want %d", a.outageReqs, want)
	}
	if got := a.perRequest(); got != float64(retryBackoff.Attempts) {
		t.Errorf("attempts per request in a total outage without a budget: %v, want %d", got, retryBackoff.Attempts)
	}
	if a.errs != 0 {
		t.Errorf("%d requests failed with something else than the backend's failure: %v", a.errs, a.firstErr)
	}
}

// TestVirtualRunBudget checks the suite's claims on the virtual clock:
// with the budget, attempts per request in a total outage stay within
// 1.1, and the backend recovers as soon as with no retries at all.
func TestVirtualRunBudget(t *testing.T) {
	none, err := virtualRun(sideNamed(t, sideNoRetry), retryTestPlan, 1)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := virtualRun(sideNamed(t, sideRetryBudget), retryTestPlan, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := none.perRequest(); got != 1 {
		t.Errorf("no retries: %v attempts per request", got)
	}
	if got := ours.perRequest(); got > 1.1 || got < 1.05 {
		t.Errorf("with the budget: %.3f attempts per request in the outage; want within [1.05, 1.1]", got)
	}
	if ours.refused <= 0 {
		t.Errorf("the budget refused %d retries in a total outage", ours.refused)
	}
	if !ours.recovered || !none.recovered || ours.recovery > none.recovery {
		t.Errorf("recovery with the budget %v (%v), with no retries %v (%v)", ours.recovery, ours.recovered, none.recovery, none.recovered)
	}
	if ours.errs != 0 || none.errs != 0 {
		t.Errorf("failures of the wrong kind: %v, %v", ours.firstErr, none.firstErr)
	}
}

// TestHedgeTailIsPastP99 checks the reason for three slow requests in two
// hundred: the p99 of requests no hedge helps falls among the slow ones,
// over a run and over one round of the default run (640 requests); and
// that hedges are slow as often.
func TestHedgeTailIsPastP99(t *testing.T) {
	for _, n := range []int{160, 200, 640, 1000, 4321} {
		lat := make([]float64, 0, n)
		for i := range n {
			d := float64(retryLatency(2*time.Millisecond, i, 0))
			if hedgeSlowAt(i, 0) {
				d *= hedgeSlow
			}
			lat = append(lat, d)
		}
		slices.Sort(lat)
		if p := quantile(lat, 0.99); p < float64(hedgeSlow)*0.8*float64(2*time.Millisecond) {
			t.Errorf("%d requests: p99 %s is not among the slow ones", n, nsText(p))
		}
	}
	// Hedges are slow at the same odds.
	slow := 0
	const n = 100000
	for i := range n {
		if hedgeSlowAt(i, 1) {
			slow++
		}
	}
	if share := float64(slow) / n; share < 0.013 || share > 0.017 {
		t.Errorf("%.2f%% of hedges are slow, want 1.5%%", 100*share)
	}
}

// TestHedgeTargetSameLoad: failsafe-go's p99 is read at ours' extra
// requests, on the line between its two runs of the rule that sent just
// less and just more. Past its runs it is the nearest run's, and ours may
// send at most half a point more than any of them.
func TestHedgeTargetSameLoad(t *testing.T) {
	plan := hedgePlan{rate: 800, span: 4 * time.Second, rounds: 5, delay: 5 * time.Millisecond, quantile: 0.97}
	none := hedgeStat{side: sideNoHedge, rule: ruleNone, p99: 36e6}
	ours := func(extra, p99 float64) hedgeStat {
		return hedgeStat{side: sideHedgeQuant, ours: true, rule: ruleQuant, q: 0.97, roundExtra: extra, p99: p99}
	}
	theirs := func(q, extra, p99 float64) hedgeStat {
		return hedgeStat{side: "failsafe-go", rule: ruleQuant, q: q, roundExtra: extra, p99: p99}
	}
	ladder := func(o hedgeStat) []hedgeStat {
		return []hedgeStat{none, theirs(0.95, 0.04, 6e6), theirs(0.96, 0.03, 7e6), theirs(0.97, 0.02, 8e6), o}
	}
	tests := []struct {
		name  string
		sides []hedgeStat
		p99   float64 // failsafe-go's, read at ours' extra
		from  string
		met   bool
	}{
		{"step 0: halfway between two runs", ladder(ours(0.025, 7.4e6)), 7.5e6, "between its past p97 and past p96", true},
		{"step 1: halfway between two runs, ours slower", ladder(ours(0.025, 7.6e6)), 7.5e6, "between its past p97 and past p96", false},
		{"step 2: on a run", ladder(ours(0.03, 7e6)), 7e6, "its past p96", true},
		{"step 3: below every run", ladder(ours(0.01, 8e6)), 8e6, "its past p97", true},
		{"step 4: within half a point above every run", ladder(ours(0.044, 6e6)), 6e6, "its past p95", true},
		{"step 5: past half a point above every run", ladder(ours(0.046, 5e6)), 0, "", false},
		{"step 6: two runs at the same extra: the lower p99", []hedgeStat{none, theirs(0.96, 0.03, 6.5e6), theirs(0.97, 0.03, 7e6), ours(0.03, 6.8e6)}, 6.5e6, "its past p96", false},
		{"step 7: between a run and two at the same extra: the lower p99", []hedgeStat{none, theirs(0.96, 0.04, 6e6), theirs(0.97, 0.02, 8e6), theirs(0.98, 0.02, 9e6), ours(0.03, 6.8e6)}, 7e6, "between its past p97 and past p96", true},
	}
	for _, tc := range tests {
		var o hedgeStat
		for _, s := range tc.sides {
			if s.ours {
				o = s
			}
		}
		p99, from, ok := hedgeAt(o, tc.sides, plan)
		if ok != (tc.from != "") || (ok && (math.Abs(p99-tc.p99) > 1 || from != tc.from)) {
			t.Errorf("%s: hedgeAt = %v, %q, %v; want %v, %q", tc.name, p99, from, ok, tc.p99, tc.from)
		}
		got := hedgeTargets(&retryHedge{plan: plan, sides: tc.sides})[1]
		if !got.known || got.met != tc.met {
			t.Errorf("%s: met %v (known %v), want %v: %s", tc.name, got.met, got.known, tc.met, got.measured)
		}
		if !strings.Contains(got.measured, "median round of 640") {
			t.Errorf("%s: %q does not give the round's size", tc.name, got.measured)
		}
	}
	// Ours measured no extra (no request came back), and failsafe-go ran
	// the rule once: nothing is read, and nothing panics.
	o := ours(math.NaN(), 7e6)
	if p99, from, ok := hedgeAt(o, []hedgeStat{none, theirs(0.97, 0.02, 8e6), o}, plan); ok || from != "" {
		t.Errorf("with no extra of ours: hedgeAt = %v, %q, %v; want nothing read", p99, from, ok)
	}
}

// TestHedgeOrders: in the default run every round is an order of all
// the sides, and every side follows at least three different sides over
// the rounds. In one fixed order each side would always follow the same
// one, and whatever that side leaves behind (a collection of its
// garbage, say) would fall on the same neighbour every round.
func TestHedgeOrders(t *testing.T) {
	p := retryConfigs["default"].hedge
	n := len(hedgeSides(p))
	orders := hedgeOrders(n, p.rounds)
	if len(orders) != p.rounds {
		t.Fatalf("%d orders for %d rounds", len(orders), p.rounds)
	}
	after := make([]map[int]bool, n) // the sides each side followed
	for i := range after {
		after[i] = map[int]bool{}
	}
	last := -1
	for round, o := range orders {
		seen := slices.Clone(o)
		slices.Sort(seen)
		for i, k := range seen {
			if k != i {
				t.Fatalf("round %d: %v is not an order of the %d sides", round, o, n)
			}
		}
		for _, k := range o {
			if last >= 0 {
				after[k][last] = true
			}
			last = k
		}
	}
	for k, a := range after {
		if len(a) < 3 {
			t.Errorf("side %d follows only %d sides over %d rounds", k, len(a), p.rounds)
		}
	}
}

// TestRetrySuite runs the suite in its smallest configuration and checks
// what it reports: every table and side, every target measured, and the
// plots with one legend entry and one colour per side.
func TestRetrySuite(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(configs["smoke"], "Retry", dir, &stdout, &stderr, false); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	table := stdout.String()
	want := []string{"RETRY", "outage, virtual clock", "outage, real clock", "heavy tail, hedged HTTP GETs", "healthy path",
		"attempts/request in the outage", "backend recovered", "extra requests", "TARGETS: retry budget"}
	for _, s := range retrySides() {
		want = append(want, s.name)
	}
	for _, s := range hedgeSides(retryConfigs["smoke"].hedge) {
		want = append(want, s.name)
	}
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
		{"retry-outage-virtual-clock.svg", 3},
		{"retry-outage-real-clock.svg", len(retrySides())},
		{"retry-hedging-latency.svg", len(hedgeSides(retryConfigs["smoke"].hedge))},
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
	for _, w := range []string{"## Targets: retry budget", "## Retry", "| scenario | side |", "retry-hedging-latency.svg"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("results.md has no %q", w)
		}
	}
}

// TestLibraryLeavesFailsafeToBench checks that failsafe-go, which only
// the bench compares against, is in no build of the library or its
// integrations.
func TestLibraryLeavesFailsafeToBench(t *testing.T) {
	const failsafe = "github.com/failsafe-go/failsafe-go"
	lib := modulesOf(t, "./policy", "./actors", "./engine", "./client", "./moonhttp", "./moongrpc")
	if lib[failsafe] {
		t.Errorf("the library's packages depend on %s; only bench may", failsafe)
	}
	if !modulesOf(t, "./bench")[failsafe] {
		t.Errorf("bench does not depend on %s: is this check looking in the right place?", failsafe)
	}
}

// TestNSPair: two times of a microsecond or more that nsText writes
// alike are written so that the larger reads larger; others as nsText
// writes them.
func TestNSPair(t *testing.T) {
	for _, tc := range []struct {
		a, b         float64
		wantA, wantB string
	}{
		{7.862e6, 7.858e6, "7862µs", "7858µs"},
		{7.86e6, 7.86e6, "7.86ms", "7.86ms"},
		{6.43e6, 6.60e6, "6.43ms", "6.60ms"},
		{4.2, 4.24, "4.2ns", "4.2ns"},
	} {
		if a, b := nsPair(tc.a, tc.b); a != tc.wantA || b != tc.wantB {
			t.Errorf("nsPair(%v, %v) = %s, %s; want %s, %s", tc.a, tc.b, a, b, tc.wantA, tc.wantB)
		}
	}
}
