package policy

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// Fixed instants for the tables: t0 is an arbitrary origin (only
// differences matter), the others are minutes after it.
const (
	t0 = int64(1_000_000_000)
	m1 = int64(time.Minute)
)

func minute(minutes int64) int64 { return t0 + minutes*m1 }

// poolOp is one row of a pool table: a call and what it must answer (see
// step), and live, idle and busy, the counts right after it.
type poolOp struct {
	call             step[*Pool[int]]
	live, idle, busy int
}

// The calls a pool table makes, written in the order of the method's
// arguments; each stops the table when its answer is wrong, since the
// steps after it build on it.
type (
	poolTake struct {
		at   int64
		want Taken[int]
	}
	poolMade struct {
		item int
		at   int64
	}
	poolUnmade struct{ at int64 }
	poolGive   struct {
		item int
		at   int64
		want bool
	}
	poolDrop  struct{ item int }
	poolEvict struct {
		at   int64
		want []int
	}
	poolClose struct{ want []int }
	poolHeat  struct {
		heat float64
		at   int64
	}
)

func (s poolTake) run(t *testing.T, p *Pool[int], where string) {
	t.Helper()
	if got := p.Take(s.at); got != s.want {
		t.Fatalf("%s: Take(%d) = %+v, want %+v", where, s.at, got, s.want)
	}
}

func (s poolMade) run(t *testing.T, p *Pool[int], where string) { p.Made(s.item, s.at) }

func (s poolUnmade) run(t *testing.T, p *Pool[int], where string) { p.Unmade(s.at) }

func (s poolGive) run(t *testing.T, p *Pool[int], where string) {
	t.Helper()
	if got := p.Give(s.item, s.at); got != s.want {
		t.Fatalf("%s: Give(%d, %d) = %v, want %v", where, s.item, s.at, got, s.want)
	}
}

func (s poolDrop) run(t *testing.T, p *Pool[int], where string) { p.Drop(s.item) }

func (s poolEvict) run(t *testing.T, p *Pool[int], where string) {
	t.Helper()
	if got := p.Evict(s.at); !slices.Equal(got, s.want) {
		t.Fatalf("%s: Evict(%d) = %v, want %v", where, s.at, got, s.want)
	}
}

func (s poolClose) run(t *testing.T, p *Pool[int], where string) {
	t.Helper()
	if got := p.Close(); !slices.Equal(got, s.want) {
		t.Fatalf("%s: Close() = %v, want %v", where, got, s.want)
	}
}

func (s poolHeat) run(t *testing.T, p *Pool[int], where string) { p.Heat(s.heat, s.at) }

func ready(item int) Taken[int] { return Taken[int]{Verdict: Ready, Item: item} }
func stale(item int) Taken[int] { return Taken[int]{Verdict: Stale, Item: item} }

var (
	mk   = Taken[int]{Verdict: Make}
	wait = Taken[int]{Verdict: Wait}
)

func shed(why Reason) Taken[int] { return Taken[int]{Verdict: Shed, Why: why} }

func later(d time.Duration, why Reason) Taken[int] {
	return Taken[int]{Verdict: Later, After: d, Why: why}
}

// runPool plays a table against p, checking the counts after each step.
func runPool(t *testing.T, p *Pool[int], ops []poolOp) {
	t.Helper()
	for n, o := range ops {
		where := fmt.Sprintf("step %d", n)
		o.call.run(t, p, where)
		if p.Live() != o.live || p.Idle() != o.idle || p.Busy() != o.busy {
			t.Fatalf("%s: after %T: live %d idle %d busy %d, want %d %d %d",
				where, o.call, p.Live(), p.Idle(), p.Busy(), o.live, o.idle, o.busy)
		}
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range []string{"Ready", "Stale", "Make", "Wait", "Later", "Shed", "Verdict(6)"} {
		if got := Verdict(v).String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", v, got, want)
		}
	}
}

func TestPool(t *testing.T) {
	keep, life := 30*time.Minute, time.Hour
	tests := []struct {
		name   string
		limits Limits
		ops    []poolOp
	}{
		{"an empty pool says make, and reserves the room", Limits{Size: 2}, []poolOp{
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
			{call: poolTake{minute(0), mk}, live: 2, busy: 2},
			{call: poolTake{minute(0), wait}, live: 2, busy: 2},
			{call: poolMade{1, minute(1)}, live: 2, busy: 2},
			{call: poolUnmade{minute(1)}, live: 1, busy: 1},
			{call: poolTake{minute(1), mk}, live: 2, busy: 2},
		}},
		{"the most recently returned is lent first", Limits{}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolMade{2, minute(0)}, live: 2, busy: 2},
			{call: poolMade{3, minute(0)}, live: 3, busy: 3},
			{call: poolGive{2, minute(1), true}, live: 3, idle: 1, busy: 2},
			{call: poolGive{1, minute(2), true}, live: 3, idle: 2, busy: 1},
			{call: poolGive{3, minute(3), true}, live: 3, idle: 3},
			{call: poolTake{minute(4), ready(3)}, live: 3, idle: 2, busy: 1},
			{call: poolTake{minute(4), ready(1)}, live: 3, idle: 1, busy: 2},
			{call: poolTake{minute(4), ready(2)}, live: 3, busy: 3},
			{call: poolTake{minute(4), mk}, live: 4, busy: 4},
		}},
		{"an idle one that sat for Keep comes out Stale, off the books", Limits{Keep: keep}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(10), true}, live: 1, idle: 1},
			{call: poolTake{minute(39), ready(1)}, live: 1, busy: 1},
			{call: poolGive{1, minute(40), true}, live: 1, idle: 1},
			{call: poolTake{minute(70), stale(1)}, live: 0},
			{call: poolTake{minute(70), mk}, live: 1, busy: 1},
		}},
		{"Keep is reached at exactly Keep, not a nanosecond later", Limits{Keep: keep}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(0), true}, live: 1, idle: 1},
			{call: poolTake{minute(30) - 1, ready(1)}, live: 1, busy: 1},
			{call: poolGive{1, minute(30) - 1, true}, live: 1, idle: 1},
			{call: poolTake{minute(60) - 1, stale(1)}, live: 0},
		}},
		{"birth survives loans, so Life retires one reused all along", Limits{Keep: keep, Life: life}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(20), true}, live: 1, idle: 1},
			{call: poolTake{minute(40), ready(1)}, live: 1, busy: 1},
			{call: poolGive{1, minute(50), true}, live: 1, idle: 1},
			{call: poolTake{minute(59), ready(1)}, live: 1, busy: 1},
			{call: poolGive{1, minute(59), true}, live: 1, idle: 1},
			{call: poolTake{minute(60), stale(1)}, live: 0},
		}},
		{"Give of one past Life is refused: it would only come back Stale", Limits{Life: life}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(60), false}, live: 0},
			{call: poolGive{1, minute(61), false}, live: 0},
		}},
		{"Give of an unregistered one fills the reserved room, born now", Limits{Life: life}, []poolOp{
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
			{call: poolGive{7, minute(30), true}, live: 1, idle: 1},
			{call: poolTake{minute(89), ready(7)}, live: 1, busy: 1},
			{call: poolGive{7, minute(89), true}, live: 1, idle: 1},
			{call: poolTake{minute(90), stale(7)}, live: 0},
		}},
		{"Give answers false when Idle is full, and the one refused leaves", Limits{Size: 3, Idle: 1}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolMade{2, minute(0)}, live: 2, busy: 2},
			{call: poolGive{1, minute(1), true}, live: 2, idle: 1, busy: 1},
			{call: poolGive{2, minute(1), false}, live: 1, idle: 1},
			{call: poolGive{2, minute(2), false}, live: 1, idle: 1},
			{call: poolTake{minute(2), ready(1)}, live: 1, busy: 1},
		}},
		{"Size 0 is no limit", Limits{}, []poolOp{
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
			{call: poolTake{minute(0), mk}, live: 2, busy: 2},
			{call: poolTake{minute(0), mk}, live: 3, busy: 3},
			{call: poolTake{minute(0), mk}, live: 4, busy: 4},
		}},
		{"Keep and Life of Forever never retire", Limits{Keep: Forever, Life: Forever}, []poolOp{
			{call: poolMade{1, math.MinInt64}, live: 1, busy: 1},
			{call: poolGive{1, math.MinInt64, true}, live: 1, idle: 1},
			{call: poolEvict{math.MaxInt64, nil}, live: 1, idle: 1},
			{call: poolTake{math.MaxInt64, ready(1)}, live: 1, busy: 1},
		}},
		{"Evict hands back every idle one past Keep or Life, and keeps the rest", Limits{Keep: keep, Life: life}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolMade{2, minute(30)}, live: 2, busy: 2},
			{call: poolMade{3, minute(30)}, live: 3, busy: 3},
			{call: poolGive{1, minute(55), true}, live: 3, idle: 1, busy: 2},
			{call: poolGive{2, minute(31), true}, live: 3, idle: 2, busy: 1},
			{call: poolGive{3, minute(56), true}, live: 3, idle: 3},
			{call: poolEvict{minute(59), nil}, live: 3, idle: 3},
			{call: poolEvict{minute(60), []int{1}}, live: 2, idle: 2},
			{call: poolEvict{minute(85), []int{2}}, live: 1, idle: 1},
			{call: poolTake{minute(85), ready(3)}, live: 1, busy: 1},
		}},
		{"Close hands back the idle; then Take is Shed and Give false", Limits{}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolMade{2, minute(0)}, live: 2, busy: 2},
			{call: poolMade{3, minute(0)}, live: 3, busy: 3},
			{call: poolGive{1, minute(1), true}, live: 3, idle: 1, busy: 2},
			{call: poolGive{2, minute(1), true}, live: 3, idle: 2, busy: 1},
			{call: poolClose{[]int{1, 2}}, live: 1, busy: 1},
			{call: poolTake{minute(2), shed(ReasonClosed)}, live: 1, busy: 1},
			{call: poolGive{3, minute(2), false}, live: 0},
			{call: poolClose{nil}, live: 0},
		}},
		{"a make in flight at Close is still answered", Limits{}, []poolOp{
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
			{call: poolTake{minute(0), mk}, live: 2, busy: 2},
			{call: poolClose{nil}, live: 2, busy: 2},
			{call: poolMade{1, minute(1)}, live: 2, busy: 2},
			{call: poolGive{1, minute(1), false}, live: 1, busy: 1},
			{call: poolGive{2, minute(1), false}, live: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runPool(t, NewPool[int](tt.limits, Ward{}), tt.ops)
		})
	}
}

// TestPoolUnknown covers the resources the pool does not know, and the
// calls that answer nothing it asked: each gets a documented answer, and
// no count goes wrong.
func TestPoolUnknown(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		ops    []poolOp
	}{
		{"Give of one never lent with no room reserved is refused and not counted", Limits{}, []poolOp{
			{call: poolGive{9, minute(0), false}, live: 0},
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
		}},
		{"a second Give of an idle one answers true and changes nothing", Limits{}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(1), true}, live: 1, idle: 1},
			{call: poolGive{1, minute(2), true}, live: 1, idle: 1},
			{call: poolTake{minute(3), ready(1)}, live: 1, busy: 1},
			{call: poolTake{minute(3), mk}, live: 2, busy: 2},
		}},
		{"Drop of a lent one frees its place", Limits{Size: 1}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolTake{minute(0), wait}, live: 1, busy: 1},
			{call: poolDrop{1}, live: 0},
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
		}},
		{"Drop of an idle one takes it out of the pool", Limits{}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolMade{2, minute(0)}, live: 2, busy: 2},
			{call: poolGive{1, minute(1), true}, live: 2, idle: 1, busy: 1},
			{call: poolGive{2, minute(1), true}, live: 2, idle: 2},
			{call: poolDrop{1}, live: 1, idle: 1},
			{call: poolTake{minute(2), ready(2)}, live: 1, busy: 1},
			{call: poolTake{minute(2), mk}, live: 2, busy: 2},
		}},
		{"Drop of an unknown one frees the room a Make reserved", Limits{Size: 1}, []poolOp{
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
			{call: poolDrop{5}, live: 0},
			{call: poolDrop{5}, live: 0},
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
		}},
		{"Drop twice leaves once", Limits{}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolTake{minute(0), mk}, live: 2, busy: 2},
			{call: poolDrop{1}, live: 1, busy: 1},
			{call: poolDrop{1}, live: 0},
			{call: poolDrop{1}, live: 0},
		}},
		{"Unmade with nothing reserved changes nothing", Limits{Size: 1}, []poolOp{
			{call: poolUnmade{minute(0)}, live: 0},
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolUnmade{minute(0)}, live: 1, busy: 1},
			{call: poolTake{minute(0), wait}, live: 1, busy: 1},
		}},
		{"Made with nothing reserved registers only if there is room", Limits{Size: 2}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolMade{2, minute(0)}, live: 2, busy: 2},
			{call: poolMade{3, minute(0)}, live: 2, busy: 2},
			{call: poolGive{3, minute(1), false}, live: 2, busy: 2},
			{call: poolGive{2, minute(1), true}, live: 2, idle: 1, busy: 1},
		}},
		{"Made with nothing reserved is ignored once closed", Limits{}, []poolOp{
			{call: poolClose{nil}, live: 0},
			{call: poolMade{1, minute(0)}, live: 0},
			{call: poolGive{1, minute(0), false}, live: 0},
		}},
		{"Made of one already on the books changes nothing; the room stays reserved", Limits{}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(0), true}, live: 1, idle: 1},
			{call: poolTake{minute(0), ready(1)}, live: 1, busy: 1},
			{call: poolTake{minute(0), mk}, live: 2, busy: 2},
			{call: poolMade{1, minute(0)}, live: 2, busy: 2},
			{call: poolUnmade{minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(0), true}, live: 1, idle: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runPool(t, NewPool[int](tt.limits, Ward{}), tt.ops)
		})
	}
}

// TestPoolLentReserved shows how a caller tells a Give refused as misuse
// from one refused because the pool is full.
func TestPoolLentReserved(t *testing.T) {
	p := NewPool[int](Limits{Idle: 1}, Ward{})
	steps := []struct {
		do           func()
		lent1, lent2 bool
		reserved     int
	}{
		{func() {}, false, false, 0},
		{func() { p.Take(minute(0)) }, false, false, 1},
		{func() { p.Made(1, minute(0)) }, true, false, 0},
		{func() { p.Made(2, minute(0)) }, true, true, 0},
		{func() { p.Give(1, minute(1)) }, false, true, 0},
		{func() { p.Give(2, minute(1)) }, false, false, 0}, // Idle full: refused
		{func() { p.Take(minute(2)) }, true, false, 0},
		{func() { p.Drop(1) }, false, false, 0},
	}
	for n, s := range steps {
		s.do()
		if p.Lent(1) != s.lent1 || p.Lent(2) != s.lent2 || p.Reserved() != s.reserved {
			t.Fatalf("step %d: Lent(1) %v Lent(2) %v Reserved %d, want %v %v %d",
				n, p.Lent(1), p.Lent(2), p.Reserved(), s.lent1, s.lent2, s.reserved)
		}
	}
	if p.Closed() {
		t.Fatal("Closed before Close")
	}
	p.Close()
	if !p.Closed() {
		t.Fatal("not Closed after Close")
	}
}

// TestPoolBadInput: limits below zero are read as no limit, and a clock
// that goes backwards is read as standing still.
func TestPoolBadInput(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		ops    []poolOp
	}{
		{"negative Size is no limit", Limits{Size: -1}, []poolOp{
			{call: poolTake{minute(0), mk}, live: 1, busy: 1},
			{call: poolTake{minute(0), mk}, live: 2, busy: 2},
			{call: poolTake{minute(0), mk}, live: 3, busy: 3},
		}},
		{"negative Idle is no limit", Limits{Size: 3, Idle: -5}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolMade{2, minute(0)}, live: 2, busy: 2},
			{call: poolMade{3, minute(0)}, live: 3, busy: 3},
			{call: poolGive{1, minute(0), true}, live: 3, idle: 1, busy: 2},
			{call: poolGive{2, minute(0), true}, live: 3, idle: 2, busy: 1},
			{call: poolGive{3, minute(0), true}, live: 3, idle: 3},
		}},
		{"negative Keep and Life are Forever", Limits{Keep: -time.Minute, Life: -time.Hour}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(0), true}, live: 1, idle: 1},
			{call: poolEvict{minute(1e6), nil}, live: 1, idle: 1},
			{call: poolTake{minute(1e6), ready(1)}, live: 1, busy: 1},
		}},
		{"a Give stamped earlier does not make one look idle longer", Limits{Keep: 30 * time.Minute}, []poolOp{
			{call: poolMade{1, minute(10)}, live: 1, busy: 1},
			{call: poolGive{1, minute(0), true}, live: 1, idle: 1},
			{call: poolTake{minute(39), ready(1)}, live: 1, busy: 1},
		}},
		{"a Made stamped earlier is not born earlier", Limits{Life: time.Hour}, []poolOp{
			{call: poolMade{1, minute(30)}, live: 1, busy: 1},
			{call: poolMade{2, minute(0)}, live: 2, busy: 2},
			{call: poolGive{2, minute(60) - 1, true}, live: 2, idle: 1, busy: 1},
			{call: poolEvict{minute(89), nil}, live: 2, idle: 1, busy: 1},
			{call: poolEvict{minute(90), []int{2}}, live: 1, busy: 1},
		}},
		{"an Evict stamped earlier retires nothing early, nor late", Limits{Keep: 30 * time.Minute}, []poolOp{
			{call: poolMade{1, minute(0)}, live: 1, busy: 1},
			{call: poolGive{1, minute(0), true}, live: 1, idle: 1},
			{call: poolTake{minute(40), stale(1)}, live: 0},
			{call: poolMade{2, minute(0)}, live: 1, busy: 1},
			{call: poolGive{2, minute(0), true}, live: 1, idle: 1},
			{call: poolEvict{minute(69), nil}, live: 1, idle: 1},
			{call: poolEvict{minute(70), []int{2}}, live: 0},
		}},
		{"ages further apart than an int64 holds saturate rather than wrap", Limits{Keep: time.Hour}, []poolOp{
			{call: poolMade{1, math.MinInt64}, live: 1, busy: 1},
			{call: poolGive{1, math.MinInt64, true}, live: 1, idle: 1},
			{call: poolTake{math.MaxInt64, stale(1)}, live: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runPool(t, NewPool[int](tt.limits, Ward{}), tt.ops)
		})
	}
}

// TestPoolZero: the zero Pool is a pool with no limits and no ward.
func TestPoolZero(t *testing.T) {
	var p Pool[int]
	runPool(t, &p, []poolOp{
		{call: poolTake{minute(0), mk}, live: 1, busy: 1},
		{call: poolMade{1, minute(0)}, live: 1, busy: 1},
		{call: poolGive{1, minute(1), true}, live: 1, idle: 1},
		{call: poolEvict{minute(1e6), nil}, live: 1, idle: 1},
		{call: poolTake{minute(1e6), ready(1)}, live: 1, busy: 1},
		{call: poolDrop{1}, live: 0},
	})
}

func TestPoolDeadline(t *testing.T) {
	p := NewPool[int](Limits{Keep: 30 * time.Minute, Life: time.Hour}, Ward{})
	type want struct {
		at int64
		ok bool
	}
	steps := []struct {
		do   func()
		want want
	}{
		{func() {}, want{0, false}},
		{func() { p.Made(1, minute(0)); p.Made(2, minute(10)) }, want{0, false}},
		{func() { p.Give(2, minute(20)) }, want{minute(50), true}}, // Keep of 2, before its Life at 70
		{func() { p.Give(1, minute(40)) }, want{minute(50), true}}, // 1's Life at 60 comes later
		{func() { p.Take(minute(45)) }, want{minute(50), true}},    // 1 lent again
		{func() { p.Take(minute(45)) }, want{0, false}},            // 2 lent: none idle
		{func() { p.Give(1, minute(46)) }, want{minute(60), true}}, // Life of 1, before its Keep at 76
	}
	for n, s := range steps {
		s.do()
		if got, ok := p.Deadline(); got != s.want.at || ok != s.want.ok {
			t.Fatalf("step %d: Deadline() = %d, %v; want %d, %v", n, got, ok, s.want.at, s.want.ok)
		}
	}

	q := NewPool[int](Limits{}, Ward{})
	q.Made(1, minute(0))
	q.Give(1, minute(0))
	if _, ok := q.Deadline(); ok {
		t.Fatal("a pool with neither Keep nor Life has a Deadline")
	}

	r := NewPool[int](Limits{Keep: time.Hour}, Ward{})
	r.Made(1, math.MaxInt64-1)
	r.Give(1, math.MaxInt64-1)
	if got, ok := r.Deadline(); got != math.MaxInt64 || !ok {
		t.Fatalf("Deadline near the end of time = %d, %v; want it saturated at MaxInt64", got, ok)
	}
}

func TestPoolEvictInto(t *testing.T) {
	p := NewPool[int](Limits{Keep: time.Minute}, Ward{})
	for i := 1; i <= 3; i++ {
		p.Made(i, minute(0))
	}
	p.Give(1, minute(0))
	p.Give(3, minute(0))
	p.Give(2, minute(5))
	buf := make([]int, 1, 8)
	buf[0] = 99
	got := p.EvictInto(minute(5), buf)
	if !slices.Equal(got, []int{99, 1, 3}) || &got[0] != &buf[0] {
		t.Fatalf("EvictInto = %v, want [99 1 3] appended in place", got)
	}
	if p.Idle() != 1 || p.Take(minute(5)) != ready(2) {
		t.Fatalf("after EvictInto: idle %d, want 2 still idle", p.Idle())
	}
}

// TestPoolAllocs: lending an idle resource and taking it back, and the
// Make → Made → Drop cycle, allocate nothing once warm.
func TestPoolAllocs(t *testing.T) {
	p := NewPool[int](DefaultLimits, Ward{})
	p.Made(1, minute(0))
	p.Give(1, minute(0))
	now := minute(0)
	if n := testing.AllocsPerRun(1000, func() {
		now++
		if p.Take(now).Verdict != Ready || !p.Give(1, now) {
			t.Fatal("the idle resource was not lent and kept")
		}
	}); n != 0 {
		t.Errorf("Take+Give: %v allocations, want 0", n)
	}

	q := NewPool[int](DefaultLimits, Ward{})
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		now++
		i++
		if q.Take(now).Verdict != Make {
			t.Fatal("no Make")
		}
		q.Made(i%8, now)
		q.Drop(i % 8)
	}); n != 0 {
		t.Errorf("Take+Made+Drop: %v allocations, want 0", n)
	}

	w := NewPool[int](DefaultLimits, Ward{
		Breaker: Throttle{K: 2},
		Bucket:  Rate{PerSecond: 1e12, Burst: 1e12},
		Backoff: Backoff{Base: time.Millisecond, Factor: 2, Jitter: Full},
		Shedder: Overload{Hot: 0.5},
		Draw:    func() float64 { return 0.5 },
	})
	w.Heat(0.9, now)
	if n := testing.AllocsPerRun(1000, func() {
		now += int64(time.Millisecond)
		i++
		switch got := w.Take(now); got.Verdict {
		case Make:
			if i%3 == 0 {
				w.Unmade(now)
				return
			}
			w.Made(i%8, now)
			w.Give(i%8, now)
		case Ready:
			w.Give(got.Item, now)
		}
		w.Drop(i % 8)
	}); n != 0 {
		t.Errorf("a warded pool: %v allocations, want 0", n)
	}
}

// TestRelease: a caller that gives up after Make frees the room without the
// ward counting a failure, and Release with nothing reserved changes nothing.
func TestRelease(t *testing.T) {
	bo := Backoff{Base: time.Second, Factor: 2, Cap: time.Minute, Attempts: 3, Jitter: Rigid}
	p := NewPool[int](Limits{Size: 1}, Ward{Backoff: bo})
	if got := p.Take(0).Verdict; got != Make {
		t.Fatalf("step 1: %v, want Make", got)
	}
	p.Release()
	if p.Live() != 0 || p.Reserved() != 0 {
		t.Fatalf("step 2: live %d reserved %d after Release", p.Live(), p.Reserved())
	}
	// No failure was counted: the next make is not held back.
	if got := p.Take(1).Verdict; got != Make {
		t.Fatalf("step 3: %v, want Make (Release must not start a backoff)", got)
	}
	p.Release()
	p.Release() // nothing reserved: no counter below zero
	if p.Live() != 0 || p.Reserved() != 0 || p.Busy() != 0 {
		t.Fatalf("step 4: live %d reserved %d busy %d", p.Live(), p.Reserved(), p.Busy())
	}
}

// TestDeadlineOf: the O(1) deadline of one idle resource agrees with the
// scan, by Keep and by Life, and says nothing of lent or unknown ones.
func TestDeadlineOf(t *testing.T) {
	const s = int64(time.Second)
	p := NewPool[int](Limits{Size: 3, Idle: 3, Keep: 10 * time.Second, Life: 25 * time.Second}, Ward{})
	for _, at := range []int64{0, 0} {
		if got := p.Take(at).Verdict; got != Make {
			t.Fatalf("take: %v", got)
		}
	}
	p.Made(1, 0)
	p.Made(2, 0)
	if _, ok := p.DeadlineOf(1); ok {
		t.Fatal("step 1: a lent resource has a deadline")
	}
	p.Give(1, 5*s)  // keep ends at 15 s
	p.Give(2, 20*s) // life ends at 25 s, before keep's 30 s
	steps := []struct {
		item int
		want int64
		ok   bool
	}{
		{1, 15 * s, true},
		{2, 25 * s, true},
		{3, 0, false},
	}
	for i, st := range steps {
		got, ok := p.DeadlineOf(st.item)
		if got != st.want || ok != st.ok {
			t.Errorf("step %d: DeadlineOf(%d) = %d, %v; want %d, %v", i+2, st.item, got, ok, st.want, st.ok)
		}
	}
	if at, _ := p.Deadline(); at != 15*s {
		t.Errorf("Deadline = %d, want the earlier of the two, %d", at, 15*s)
	}
}
