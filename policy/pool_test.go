package policy

import (
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

// poolOp is one call in a table: what to call, with what, and what must come
// back; live, idle and busy are the counts right after it.
type poolOp struct {
	call             string // take, made, unmade, give, drop, evict, close, heat
	at               int64
	item             int // the resource; for heat, the heat in hundredths
	want             any // Taken[int] for take, bool for give, []int for evict and close
	live, idle, busy int
}

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

// run plays a table against p, reporting the failing step.
func runPool(t *testing.T, p *Pool[int], ops []poolOp) {
	t.Helper()
	for n, o := range ops {
		var got any
		switch o.call {
		case "take":
			got = p.Take(o.at)
		case "made":
			p.Made(o.item, o.at)
		case "unmade":
			p.Unmade(o.at)
		case "give":
			got = p.Give(o.item, o.at)
		case "drop":
			p.Drop(o.item)
		case "evict":
			got = p.Evict(o.at)
		case "close":
			got = p.Close()
		case "heat":
			p.Heat(float64(o.item)/100, o.at)
		default:
			t.Fatalf("step %d: unknown call %q", n, o.call)
		}
		switch want := o.want.(type) {
		case nil:
			if got != nil {
				t.Fatalf("step %d: %s answered %v, the table expects nothing", n, o.call, got)
			}
		case []int:
			if g, _ := got.([]int); !slices.Equal(g, want) {
				t.Fatalf("step %d: %s = %v, want %v", n, o.call, got, want)
			}
		default:
			if got != want {
				t.Fatalf("step %d: %s = %+v, want %+v", n, o.call, got, want)
			}
		}
		if p.Live() != o.live || p.Idle() != o.idle || p.Busy() != o.busy {
			t.Fatalf("step %d: %s: live %d idle %d busy %d, want %d %d %d",
				n, o.call, p.Live(), p.Idle(), p.Busy(), o.live, o.idle, o.busy)
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
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
			{call: "take", at: minute(0), want: mk, live: 2, busy: 2},
			{call: "take", at: minute(0), want: wait, live: 2, busy: 2},
			{call: "made", at: minute(1), item: 1, live: 2, busy: 2},
			{call: "unmade", at: minute(1), live: 1, busy: 1},
			{call: "take", at: minute(1), want: mk, live: 2, busy: 2},
		}},
		{"the most recently returned is lent first", Limits{}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "made", at: minute(0), item: 2, live: 2, busy: 2},
			{call: "made", at: minute(0), item: 3, live: 3, busy: 3},
			{call: "give", at: minute(1), item: 2, want: true, live: 3, idle: 1, busy: 2},
			{call: "give", at: minute(2), item: 1, want: true, live: 3, idle: 2, busy: 1},
			{call: "give", at: minute(3), item: 3, want: true, live: 3, idle: 3},
			{call: "take", at: minute(4), want: ready(3), live: 3, idle: 2, busy: 1},
			{call: "take", at: minute(4), want: ready(1), live: 3, idle: 1, busy: 2},
			{call: "take", at: minute(4), want: ready(2), live: 3, busy: 3},
			{call: "take", at: minute(4), want: mk, live: 4, busy: 4},
		}},
		{"an idle one that sat for Keep comes out Stale, off the books", Limits{Keep: keep}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(10), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(39), want: ready(1), live: 1, busy: 1},
			{call: "give", at: minute(40), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(70), want: stale(1), live: 0},
			{call: "take", at: minute(70), want: mk, live: 1, busy: 1},
		}},
		{"Keep is reached at exactly Keep, not a nanosecond later", Limits{Keep: keep}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(0), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(30) - 1, want: ready(1), live: 1, busy: 1},
			{call: "give", at: minute(30) - 1, item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(60) - 1, want: stale(1), live: 0},
		}},
		{"birth survives loans, so Life retires one reused all along", Limits{Keep: keep, Life: life}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(20), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(40), want: ready(1), live: 1, busy: 1},
			{call: "give", at: minute(50), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(59), want: ready(1), live: 1, busy: 1},
			{call: "give", at: minute(59), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(60), want: stale(1), live: 0},
		}},
		{"Give of one past Life is refused: it would only come back Stale", Limits{Life: life}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(60), item: 1, want: false, live: 0},
			{call: "give", at: minute(61), item: 1, want: false, live: 0},
		}},
		{"Give of an unregistered one fills the reserved room, born now", Limits{Life: life}, []poolOp{
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
			{call: "give", at: minute(30), item: 7, want: true, live: 1, idle: 1},
			{call: "take", at: minute(89), want: ready(7), live: 1, busy: 1},
			{call: "give", at: minute(89), item: 7, want: true, live: 1, idle: 1},
			{call: "take", at: minute(90), want: stale(7), live: 0},
		}},
		{"Give answers false when Idle is full, and the one refused leaves", Limits{Size: 3, Idle: 1}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "made", at: minute(0), item: 2, live: 2, busy: 2},
			{call: "give", at: minute(1), item: 1, want: true, live: 2, idle: 1, busy: 1},
			{call: "give", at: minute(1), item: 2, want: false, live: 1, idle: 1},
			{call: "give", at: minute(2), item: 2, want: false, live: 1, idle: 1},
			{call: "take", at: minute(2), want: ready(1), live: 1, busy: 1},
		}},
		{"Size 0 is no limit", Limits{}, []poolOp{
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
			{call: "take", at: minute(0), want: mk, live: 2, busy: 2},
			{call: "take", at: minute(0), want: mk, live: 3, busy: 3},
			{call: "take", at: minute(0), want: mk, live: 4, busy: 4},
		}},
		{"Keep and Life of Forever never retire", Limits{Keep: Forever, Life: Forever}, []poolOp{
			{call: "made", at: math.MinInt64, item: 1, live: 1, busy: 1},
			{call: "give", at: math.MinInt64, item: 1, want: true, live: 1, idle: 1},
			{call: "evict", at: math.MaxInt64, want: []int(nil), live: 1, idle: 1},
			{call: "take", at: math.MaxInt64, want: ready(1), live: 1, busy: 1},
		}},
		{"Evict hands back every idle one past Keep or Life, and keeps the rest", Limits{Keep: keep, Life: life}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "made", at: minute(30), item: 2, live: 2, busy: 2},
			{call: "made", at: minute(30), item: 3, live: 3, busy: 3},
			{call: "give", at: minute(55), item: 1, want: true, live: 3, idle: 1, busy: 2},
			{call: "give", at: minute(31), item: 2, want: true, live: 3, idle: 2, busy: 1},
			{call: "give", at: minute(56), item: 3, want: true, live: 3, idle: 3},
			{call: "evict", at: minute(59), want: []int(nil), live: 3, idle: 3},
			{call: "evict", at: minute(60), want: []int{1}, live: 2, idle: 2},
			{call: "evict", at: minute(85), want: []int{2}, live: 1, idle: 1},
			{call: "take", at: minute(85), want: ready(3), live: 1, busy: 1},
		}},
		{"Close hands back the idle; then Take is Shed and Give false", Limits{}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "made", at: minute(0), item: 2, live: 2, busy: 2},
			{call: "made", at: minute(0), item: 3, live: 3, busy: 3},
			{call: "give", at: minute(1), item: 1, want: true, live: 3, idle: 1, busy: 2},
			{call: "give", at: minute(1), item: 2, want: true, live: 3, idle: 2, busy: 1},
			{call: "close", want: []int{1, 2}, live: 1, busy: 1},
			{call: "take", at: minute(2), want: shed(ReasonClosed), live: 1, busy: 1},
			{call: "give", at: minute(2), item: 3, want: false, live: 0},
			{call: "close", want: []int(nil), live: 0},
		}},
		{"a make in flight at Close is still answered", Limits{}, []poolOp{
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
			{call: "take", at: minute(0), want: mk, live: 2, busy: 2},
			{call: "close", want: []int(nil), live: 2, busy: 2},
			{call: "made", at: minute(1), item: 1, live: 2, busy: 2},
			{call: "give", at: minute(1), item: 1, want: false, live: 1, busy: 1},
			{call: "give", at: minute(1), item: 2, want: false, live: 0},
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
			{call: "give", at: minute(0), item: 9, want: false, live: 0},
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
		}},
		{"a second Give of an idle one answers true and changes nothing", Limits{}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(1), item: 1, want: true, live: 1, idle: 1},
			{call: "give", at: minute(2), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(3), want: ready(1), live: 1, busy: 1},
			{call: "take", at: minute(3), want: mk, live: 2, busy: 2},
		}},
		{"Drop of a lent one frees its place", Limits{Size: 1}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "take", at: minute(0), want: wait, live: 1, busy: 1},
			{call: "drop", item: 1, live: 0},
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
		}},
		{"Drop of an idle one takes it out of the pool", Limits{}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "made", at: minute(0), item: 2, live: 2, busy: 2},
			{call: "give", at: minute(1), item: 1, want: true, live: 2, idle: 1, busy: 1},
			{call: "give", at: minute(1), item: 2, want: true, live: 2, idle: 2},
			{call: "drop", item: 1, live: 1, idle: 1},
			{call: "take", at: minute(2), want: ready(2), live: 1, busy: 1},
			{call: "take", at: minute(2), want: mk, live: 2, busy: 2},
		}},
		{"Drop of an unknown one frees the room a Make reserved", Limits{Size: 1}, []poolOp{
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
			{call: "drop", item: 5, live: 0},
			{call: "drop", item: 5, live: 0},
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
		}},
		{"Drop twice leaves once", Limits{}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "take", at: minute(0), want: mk, live: 2, busy: 2},
			{call: "drop", item: 1, live: 1, busy: 1},
			{call: "drop", item: 1, live: 0},
			{call: "drop", item: 1, live: 0},
		}},
		{"Unmade with nothing reserved changes nothing", Limits{Size: 1}, []poolOp{
			{call: "unmade", at: minute(0), live: 0},
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "unmade", at: minute(0), live: 1, busy: 1},
			{call: "take", at: minute(0), want: wait, live: 1, busy: 1},
		}},
		{"Made with nothing reserved registers only if there is room", Limits{Size: 2}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "made", at: minute(0), item: 2, live: 2, busy: 2},
			{call: "made", at: minute(0), item: 3, live: 2, busy: 2},
			{call: "give", at: minute(1), item: 3, want: false, live: 2, busy: 2},
			{call: "give", at: minute(1), item: 2, want: true, live: 2, idle: 1, busy: 1},
		}},
		{"Made with nothing reserved is ignored once closed", Limits{}, []poolOp{
			{call: "close", want: []int(nil), live: 0},
			{call: "made", at: minute(0), item: 1, live: 0},
			{call: "give", at: minute(0), item: 1, want: false, live: 0},
		}},
		{"Made of one already on the books changes nothing; the room stays reserved", Limits{}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(0), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(0), want: ready(1), live: 1, busy: 1},
			{call: "take", at: minute(0), want: mk, live: 2, busy: 2},
			{call: "made", at: minute(0), item: 1, live: 2, busy: 2},
			{call: "unmade", at: minute(0), live: 1, busy: 1},
			{call: "give", at: minute(0), item: 1, want: true, live: 1, idle: 1},
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
			{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
			{call: "take", at: minute(0), want: mk, live: 2, busy: 2},
			{call: "take", at: minute(0), want: mk, live: 3, busy: 3},
		}},
		{"negative Idle is no limit", Limits{Size: 3, Idle: -5}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "made", at: minute(0), item: 2, live: 2, busy: 2},
			{call: "made", at: minute(0), item: 3, live: 3, busy: 3},
			{call: "give", at: minute(0), item: 1, want: true, live: 3, idle: 1, busy: 2},
			{call: "give", at: minute(0), item: 2, want: true, live: 3, idle: 2, busy: 1},
			{call: "give", at: minute(0), item: 3, want: true, live: 3, idle: 3},
		}},
		{"negative Keep and Life are Forever", Limits{Keep: -time.Minute, Life: -time.Hour}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(0), item: 1, want: true, live: 1, idle: 1},
			{call: "evict", at: minute(1e6), want: []int(nil), live: 1, idle: 1},
			{call: "take", at: minute(1e6), want: ready(1), live: 1, busy: 1},
		}},
		{"a Give stamped earlier does not make one look idle longer", Limits{Keep: 30 * time.Minute}, []poolOp{
			{call: "made", at: minute(10), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(0), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(39), want: ready(1), live: 1, busy: 1},
		}},
		{"a Made stamped earlier is not born earlier", Limits{Life: time.Hour}, []poolOp{
			{call: "made", at: minute(30), item: 1, live: 1, busy: 1},
			{call: "made", at: minute(0), item: 2, live: 2, busy: 2},
			{call: "give", at: minute(60) - 1, item: 2, want: true, live: 2, idle: 1, busy: 1},
			{call: "evict", at: minute(89), want: []int(nil), live: 2, idle: 1, busy: 1},
			{call: "evict", at: minute(90), want: []int{2}, live: 1, busy: 1},
		}},
		{"an Evict stamped earlier retires nothing early, nor late", Limits{Keep: 30 * time.Minute}, []poolOp{
			{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
			{call: "give", at: minute(0), item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: minute(40), want: stale(1), live: 0},
			{call: "made", at: minute(0), item: 2, live: 1, busy: 1},
			{call: "give", at: minute(0), item: 2, want: true, live: 1, idle: 1},
			{call: "evict", at: minute(69), want: []int(nil), live: 1, idle: 1},
			{call: "evict", at: minute(70), want: []int{2}, live: 0},
		}},
		{"ages further apart than an int64 holds saturate rather than wrap", Limits{Keep: time.Hour}, []poolOp{
			{call: "made", at: math.MinInt64, item: 1, live: 1, busy: 1},
			{call: "give", at: math.MinInt64, item: 1, want: true, live: 1, idle: 1},
			{call: "take", at: math.MaxInt64, want: stale(1), live: 0},
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
		{call: "take", at: minute(0), want: mk, live: 1, busy: 1},
		{call: "made", at: minute(0), item: 1, live: 1, busy: 1},
		{call: "give", at: minute(1), item: 1, want: true, live: 1, idle: 1},
		{call: "evict", at: minute(1e6), want: []int(nil), live: 1, idle: 1},
		{call: "take", at: minute(1e6), want: ready(1), live: 1, busy: 1},
		{call: "drop", item: 1, live: 0},
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
