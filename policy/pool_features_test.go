package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestSetLimitsShrinkAndGrow: shrinking closes the surplus idle at once,
// the longest idle first, and the surplus lent as each comes home; growing
// lets Take make again at once.
func TestSetLimitsShrinkAndGrow(t *testing.T) {
	p := NewPool[int](Limits{Size: 4}, Ward{})
	for i := 1; i <= 4; i++ {
		if got := p.Take(minute(0)); got.Verdict != Make {
			t.Fatalf("take %d: %v, want Make", i, got.Verdict)
		}
		p.Made(i, minute(0))
	}
	p.Give(1, minute(1)) // idle: 1, then 2 (the newest last)
	p.Give(2, minute(2))
	if got := p.SetLimits(Limits{Size: 3}, nil); !slices.Equal(got, []int{1}) {
		t.Fatalf("shrink to 3 closes %v, want [1]: the longest idle", got)
	}
	if got := p.SetLimits(Limits{Size: 1}, nil); !slices.Equal(got, []int{2}) {
		t.Fatalf("shrink to 1 closes %v, want [2]", got)
	}
	if p.Live() != 2 || p.Idle() != 0 {
		t.Fatalf("live %d idle %d, want 2 lent over a size of 1", p.Live(), p.Idle())
	}
	if got := p.Take(minute(3)); got.Verdict != Wait {
		t.Fatalf("take over size: %v, want Wait", got.Verdict)
	}
	if p.Give(3, minute(3)) {
		t.Fatalf("a lent one coming home over size was kept")
	}
	if !p.Give(4, minute(3)) {
		t.Fatalf("the last one, within size, was not kept")
	}
	if p.Live() != 1 {
		t.Fatalf("live %d, want 1", p.Live())
	}
	p.SetLimits(Limits{Size: 2}, nil)
	if got := p.Take(minute(4)); got.Verdict != Ready || got.Item != 4 {
		t.Fatalf("take after growing: %+v, want Ready 4", got)
	}
	if got := p.Take(minute(4)); got.Verdict != Make {
		t.Fatalf("take with the new room: %v, want Make", got.Verdict)
	}
	if got := p.SetLimits(Limits{Size: 2, Idle: -1}, nil); got != nil || p.Limits().Idle != 0 {
		t.Fatalf("a negative Idle closes %v and reads %d; want nothing and no limit", got, p.Limits().Idle)
	}
}

// TestSetLimitsIdle: a lower Idle closes the idle beyond it, oldest first.
func TestSetLimitsIdle(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{})
	for i := 1; i <= 3; i++ {
		p.Take(minute(0))
		p.Made(i, minute(0))
	}
	for i := 1; i <= 3; i++ {
		p.Give(i, minute(int64(i)))
	}
	if got := p.SetLimits(Limits{Idle: 1}, nil); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("idle 1 closes %v, want [1 2]", got)
	}
	if got := p.Take(minute(5)); got.Item != 3 {
		t.Fatalf("take: %+v, want the one kept, 3", got)
	}
}

// TestResetGeneration: Reset hands back the idle, and Give refuses every
// resource lent before it, whether it comes home or is dropped; what is
// made after it is kept.
func TestResetGeneration(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{})
	for i := 1; i <= 3; i++ {
		p.Take(minute(0))
		p.Made(i, minute(0))
	}
	p.Give(3, minute(1))
	if got := p.Reset(nil); !slices.Equal(got, []int{3}) || p.Outdated() != 2 {
		t.Fatalf("Reset hands back %v with %d outdated; want [3] and 2", got, p.Outdated())
	}
	p.Take(minute(2))
	p.Made(4, minute(2))
	if p.Give(1, minute(3)) {
		t.Fatalf("a resource lent before the Reset was kept")
	}
	p.Drop(2)
	if !p.Give(4, minute(3)) {
		t.Fatalf("a resource made after the Reset was refused")
	}
	if p.Outdated() != 0 || p.Live() != 1 || p.Idle() != 1 {
		t.Fatalf("outdated %d live %d idle %d; want 0, 1, 1", p.Outdated(), p.Live(), p.Idle())
	}
}

// retirements makes n resources at t0 under limits and ward, gives them all
// back at once, and counts how many Evict retires in each second up to
// Life: the index is the second, from t0.
func retirements(limits Limits, ward Ward, n int) map[int]int {
	p := NewPool[int](limits, ward)
	for i := range n {
		p.Take(t0)
		p.Made(i, t0)
	}
	for i := range n {
		p.Give(i, t0)
	}
	out := map[int]int{}
	for s := int64(0); s <= int64(limits.Life/time.Second); s++ {
		if got := len(p.Evict(t0 + s*int64(time.Second))); got > 0 {
			out[int(s)] = got
		}
	}
	if p.Idle() != 0 {
		panic("some outlived Life")
	}
	return out
}

// TestLifeJitterSpreads: a hundred resources made in the same instant are
// retired across the jitter span, no second holding many, the draws coming
// from the ward's Draw (seeded, so the test is the same every run) or, with
// none, from the pool's own even sequence; without jitter they go together.
func TestLifeJitterSpreads(t *testing.T) {
	const life, span = time.Hour, 1000 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		ward Ward
	}{{"seeded draws", Ward{Draw: rng.Float64}}, {"no Draw", Ward{}}} {
		got := retirements(Limits{Life: life, LifeJitter: span}, tc.ward, 100)
		most, first := 0, math.MaxInt
		for s, n := range got {
			most, first = max(most, n), min(first, s)
		}
		// 100 into 1000 one-second buckets: a fair share is under 1; a
		// uniform draw seldom puts more than 3 in one.
		if most > 3 {
			t.Errorf("%s: %d retired in one second, want a spread: %v", tc.name, most, got)
		}
		if lo := int((life - span) / time.Second); first < lo || len(got) < 90 {
			t.Errorf("%s: retired from second %d over %d seconds, want from %d over at least 90", tc.name, first, len(got), lo)
		}
	}
	if got := retirements(Limits{Life: life}, Ward{}, 100); len(got) != 1 || got[int(life/time.Second)] != 100 {
		t.Errorf("without jitter: %v, want all 100 at second %d", got, int(life/time.Second))
	}
	if got := retirements(Limits{Life: time.Minute, LifeJitter: time.Hour}, Ward{}, 10); len(got) == 0 {
		t.Errorf("a jitter past Life retired nothing within Life")
	}
}

// TestFill: Fill asks for makes until MinIdle are idle or being made, never
// past Size, through the ward's bucket, and not at all on a closed pool.
func TestFill(t *testing.T) {
	p := NewPool[int](Limits{Size: 3, MinIdle: 5}, Ward{Bucket: Rate{PerSecond: 1, Burst: 2}})
	steps := []struct {
		at      int64
		filling int
		want    Verdict
	}{
		{t0, 0, Make},
		{t0, 1, Make},
		{t0, 2, Later}, // the bucket's burst is spent
		{t0 + int64(time.Second), 2, Make},
		{t0 + int64(time.Second), 3, Wait}, // Size reached
	}
	for k, s := range steps {
		if got := p.Fill(s.at, s.filling); got.Verdict != s.want {
			t.Fatalf("step %d: Fill = %+v, want %v", k, got, s.want)
		}
	}
	for i := range 3 {
		p.Give(i, t0+int64(time.Second)) // the made, registered idle
	}
	if p.Idle() != 3 || p.Reserved() != 0 {
		t.Fatalf("idle %d reserved %d, want 3 and 0", p.Idle(), p.Reserved())
	}
	q := NewPool[int](Limits{Idle: 1, MinIdle: 5}, Ward{})
	q.Fill(t0, 0)
	q.Give(1, t0)
	if got := q.Fill(t0, 0); got.Verdict != Wait {
		t.Fatalf("MinIdle over Idle: Fill = %v, want Wait (read as Idle)", got.Verdict)
	}
	q.Close()
	if got := NewPool[int](Limits{MinIdle: 1}, Ward{}); got.Close() == nil && got.Fill(t0, 0).Verdict != Wait {
		t.Fatalf("a closed pool was asked to fill")
	}
}

// TestDueAndChecked: Due lends the idle that went unchecked for the period
// to the owner, so Take cannot lend them meanwhile; Checked puts a good one
// back where its idle time puts it, without resetting that time (Keep still
// retires it), and takes a bad one off the books. Sat says how long a
// resource went unused and unchecked.
func TestDueAndChecked(t *testing.T) {
	p := NewPool[int](Limits{Keep: 10 * time.Minute}, Ward{})
	for i := 1; i <= 3; i++ {
		p.Take(t0)
		p.Made(i, t0)
	}
	p.Give(1, minute(1))
	p.Give(2, minute(2))
	p.Give(3, minute(4))
	for _, want := range []int{1, 2} { // one at a time, the longest unchecked first
		if got, ok := p.Due(minute(4), 2*time.Minute); !ok || got != want {
			t.Fatalf("Due = %v, %v; want %d", got, ok, want)
		}
	}
	if got, ok := p.Due(minute(4), 2*time.Minute); ok {
		t.Fatalf("Due = %v: 3 was returned just now", got)
	}
	if got := p.Take(minute(4)); got.Item != 3 {
		t.Fatalf("Take while 1 and 2 are checked = %+v, want 3", got)
	}
	if got := p.Take(minute(4)); got.Verdict != Make {
		t.Fatalf("Take with the rest being checked = %v, want Make", got.Verdict)
	}
	p.Release()
	if p.Checked(1, false, minute(5)) || !p.Checked(2, true, minute(5)) || p.Checked(2, true, minute(5)) {
		t.Fatalf("Checked: a bad one kept, a good one refused, or a second Checked kept")
	}
	if p.Live() != 2 || p.Idle() != 1 {
		t.Fatalf("live %d idle %d, want 2 and 1", p.Live(), p.Idle())
	}
	if d, _ := p.Sat(2, minute(6)); d != time.Minute {
		t.Fatalf("Sat after a check a minute ago = %v, want 1m", d)
	}
	if got := p.Evict(minute(12)); !slices.Equal(got, []int{2}) {
		t.Fatalf("Evict at Keep after the return = %v, want [2]: a check is not a use", got)
	}
}

// TestUnderCheckNotTheCallers: a resource Due lent to be checked is not a
// caller's: a stray Give, GiveLent or Drop of it (a second Put or Discard
// by its last holder) changes nothing, so it is neither lent to a caller
// while the check holds it nor taken off the books twice, and Checked still
// takes it back.
func TestUnderCheckNotTheCallers(t *testing.T) {
	p := NewPool[int](Limits{Size: 2}, Ward{})
	p.Take(t0)
	p.Made(1, t0)
	p.Give(1, t0)
	if got, ok := p.Due(minute(2), time.Minute); !ok || got != 1 {
		t.Fatalf("Due = %v, %v; want 1", got, ok)
	}
	for step, stray := range []func(){
		func() { p.Give(1, minute(2)) },
		func() { p.GiveLent(1, minute(2)) },
		func() { p.Drop(1) },
	} {
		if p.Lent(1) {
			t.Fatalf("step %d: Lent says the checked one is a caller's", step)
		}
		if kept, lent := p.GiveLent(1, minute(2)); kept || lent {
			t.Fatalf("step %d: GiveLent of the checked one = %v, %v; want false, false", step, kept, lent)
		}
		stray()
		if p.Live() != 1 || p.Busy() != 1 || p.Idle() != 0 {
			t.Fatalf("step %d: live %d busy %d idle %d, want 1, 1, 0", step, p.Live(), p.Busy(), p.Idle())
		}
		if got := p.Take(minute(2)); got.Verdict != Make {
			t.Fatalf("step %d: Take while it is checked = %v %v, want Make", step, got.Verdict, got.Item)
		}
		p.Release()
	}
	if !p.Checked(1, true, minute(3)) || p.Live() != 1 || p.Idle() != 1 || p.Busy() != 0 {
		t.Fatalf("after Checked: live %d idle %d busy %d, want 1, 1, 0", p.Live(), p.Idle(), p.Busy())
	}
}

// TestGiveUnchecked: a resource handed back neither used nor checked keeps
// the time it was last known good, so it is still due a check; a Give
// would make that now. It refuses what is not lent to a caller, as
// GiveLent does.
func TestGiveUnchecked(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{})
	p.Take(t0)
	p.Made(1, t0)
	p.Give(1, t0)
	p.Take(minute(2))
	if kept, lent := p.GiveUnchecked(1, minute(2)); !kept || !lent {
		t.Fatalf("GiveUnchecked = %v, %v; want true, true", kept, lent)
	}
	if d, _ := p.Sat(1, minute(3)); d != 3*time.Minute {
		t.Fatalf("Sat after GiveUnchecked = %v, want 3m: unchecked since t0", d)
	}
	if kept, lent := p.GiveUnchecked(1, minute(3)); kept || lent {
		t.Fatalf("GiveUnchecked of an idle one = %v, %v; want false, false", kept, lent)
	}
}

// TestKeepSparesMinIdle: Keep retires the longest idle only down to
// MinIdle, so a quiet pool does not close warm resources and make new ones
// every Keep; Life retires them all the same. Deadline and Take agree.
func TestKeepSparesMinIdle(t *testing.T) {
	p := NewPool[int](Limits{Keep: time.Minute, Life: time.Hour, MinIdle: 2}, Ward{})
	for i := 1; i <= 3; i++ {
		p.Take(t0)
		p.Made(i, t0)
	}
	p.Give(1, t0)
	p.Give(2, minute(1))
	p.Give(3, minute(2))
	if at, ok := p.Deadline(); !ok || at != minute(1) {
		t.Fatalf("Deadline with 3 idle = %v, %v; want minute 1, Keep's for 1", at, ok)
	}
	if got := p.Evict(minute(5)); !slices.Equal(got, []int{1}) {
		t.Fatalf("Evict with all 3 past Keep = %v, want [1]: the longest idle, down to MinIdle", got)
	}
	if at, ok := p.Deadline(); !ok || at != minute(60) {
		t.Fatalf("Deadline with MinIdle idle = %v, %v; want minute 60, Life's", at, ok)
	}
	if got := p.Take(minute(6)); got.Verdict != Ready || got.Item != 3 {
		t.Fatalf("Take past Keep with MinIdle idle = %v %v, want Ready 3", got.Verdict, got.Item)
	}
	p.Give(3, minute(6))
	if got := p.Evict(minute(59)); got != nil {
		t.Fatalf("Evict at minute 59 = %v, want none: the last MinIdle stay however long they sit", got)
	}
	if got := p.Evict(minute(60)); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("Evict at Life = %v, want [2 3]", got)
	}
}
