package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
)

// Gate caps how many things happen at once: the concurrency limit a server
// puts on itself. Enter answers at once and never queues — past its limit
// a server should say "busy" rather than line callers up, since a queue is
// how an overload becomes an outage. Leave gives the room back.
//
// The count lives in one actor on the engine (see actors.SpawnGate); a Gate
// is safe for concurrent use. Build one with NewGate; the zero Gate is not
// usable.
type Gate struct {
	ref    *engine.Ref
	room   *actors.Room // room the actor lent ahead of time; nil for a small limit
	closed atomic.Bool
	// reqs holds Enter requests with their reply channels (room for one)
	// for reuse, so Enter allocates nothing; one goes back once its answer
	// is read. Each gate keeps its own, not the process: a gate made in a
	// testing/synctest bubble then only ever uses channels made there.
	reqs sync.Pool
}

// NewGate starts a gate on eng letting at most limit callers in at once.
// A limit <= 0 is no limit, as for policy.NewGate: the gate only counts. It
// returns an error if eng is nil or refuses the actor.
func NewGate(eng *Engine, limit int) (*Gate, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewGate: nil engine")
	}
	ref, room, err := actors.SpawnGateCredit(eng, "", limit)
	if err != nil {
		return nil, fmt.Errorf("moonpool: NewGate: %w", err)
	}
	return &Gate{ref: ref, room: room}, nil
}

// Enter is whether there is room, taking it if so. It never blocks on
// other callers: a full gate says no at once. Each true must be matched by
// one Leave. After Close it says no.
//
// The gate's actor lends room ahead of time (a sixteenth of the limit, at
// most 64, for a limit of sixteen or more), so most Enters and Leaves cost
// one atomic operation; the limit is never exceeded, and a refusal is
// decided by the actor after it has taken the lent room back, so it is
// exact.
func (g *Gate) Enter() bool {
	if g.closed.Load() {
		return false
	}
	if g.room.Enter() {
		return true
	}
	req := g.request()
	g.ref.Send(req)
	p := <-req.Reply
	g.reqs.Put(req)
	return p.OK
}

// request is an Enter from g.reqs, or a new one.
func (g *Gate) request() *actors.Enter {
	req, _ := g.reqs.Get().(*actors.Enter)
	if req == nil {
		req = &actors.Enter{Reply: make(chan actors.Permit, 1)}
	}
	return req
}

// Leave gives back the room an Enter took. A Leave with nobody inside
// changes nothing — an unmatched Leave must not let an extra caller in
// later — and so does a Leave after Close.
func (g *Gate) Leave() {
	if g.closed.Load() || g.room.Leave() {
		return
	}
	g.ref.Send(actors.Leave{})
}

// Held is how many are inside now; 0 after Close.
func (g *Gate) Held() int {
	if g.closed.Load() {
		return 0
	}
	req := g.request() // for its reply channel
	g.ref.Send(&actors.Left{Reply: req.Reply})
	p := <-req.Reply
	g.reqs.Put(req)
	if p.Err != nil {
		return 0
	}
	return p.Held
}

// Close stops the gate's actor, waiting within ctx; afterwards Enter says
// no. A second Close does nothing and returns nil, as does a Close after
// the engine shut down.
func (g *Gate) Close(ctx context.Context) error {
	return stopActor(ctx, g.ref, &g.closed)
}
