package engine

import (
	"github.com/asynkron/protoactor-go/actor"
)

// names is the engine's directory: one actor that owns the map from name to
// Ref, so spawning, looking up and stopping need no lock. It also owns the
// heat meter and the list of those who want its readings.
//
// A Spawn holds its name first and publishes its Ref only once the Ref is
// complete (its PID set): until then Lookup does not find it, and
// Shutdown's list waits for it, so nobody ever stops a half-made actor.
type names struct {
	ref *Ref
}

type (
	nameAdd struct {
		ref   *Ref
		reply chan error
	}
	nameGet struct {
		name  string
		reply chan *Ref
	}
	// nameDone ends the Spawn that holds ref's name: the Ref is published
	// if ok, the name freed if not.
	nameDone struct {
		ref *Ref
		ok  bool
	}
	nameRemove struct{ ref *Ref }
	nameAll    struct{ reply chan []*Ref }
	heatWatch  struct {
		id uint64
		fn func(now int64, heat float64)
	}
	heatUnwatch struct{ id uint64 }
	heatTick    struct{}
)

func (m *nameAdd) Refuse() { m.reply <- ErrShutdown }
func (m *nameGet) Refuse() { m.reply <- nil }
func (m *nameAll) Refuse() { m.reply <- nil }

type directory struct {
	e       *Engine
	refs    map[string]*Ref // published: spawned, PID set
	held    map[string]*Ref // names held by Spawns under way
	subs    map[uint64]func(now int64, heat float64)
	meter   *heatMeter
	timer   Timer
	done    bool
	closing bool     // Shutdown has asked for its list; no more names
	all     *nameAll // Shutdown's request, parked while Spawns are under way
}

func (d *directory) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *nameAdd:
		if d.closing {
			m.reply <- ErrShutdown
			return
		}
		name := m.ref.name
		if d.refs[name] != nil || d.held[name] != nil {
			m.reply <- ErrNameTaken
			return
		}
		d.held[name] = m.ref
		m.reply <- nil
	case *nameDone:
		name := m.ref.name
		if d.held[name] == m.ref {
			delete(d.held, name)
			if m.ok {
				d.refs[name] = m.ref
			}
		}
		if d.all != nil && len(d.held) == 0 {
			d.list(d.all)
			d.all = nil
		}
	case *nameGet:
		m.reply <- d.refs[m.name]
	case *nameRemove:
		// Only its own entry: the name may belong to another actor by now.
		if d.refs[m.ref.name] == m.ref {
			delete(d.refs, m.ref.name)
		}
	case *nameAll:
		d.closing = true // nothing may join after Shutdown's list
		if len(d.held) > 0 {
			d.all = m // answered when the last Spawn under way is done
			return
		}
		d.list(m)
	case *heatWatch:
		d.subs[m.id] = m.fn
		d.arm()
	case *heatUnwatch:
		delete(d.subs, m.id)
	case *heatTick:
		d.timer = nil
		if len(d.subs) == 0 || d.done {
			return
		}
		if d.meter == nil {
			d.meter = newHeatMeter()
		}
		h, now := d.meter.read(), d.e.clock.Now()
		for _, fn := range d.subs {
			fn(now, h)
		}
		d.arm()
	case *actor.Stopping:
		d.done = true
		if d.timer != nil {
			d.timer.Stop()
			d.timer = nil
		}
	}
}

// list answers Shutdown with every published Ref.
func (d *directory) list(m *nameAll) {
	all := make([]*Ref, 0, len(d.refs))
	for _, r := range d.refs {
		all = append(all, r)
	}
	m.reply <- all
}

// arm asks the clock for the next heat reading, if none is pending.
func (d *directory) arm() {
	if d.timer != nil || d.done || d.e.heatEvery <= 0 {
		return
	}
	ref := d.e.names.ref
	d.timer = d.e.clock.AfterFunc(d.e.heatEvery, func() { ref.Fire(&heatTick{}) })
}

func newNames(e *Engine) *names {
	mb := newMailbox(dedicated, 1)
	ref := &Ref{name: "$names", mb: mb, engine: e}
	d := &directory{e: e, refs: make(map[string]*Ref), held: make(map[string]*Ref), subs: make(map[uint64]func(int64, float64))}
	props := actor.PropsFromProducer(
		func() actor.Actor { return &member{inner: d, mb: mb} },
		actor.WithMailbox(func() actor.Mailbox { return mb }),
		actor.WithGuardian(resume{}),
	)
	n := &names{ref: ref}
	e.names = n
	ref.pid = e.system.Root.Spawn(props)
	return n
}

func (n *names) add(r *Ref) error {
	m := &nameAdd{ref: r, reply: make(chan error, 1)}
	n.ref.Send(m)
	return <-m.reply
}

func (n *names) get(name string) (*Ref, bool) {
	m := &nameGet{name: name, reply: make(chan *Ref, 1)}
	n.ref.Send(m)
	r := <-m.reply
	return r, r != nil
}

func (n *names) done(r *Ref, ok bool) { n.ref.Send(&nameDone{ref: r, ok: ok}) }

func (n *names) remove(r *Ref) { n.ref.Send(&nameRemove{ref: r}) }

func (n *names) all() []*Ref {
	m := &nameAll{reply: make(chan []*Ref, 1)}
	n.ref.Send(m)
	return <-m.reply
}

func (n *names) stop() {
	n.ref.engine.system.Root.Stop(n.ref.pid)
	n.ref.wait()
}

func (n *names) watchHeat(id uint64, fn func(now int64, heat float64)) {
	n.ref.Send(&heatWatch{id: id, fn: fn})
}

func (n *names) unwatchHeat(id uint64) { n.ref.Send(&heatUnwatch{id: id}) }
