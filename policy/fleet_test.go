package policy

import (
	"math"
	"testing"
	"time"
)

// The calls of the fleet tables, beside the pool's (see poolOp).
type (
	poolFleet struct {
		view FleetView
		at   int64
	}
	poolRelease struct{}
	// poolProbing checks FleetProbe.
	poolProbing struct{ want bool }
	// poolHeld checks whether the local backoff holds makes at at.
	poolHeld struct {
		at   int64
		want bool
	}
)

func (s poolFleet) run(t *testing.T, p *Pool[int], where string) { p.SetFleet(s.view, s.at) }

func (s poolRelease) run(t *testing.T, p *Pool[int], where string) { p.Release() }

func (s poolProbing) run(t *testing.T, p *Pool[int], where string) {
	t.Helper()
	if got := p.FleetProbe(); got != s.want {
		t.Fatalf("%s: FleetProbe() = %v, want %v", where, got, s.want)
	}
}

func (s poolHeld) run(t *testing.T, p *Pool[int], where string) {
	t.Helper()
	if _, got := p.Held(s.at); got != s.want {
		t.Fatalf("%s: Held(%d) held = %v, want %v", where, s.at, got, s.want)
	}
}

// held is a fleet hold whose probe interval is 100 ms.
func held(probe bool) FleetView {
	return FleetView{State: FleetHeld, Probe: probe, ProbeEvery: 100 * milli}
}

// doubling is a ramp whose curve has allowed exactly 2^k - 1 makes k
// seconds in, for k up to 3: Start·Double/ln 2 is one make.
var doubling = Ramp{Start: math.Ln2, Double: time.Second, Full: 8 * math.Ln2}

func TestFleetStateString(t *testing.T) {
	for s, want := range []string{"open", "held", "ramp", "alone", "FleetState(4)"} {
		if got := FleetState(s).String(); got != want {
			t.Errorf("FleetState(%d).String() = %q, want %q", s, got, want)
		}
	}
}

// TestFleetHeld: a held fleet makes nothing but its one probe, which skips
// the local backoff's hold; each grant of the lease lets one probe go.
func TestFleetHeld(t *testing.T) {
	p := NewPool[int](Limits{Size: 4}, Ward{Backoff: rigid})
	fleet := later(100*milli, ReasonFleet)
	runPool(t, p, []poolOp{
		{call: poolFleet{held(false), after0(0)}},
		{call: poolTake{after0(0), fleet}},
		{call: poolFleet{held(true), after0(0)}},
		{call: poolTake{after0(0), mk}, live: 1, busy: 1},
		{call: poolProbing{true}, live: 1, busy: 1},
		// One probe at a time, and no other make meanwhile.
		{call: poolTake{after0(0), fleet}, live: 1, busy: 1},
		{call: poolUnmade{after0(10 * milli)}},
		{call: poolProbing{false}},
		// The failed probe started a local hold, but what answers is the
		// fleet: the lease was used.
		{call: poolHeld{after0(10 * milli), true}},
		{call: poolTake{after0(10 * milli), fleet}},
		// The next lease lets the next probe through the local hold.
		{call: poolFleet{held(true), after0(20 * milli)}},
		{call: poolTake{after0(20 * milli), mk}, live: 1, busy: 1},
		{call: poolMade{1, after0(30 * milli)}, live: 1, busy: 1},
		{call: poolProbing{false}, live: 1, busy: 1},
		{call: poolHeld{after0(30 * milli), false}, live: 1, busy: 1},
		// The probe worked, but the fleet has not said so yet.
		{call: poolTake{after0(30 * milli), fleet}, live: 1, busy: 1},
		{call: poolGive{1, after0(30 * milli), true}, live: 1, idle: 1},
		// Lending is never held back.
		{call: poolTake{after0(30 * milli), ready(1)}, live: 1, busy: 1},
		{call: poolFleet{FleetView{State: FleetOpen}, after0(40 * milli)}, live: 1, busy: 1},
		{call: poolTake{after0(40 * milli), mk}, live: 2, busy: 2},
	})
}

// TestFleetHeldRecheck: a hold that names no probe interval answers
// Later after a second.
func TestFleetHeldRecheck(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{})
	p.SetFleet(FleetView{State: FleetHeld}, t0)
	if got := p.Take(t0); got != later(time.Second, ReasonFleet) {
		t.Fatalf("Take = %+v, want Later 1s by the fleet", got)
	}
}

// TestFleetProbeUntried: a probe given up before it was tried (Release,
// or a Drop of what it was to make) leaves the lease's grant for the next
// make.
func TestFleetProbeUntried(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{Backoff: rigid})
	fleet := later(100*milli, ReasonFleet)
	runPool(t, p, []poolOp{
		{call: poolFleet{held(true), after0(0)}},
		{call: poolTake{after0(0), mk}, live: 1, busy: 1},
		{call: poolRelease{}},
		{call: poolProbing{false}},
		{call: poolTake{after0(0), mk}, live: 1, busy: 1},
		{call: poolDrop{7}},
		{call: poolTake{after0(0), mk}, live: 1, busy: 1},
		{call: poolUnmade{after0(0)}},
		{call: poolTake{after0(0), fleet}},
		// A lease lost before its probe went takes the grant with it.
		{call: poolFleet{held(true), after0(0)}},
		{call: poolFleet{held(false), after0(0)}},
		{call: poolTake{after0(0), fleet}},
	})
}

// TestFleetProbeSkipsBreaker: the breaker of a replica that failed alone
// may refuse most makes; the fleet's probe is not among them.
func TestFleetProbeSkipsBreaker(t *testing.T) {
	ward := Ward{Breaker: Throttle{K: 2, Floor: 1}}
	open, fleet := NewPool[int](Limits{}, ward), NewPool[int](Limits{}, ward)
	now := t0
	for open.ward.breaker.admits(now) {
		now += int64(milli)
		for _, p := range []*Pool[int]{open, fleet} {
			if got := p.Take(now); got != mk {
				t.Fatalf("Take while the breaker admits = %+v, want Make", got)
			}
			p.Unmade(now)
		}
	}
	if got := open.Take(now); got != shed(ReasonBreaker) {
		t.Fatalf("without a fleet: %+v, want Shed by the breaker", got)
	}
	fleet.SetFleet(held(true), now)
	if got := fleet.Take(now); got != mk {
		t.Fatalf("the fleet's probe: %+v, want Make", got)
	}
}

// TestFleetLeavesHeld: once the view leaves FleetHeld, the probe in flight
// is an ordinary make.
func TestFleetLeavesHeld(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{})
	runPool(t, p, []poolOp{
		{call: poolFleet{held(true), after0(0)}},
		{call: poolTake{after0(0), mk}, live: 1, busy: 1},
		{call: poolFleet{FleetView{State: FleetAlone}, after0(0)}, live: 1, busy: 1},
		{call: poolProbing{false}, live: 1, busy: 1},
		{call: poolTake{after0(0), mk}, live: 2, busy: 2},
	})
	p.SetFleet(FleetView{State: 9}, t0)
	if got := p.Fleet().State; got != FleetAlone {
		t.Fatalf("state 9 read as %v, want alone", got)
	}
}

// TestFleetRamp: the recovery ends the local backoff's run, one make goes
// at once, and the rest follow the curve until it is full.
func TestFleetRamp(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{Backoff: rigid})
	since := after0(10 * milli)
	ramp := FleetView{State: FleetRamp, Since: since, Share: 1, Ramp: doubling}
	at := func(d time.Duration) int64 { return since + int64(d) }
	runPool(t, p, []poolOp{
		{call: poolTake{after0(0), mk}, live: 1, busy: 1},
		{call: poolUnmade{after0(0)}},
		{call: poolHeld{since, true}},
		{call: poolFleet{ramp, since}},
		{call: poolHeld{since, false}},
		{call: poolTake{since, mk}, live: 1, busy: 1},
		{call: poolTake{since, later(time.Second, ReasonRamp)}, live: 1, busy: 1},
		{call: poolTake{at(500 * milli), later(500*milli, ReasonRamp)}, live: 1, busy: 1},
		{call: poolTake{at(time.Second), mk}, live: 2, busy: 2},
		// The second make on the curve is at log2(3) seconds.
		{call: poolTake{at(time.Second), later(584962501, ReasonRamp)}, live: 2, busy: 2},
		{call: poolTake{at(2 * time.Second), mk}, live: 3, busy: 3},
		// The make the curve allowed at log2(3) seconds, which nobody
		// asked for then, is kept.
		{call: poolTake{at(2 * time.Second), mk}, live: 4, busy: 4},
		// Only one is kept: the next is at log2(5) seconds.
		{call: poolTake{at(2 * time.Second), later(321928095, ReasonRamp)}, live: 4, busy: 4},
		// Three doublings reach Full: the ramp is over, and the view acts
		// as FleetOpen.
		{call: poolTake{at(3 * time.Second), mk}, live: 5, busy: 5},
		{call: poolTake{at(3 * time.Second), mk}, live: 6, busy: 6},
		// The same ramp again does not start it over.
		{call: poolFleet{ramp, at(3 * time.Second)}, live: 6, busy: 6},
		{call: poolTake{at(3 * time.Second), mk}, live: 7, busy: 7},
	})
	if got := ramp.StateAt(at(3*time.Second) - 1); got != FleetRamp {
		t.Errorf("StateAt a nanosecond before the end = %v, want ramp", got)
	}
	if got := ramp.StateAt(at(3 * time.Second)); got != FleetOpen {
		t.Errorf("StateAt the end = %v, want open", got)
	}
}

// TestFleetRampShare: each replica takes its share of the curve.
func TestFleetRampShare(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{})
	since := after0(0)
	p.SetFleet(FleetView{State: FleetRamp, Since: since, Share: 3, Ramp: doubling}, since)
	if got := p.Take(since); got != mk {
		t.Fatalf("the first make: %+v, want Make at once", got)
	}
	// Three replicas share it, so this one's next waits for the curve's
	// third make: 2^k - 1 = 3 at two seconds.
	if got := p.Take(since); got != later(2*time.Second, ReasonRamp) {
		t.Fatalf("the second make: %+v, want Later 2s by the ramp", got)
	}
}

// TestFleetRampKeepsRoomForBucket: a make the bucket refuses spends none
// of the ramp's room, and a local failure in a ramp holds as ever.
func TestFleetRampKeepsRoomForBucket(t *testing.T) {
	p := NewPool[int](Limits{}, Ward{Bucket: Rate{PerSecond: 1 / 1.1, Burst: 1}, Backoff: rigid})
	since := after0(0)
	ramp := FleetView{State: FleetRamp, Since: since, Ramp: doubling}
	at := func(d time.Duration) int64 { return since + int64(d) }
	runPool(t, p, []poolOp{
		{call: poolFleet{ramp, since}},
		{call: poolTake{since, mk}, live: 1, busy: 1},
		{call: poolMade{1, since}, live: 1, busy: 1},
		{call: poolTake{at(time.Second), later(100*milli, ReasonBucket)}, live: 1, busy: 1},
		// 2^1.1 - 1 made by now: room for the second, and the bucket has
		// its token.
		{call: poolTake{at(1100 * milli), mk}, live: 2, busy: 2},
		{call: poolUnmade{at(1100 * milli)}, live: 1, busy: 1},
		{call: poolHeld{at(1100 * milli), true}, live: 1, busy: 1},
		// The same ramp set again keeps the local hold: only a recovery
		// ends it.
		{call: poolFleet{ramp, at(1100 * milli)}, live: 1, busy: 1},
		{call: poolHeld{at(1100 * milli), true}, live: 1, busy: 1},
		{call: poolTake{at(1100 * milli), later(100*milli, ReasonBackoff)}, live: 1, busy: 1},
	})
}

func TestRampCurve(t *testing.T) {
	span := time.Duration(math.Ceil(float64(100*milli) * math.Log2(100)))
	tests := []struct {
		name  string
		ramp  Ramp
		d     time.Duration
		rate  float64
		span  time.Duration
		allow float64
	}{
		{"defaults at 0", Ramp{}, 0, 10, span, 0},
		{"defaults before", Ramp{}, -time.Second, 10, span, 0},
		{"defaults after a doubling", Ramp{}, 100 * milli, 20, span, 1 / math.Ln2},
		{"defaults at the end", Ramp{}, span, 1000, span, 0},
		{"defaults long after", Ramp{}, time.Hour, 1000, span, 0},
		{"NaN is the defaults", Ramp{Start: math.NaN(), Full: math.NaN(), Double: -1}, 100 * milli, 20, span, 1 / math.Ln2},
		{"doubling", doubling, 2 * time.Second, 4 * math.Ln2, 3 * time.Second, 3},
		{"doubling past its end", doubling, 4 * time.Second, 8 * math.Ln2, 3 * time.Second, 7 + 8*math.Ln2},
		{"full below start", Ramp{Start: 100, Full: 50}, time.Second, 50, 0, 50},
		{"infinite start", Ramp{Start: math.Inf(1)}, time.Second, 1000, 0, 1000},
		{"infinite full: 64 doublings", Ramp{Full: math.Inf(1)}, time.Second, 10 * 1024, 64 * 100 * milli, 0},
	}
	for _, tt := range tests {
		if got := tt.ramp.Rate(tt.d); math.Abs(got-tt.rate) > 1e-9*tt.rate {
			t.Errorf("%s: Rate(%v) = %v, want %v", tt.name, tt.d, got, tt.rate)
		}
		if got := tt.ramp.Span(); got != tt.span {
			t.Errorf("%s: Span() = %v, want %v", tt.name, got, tt.span)
		}
		if tt.allow == 0 {
			continue
		}
		if got := tt.ramp.Allows(tt.d); math.Abs(got-tt.allow) > 1e-9*tt.allow {
			t.Errorf("%s: Allows(%v) = %v, want %v", tt.name, tt.d, got, tt.allow)
		}
	}
	if got := (Ramp{Double: time.Duration(math.MaxInt64)}).Span(); got != time.Duration(math.MaxInt64) {
		t.Errorf("a ramp of centuries: Span() = %v, want it saturated", got)
	}
}

// TestFleetRampFollowsCurve: a replica asked for a make at every
// millisecond never makes more than its share of the curve allows, plus
// the one at once, and never falls a make behind it.
func TestFleetRampFollowsCurve(t *testing.T) {
	for _, share := range []int{1, 3, 50} {
		p := NewPool[int](Limits{}, Ward{})
		r := Ramp{}
		since := after0(0)
		p.SetFleet(FleetView{State: FleetRamp, Since: since, Share: share, Ramp: r}, since)
		made := 0
		for d := time.Duration(0); d < r.Span(); d += milli {
			got := p.Take(since + int64(d))
			switch {
			case got == mk:
				made++
			case got.Verdict != Later || got.Why != ReasonRamp || got.After <= 0:
				t.Fatalf("share %d at %v: %+v, want Make or Later by the ramp", share, d, got)
			}
			curve := r.Allows(d) / float64(share)
			if float64(made) > 1+curve+1e-9 || float64(made) < curve-1 {
				t.Fatalf("share %d at %v: %d made, the curve allows %.3f and one at once", share, d, made, curve)
			}
		}
	}
}

// FuzzFleet drives a pool with any sequence of calls and fleet views, and
// checks the promises the fleet's view makes: no make while held but the
// one probe each grant lets go, the ramp within its curve, every Later
// with an After above zero, and FleetOpen and FleetAlone answering exactly
// as a pool with no fleet.
func FuzzFleet(f *testing.F) {
	f.Add(byte(0), []byte{0, 0, 1, 0, 0, 0, 2, 0, 8, 1, 0, 0, 3, 0})
	f.Add(byte(1), []byte{8, 0x13, 0, 0, 0, 0, 5, 0, 0, 0, 8, 0x11, 0, 0, 4, 0, 0, 0})
	f.Add(byte(3), []byte{8, 0x22, 0, 0, 0, 0, 9, 50, 0, 0, 9, 20, 0, 0, 2, 0})
	f.Add(byte(7), []byte{0, 0, 3, 0, 8, 0x12, 0, 0, 1, 0, 0, 0, 6, 0, 8, 0x02, 0, 0})
	f.Fuzz(func(t *testing.T, knobs byte, ops []byte) {
		// Bit 0: the views may hold and ramp; else only open and alone,
		// and the pool must answer as its twin with no fleet does.
		fleetOn := knobs&1 != 0
		ward := Ward{}
		if knobs&2 != 0 {
			ward.Backoff = rigid
		}
		if knobs&4 != 0 {
			ward.Bucket = Rate{PerSecond: 20, Burst: 2}
		}
		if knobs&8 != 0 {
			ward.Breaker = Throttle{K: 2, Floor: 1}
		}
		limits := Limits{Size: int(knobs>>4) % 6}
		p, twin := NewPool[int](limits, ward), NewPool[int](limits, ward)

		now := t0
		next := 1      // the next resource's name
		var lent []int // what the pool has lent, to give back
		// The model of the fleet's probe: whether a grant is there, and
		// whether the probe is out.
		grant, probing := false, false
		var view FleetView
		rampMade := 0 // makes since the ramp began

		// take asks both pools for a resource (fill: in the background)
		// and checks what the fleet's view allows.
		take := func(fill bool) Taken[int] {
			reserved := p.Reserved()
			var got, want Taken[int]
			if fill {
				got, want = p.Fill(now, 0), twin.Fill(now, 0)
			} else {
				got, want = p.Take(now), twin.Take(now)
			}
			if !fleetOn && got != want {
				t.Fatalf("view %v: %+v, a pool with no fleet answers %+v", view.State, got, want)
			}
			if got.Verdict == Later && got.After <= 0 {
				t.Fatalf("Later with After %v", got.After)
			}
			if got.Verdict == Ready {
				lent = append(lent, got.Item)
			}
			if got.Verdict != Make {
				return got
			}
			switch state := view.StateAt(now); {
			case state == FleetHeld && (!grant || reserved > 0):
				t.Fatalf("a make while held: grant %v, %d in flight", grant, reserved)
			case state == FleetHeld:
				grant, probing = false, true
			case state == FleetRamp:
				rampMade++
				u := elapsed(now, view.Since)
				if curve := view.Ramp.Allows(u) / view.share(); float64(rampMade) > 1+curve+1e-9 {
					t.Fatalf("%d made %v into the ramp, the curve allows %.3f", rampMade, u, curve)
				}
			}
			return got
		}
		for len(ops) >= 2 {
			op, arg := ops[0], ops[1]
			ops = ops[2:]
			now += int64(arg&0x0f) * int64(10*milli)
			switch op % 10 {
			case 0: // a make that works
				if take(false).Verdict == Make {
					lent = append(lent, next)
					p.Made(next, now)
					twin.Made(next, now)
					next++
					probing = false
				}
			case 1: // a make in the background that works
				if take(true).Verdict == Make {
					p.Give(next, now)
					twin.Give(next, now)
					next++
					probing = false
				}
			case 2: // a make that fails
				if take(false).Verdict == Make {
					p.Unmade(now)
					twin.Unmade(now)
					probing = false
				}
			case 3: // a make given up before it was tried
				if take(false).Verdict == Make {
					p.Release()
					twin.Release()
					if probing {
						probing, grant = false, true
					}
				}
			case 4, 5: // give back, or drop, the oldest lent
				if len(lent) > 0 {
					item := lent[0]
					lent = lent[1:]
					if op%10 == 4 {
						p.Give(item, now)
						twin.Give(item, now)
					} else {
						p.Drop(item)
						twin.Drop(item)
					}
				}
			case 6: // time passes
				now += int64(arg) * int64(milli)
			default: // a new view
				v := FleetView{Since: now - int64(arg>>4)*int64(50*milli), Share: int(arg>>4) % 4}
				v.Ramp = Ramp{Start: float64(arg & 7), Double: time.Duration(arg&3) * 50 * milli}
				if fleetOn {
					v.State = FleetState(arg % 5)
					v.Probe = arg&8 != 0
				} else {
					v.State = []FleetState{FleetOpen, FleetAlone, 9}[arg%3]
				}
				was := view
				p.SetFleet(v, now)
				view = p.Fleet()
				grant = view.State == FleetHeld && view.Probe
				if view.State != FleetHeld {
					probing = false
				}
				if view.State == FleetRamp && (was.State != FleetRamp || was.Since != view.Since) {
					rampMade = 0
				}
			}
			if p.FleetProbe() != probing {
				t.Fatalf("FleetProbe() = %v, want %v", p.FleetProbe(), probing)
			}
			if probing && p.Reserved() != 1 {
				t.Fatalf("the fleet's probe is out with %d in flight", p.Reserved())
			}
			if r := view.Ramp.Rate(elapsed(now, view.Since)); math.IsNaN(r) || r <= 0 {
				t.Fatalf("the ramp's rate is %v", r)
			}
		}
	})
}
