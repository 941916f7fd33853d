package actors

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

// fleetRig is a rig whose pool reports to a fleet the test plays.
type fleetRig struct {
	*rig
	reports chan FleetReport
}

func newFleetRig(t *testing.T, cfg PoolConfig, opts ...moontest.Option) *fleetRig {
	t.Helper()
	reports := make(chan FleetReport, 64)
	cfg.Fleet = func(r FleetReport) {
		select {
		case reports <- r:
		default:
			t.Error("more than 64 reports unread")
		}
	}
	return &fleetRig{rig: newRig(t, cfg, opts...), reports: reports}
}

// view hands the pool a fleet's view now.
func (r *fleetRig) view(v policy.FleetView) { r.ref.Send(&Fleet{Now: r.now(), View: v}) }

// report is the next report, which a barrier says has been sent.
func (r *fleetRig) report(step string) FleetReport {
	r.t.Helper()
	r.stats() // a barrier: what the actor was sent before has been handled
	select {
	case rep := <-r.reports:
		return rep
	default:
		r.t.Fatalf("%s: no report", step)
		return FleetReport{}
	}
}

// quiet fails if the pool has reported anything not read yet.
func (r *fleetRig) quiet(step string) {
	r.t.Helper()
	r.stats()
	select {
	case rep := <-r.reports:
		r.t.Fatalf("%s: reported %+v, want nothing", step, rep)
	default:
	}
}

// parkTake sends a waiting Take and does not wait for its answer.
func (r *fleetRig) parkTake() *Take[int64] {
	m := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	return m
}

// served is the answer m has had, after a barrier; ok is false when it is
// still parked.
func (r *fleetRig) served(m *Take[int64]) (a Answer[int64], ok bool) {
	r.stats()
	select {
	case a = <-m.Reply:
		return a, true
	default:
		return a, false
	}
}

// made registers a resource for a Make, and returns it.
func (r *fleetRig) made() int64 {
	item := r.next.Add(1)
	m := &Made[int64]{Now: r.now(), Item: item, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	if a := <-m.Reply; !a.Kept {
		r.t.Fatalf("made %d: not kept: %+v", item, a)
	}
	return item
}

var fleetHeld = policy.FleetView{State: policy.FleetHeld, ProbeEvery: 100 * time.Millisecond}

// TestPoolFleetHeld: a held fleet's pool makes nothing; each lease lets
// one parked caller make the probe; the probe's outcome is reported at
// once; and the recovery serves the parked callers.
func TestPoolFleetHeld(t *testing.T) {
	r := newFleetRig(t, PoolConfig{Limits: policy.Limits{Size: 4}, Ward: policy.Ward{Backoff: policy.DefaultBackoff}})
	r.view(fleetHeld)
	if a := r.take(false); a.Verdict != policy.Later || a.Why != policy.ReasonFleet || a.After != 100*time.Millisecond {
		t.Fatalf("take while held: %+v, want Later 100ms by the fleet", a)
	}
	first, second := r.parkTake(), r.parkTake()
	if _, ok := r.served(first); ok {
		t.Fatal("a caller was served while the fleet holds")
	}
	if s := r.stats(); s.Fleet != policy.FleetHeld || s.Waiting != 2 || s.HeldBy[policy.ReasonFleet] < 2 {
		t.Fatalf("stats while held: fleet %v, waiting %d, held by the fleet %d", s.Fleet, s.Waiting, s.HeldBy[policy.ReasonFleet])
	}

	probe := fleetHeld
	probe.Probe = true
	r.view(probe)
	if a, ok := r.served(first); !ok || a.Verdict != policy.Make {
		t.Fatalf("the first caller under the lease: %+v (answered %v), want Make", a, ok)
	}
	if _, ok := r.served(second); ok {
		t.Fatal("the second caller was served while the probe is out")
	}
	r.ref.Send(&Unmade{Now: r.now()})
	if rep := r.report("failed probe"); !rep.Probed || rep.ProbeOK || rep.Failures != 1 || rep.Now != r.now() {
		t.Fatalf("failed probe reported %+v, want Probed, not OK, 1 failure, now", rep)
	}
	if _, ok := r.served(second); ok {
		t.Fatal("the second caller was served on the same lease")
	}

	r.clock.Advance(100 * time.Millisecond)
	r.view(probe)
	if a, ok := r.served(second); !ok || a.Verdict != policy.Make {
		t.Fatalf("the second caller under the next lease: %+v (answered %v), want Make", a, ok)
	}
	item := r.made()
	if rep := r.report("probe that worked"); !rep.Probed || !rep.ProbeOK || rep.Failures != 0 {
		t.Fatalf("probe that worked reported %+v, want Probed and OK", rep)
	}
	r.give(item)

	// The recovery: what was held is served.
	third := r.parkTake()
	if a, ok := r.served(third); !ok || a.Verdict != policy.Ready || a.Item != item {
		t.Fatalf("a caller with one idle: %+v (answered %v), want it lent", a, ok)
	}
	fourth := r.parkTake()
	if _, ok := r.served(fourth); ok {
		t.Fatal("a caller was served a make while held")
	}
	r.view(policy.FleetView{State: policy.FleetOpen})
	if a, ok := r.served(fourth); !ok || a.Verdict != policy.Make {
		t.Fatalf("the parked caller when the fleet opens: %+v (answered %v), want Make", a, ok)
	}
	r.give(r.made())
	r.give(item)
	r.quiet("makes that worked")
	r.balance()
}

// TestPoolFleetHeldDeadline: a Take whose deadline comes before the
// fleet's next probe could end the hold is answered ErrHeld at once; one
// with longer to wait parks.
func TestPoolFleetHeldDeadline(t *testing.T) {
	r := newFleetRig(t, PoolConfig{})
	r.view(fleetHeld)
	m := &Take[int64]{Now: r.now(), Wait: true, Deadline: r.now() + int64(50*time.Millisecond), Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	if a := <-m.Reply; !errors.Is(a.Err, ErrHeld) || a.Why != policy.ReasonFleet || a.After != 100*time.Millisecond {
		t.Fatalf("a Take with 50ms to wait: %+v, want ErrHeld by the fleet after 100ms", a)
	}
	long := &Take[int64]{Now: r.now(), Wait: true, Deadline: r.now() + int64(time.Second), Reply: make(chan Answer[int64], 1)}
	r.ref.Send(long)
	if _, ok := r.served(long); ok {
		t.Fatal("a Take with a second to wait was answered")
	}
	r.view(policy.FleetView{State: policy.FleetAlone})
	if a, ok := r.served(long); !ok || a.Verdict != policy.Make {
		t.Fatalf("the parked Take once the fleet is gone: %+v (answered %v), want Make", a, ok)
	}
	r.give(r.made())
	if s := r.stats(); s.Fleet != policy.FleetAlone {
		t.Fatalf("stats say the fleet is %v, want alone", s.Fleet)
	}
}

// TestPoolFleetProbeGivenUp: a probe whose caller gave up before opening
// reports nothing, and the next caller makes the probe in its place.
func TestPoolFleetProbeGivenUp(t *testing.T) {
	r := newFleetRig(t, PoolConfig{})
	probe := fleetHeld
	probe.Probe = true
	r.view(probe)
	if a := r.take(false); a.Verdict != policy.Make {
		t.Fatalf("the probe: %+v, want Make", a)
	}
	r.ref.Send(&Release{Now: r.now()})
	r.quiet("a probe given up")
	if a := r.take(false); a.Verdict != policy.Make {
		t.Fatalf("the next caller: %+v, want Make as the probe", a)
	}
	r.give(r.made())
	if rep := r.report("the probe that worked"); !rep.Probed || !rep.ProbeOK {
		t.Fatalf("reported %+v, want the probe worked", rep)
	}
}

// TestPoolFleetBatch: failed makes are reported at most once a batch, the
// first at once; a failure after a quiet batch is reported at once again;
// a pool with nothing to report asks for no timer.
func TestPoolFleetBatch(t *testing.T) {
	for _, late := range lateClocks {
		t.Run(late.name, func(t *testing.T) {
			r := newFleetRig(t, PoolConfig{FleetBatch: 10 * time.Millisecond}, late.opts...)
			fail := func() {
				t.Helper()
				if a := r.take(false); a.Verdict != policy.Make {
					t.Fatalf("take: %+v, want Make", a)
				}
				r.ref.Send(&Unmade{Now: r.now()})
			}
			start := r.now()
			fail()
			if rep := r.report("the first failure"); rep.Failures != 1 || rep.Probed || rep.Now != start {
				t.Fatalf("the first failure reported %+v, want 1 failure at once", rep)
			}
			for range 3 {
				r.clock.Advance(2 * time.Millisecond)
				fail()
			}
			r.quiet("three more within the batch")
			if n := r.clock.Pending(); n != 1 {
				t.Fatalf("%d timers pending with failures held back, want 1", n)
			}
			if _, ok := r.clock.AdvanceNext(); !ok {
				t.Fatal("no timer to fire")
			}
			rep := r.report("the batch's end")
			if rep.Failures != 3 || rep.Now != r.now() {
				t.Fatalf("the batch reported %+v, want 3 failures at %d", rep, r.now())
			}
			if d := time.Duration(rep.Now - start); d < 10*time.Millisecond || d > 10*time.Millisecond+late.most {
				t.Fatalf("the batch went %v after the first report, want 10ms and at most %v late", d, late.most)
			}
			if n := r.clock.Pending(); n != 0 {
				t.Fatalf("%d timers pending with nothing to report, want none", n)
			}
			r.clock.Advance(time.Second)
			fail()
			if rep := r.report("a failure after a quiet second"); rep.Failures != 1 || rep.Now != r.now() {
				t.Fatalf("a failure after a quiet second reported %+v, want 1 at once", rep)
			}
			if s := r.stats(); s.MakeFailures != 5 || s.FleetReports != 3 {
				t.Fatalf("%d make failures, %d reports; want 5, 3", s.MakeFailures, s.FleetReports)
			}
		})
	}
}

// TestPoolFleetHealthy: a pool whose makes work tells its fleet nothing and
// asks for no timer on its behalf.
func TestPoolFleetHealthy(t *testing.T) {
	r := newFleetRig(t, PoolConfig{Limits: policy.Limits{Size: 8}, Ward: policy.Ward{Backoff: policy.DefaultBackoff}})
	for range 100 {
		if a := r.take(false); a.Verdict == policy.Make {
			r.give(r.made())
		} else {
			r.give(a.Item)
		}
	}
	r.quiet("healthy traffic")
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending, want none", n)
	}
	if s := r.stats(); s.FleetReports != 0 || s.Fleet != policy.FleetOpen {
		t.Fatalf("reports %d, fleet %v; want 0, open", s.FleetReports, s.Fleet)
	}
}

// TestPoolFleetReportPanics: a fleet whose report panics loses that report;
// the pool goes on, and the caller in line is served after the failure.
func TestPoolFleetReportPanics(t *testing.T) {
	r := &fleetRig{rig: newRig(t, PoolConfig{Limits: policy.Limits{Size: 1}, Fleet: func(FleetReport) { panic("the fleet broke") }})}
	if a := r.take(false); a.Verdict != policy.Make {
		t.Fatalf("take: %+v", a)
	}
	next := r.parkTake()
	r.ref.Send(&Unmade{Now: r.now()})
	if a, ok := r.served(next); !ok || a.Verdict != policy.Make {
		t.Fatalf("the caller in line after the failure: %+v (answered %v), want Make", a, ok)
	}
	if s := r.stats(); s.MakeFailures != 1 || s.FleetReports != 1 {
		t.Fatalf("make failures %d, reports %d; want 1, 1", s.MakeFailures, s.FleetReports)
	}
	r.ref.Send(&Release{Now: r.now()})
}

// TestPoolFleetRamp: callers parked through a hold are served as the
// fleet recovers, one at once and the rest along this replica's share of
// the ramp's curve, with the actor's timers on time or late. Once the ramp
// is over, the local ward alone decides, and it serves them all.
func TestPoolFleetRamp(t *testing.T) {
	const callers = 40
	ramp := policy.Ramp{Start: 20, Double: 50 * time.Millisecond, Full: 400}
	for _, late := range lateClocks {
		t.Run(late.name, func(t *testing.T) {
			r := newFleetRig(t, PoolConfig{Ward: policy.Ward{Backoff: policy.DefaultBackoff}}, late.opts...)
			r.view(fleetHeld)
			parked := make([]*Take[int64], callers)
			for i := range parked {
				parked[i] = r.parkTake()
			}
			since := r.now()
			r.view(policy.FleetView{State: policy.FleetRamp, Since: since, Share: 2, Ramp: ramp})
			made := 0
			collect := func() {
				for i, m := range parked {
					if m == nil {
						continue
					}
					if a, ok := r.served(m); ok {
						if a.Verdict != policy.Make {
							t.Fatalf("a parked caller got %+v, want Make", a)
						}
						made++
						parked[i] = nil
					}
				}
			}
			collect()
			if made != 1 {
				t.Fatalf("%d served at the recovery, want 1", made)
			}
			end := since + int64(ramp.Span())
			for r.now() < end+int64(late.most) && made < callers {
				if _, ok := r.clock.AdvanceNext(); !ok {
					t.Fatalf("no timer pending at +%v with %d callers parked", time.Duration(r.now()-since), callers-made)
				}
				collect()
				if r.now() >= end {
					break // the ramp is over: the view acts as FleetOpen
				}
				d := time.Duration(r.now() - since)
				curve := ramp.Allows(d) / 2
				if float64(made) > 1+curve+1e-9 {
					t.Fatalf("%d made at +%v, the curve allows %.3f and one at once", made, d, curve)
				}
				if late.most == 0 && float64(made) < math.Floor(curve) {
					t.Fatalf("%d made at +%v, the curve allows %.3f: behind it", made, d, curve)
				}
			}
			if made != callers {
				t.Fatalf("%d of %d served by the ramp's end +%v", made, callers, time.Duration(r.now()-since))
			}
			if s := r.stats(); s.Fleet != policy.FleetOpen || s.HeldBy[policy.ReasonRamp] == 0 {
				t.Fatalf("after the ramp: fleet %v, held by the ramp %d; want open, some", s.Fleet, s.HeldBy[policy.ReasonRamp])
			}
			for range callers {
				r.ref.Send(&Release{Now: r.now()})
			}
		})
	}
}

// TestPoolFleetFill: a pool that keeps MinIdle makes the fleet's probe
// itself when no caller asks, and reports it.
func TestPoolFleetFill(t *testing.T) {
	fills := make(chan struct{}, 1)
	r := newFleetRig(t, PoolConfig{Limits: policy.Limits{MinIdle: 1}, Fills: fills})
	probe := fleetHeld
	probe.Probe = true
	r.view(fleetHeld)
	ask := func() Answer[int64] {
		m := &Fill[int64]{Now: r.now(), Reply: make(chan Answer[int64], 1)}
		r.ref.Send(m)
		return <-m.Reply
	}
	if a := ask(); a.Verdict != policy.Later || a.Why != policy.ReasonFleet {
		t.Fatalf("fill while held: %+v, want Later by the fleet", a)
	}
	r.view(probe)
	select {
	case <-fills:
	default:
		r.stats()
		select {
		case <-fills:
		default:
			t.Fatal("the lease did not signal a fill")
		}
	}
	a := ask()
	if a.Verdict != policy.Make {
		t.Fatalf("fill under the lease: %+v, want Make", a)
	}
	m := &Filled[int64]{Now: r.now(), Item: r.next.Add(1), Gen: a.Gen, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	if a := <-m.Reply; !a.Kept {
		t.Fatalf("filled: %+v", a)
	}
	if rep := r.report("a fill's probe"); !rep.Probed || !rep.ProbeOK {
		t.Fatalf("reported %+v, want the probe worked", rep)
	}
}

// TestPoolFleetSeq: of two views that raced, the one numbered later
// stands, whichever arrives last.
func TestPoolFleetSeq(t *testing.T) {
	r := newFleetRig(t, PoolConfig{})
	r.ref.Send(&Fleet{Seq: 2, View: fleetHeld})
	r.ref.Send(&Fleet{Seq: 1, View: policy.FleetView{State: policy.FleetOpen}})
	if a := r.take(false); a.Verdict != policy.Later || a.Why != policy.ReasonFleet {
		t.Fatalf("after an older view arrived last: %+v, want Later by the fleet", a)
	}
	r.ref.Send(&Fleet{Seq: 3, View: policy.FleetView{State: policy.FleetOpen}})
	if a := r.take(false); a.Verdict != policy.Make {
		t.Fatalf("after a newer view: %+v, want Make", a)
	}
	r.ref.Send(&Release{Now: r.now()})
}
