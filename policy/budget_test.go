package policy

import (
	"math"
	"testing"
	"time"
)

// budgetStep is one call on a Budget at an instant: first (n first
// attempts), spend (want: whether it is allowed) or left (want the Left).
type budgetStep struct {
	call string
	at   int64
	n    int
	ok   bool    // for spend
	left float64 // Left after the call
}

func runBudget(t *testing.T, b *Budget, steps []budgetStep) {
	t.Helper()
	for i, s := range steps {
		switch s.call {
		case "first":
			b.First(s.at, s.n)
		case "spend":
			for k := range max(s.n, 1) {
				if got := b.Spend(s.at); got != s.ok {
					t.Fatalf("step %d: spend %d of %d: Spend = %v, want %v", i, k+1, max(s.n, 1), got, s.ok)
				}
			}
		case "left":
		default:
			t.Fatalf("step %d: unknown call %q", i, s.call)
		}
		if got := b.Left(s.at); got != s.left {
			t.Fatalf("step %d: %s: Left = %v, want %v", i, s.call, got, s.left)
		}
	}
}

func TestBudget(t *testing.T) {
	ms := func(d int64) int64 { return t0 + d*int64(time.Millisecond) }
	tests := []struct {
		name  string
		b     *Budget
		steps []budgetStep
	}{
		{"a quiet client spends the floor, then is refused", NewBudget(0.1, 1, 10*time.Second), []budgetStep{
			{call: "left", at: ms(0), left: 10},
			{call: "spend", at: ms(0), n: 10, ok: true, left: 0},
			{call: "spend", at: ms(5000), ok: false, left: 0},
		}},
		{"first attempts raise the budget by the ratio", NewBudget(0.1, 1, 10*time.Second), []budgetStep{
			{call: "first", at: ms(0), n: 300, left: 30},
			{call: "spend", at: ms(100), n: 30, ok: true, left: 0},
			{call: "spend", at: ms(200), ok: false, left: 0},
			{call: "first", at: ms(300), n: 10, left: 1},
			{call: "spend", at: ms(300), ok: true, left: 0},
			{call: "spend", at: ms(300), ok: false, left: 0},
		}},
		{"the floor is a floor, not an addition", NewBudget(0.1, 1, 10*time.Second), []budgetStep{
			{call: "first", at: ms(0), n: 50, left: 10}, // max(5, 10)
			{call: "first", at: ms(0), n: 100, left: 15},
			{call: "spend", at: ms(0), n: 15, ok: true, left: 0},
			{call: "spend", at: ms(0), ok: false, left: 0},
		}},
		{"firsts leave at the window's end, spends a slot later", NewBudget(0.1, 1, 10*time.Second), []budgetStep{
			{call: "first", at: ms(0), n: 200, left: 20},
			{call: "spend", at: ms(0), n: 20, ok: true, left: 0},
			// The last instant whose window holds the firsts.
			{call: "spend", at: ms(9999), ok: false, left: 0},
			// The firsts have left; the spends are still within the last
			// window of some instant of this slot: the floor is spent.
			{call: "spend", at: ms(10000), ok: false, left: 0},
			{call: "spend", at: ms(10499), ok: false, left: 0},
			// Gone: the floor is back.
			{call: "left", at: ms(10500), left: 10},
		}},
		{"counts age out a slot at a time", NewBudget(0.5, 0, time.Second), []budgetStep{
			{call: "first", at: ms(0), n: 4, left: 2},
			{call: "first", at: ms(500), n: 4, left: 4},
			{call: "spend", at: ms(500), n: 4, ok: true, left: 0},
			// ms(0)'s firsts leave at 1s, ms(500)'s stay: 2 allowed,
			// 4 spent.
			{call: "left", at: ms(1000), left: 0},
			{call: "first", at: ms(1000), n: 4, left: 0},
			// The spends of ms(500) go at 1.55s; the firsts of ms(500)
			// left at 1.5s.
			{call: "left", at: ms(1549), left: 0},
			{call: "left", at: ms(1550), left: 2},
		}},
		{"a clock that goes back counts at the latest instant", NewBudget(0.5, 0, time.Second), []budgetStep{
			{call: "first", at: ms(900), n: 4, left: 2},
			{call: "first", at: ms(0), n: 4, left: 4},
			{call: "spend", at: ms(0), n: 4, ok: true, left: 0},
			// Had they been counted at ms(0), they would have left by now.
			{call: "left", at: ms(1850), left: 0},
			{call: "left", at: ms(1900), left: 0},
			{call: "left", at: ms(1950), left: 0},
		}},
		{"a ratio of zero is the floor alone", NewBudget(0, 2, time.Second), []budgetStep{
			{call: "first", at: ms(0), n: 1000, left: 2},
			{call: "spend", at: ms(0), n: 2, ok: true, left: 0},
			{call: "spend", at: ms(0), ok: false, left: 0},
		}},
		{"without floor or firsts nothing is allowed", NewBudget(0.1, 0, time.Second), []budgetStep{
			{call: "spend", at: ms(0), ok: false, left: 0},
			{call: "first", at: ms(0), n: 9, left: 0},
			{call: "spend", at: ms(0), ok: false, left: 0},
			{call: "first", at: ms(0), n: 1, left: 1},
			{call: "spend", at: ms(0), ok: true, left: 0},
		}},
		{"zero and negative counts count nothing", NewBudget(1, 0, time.Second), []budgetStep{
			{call: "first", at: ms(0), n: 0, left: 0},
			{call: "first", at: ms(0), n: -5, left: 0},
			{call: "first", at: ms(0), n: 1, left: 1},
		}},
		{"an infinite ratio allows everything once a first is counted", NewBudget(math.Inf(1), 0, time.Second), []budgetStep{
			{call: "left", at: ms(0), left: 0},
			{call: "first", at: ms(0), n: 1, left: math.Inf(1)},
			{call: "spend", at: ms(0), n: 1000, ok: true, left: math.Inf(1)},
		}},
		{"an infinite floor allows everything", NewBudget(0.1, math.Inf(1), time.Second), []budgetStep{
			{call: "spend", at: ms(0), n: 1000, ok: true, left: math.Inf(1)},
		}},
		{"bad numbers are read as documented", NewBudget(math.NaN(), math.NaN(), -time.Second), []budgetStep{
			{call: "first", at: ms(0), n: 1000, left: 0},
			{call: "spend", at: ms(0), ok: false, left: 0},
		}},
		{"negative numbers are read as zero", NewBudget(-1, -1, 0), []budgetStep{
			{call: "first", at: ms(0), n: 1000, left: 0},
		}},
		{"the zero Budget has the defaults", &Budget{}, []budgetStep{
			{call: "left", at: ms(0), left: 10},
			{call: "first", at: ms(0), n: 1000, left: 100},
			{call: "left", at: ms(9999), left: 100},
			{call: "left", at: ms(10000), left: 10},
		}},
		{"the ends of the clock", NewBudget(1, 0, time.Second), []budgetStep{
			{call: "first", at: math.MinInt64, n: 1, left: 1},
			{call: "spend", at: math.MinInt64, ok: true, left: 0},
			{call: "first", at: math.MaxInt64, n: 2, left: 2},
			{call: "spend", at: math.MaxInt64, ok: true, left: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runBudget(t, tt.b, tt.steps) })
	}
}

// TestBudgetWindow: the window is counted in twenty slots of whole
// nanoseconds, so Window is the window rounded up to that.
func TestBudgetWindow(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{10 * time.Second, 10 * time.Second},
		{0, DefaultBudgetWindow},
		{-1, DefaultBudgetWindow},
		{41, 60},
		{1, 40},
		{40, 40},
	} {
		if got := NewBudget(1, 1, c.in).Window(); got != c.want {
			t.Errorf("NewBudget(1, 1, %v).Window() = %v, want %v", c.in, got, c.want)
		}
	}
	if got := (&Budget{}).Window(); got != DefaultBudgetWindow {
		t.Errorf("the zero Budget's Window = %v, want %v", got, DefaultBudgetWindow)
	}
}

// TestBudgetOutage: under a steady stream of first attempts that all
// fail, each retried as long as the budget allows, retries settle at the
// ratio of first attempts: an outage costs the backend 1 + ratio attempts
// per request, not the Attempts each caller would make.
func TestBudgetOutage(t *testing.T) {
	b := NewBudget(0.1, 1, 10*time.Second)
	const perMs = 5 // 5,000 requests a second, each wanting 3 retries
	var firsts, retries int
	for ms := range int64(60_000) {
		now := t0 + ms*int64(time.Millisecond)
		for range perMs {
			b.First(now, 1)
			firsts++
			for range 3 {
				if !b.Spend(now) {
					break
				}
				retries++
			}
		}
	}
	got := float64(firsts+retries) / float64(firsts)
	if got > 1.1 || got < 1.09 {
		t.Fatalf("%d requests made %d attempts: %.4f per request, want 1.09 to 1.1", firsts, firsts+retries, got)
	}
}

// TestBudgetDoesNotAllocate: a budget consulted on every request makes no
// garbage.
func TestBudgetDoesNotAllocate(t *testing.T) {
	b := NewBudget(0.1, 1, time.Second)
	q := NewQuantile(time.Second)
	var now int64
	cases := []struct {
		name string
		f    func()
	}{
		{"Budget.First", func() { now += int64(time.Millisecond); b.First(now, 1) }},
		{"Budget.Spend", func() { b.Spend(now) }},
		{"Budget.Left", func() { b.Left(now) }},
		{"Quantile.Add", func() { now += int64(time.Millisecond); q.Add(time.Duration(now%1e7), now) }},
		{"Quantile.At", func() { q.At(0.95, now) }},
	}
	for _, c := range cases {
		if got := testing.AllocsPerRun(1000, c.f); got != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, got)
		}
	}
}

// TestBudgetEndOfClock: the shortest window still counts at the last
// instants of the clock, and Quantile's does too. Slots of a nanosecond
// would number the last instant math.MaxInt64, and a loop over the slots
// up to it would never end.
func TestBudgetEndOfClock(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := NewBudget(1, 0, 1)
		q := NewQuantile(1)
		for _, at := range []int64{math.MaxInt64 - 30, math.MaxInt64 - 1, math.MaxInt64} {
			b.First(at, 1)
			b.Spend(at)
			q.Add(time.Millisecond, at)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a budget of the shortest window did not return at the end of the clock")
	}
}

// TestBudgetLease: a lease is Left at its instant, and holds until the
// next slot begins, when counts can first leave the window. Spends made
// under it and counted with Spent are refused no more than asked ones.
func TestBudgetLease(t *testing.T) {
	ms := func(d int64) int64 { return t0 + d*int64(time.Millisecond) }
	b := NewBudget(0.1, 1, 10*time.Second) // slots of 500ms; t0 starts one
	b.First(ms(0), 300)
	for i, c := range []struct {
		at    int64
		n     float64
		until int64
	}{
		{ms(0), 30, ms(500)},
		{ms(499), 30, ms(500)},
		{ms(500), 30, ms(1000)},
		// The first attempts leave at +10s, the start of a slot: a lease
		// taken just before it lasts no longer.
		{ms(9999), 30, ms(10000)},
		{ms(10000), 10, ms(10500)},
	} {
		if n, until := b.Lease(c.at); n != c.n || until != c.until {
			t.Fatalf("step %d: Lease(+%v) = %v until +%v, want %v until +%v", i, time.Duration(c.at-t0), n, time.Duration(until-t0), c.n, time.Duration(c.until-t0))
		}
	}
	b = NewBudget(0.1, 1, 10*time.Second)
	b.First(ms(0), 300)
	b.Spent(ms(100), 29)
	b.Spent(ms(100), 0)
	b.Spent(ms(100), -3)
	if n, _ := b.Lease(ms(100)); n != 1 || !b.Spend(ms(100)) || b.Spend(ms(100)) {
		t.Fatalf("after 29 spends counted with Spent: Lease = %v, want 1 left, spent by one Spend", n)
	}
	if n, until := NewBudget(0, math.Inf(1), time.Second).Lease(math.MaxInt64); !math.IsInf(n, 1) || until != math.MaxInt64 {
		t.Fatalf("at the end of the clock: Lease = %v until %v", n, until)
	}
}
