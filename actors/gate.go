package actors

import (
	"math"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// SpawnGate starts a gate actor on e under name (a fresh name when empty):
// a count with a ceiling, letting at most limit callers in at once, as
// policy.NewGate reads it (limit <= 0 is no limit).
//
// Enter is answered at once and never queued — a server past its limit
// answers rather than waits, which is the point of a gate: OK, or not OK
// with After 0, since a gate cannot know when someone will leave; either way
// with Held, how many are inside now (itself included if OK), and Left, the
// room left (+Inf with no limit). Leave gives room back; a Leave with nobody
// inside changes nothing, so an unmatched Leave never lets an extra caller
// in later. Left is answered with Held and Left as of now.
func SpawnGate(e *engine.Engine, name string, limit int) (*engine.Ref, error) {
	if e == nil {
		return nil, errNoEngine
	}
	return e.Spawn(name, &gateActor{gate: *policy.NewGate(limit), limit: limit}, nil)
}

// gateActor owns one policy.Gate.
type gateActor struct {
	gate  policy.Gate
	limit int
	inFlight
}

func (g *gateActor) Receive(c actor.Context) { g.Handle(c.Message()) }

// Handle runs one message; the engine calls it straight for user messages
// (see engine.Handler), and Receive for the rest. A request it does not
// serve, or whose handling panics, is refused (see inFlight).
func (g *gateActor) Handle(msg any) {
	defer g.unanswered()
	g.hold(msg)
	g.handle(msg)
}

func (g *gateActor) handle(msg any) {
	switch m := msg.(type) {
	case *Enter:
		ok := g.gate.Enter()
		reply(m.Reply, Permit{OK: ok, Left: g.room(), Held: g.gate.Held()})
		g.answered()
	case *Leave:
		g.gate.Leave()
	case Leave:
		g.gate.Leave()
	case *Left:
		reply(m.Reply, Permit{Left: g.room(), Held: g.gate.Held()})
		g.answered()
	}
}

// room is how many more could enter now: +Inf with no limit.
func (g *gateActor) room() float64 {
	if g.limit <= 0 {
		return math.Inf(1)
	}
	return float64(max(g.limit-g.gate.Held(), 0))
}
