package client

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeFleet is a Fleet the test plays: it sets views by hand and keeps
// what the pool reports.
type fakeFleet struct {
	mu      sync.Mutex
	set     func(FleetView)
	first   *FleetView // set inside Join, before the pool's actor runs
	reports chan FleetReport
	joins   atomic.Int32
	leaves  atomic.Int32
}

func newFakeFleet(first *FleetView) *fakeFleet {
	return &fakeFleet{first: first, reports: make(chan FleetReport, 64)}
}

func (f *fakeFleet) Join(set func(FleetView)) (func(FleetReport), func()) {
	f.joins.Add(1)
	f.mu.Lock()
	f.set = set
	f.mu.Unlock()
	if f.first != nil {
		set(*f.first)
	}
	report := func(r FleetReport) {
		select {
		case f.reports <- r:
		default:
		}
	}
	return report, func() { f.leaves.Add(1) }
}

// view hands the pool a view, as the fleet does when its view changes.
func (f *fakeFleet) view(v FleetView) {
	f.mu.Lock()
	set := f.set
	f.mu.Unlock()
	set(v)
}

// report is the next report, waited for within the rig's safety net.
func (f *fakeFleet) report(r *rig, step string) FleetReport {
	r.t.Helper()
	select {
	case rep := <-f.reports:
		return rep
	case <-r.ctx.Done():
		r.t.Fatalf("%s: no report", step)
		return FleetReport{}
	}
}

// quiet fails if the pool has reported anything.
func (f *fakeFleet) quiet(r *rig, step string) {
	r.t.Helper()
	r.pool.Stats() // a barrier: the actor has handled what came before
	select {
	case rep := <-f.reports:
		r.t.Fatalf("%s: reported %+v, want nothing", step, rep)
	default:
	}
}

// until waits, within the rig's safety net, for cond to hold.
func (r *rig) until(what string, cond func() bool) {
	r.t.Helper()
	for !cond() {
		if r.ctx.Err() != nil {
			r.t.Fatalf("gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}

var heldView = FleetView{State: FleetHeld, ProbeEvery: 100 * time.Millisecond}

// TestPoolFleetHoldsOpens: a pool whose fleet is held opens nothing; a Get
// whose deadline comes before the fleet's next probe returns at once with a
// WaitError naming the fleet's hold; a view set inside Join applies from
// the pool's first Get.
func TestPoolFleetHoldsOpens(t *testing.T) {
	f := newFakeFleet(&heldView)
	r := newRig(t, PoolConfig[*conn]{Limits: Limits{Size: 2}, Ward: Ward{Backoff: DefaultBackoff}, Fleet: f})
	ctx, cancel := context.WithTimeout(r.ctx, 50*time.Millisecond)
	defer cancel()
	_, err := r.pool.Get(ctx)
	var we *WaitError
	if !errors.As(err, &we) || we.By != "the fleet's hold" || we.Wait != 100*time.Millisecond {
		t.Fatalf("Get with 50ms to wait: %v, want a WaitError of 100ms for the fleet's hold", err)
	}
	if n := len(r.be.tries()); n != 0 {
		t.Fatalf("%d Opens while the fleet holds, want none", n)
	}
	if _, err := r.pool.TryGet(r.ctx); !errors.Is(err, ErrNoneIdle) {
		t.Fatalf("TryGet while held: %v, want ErrNoneIdle", err)
	}
	s := r.pool.Stats()
	if s.Fleet != FleetHeld || s.HeldPastDeadline != 1 || s.HeldFleet != 2 {
		t.Fatalf("stats: fleet %v, held past deadline %d, held by the fleet %d; want held, 1, 2", s.Fleet, s.HeldPastDeadline, s.HeldFleet)
	}
	if f.joins.Load() != 1 {
		t.Fatalf("joined %d times, want once", f.joins.Load())
	}
}

// TestPoolFleetProbe: a Get in line while the fleet holds makes the probe
// when the fleet hands this pool the lease, and the pool reports how the
// probe went at once; a failed Open is reported too, within a batch of the
// report before, and Opens that work are not reported.
func TestPoolFleetProbe(t *testing.T) {
	f := newFakeFleet(&heldView)
	r := newRig(t, PoolConfig[*conn]{Limits: Limits{Size: 2}, Fleet: f})
	got := make(chan *conn, 1)
	go func() {
		c, err := r.pool.Get(r.ctx)
		if err != nil {
			t.Errorf("the Get in line: %v", err)
		}
		got <- c
	}()
	r.until("the Get to wait in line", func() bool { return r.pool.Stats().Waiting == 1 })
	probe := heldView
	probe.Probe = true
	f.view(probe)
	c := <-got
	if rep := f.report(r, "the probe"); !rep.Probed || !rep.ProbeOK || rep.Failures != 0 {
		t.Fatalf("the probe reported %+v, want Probed and OK", rep)
	}
	r.put(c)

	f.view(FleetView{State: FleetOpen})
	r.be.up.Store(r.clock.Now() + int64(time.Hour))
	c1 := r.get() // the idle one
	if _, err := r.pool.Get(r.ctx); !errors.As(err, new(*OpenError)) {
		t.Fatalf("Get against a dead backend: %v, want an OpenError", err)
	}
	f.quiet(r, "a failure in the probe report's batch")
	r.clock.Advance(10 * time.Millisecond)
	if rep := f.report(r, "the failed Open"); rep.Failures != 1 || rep.Probed {
		t.Fatalf("the failed Open reported %+v, want 1 failure", rep)
	}
	r.be.up.Store(0)
	r.put(c1)
	for range 20 {
		r.put(r.get())
	}
	c2, c3 := r.get(), r.get() // one idle, one opened
	r.put(c2)
	r.put(c3)
	f.quiet(r, "Gets and Opens that work")
	if s := r.pool.Stats(); s.Fleet != FleetOpen {
		t.Fatalf("stats say the fleet is %v, want open", s.Fleet)
	}
}

// TestPoolFleetRamp: Gets in line through a hold are served as the fleet
// recovers: one at once, the rest along the ramp.
func TestPoolFleetRamp(t *testing.T) {
	const callers = 4
	f := newFakeFleet(&heldView)
	r := newRig(t, PoolConfig[*conn]{Fleet: f})
	got := make(chan *conn, callers)
	for range callers {
		go func() {
			c, err := r.pool.Get(r.ctx)
			if err != nil {
				t.Errorf("a Get in line: %v", err)
			}
			got <- c
		}()
	}
	r.until("the Gets to wait in line", func() bool { return r.pool.Stats().Waiting == callers })
	ramp := Ramp{Start: 10, Double: 100 * time.Millisecond, Full: 1000}
	f.view(FleetView{State: FleetRamp, Since: r.clock.Now(), Share: 1, Ramp: ramp})
	first := <-got
	r.until("the rest to be held by the ramp", func() bool {
		s := r.pool.Stats()
		return s.Waiting == callers-1 && s.HeldRamp > 0
	})
	if n := r.be.made.Load(); n != 1 {
		t.Fatalf("%d opened at the recovery, want 1", n)
	}
	r.put(first)
	r.clock.Advance(ramp.Span())
	for range callers - 1 {
		r.put(<-got)
	}
	if s := r.pool.Stats(); s.Fleet != FleetOpen || s.Waiting != 0 {
		t.Fatalf("after the ramp: fleet %v, waiting %d; want open, 0", s.Fleet, s.Waiting)
	}
}

// TestPoolFleetRampWaitError: a Get whose deadline comes before the ramp
// has room for it, with nothing lent, returns at once a WaitError naming
// the ramp.
func TestPoolFleetRampWaitError(t *testing.T) {
	f := newFakeFleet(nil)
	r := newRig(t, PoolConfig[*conn]{Fleet: f})
	ramp := Ramp{Start: 10, Double: 100 * time.Millisecond, Full: 1000}
	f.view(FleetView{State: FleetRamp, Since: r.clock.Now(), Share: 1, Ramp: ramp})
	if err := r.pool.Discard(r.get()); err != nil {
		t.Fatal(err)
	}
	// The ramp's next room is 76ms on.
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Millisecond)
	defer cancel()
	var we *WaitError
	if _, err := r.pool.Get(ctx); !errors.As(err, &we) || we.By != "the fleet's ramp" || we.Wait < 70*time.Millisecond {
		t.Fatalf("Get with 10ms to wait: %v, want a WaitError of 76ms for the fleet's ramp", err)
	}
}

// TestPoolFleetLeaves: a pool leaves its fleet when it closes, and when
// NewPool fails after joining.
func TestPoolFleetLeaves(t *testing.T) {
	f := newFakeFleet(nil)
	r := newRig(t, PoolConfig[*conn]{Fleet: f, Name: "fleet"})
	if _, err := NewPool(r.eng, PoolConfig[*conn]{Open: r.be.open, Fleet: f, Name: "fleet"}); err == nil {
		t.Fatal("a second pool of the same name was made")
	}
	if j, l := f.joins.Load(), f.leaves.Load(); j != 2 || l != 1 {
		t.Fatalf("after a failed NewPool: %d joins, %d leaves; want 2, 1", j, l)
	}
	if err := r.pool.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	if l := f.leaves.Load(); l != 2 {
		t.Fatalf("after Close: %d leaves, want 2", l)
	}
	f.view(heldView) // a view set after leave reaches a closed pool: nothing happens
}

// reentrantFleet holds the fleet from inside the pool's report, as a fleet
// that decides at once might: the report runs in the pool's actor, maybe
// on a caller's goroutine.
type reentrantFleet struct{ set func(FleetView) }

func (f *reentrantFleet) Join(set func(FleetView)) (func(FleetReport), func()) {
	f.set = set
	return func(FleetReport) { f.set(heldView) }, func() {}
}

// TestPoolFleetSetFromReport: a fleet that sets a view from inside the
// pool's report neither deadlocks the pool nor loses the view.
func TestPoolFleetSetFromReport(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{Fleet: &reentrantFleet{}})
	r.be.up.Store(r.clock.Now() + int64(time.Hour))
	if _, err := r.pool.Get(r.ctx); !errors.As(err, new(*OpenError)) {
		t.Fatalf("Get against a dead backend: %v, want an OpenError", err)
	}
	r.until("the fleet's hold to reach the pool", func() bool { return r.pool.Stats().Fleet == FleetHeld })
	ctx, cancel := context.WithTimeout(r.ctx, 50*time.Millisecond)
	defer cancel()
	var we *WaitError
	if _, err := r.pool.Get(ctx); !errors.As(err, &we) || we.By != "the fleet's hold" {
		t.Fatalf("Get after the fleet held: %v, want a WaitError for the fleet's hold", err)
	}
}
