package moonredis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/redis/go-redis/v9"
)

// FleetConfig is how a Fleet reaches Redis and when it holds the fleet.
// Client and Name are required; every other zero field means its
// documented default.
type FleetConfig struct {
	// Client runs the fleet's script and carries its Pub/Sub channel. Its
	// keys share one hash slot, so a *redis.ClusterClient works too.
	Client redis.UniversalClient
	// Name names the backend the fleet shares. Every replica of one pool
	// uses the same Name. Its keys begin "moonpool:fleet:{Name}:".
	Name string
	// Replica names this process in the fleet; "" is the host name, the
	// process id and a random number. Two live replicas must not share one.
	Replica string
	// Quorum is how many distinct replicas must see makes fail within
	// Window to hold the fleet; <= 0 is 3. While fewer replicas are live,
	// every live one must.
	Quorum int
	// Window is how recent those failures must be; <= 0 is 2 s.
	Window time.Duration
	// ProbeEvery is how often the held fleet probes the backend, once
	// across all replicas; <= 0 is 50 ms, and below a millisecond is one.
	// A backend that returns waits about that long for the next probe,
	// and every replica hears of it then. The probe is paid once, not once
	// a replica, so it can be short.
	ProbeEvery time.Duration
	// Lease is how long the replica that takes the probe lease keeps it
	// while its probe is out; <= 0 is 1 s. A probe that takes longer may
	// meet a second one. A replica that dies with the lease frees it when
	// the lease ends.
	Lease time.Duration
	// Hold is how long a hold lasts in Redis unless a failed probe renews
	// it; <= 0 is 10 s. A fleet whose replicas all stop probing is open
	// again a Hold after the last failed probe.
	Hold time.Duration
	// Ramp is the slow start every replica follows after a recovery (see
	// client.Ramp for its defaults).
	Ramp client.Ramp
	// Heartbeat is how often each replica tells Redis it is live and reads
	// the fleet's state, in case a message was lost; <= 0 is 1 s. A
	// replica is live for three heartbeats after its last.
	Heartbeat time.Duration
	// Timeout bounds each call to Redis; <= 0 is 100 ms. A call that
	// fails or takes longer leaves the replica alone: its pools follow
	// their local wards until Redis answers again.
	Timeout time.Duration
}

// normal is c with its defaults filled in.
func (c FleetConfig) normal() (FleetConfig, error) {
	if c.Client == nil {
		return c, errors.New("moonredis: FleetConfig.Client is nil")
	}
	if c.Name == "" {
		return c, errors.New("moonredis: FleetConfig.Name is empty")
	}
	if c.Replica == "" {
		host, _ := os.Hostname()
		c.Replica = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64(), 36)
	}
	if c.Quorum <= 0 {
		c.Quorum = 3
	}
	if c.Window <= 0 {
		c.Window = 2 * time.Second
	}
	if c.ProbeEvery <= 0 {
		c.ProbeEvery = 50 * time.Millisecond
	}
	c.ProbeEvery = max(c.ProbeEvery, time.Millisecond)
	if c.Lease <= 0 {
		c.Lease = time.Second
	}
	c.Lease = max(c.Lease, time.Millisecond)
	if c.Hold <= 0 {
		c.Hold = 10 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 100 * time.Millisecond
	}
	return c, nil
}

// Fleet shares a pool's ward with the same pool in other processes,
// through Redis: give it to client.PoolConfig.Fleet. See the package
// documentation for what it shares and what each replica decides alone.
//
// It is safe for concurrent use. Build one with NewFleet; the zero Fleet
// is not usable.
type Fleet struct {
	eng     *engine.Engine
	ref     *engine.Ref
	cfg     FleetConfig
	keys    []string // the state, the failures, the members, the lease
	channel string
	live    any // ARGV[3]: how long a member stays live (µs), boxed once
	ps      *redis.PubSub

	// ctx ends every call and the listener when the fleet stops; run
	// counts them, and mu orders each run.Add before shutdown's Wait.
	ctx      context.Context
	cancel   context.CancelFunc
	run      sync.WaitGroup
	mu       sync.Mutex
	stopping bool
	closed   atomic.Bool

	// pools guards the pools joined, and is held while one is given a
	// view, so that no view reaches a pool after its leave has returned.
	pools struct {
		sync.Mutex
		list []*joined
	}

	stats fleetCounts
	busy  atomic.Int64 // messages sent to the actor and calls out, not yet handled: a test hook
}

// joined is one pool joined to the fleet.
type joined struct {
	set  func(client.FleetView)
	left bool // guarded by Fleet.pools
}

// fleetCounts are a fleet's running counts (see FleetStats).
type fleetCounts struct {
	state                                             atomic.Uint32
	epoch, members                                    atomic.Int64
	calls, failed, reports, leases, probes, holds     atomic.Int64
	recoveries, heard, alone, aloneSince, lostReports atomic.Int64
}

// FleetStats are a Fleet's counts since it started, in this process, and
// its state now.
type FleetStats struct {
	State   client.FleetState // the view this replica's pools have now
	Epoch   int64             // the number of the fleet's state as last heard: one more with each hold and recovery
	Members int               // the live replicas, as last heard
	// Calls counts the script runs sent to Redis: heartbeats, failure
	// reports, lease tries and probe outcomes. A healthy fleet sends one
	// heartbeat a Heartbeat and nothing else.
	Calls      int64
	Failed     int64 // calls that failed or took longer than Timeout
	Reports    int64 // failure reports among the calls
	Leases     int64 // probe leases this replica took
	Probes     int64 // probe outcomes it sent
	Holds      int64 // holds it heard of
	Recoveries int64 // recoveries it heard of
	Heard      int64 // state changes it heard through Pub/Sub
	Alone      int64 // times it lost Redis
	AloneSince int64 // when, on the engine's clock, it lost Redis this time; 0 while Redis answers
	// Unsent counts reports it did not send: failures while it was alone
	// or the fleet was held, probes while it was alone.
	Unsent int64
}

// NewFleet joins the fleet named cfg.Name in Redis, on eng. It starts
// the fleet's actor, its heartbeat and its Pub/Sub listener, and does not
// wait for Redis: until Redis answers, its view is FleetOpen. A nil eng,
// a Config without a Client or a Name, and a stopped engine are refused
// with an error.
//
// Its listener waits on a network read, which a testing/synctest bubble
// never counts as durably blocked, so a bubble's clock would not move:
// build a Fleet outside any bubble.
func NewFleet(eng *client.Engine, cfg FleetConfig) (*Fleet, error) {
	if eng == nil {
		return nil, errors.New("moonredis: NewFleet: nil engine")
	}
	cfg, err := cfg.normal()
	if err != nil {
		return nil, fmt.Errorf("moonredis: NewFleet: %w", err)
	}
	f := &Fleet{eng: eng, cfg: cfg, channel: "moonpool:fleet:{" + cfg.Name + "}"}
	p := f.channel + ":"
	f.keys = []string{p + "state", p + "failures", p + "members", p + "lease"}
	f.live = strconv.FormatInt(3*cfg.Heartbeat.Microseconds(), 10)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	o := &fleetOwner{f: f}
	ref, err := eng.Spawn("", o, f.shutdown)
	if err != nil {
		f.cancel()
		return nil, fmt.Errorf("moonredis: NewFleet: %w", err)
	}
	f.ref = ref
	f.ps = cfg.Client.Subscribe(f.ctx) // no channel yet: no call
	f.mu.Lock()
	if !f.stopping {
		f.run.Add(1)
		go f.listen()
	}
	f.mu.Unlock()
	f.send(fleetTick{what: resync}) // the first heartbeat
	return f, nil
}

// Join attaches a pool: see client.Fleet. The pool is handed the fleet's
// view at once, and each new view after. Several pools may join one
// Fleet; they see the same view, and a probe lease goes to one of them.
func (f *Fleet) Join(set func(client.FleetView)) (report func(client.FleetReport), leave func()) {
	j := &joined{set: set}
	f.send(joinMsg{j})
	report = func(r client.FleetReport) {
		if r.Failures > 0 || r.Probed {
			f.send(reportMsg{r})
		}
	}
	leave = func() {
		f.pools.Lock()
		defer f.pools.Unlock()
		j.left = true
		for i, p := range f.pools.list {
			if p == j {
				f.pools.list = append(f.pools.list[:i], f.pools.list[i+1:]...)
				break
			}
		}
	}
	return report, leave
}

// Stats are the fleet's counts in this process, and its state now.
func (f *Fleet) Stats() FleetStats {
	c := &f.stats
	return FleetStats{
		State: client.FleetState(c.state.Load()), Epoch: c.epoch.Load(), Members: int(c.members.Load()),
		Calls: c.calls.Load(), Failed: c.failed.Load(), Reports: c.reports.Load(), Leases: c.leases.Load(),
		Probes: c.probes.Load(), Holds: c.holds.Load(), Recoveries: c.recoveries.Load(), Heard: c.heard.Load(),
		Alone: c.alone.Load(), AloneSince: c.aloneSince.Load(), Unsent: c.lostReports.Load(),
	}
}

// Close leaves the fleet within ctx: its pools are handed FleetAlone, so
// their local wards decide alone, and its calls and listener are cut short
// and waited for. It writes nothing to Redis: the replica stops being a
// member three Heartbeats after its last, and a lease it held ends with
// Lease. A second Close returns nil.
func (f *Fleet) Close(ctx context.Context) error {
	if !f.closed.CompareAndSwap(false, true) {
		return nil
	}
	return f.ref.Stop(ctx)
}

// shutdown runs when the actor is stopped, by Close or the engine's
// Shutdown: every call and the listener end, within ctx.
func (f *Fleet) shutdown(ctx context.Context) error {
	f.closed.Store(true)
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
	f.cancel()
	f.ps.Close() // ends a listener blocked on a read
	ended := make(chan struct{})
	go func() { f.run.Wait(); close(ended) }()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send hands msg to the actor.
func (f *Fleet) send(msg any) {
	f.busy.Add(1)
	f.ref.Send(msg)
}

// listen reads the fleet's channel until the fleet stops, and hands every
// state it hears to the actor. Each time it (re)subscribes, and each time
// the connection fails, it asks the actor to read the state: a message
// may have been missed, and Redis may be gone. It waits between failed
// tries, from 10 ms doubling to the Heartbeat, on the real clock: the
// network's.
func (f *Fleet) listen() {
	defer f.run.Done()
	f.ps.Subscribe(f.ctx, f.channel) // on failure, the first Receive subscribes again
	pause := 10 * time.Millisecond
	for {
		msg, err := f.ps.ReceiveTimeout(f.ctx, 0)
		if f.ctx.Err() != nil {
			return
		}
		if err != nil {
			f.send(fleetTick{what: resync})
			t := time.NewTimer(pause)
			select {
			case <-f.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			pause = min(2*pause, f.cfg.Heartbeat)
			continue
		}
		pause = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				f.send(fleetTick{what: resync})
			}
		case *redis.Message:
			f.send(heardMsg{m.Payload})
		}
	}
}

// The actor's messages: its timers' ticks, a call that came back, a state
// heard on the channel, a pool joining, a pool's report.
type (
	fleetTick struct {
		what tickKind
		gen  uint32 // the timer's generation: a tick from a timer stopped or set again is dropped
	}
	heardMsg  struct{ line string }
	joinMsg   struct{ j *joined }
	reportMsg struct{ r client.FleetReport }
)

type tickKind uint8

const (
	beat    tickKind = iota // the heartbeat, or a retry while alone
	resync                  // the listener asks for a read of the state
	lease                   // while held, try the probe lease
	rampEnd                 // the ramp has run its span
	flush                   // failures wait to be reported
	ticks
)

// fleetCall is one script run, off the actor; it comes back to the actor
// with its answer.
type fleetCall struct {
	step  string
	args  []any
	epoch int64 // a probe's outcome: the hold it probed
	line  fleetLine
	err   error
}

// fleetOwner is the fleet's actor. It keeps the fleet's state as last
// heard, makes the calls, and hands the pools their views.
type fleetOwner struct {
	f *Fleet

	known   fleetLine // the state last heard from Redis
	heardAt int64     // when known was heard, on the engine's clock
	since   int64     // when known's state began, on the engine's clock
	alone   bool      // the last call failed: the pools follow their local wards
	lonely  int64     // when alone began
	pause   time.Duration

	view    client.FleetView // the pools' view, without Probe
	lease   bool             // this replica holds the probe lease of known's hold
	granted *joined          // the pool the lease was handed to
	turn    int              // the pool the next lease goes to

	failures int   // failed makes not yet reported
	failAt   int64 // when the last report went
	flying   [4]bool
	again    [4]bool // a call of that step came while one was out: make it when that lands

	timers  [ticks]engine.Timer
	gens    [ticks]uint32
	stopped bool
}

// Receive takes protoactor's own messages: only Stopped matters. The
// fleet's come through Handle.
func (o *fleetOwner) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Stopped); ok {
		o.stop()
	}
}

// Handle runs one user message (see engine.Handler).
func (o *fleetOwner) Handle(msg any) {
	defer o.f.busy.Add(-1)
	if o.stopped {
		return
	}
	now := o.f.eng.Now()
	switch m := msg.(type) {
	case fleetTick:
		if m.what != resync {
			if m.gen != o.gens[m.what] {
				return
			}
			o.timers[m.what] = nil
		}
		o.tick(m.what, now)
	case *fleetCall:
		o.landed(m, now)
	case heardMsg:
		l, err := parseFleetLine(m.line)
		if err != nil {
			return
		}
		o.f.stats.heard.Add(1)
		o.heard(l, now)
		if o.alone {
			o.call(stepSync) // the channel works: Redis may be back
		}
		o.show(now)
	case joinMsg:
		o.f.pools.Lock()
		if !m.j.left {
			o.f.pools.list = append(o.f.pools.list, m.j)
			m.j.set(o.view)
		}
		o.f.pools.Unlock()
	case reportMsg:
		o.report(m.r, now)
	}
}

// tick runs a timer's work.
func (o *fleetOwner) tick(what tickKind, now int64) {
	switch what {
	case beat, resync:
		o.call(stepSync)
	case lease:
		if o.known.state == client.FleetHeld && !o.alone {
			o.call(stepLease)
		}
	case rampEnd:
		o.show(now)
	case flush:
		o.sendFailures(now)
	}
}

// report takes a pool's report: a probe's outcome goes to Redis at once,
// failures at most once a quarter Window (the first at once), which is
// enough to keep this replica among the failing while its makes fail.
func (o *fleetOwner) report(r client.FleetReport, now int64) {
	if r.Probed {
		o.probed(r.ProbeOK)
	}
	if r.Failures <= 0 {
		return
	}
	if o.alone || o.known.state == client.FleetHeld {
		// Held, the fleet knows already; alone, Redis cannot hear it.
		o.f.stats.lostReports.Add(1)
		return
	}
	o.failures += r.Failures
	o.sendFailures(now)
}

// sendFailures reports the failures in hand, unless one went less than a
// quarter Window ago: then a timer sends them when it has.
func (o *fleetOwner) sendFailures(now int64) {
	if o.failures == 0 || o.alone || o.known.state == client.FleetHeld {
		o.failures = 0
		return
	}
	every := int64(o.f.cfg.Window / 4)
	if o.failAt != 0 && now-o.failAt < every {
		o.arm(flush, time.Duration(o.failAt+every-now))
		return
	}
	o.failures, o.failAt = 0, now
	o.f.stats.reports.Add(1)
	o.call(stepFail)
}

// probed takes the outcome of the probe this replica made: the lease is
// spent, and Redis hears how the probe went.
func (o *fleetOwner) probed(ok bool) {
	if o.alone || o.known.state != client.FleetHeld {
		o.f.stats.lostReports.Add(1)
		return
	}
	o.lease = false
	o.revoke()
	o.f.stats.probes.Add(1)
	c := o.newCall(stepProbed)
	c.epoch = o.known.epoch
	outcome := "0"
	if ok {
		outcome = "1"
	}
	c.args = append(c.args, outcome, c.epoch, o.f.cfg.Hold.Microseconds(), o.f.cfg.ProbeEvery.Milliseconds())
	o.launch(c)
}

// call makes a call of step with the arguments it takes now, unless one
// is out already: then it goes when that one lands.
func (o *fleetOwner) call(step string) {
	c := o.newCall(step)
	switch step {
	case stepFail:
		cfg := &o.f.cfg
		c.args = append(c.args, cfg.Window.Microseconds(), cfg.Quorum, cfg.Hold.Microseconds())
	case stepLease:
		c.args = append(c.args, o.f.cfg.Lease.Milliseconds())
	}
	o.launch(c)
}

// newCall is a call of step with the arguments every step takes.
func (o *fleetOwner) newCall(step string) *fleetCall {
	return &fleetCall{step: step, args: []any{step, o.f.cfg.Replica, o.f.live, o.f.channel}}
}

// slot is the index of a step in flying and again; a probe's outcome has
// none, since each must go.
func slot(step string) int {
	switch step {
	case stepSync:
		return 0
	case stepFail:
		return 1
	case stepLease:
		return 2
	}
	return 3
}

// launch sends c to Redis off the actor.
func (o *fleetOwner) launch(c *fleetCall) {
	if i := slot(c.step); i < 3 {
		if o.flying[i] {
			o.again[i] = true
			return
		}
		o.flying[i] = true
	}
	f := o.f
	f.mu.Lock()
	if f.stopping {
		f.mu.Unlock()
		return
	}
	f.run.Add(1)
	f.mu.Unlock()
	f.busy.Add(1)
	f.stats.calls.Add(1)
	go f.do(c)
}

// do runs c's script and hands c back to the actor.
func (f *Fleet) do(c *fleetCall) {
	defer f.run.Done()
	defer f.busy.Add(-1) // once c is on its way back
	ctx, cancel := context.WithTimeout(f.ctx, f.cfg.Timeout)
	s, err := fleetScript.Run(ctx, f.cfg.Client, f.keys, c.args...).Text()
	cancel()
	if err == nil {
		c.line, err = parseFleetLine(s)
	}
	c.err = err
	f.send(c)
}

// landed takes a call's answer.
func (o *fleetOwner) landed(c *fleetCall, now int64) {
	i := slot(c.step)
	if i < 3 {
		o.flying[i] = false
	}
	wasAlone := o.alone
	if c.err != nil {
		o.f.stats.failed.Add(1)
		o.lost(now)
	} else {
		o.alone, o.pause = false, 0
		o.f.stats.aloneSince.Store(0)
		o.heard(c.line, now)
		if c.step == stepLease {
			o.leased(c.line, now)
		}
		if wasAlone && o.known.state == client.FleetHeld {
			o.arm(lease, o.f.cfg.ProbeEvery) // alone, it stopped trying the lease
		}
	}
	if c.step == stepSync || o.alone && !wasAlone {
		o.arm(beat, o.beatAfter()) // alone, the next heartbeat is the retry
	}
	if i < 3 && o.again[i] {
		o.again[i] = false
		if !o.alone || c.step == stepSync {
			o.call(c.step) // a read asked for while one was out: the listener heard something
		}
	}
	o.show(now)
}

// beatAfter is when the next heartbeat goes: a Heartbeat on, or, while
// alone, a pause that starts at ProbeEvery and doubles up to it.
func (o *fleetOwner) beatAfter() time.Duration {
	if !o.alone {
		return o.f.cfg.Heartbeat
	}
	hb := o.f.cfg.Heartbeat
	if o.pause == 0 {
		o.pause = min(o.f.cfg.ProbeEvery, hb)
	} else {
		o.pause = min(2*o.pause, hb)
	}
	return o.pause
}

// lost notes that a call failed: the replica is alone until one works.
func (o *fleetOwner) lost(now int64) {
	if o.alone {
		return
	}
	o.alone, o.lonely = true, now
	o.f.stats.alone.Add(1)
	o.f.stats.aloneSince.Store(now)
	o.lease = false
	o.failures = 0
	o.stopTimer(lease)
	o.stopTimer(flush)
}

// heard takes a state from Redis, heard at now, unless it says less than
// the one known.
func (o *fleetOwner) heard(l fleetLine, now int64) {
	k := o.known
	if !l.newer(k) {
		return
	}
	o.f.stats.members.Store(int64(l.members))
	o.known, o.heardAt = l, now
	if l.born == k.born && l.epoch == k.epoch && l.state == k.state {
		return // the same state, read again
	}
	o.f.stats.epoch.Store(l.epoch)
	o.since = now - l.age*int64(time.Microsecond)
	o.lease = false
	o.stopTimer(lease)
	o.stopTimer(rampEnd)
	switch l.state {
	case client.FleetHeld:
		o.f.stats.holds.Add(1)
		o.arm(lease, o.f.cfg.ProbeEvery)
	case client.FleetRamp:
		o.f.stats.recoveries.Add(1)
		if end := o.since + int64(o.f.cfg.Ramp.Span()); end > now {
			o.arm(rampEnd, time.Duration(end-now))
		}
	}
}

// leased takes a lease try's answer: the lease taken is handed to one
// pool, and the next try is set for when the lease may be free.
func (o *fleetOwner) leased(l fleetLine, now int64) {
	if o.alone || o.known.state != client.FleetHeld || l.epoch != o.known.epoch || l.born != o.known.born {
		return
	}
	next := o.f.cfg.ProbeEvery
	switch {
	case l.holder && !o.lease:
		o.lease = true
		o.f.stats.leases.Add(1)
		o.grant(now)
	case !l.holder && o.lease:
		o.lease = false
		o.revoke()
	}
	if !l.holder && l.lease >= 0 {
		next = min(next, time.Duration(l.lease+1)*time.Millisecond)
	}
	o.arm(lease, next)
}

// viewAt is the pools' view at now, without Probe.
func (o *fleetOwner) viewAt(now int64) client.FleetView {
	switch {
	case o.alone:
		return client.FleetView{State: client.FleetAlone, Since: o.lonely}
	case o.known.state == client.FleetHeld:
		return client.FleetView{State: client.FleetHeld, Since: o.since, ProbeEvery: o.f.cfg.ProbeEvery}
	case o.known.state == client.FleetRamp && now-o.since < int64(o.f.cfg.Ramp.Span()):
		return client.FleetView{State: client.FleetRamp, Since: o.since, Share: max(o.known.share, 1), Ramp: o.f.cfg.Ramp}
	}
	return client.FleetView{}
}

// show hands the pools the view at now, if it has changed.
func (o *fleetOwner) show(now int64) {
	v := o.viewAt(now)
	o.f.stats.state.Store(uint32(v.State))
	if v == o.view {
		return
	}
	o.view, o.granted = v, nil
	o.f.pools.Lock()
	defer o.f.pools.Unlock()
	for _, j := range o.f.pools.list {
		j.set(v)
	}
}

// grant hands the probe lease to one pool, each pool in turn: one view
// with Probe set lets it make one probe.
func (o *fleetOwner) grant(now int64) {
	o.show(now) // the pools see the hold before the lease
	if o.view.State != client.FleetHeld {
		return
	}
	o.f.pools.Lock()
	defer o.f.pools.Unlock()
	if len(o.f.pools.list) == 0 {
		return
	}
	o.turn = (o.turn + 1) % len(o.f.pools.list)
	j := o.f.pools.list[o.turn]
	v := o.view
	v.Probe = true
	j.set(v)
	o.granted = j
}

// revoke takes back a lease handed to a pool and not yet used.
func (o *fleetOwner) revoke() {
	j := o.granted
	if j == nil {
		return
	}
	o.granted = nil
	o.f.pools.Lock()
	defer o.f.pools.Unlock()
	if !j.left {
		j.set(o.view)
	}
}

// arm sets the timer for what, d from now, in place of one already set.
func (o *fleetOwner) arm(what tickKind, d time.Duration) {
	o.stopTimer(what)
	if o.stopped {
		return
	}
	f, gen := o.f, o.gens[what]
	o.timers[what] = f.eng.Clock().AfterFunc(d, func() { f.send(fleetTick{what, gen}) })
}

// stopTimer stops the timer for what; a tick it sent already is dropped.
func (o *fleetOwner) stopTimer(what tickKind) {
	if t := o.timers[what]; t != nil {
		t.Stop()
		o.timers[what] = nil
	}
	o.gens[what]++
}

// stop ends the timers and hands the pools FleetAlone: the fleet is
// closed, and their local wards decide alone.
func (o *fleetOwner) stop() {
	o.stopped = true
	for i := range o.timers {
		o.stopTimer(tickKind(i))
	}
	v := client.FleetView{State: client.FleetAlone, Since: o.f.eng.Now()}
	o.f.stats.state.Store(uint32(v.State))
	o.f.pools.Lock()
	defer o.f.pools.Unlock()
	for _, j := range o.f.pools.list {
		j.set(v)
	}
	o.f.pools.list = nil
}

var _ client.Fleet = (*Fleet)(nil)
