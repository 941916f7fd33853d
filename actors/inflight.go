package actors

import (
	"errors"

	"github.com/moonpool-go/moonpool/engine"
)

// inFlight is how every actor here keeps its promise of exactly one answer
// per request: Handle holds the request while it runs, and the request
// leaves when the actor answers or parks it (answered). If it is still held
// when Handle returns — the actor does not serve that kind, or its
// handling panicked — unanswered refuses it as if the actor had stopped, then
// lets a panic go on to the engine's supervision, which resumes the actor
// with its state. A request answered or parked before a panic is not
// touched again: its caller has its answer, or will get it from the line.
type inFlight struct {
	current engine.Refusable
	fault   *fault // a panic a test armed; nil in use
}

// hold takes msg in hand if it wants an answer. Handle defers unanswered
// first, so that even a panic here is answered.
func (f *inFlight) hold(msg any) {
	r, ok := msg.(engine.Refusable)
	if !ok {
		if t, ok := msg.(*fault); ok {
			f.fault = t
			close(t.armed)
		}
		return
	}
	f.holding(r)
}

// holding is hold for a request its actor knows wants an answer.
func (f *inFlight) holding(r engine.Refusable) {
	f.current = r
	if f.fault != nil && !f.fault.after {
		f.trip()
	}
}

// answered notes that the request in hand has its answer, or is parked.
func (f *inFlight) answered() {
	f.current = nil
	if f.fault != nil && f.fault.after {
		f.trip()
	}
}

// unanswered runs as Handle returns: a request still in hand is refused.
// A panic is not recovered here: it goes on past this deferred call to the
// engine's supervision.
func (f *inFlight) unanswered() {
	if f.current != nil {
		req := f.current
		f.current = nil
		req.Refuse()
	}
}

// fault is a test hook: sent to an actor, it arms one panic, thrown as the
// next request that wants an answer is taken in hand, or with after once
// it has been answered. armed is closed when the actor has it.
type fault struct {
	after bool
	armed chan struct{}
}

// errFault is what an armed fault panics with.
var errFault = errors.New("moonpool: injected fault")

func (f *inFlight) trip() {
	f.fault = nil
	panic(errFault)
}
