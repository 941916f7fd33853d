package client

import (
	"sync"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// Fleet shares a pool's ward with the same pool in other processes. Give
// one to PoolConfig.Fleet; moonredis.NewFleet builds one on Redis.
//
// The fleet shares what it knows of the backend. When makes fail in enough
// replicas at once, it holds every replica's makes. One replica at a time
// then makes the fleet's probe. When the probe works, every replica hears
// of it and ramps up along one fleet-wide curve. Each replica's own ward
// still decides everything else. A pool tells its fleet only of failed
// makes and probes, so a healthy pool sends it nothing.
type Fleet interface {
	// Join attaches a pool. set hands the pool a new view; the fleet may
	// call it from any goroutine, whenever the view changes, and must
	// call it in the order the views change. A view with Probe set lets
	// the pool make one probe, so the fleet sets it once for each lease
	// it takes. report is what the pool calls with its reports, from its
	// actor: it must not block, though it may call set. leave detaches
	// the pool as it closes; the fleet stops calling set then, though a
	// late call does no harm.
	Join(set func(FleetView)) (report func(FleetReport), leave func())
}

// The fleet's types, as policy and actors have them.
type (
	// FleetView is one replica's view of its fleet (policy.FleetView).
	// Its Since is on the engine's clock (Engine.Now).
	FleetView = policy.FleetView
	// FleetState is what the fleet says of the backend (policy.FleetState).
	FleetState = policy.FleetState
	// FleetReport is what a pool tells its fleet: failed makes and probe
	// outcomes (actors.FleetReport).
	FleetReport = actors.FleetReport
	// Ramp is the fleet's slow start after a recovery (policy.Ramp).
	Ramp = policy.Ramp
)

// The fleet's states (see policy.FleetState).
const (
	FleetOpen  = policy.FleetOpen
	FleetHeld  = policy.FleetHeld
	FleetRamp  = policy.FleetRamp
	FleetAlone = policy.FleetAlone
)

// The fleet's reasons for holding a make back (see policy.Reason).
const (
	ReasonFleet = policy.ReasonFleet
	ReasonRamp  = policy.ReasonRamp
)

// fleetLink carries a fleet's views to a pool's actor. A fleet may set a
// view inside Join, before the actor runs: the latest such view is sent
// when it does. Each view is numbered, so the actor applies the latest even
// when that first view and a new one race. No lock is held while a view is
// sent: a send may run the actor, which may call the fleet's report.
type fleetLink struct {
	mu   sync.Mutex
	ref  *engine.Ref // nil until the actor runs
	seq  uint64      // the number of the latest view set
	view FleetView   // the latest view set before the actor ran
}

// set is the func a pool hands its fleet's Join.
func (l *fleetLink) set(v FleetView) {
	l.mu.Lock()
	l.seq++
	seq, ref := l.seq, l.ref
	if ref == nil {
		l.view = v
	}
	l.mu.Unlock()
	if ref != nil {
		ref.Send(&actors.Fleet{Seq: seq, View: v})
	}
}

// attach starts sending views to ref, the latest one set so far first.
func (l *fleetLink) attach(ref *engine.Ref) {
	l.mu.Lock()
	l.ref = ref
	seq, v := l.seq, l.view
	l.mu.Unlock()
	if seq > 0 {
		ref.Send(&actors.Fleet{Seq: seq, View: v})
	}
}
