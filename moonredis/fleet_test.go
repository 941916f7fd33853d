package moonredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/redis/go-redis/v9"
)

// poolSide stands for one pool joined to a fleet: it keeps every view
// the fleet hands it, and reports as a pool would.
type poolSide struct {
	mu     sync.Mutex
	views  []client.FleetView
	report func(client.FleetReport)
	leave  func()
}

func (p *poolSide) set(v client.FleetView) {
	p.mu.Lock()
	p.views = append(p.views, v)
	p.mu.Unlock()
}

// last is the view the pool has now.
func (p *poolSide) last() client.FleetView {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.views) == 0 {
		return client.FleetView{}
	}
	return p.views[len(p.views)-1]
}

// seen is how many views the pool has been handed.
func (p *poolSide) seen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.views)
}

// grants is how many of the views handed from the from-th on let the
// pool make a probe.
func (p *poolSide) grants(from int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, v := range p.views[min(from, len(p.views)):] {
		if v.Probe {
			n++
		}
	}
	return n
}

// states are the states of the views handed from the from-th on.
func (p *poolSide) states(from int) []client.FleetState {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s []client.FleetState
	for _, v := range p.views[min(from, len(p.views)):] {
		s = append(s, v.State)
	}
	return s
}

// fleetRig is n replicas of one fleet, each a Fleet with one pool, on one
// engine with a virtual clock and one miniredis that keeps its time.
type fleetRig struct {
	*fake
	fleets []*Fleet
	pools  []*poolSide
	steps  *stepCount
}

// stepCount counts the commands a client sends, the fleet's script by
// its step, others by name, but for a new connection's handshake.
type stepCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *stepCount) hook() redis.Hook {
	return hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			err := next(ctx, cmd)
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				return err // go-redis sends the script again, which counts
			}
			name := cmd.Name()
			if name == "hello" || name == "client" {
				return err
			}
			if args := cmd.Args(); strings.HasPrefix(name, "eval") && len(args) > 7 {
				name = fmt.Sprint(args[7]) // the step, after the script, the key count and four keys
			}
			c.mu.Lock()
			c.n[name]++
			c.mu.Unlock()
			return err
		}
	}}
}

// read is a copy of the counts.
func (c *stepCount) read() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.n))
	for k, v := range c.n {
		m[k] = v
	}
	return m
}

// newFleetRig starts n replicas with cfg (its Client and Name filled in)
// and waits for each one's first heartbeat.
func newFleetRig(t *testing.T, n int, cfg FleetConfig) *fleetRig {
	t.Helper()
	r := &fleetRig{fake: newFake(t), steps: &stepCount{n: map[string]int{}}}
	// One dial a call: a call to a Redis that is gone fails at once.
	rdb := redis.NewClient(&redis.Options{Addr: r.mr.Addr(), DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(r.steps.hook())
	cfg.Client = rdb
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second // a busy machine is not a slow Redis
	}
	if cfg.Name == "" {
		cfg.Name = "db"
	}
	for i := range n {
		c := cfg
		c.Replica = fmt.Sprint("r", i)
		fl, err := NewFleet(r.eng, c)
		if err != nil {
			t.Fatal(err)
		}
		p := &poolSide{}
		p.report, p.leave = fl.Join(p.set)
		r.fleets = append(r.fleets, fl)
		r.pools = append(r.pools, p)
	}
	// Each reads the state twice: at its start, and once subscribed.
	awaitTold(t, "every replica's first heartbeat and subscription", func() bool {
		for _, fl := range r.fleets {
			if st := fl.Stats(); st.Members == 0 || st.Calls < 2 {
				return false
			}
		}
		return true
	}, r.tell)
	r.settle(t)
	return r
}

// tell is what each replica has and its pool was handed, for a failure.
func (r *fleetRig) tell() string {
	var s []string
	for i, fl := range r.fleets {
		s = append(s, fmt.Sprintf("replica %d: %+v, busy %d, view %+v", i, fl.Stats(), fl.busy.Load(), r.pools[i].last()))
	}
	return strings.Join(s, "\n")
}

// awaitTold is waitFor that says, when it gives up, what tell says.
func awaitTold(t *testing.T, what string, cond func() bool, tell func() string) {
	t.Helper()
	end := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s after %v:\n%s", what, bound, tell())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// settle waits until no replica has a message or call in hand.
func (r *fleetRig) settle(t *testing.T) {
	t.Helper()
	waitFor(t, "the replicas to settle", func() bool {
		for _, fl := range r.fleets {
			if fl.busy.Load() != 0 {
				return false
			}
		}
		return true
	})
}

// step moves the clock by d and waits for what it set off. Redis's clock
// moves first, so the calls the timers make find it where the engine's is.
func (r *fleetRig) step(t *testing.T, d time.Duration) {
	t.Helper()
	r.mr.SetTime(time.Unix(0, r.clock.Now()+int64(d)))
	r.mr.FastForward(d)
	r.clock.Advance(d)
	r.settle(t)
}

// fail has replica i report a failed make, and waits for what it set off.
func (r *fleetRig) fail(t *testing.T, i int) {
	t.Helper()
	r.pools[i].report(client.FleetReport{Now: r.clock.Now(), Failures: 1})
	r.settle(t)
}

// all waits until every replica's pool has a view that passes ok.
func (r *fleetRig) all(t *testing.T, what string, ok func(client.FleetView) bool) {
	t.Helper()
	awaitTold(t, what, func() bool {
		for _, p := range r.pools {
			if !ok(p.last()) {
				return false
			}
		}
		return true
	}, r.tell)
	r.settle(t)
}

// back steps the clock 100 ms at a time until no replica is alone, with
// a moment of real time between steps: go-redis dials a server that has
// refused it again only once a second, on the real clock, and until then
// fails every call at once.
func (r *fleetRig) back(t *testing.T) {
	t.Helper()
	end := time.Now().Add(bound)
	for {
		alone := 0
		for _, p := range r.pools {
			if p.last().State == client.FleetAlone {
				alone++
			}
		}
		if alone == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("Redis back, and %d replicas still alone after %v:\n%s", alone, bound, r.tell())
		}
		r.step(t, 100*time.Millisecond)
		time.Sleep(20 * time.Millisecond)
	}
}

// hold holds the fleet: Quorum replicas report a failure.
func (r *fleetRig) hold(t *testing.T, quorum int) {
	t.Helper()
	for i := range quorum {
		r.fail(t, i)
	}
	r.all(t, "every replica held", func(v client.FleetView) bool { return v.State == client.FleetHeld })
}

// holder is the replica whose pool was last handed a probe since the
// from-th views, and how many were handed one.
func (r *fleetRig) holder(from []int) (who, n int) {
	who = -1
	for i, p := range r.pools {
		if g := p.grants(from[i]); g > 0 {
			who, n = i, n+g
		}
	}
	return who, n
}

// marks is how many views each pool has been handed so far.
func (r *fleetRig) marks() []int {
	m := make([]int, len(r.pools))
	for i, p := range r.pools {
		m[i] = p.seen()
	}
	return m
}

// TestFleetQuorum: the fleet holds once Quorum distinct replicas have
// failed within Window, and not before; every replica, not only those
// that failed, is held at once, by the message Redis publishes (the clock
// does not move). Failures older than Window do not count, and with fewer
// live replicas than Quorum every live one must fail.
func TestFleetQuorum(t *testing.T) {
	t.Run("three of five", func(t *testing.T) {
		r := newFleetRig(t, 5, FleetConfig{})
		r.fail(t, 0)
		r.fail(t, 1)
		r.fail(t, 1) // the same replica again is not a third
		for i, p := range r.pools {
			if v := p.last(); v.State != client.FleetOpen {
				t.Fatalf("replica %d is %v after two replicas failed, want open", i, v.State)
			}
		}
		t0 := r.clock.Now()
		r.fail(t, 2)
		r.all(t, "every replica held", func(v client.FleetView) bool { return v.State == client.FleetHeld })
		for i, p := range r.pools {
			v := p.last()
			if v.Since != t0 || v.Probe || v.ProbeEvery != 50*time.Millisecond {
				t.Errorf("replica %d's view %+v, want held since %d, ProbeEvery 50ms, no probe", i, v, t0)
			}
			if st := r.fleets[i].Stats(); st.Holds != 1 || st.State != client.FleetHeld || st.Epoch != 1 {
				t.Errorf("replica %d: Stats %+v, want one hold, held, epoch 1", i, st)
			}
		}
	})
	t.Run("older than Window", func(t *testing.T) {
		r := newFleetRig(t, 5, FleetConfig{Window: time.Second})
		r.fail(t, 0)
		r.step(t, 1001*time.Millisecond)
		r.fail(t, 1)
		r.fail(t, 2)
		for i, p := range r.pools {
			if v := p.last(); v.State != client.FleetOpen {
				t.Fatalf("replica %d is %v with one of three failures past the window, want open", i, v.State)
			}
		}
		r.fail(t, 3)
		r.all(t, "every replica held", func(v client.FleetView) bool { return v.State == client.FleetHeld })
	})
	t.Run("fewer live than Quorum", func(t *testing.T) {
		r := newFleetRig(t, 2, FleetConfig{Quorum: 3})
		r.fail(t, 0)
		if v := r.pools[1].last(); v.State != client.FleetOpen {
			t.Fatalf("one of two replicas failed, and the other is %v", v.State)
		}
		r.fail(t, 1)
		r.all(t, "both replicas held", func(v client.FleetView) bool { return v.State == client.FleetHeld })
	})
}

// TestFleetOneReplicaDoesNotHold: one replica whose makes fail for ten
// seconds (its own network broken, say) never holds the fleet, nor
// itself: its local ward decides for it. It reports at most once a
// quarter Window while it fails, not once a failure.
func TestFleetOneReplicaDoesNotHold(t *testing.T) {
	r := newFleetRig(t, 5, FleetConfig{})
	from := r.marks()
	for range 200 {
		r.fail(t, 0)
		r.step(t, 50*time.Millisecond)
	}
	for i, p := range r.pools {
		for _, s := range p.states(from[i]) {
			if s != client.FleetOpen {
				t.Fatalf("replica %d was handed %v while one replica failed alone", i, s)
			}
		}
	}
	// Ten seconds, a report each half second at most (the Window is 2 s).
	if got := r.fleets[0].Stats().Reports; got < 10 || got > 21 {
		t.Errorf("the failing replica sent %d reports in 10 s of failures, want one each 500ms (about 20)", got)
	}
}

// TestFleetOneProbePerInterval: while the fleet is held, one replica
// takes the probe lease each ProbeEvery, whatever the number of
// replicas, and its pool alone is handed a probe; a failed probe keeps
// every replica, the prober too, from the next one until ProbeEvery has
// passed; a replica that dies with the lease frees it after Lease.
func TestFleetOneProbePerInterval(t *testing.T) {
	const every = 100 * time.Millisecond
	r := newFleetRig(t, 5, FleetConfig{ProbeEvery: every, Heartbeat: time.Hour})
	r.hold(t, 3)
	before := r.steps.read()
	probers := map[int]int{}
	for k := range 20 {
		from := r.marks()
		r.step(t, every/2)
		if who, n := r.holder(from); n != 0 {
			t.Fatalf("interval %d: replica %d handed a probe half a ProbeEvery after the last", k, who)
		}
		r.step(t, every/2)
		who, n := r.holder(from)
		if n != 1 {
			t.Fatalf("interval %d: %d probes handed across the fleet, want 1", k, n)
		}
		probers[who]++
		r.pools[who].report(client.FleetReport{Now: r.clock.Now(), Failures: 1, Probed: true})
		r.settle(t)
		if v := r.pools[who].last(); v.Probe || v.State != client.FleetHeld {
			t.Fatalf("interval %d: after its probe failed, the prober's view is %+v, want held without a probe", k, v)
		}
	}
	after := r.steps.read()
	if got := after[stepProbed] - before[stepProbed]; got != 20 {
		t.Errorf("%d probe outcomes sent in 20 intervals, want 20", got)
	}
	// Each replica tries the lease once an interval: five calls, one lease.
	if got := after[stepLease] - before[stepLease]; got > 5*20+5 {
		t.Errorf("%d lease tries in 20 intervals of 5 replicas, want about 100", got)
	}
	if got := after[stepFail] - before[stepFail]; got != 0 {
		t.Errorf("%d failure reports sent while held, want none", got)
	}
	t.Logf("probes by replica: %v", probers)

	// The next holder dies with its lease: nobody probes until Lease has
	// passed, then another replica does.
	from := r.marks()
	r.step(t, every)
	who, _ := r.holder(from)
	if who < 0 {
		t.Fatal("nobody took the lease")
	}
	if err := r.fleets[who].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	from = r.marks()
	r.step(t, time.Second-every)
	if w, n := r.holder(from); n != 0 {
		t.Fatalf("replica %d handed a probe while a dead replica's lease lasted", w)
	}
	r.step(t, every+time.Millisecond)
	if w, n := r.holder(from); n != 1 || w == who {
		t.Fatalf("after the dead replica's lease ended, %d probes were handed (the last to replica %d), want one to another replica", n, w)
	}
}

// TestFleetRecovery: when the probe works, every replica hears it at once
// (the clock does not move) and ramps from the recovery's instant, the
// ramp shared by every live replica; when the ramp has run its span each
// is open again without a word to Redis.
func TestFleetRecovery(t *testing.T) {
	ramp := client.Ramp{Start: 5, Double: 50 * time.Millisecond, Full: 80} // four doublings: 200 ms
	r := newFleetRig(t, 5, FleetConfig{Ramp: ramp, Heartbeat: time.Hour})
	r.hold(t, 3)
	from := r.marks()
	r.step(t, 100*time.Millisecond)
	who, n := r.holder(from)
	if n != 1 {
		t.Fatalf("%d probes handed, want 1", n)
	}
	t0 := r.clock.Now()
	r.pools[who].report(client.FleetReport{Now: t0, Probed: true, ProbeOK: true})
	r.all(t, "every replica ramping", func(v client.FleetView) bool { return v.State == client.FleetRamp })
	want := client.FleetView{State: client.FleetRamp, Since: t0, Share: 5, Ramp: ramp}
	for i, p := range r.pools {
		if v := p.last(); v != want {
			t.Errorf("replica %d's view %+v, want %+v", i, v, want)
		}
		if st := r.fleets[i].Stats(); st.Recoveries != 1 || st.Epoch != 2 {
			t.Errorf("replica %d: Stats %+v, want one recovery, epoch 2", i, st)
		}
	}
	before := r.steps.read()
	r.step(t, ramp.Span()-time.Millisecond)
	for i, p := range r.pools {
		if v := p.last(); v.State != client.FleetRamp {
			t.Errorf("replica %d is %v before the ramp's span has passed", i, v.State)
		}
	}
	r.step(t, time.Millisecond)
	for i, p := range r.pools {
		if v := p.last(); v.State != client.FleetOpen {
			t.Errorf("replica %d is %v once the ramp's span has passed, want open", i, v.State)
		}
	}
	if after := r.steps.read(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the ramp's end sent commands to Redis: %v, then %v", before, after)
	}
	// A failure after the recovery is one replica's again: no hold.
	r.fail(t, 0)
	if v := r.pools[4].last(); v.State != client.FleetOpen {
		t.Errorf("one failure after the recovery left replica 4 %v: the failures before it still counted", v.State)
	}
}

// TestFleetAlone: with Redis gone, every replica's pools are handed
// FleetAlone (their local wards decide), Stats says so and since when,
// and reports go nowhere.
func TestFleetAlone(t *testing.T) {
	r := newFleetRig(t, 3, FleetConfig{})
	r.mr.Close()
	r.step(t, time.Second) // the heartbeat, if the listener has not noticed first
	r.all(t, "every replica alone", func(v client.FleetView) bool { return v.State == client.FleetAlone })
	for i, fl := range r.fleets {
		st := fl.Stats()
		if st.State != client.FleetAlone || st.Alone != 1 || st.AloneSince == 0 || st.Failed == 0 {
			t.Errorf("replica %d: Stats %+v, want alone once, since when, with a failed call", i, st)
		}
	}
	calls := r.fleets[0].Stats().Calls
	r.fail(t, 0)
	if st := r.fleets[0].Stats(); st.Calls != calls || st.Unsent != 1 {
		t.Errorf("a failure while alone: Stats %+v, want it unsent and no call", st)
	}
	if err := r.mr.Restart(); err != nil {
		t.Fatal(err)
	}
	r.back(t)
	r.all(t, "every replica back", func(v client.FleetView) bool { return v.State == client.FleetOpen })
	if st := r.fleets[0].Stats(); st.AloneSince != 0 || st.State != client.FleetOpen {
		t.Errorf("back with Redis: Stats %+v, want open and not alone", st)
	}
}

// TestFleetBackWithoutFalseHold: a replica that lost Redis while the
// fleet was held finds, when Redis returns, what Redis says now: the hold
// if it still lasts, and no hold once its Hold has passed meanwhile.
func TestFleetBackWithoutFalseHold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		out   time.Duration
		state client.FleetState
	}{
		{"hold still on", 2 * time.Second, client.FleetHeld},
		{"hold over", 31 * time.Second, client.FleetOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFleetRig(t, 3, FleetConfig{Hold: 30 * time.Second})
			r.hold(t, 3)
			r.mr.Close()
			r.all(t, "every replica alone", func(v client.FleetView) bool { return v.State == client.FleetAlone })
			r.step(t, tc.out)
			from := r.marks()
			if err := r.mr.Restart(); err != nil {
				t.Fatal(err)
			}
			r.back(t)
			for i, p := range r.pools {
				for _, s := range p.states(from[i]) {
					if s != tc.state {
						t.Errorf("replica %d was handed %v on Redis's return, want only %v", i, s, tc.state)
					}
				}
			}
		})
	}
}

// TestFleetHealthyPathQuiet: a fleet whose pools report nothing (healthy
// pools send no report) costs Redis one heartbeat per replica a Heartbeat
// and nothing else; a report of no failure and no probe sends nothing.
func TestFleetHealthyPathQuiet(t *testing.T) {
	r := newFleetRig(t, 3, FleetConfig{})
	before := r.steps.read()
	for range 100 {
		for _, p := range r.pools {
			p.report(client.FleetReport{Now: r.clock.Now()})
		}
		r.step(t, 100*time.Millisecond)
	}
	after := r.steps.read()
	for k := range after {
		if after[k] -= before[k]; after[k] == 0 {
			delete(after, k)
		}
	}
	if want := map[string]int{stepSync: 30}; fmt.Sprint(after) != fmt.Sprint(want) {
		t.Errorf("three healthy replicas sent %v in 10 s, want %v", after, want)
	}
}

// TestFleetClose: Close hands the pools FleetAlone, so they follow their
// local wards, and so does the engine's Shutdown; no view reaches a pool
// after its leave has returned; a report after Close does nothing, and a
// second Close returns nil. TestMain finds any goroutine left behind.
func TestFleetClose(t *testing.T) {
	r := newFleetRig(t, 3, FleetConfig{})
	r.pools[2].leave()
	n := r.pools[2].seen()
	r.fail(t, 0)
	r.fail(t, 1)
	r.fail(t, 2)
	for i := range 2 {
		awaitTold(t, fmt.Sprint("replica ", i, " held"), func() bool { return r.pools[i].last().State == client.FleetHeld }, r.tell)
	}
	awaitTold(t, "replica 2 held", func() bool { return r.fleets[2].Stats().State == client.FleetHeld }, r.tell)
	if got := r.pools[2].seen(); got != n {
		t.Errorf("a pool that left was handed %d views after its leave returned", got-n)
	}
	fl := r.fleets[0]
	if err := fl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := r.pools[0].last(); v.State != client.FleetAlone {
		t.Errorf("after Close the pool's view is %v, want alone", v.State)
	}
	r.pools[0].report(client.FleetReport{Failures: 1, Probed: true})
	if err := fl.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if st := fl.Stats(); st.State != client.FleetAlone {
		t.Errorf("Stats after Close: %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := r.eng.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if v := r.pools[1].last(); v.State != client.FleetAlone {
		t.Errorf("after the engine's Shutdown the pool's view is %v, want alone", v.State)
	}
	if _, err := NewFleet(r.eng, FleetConfig{Client: r.rdb, Name: "db"}); err == nil {
		t.Error("NewFleet on an engine shut down: no error")
	}
}

// TestFleetBadInput: a Fleet without an engine, a Client or a Name is
// refused with an error; odd numbers take their defaults.
func TestFleetBadInput(t *testing.T) {
	f := newFake(t)
	for _, tc := range []struct {
		name string
		eng  *client.Engine
		cfg  FleetConfig
	}{
		{"nil engine", nil, FleetConfig{Client: f.rdb, Name: "db"}},
		{"no client", f.eng, FleetConfig{Name: "db"}},
		{"no name", f.eng, FleetConfig{Client: f.rdb}},
	} {
		if fl, err := NewFleet(tc.eng, tc.cfg); err == nil {
			fl.Close(context.Background())
			t.Errorf("%s: no error", tc.name)
		}
	}
	c, err := FleetConfig{Client: f.rdb, Name: "db", Quorum: -1, Window: -1, ProbeEvery: time.Nanosecond, Lease: -1, Hold: -1, Heartbeat: -1, Timeout: -1}.normal()
	if err != nil {
		t.Fatal(err)
	}
	want := FleetConfig{Client: f.rdb, Name: "db", Replica: c.Replica, Quorum: 3, Window: 2 * time.Second, ProbeEvery: time.Millisecond,
		Lease: time.Second, Hold: 10 * time.Second, Heartbeat: time.Second, Timeout: 100 * time.Millisecond}
	if c != want || c.Replica == "" {
		t.Errorf("normal = %+v, want %+v and a Replica", c, want)
	}
}

// TestFleetLine: the script's answer and messages read back, and which
// of two states says more.
func TestFleetLine(t *testing.T) {
	l, err := parseFleetLine("100 4 held 900 3000 5 1000 7 1 250")
	if err != nil {
		t.Fatal(err)
	}
	want := fleetLine{born: 100, epoch: 4, state: client.FleetHeld, age: 100, left: 2000, share: 5, members: 7, at: 1000, holder: true, lease: 250}
	if l != want {
		t.Errorf("parsed %+v, want %+v", l, want)
	}
	for _, bad := range []string{"", "1 2 held 3 4 5 6", "1 2 odd 3 4 5 6 7", "1 x open 3 4 5 6 7", "1 2 open 3 4 5 6 7 8"} {
		if _, err := parseFleetLine(bad); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
	k := fleetLine{born: 100, epoch: 4, at: 1000}
	for i, tc := range []struct {
		l    fleetLine
		want bool
	}{
		{fleetLine{born: 100, epoch: 5, at: 900}, true},   // a later epoch
		{fleetLine{born: 100, epoch: 3, at: 2000}, false}, // an earlier one, read later
		{fleetLine{born: 100, epoch: 4, at: 1001}, true},  // the same, read later
		{fleetLine{born: 100, epoch: 4, at: 999}, false},  // the same, read earlier
		{fleetLine{born: 0, epoch: 0, at: 2000}, true},    // Redis lost the state
		{fleetLine{born: 200, epoch: 1, at: 2000}, true},  // and wrote it again
		{fleetLine{born: 0, epoch: 0, at: 99}, false},     // read before the state was first written
		{fleetLine{born: 0, epoch: 0, at: 1000}, false},   // the same microsecond
		{fleetLine{born: 101, epoch: 1, at: 1000}, true},  // written again, the same microsecond
		{fleetLine{born: 50, epoch: 9, at: 999}, false},   // another history, read earlier
	} {
		if got := tc.l.newer(k); got != tc.want {
			t.Errorf("step %d: %+v newer than %+v = %v, want %v", i, tc.l, k, got, tc.want)
		}
	}
}

// TestFleetPoolHealthyPath: two client.Pools joined to their replicas'
// fleets make a thousand connections each and lend them four thousand
// times; while every Open works, no pool reports anything and neither
// replica sends Redis a command (the clock does not move, so no
// heartbeat is due). One failed Open is reported, once.
func TestFleetPoolHealthyPath(t *testing.T) {
	r := newFleetRig(t, 2, FleetConfig{})
	var fail atomic.Bool
	var next atomic.Int64
	pools := make([]*client.Pool[int64], 2)
	for i := range pools {
		p, err := client.NewPool(r.eng, client.PoolConfig[int64]{
			Open: func(context.Context) (int64, error) {
				if fail.Load() {
					return 0, errors.New("refused")
				}
				return next.Add(1), nil
			},
			Limits: client.Limits{Size: 4, Idle: 4},
			Ward:   client.Ward{Backoff: client.DefaultBackoff},
			Fleet:  r.fleets[i],
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(context.Background())
		pools[i] = p
	}
	r.settle(t)
	before := r.steps.read()
	ctx := context.Background()
	for n := range 4000 {
		p := pools[n%2]
		c, err := p.Get(ctx)
		if err != nil {
			t.Fatalf("Get %d: %v", n, err)
		}
		if n%4 < 2 {
			err = p.Discard(c) // the next Get makes a new one
		} else {
			err = p.Put(c)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r.settle(t)
	if after := r.steps.read(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("healthy pools made Redis calls: %v before, %v after", before, after)
	}
	for i, p := range pools {
		if st := p.Stats(); st.Made < 1000 || st.Fleet != client.FleetOpen {
			t.Errorf("pool %d: made %d, fleet %v; want a thousand made, open", i, st.Made, st.Fleet)
		}
		if st := r.fleets[i].Stats(); st.Reports != 0 {
			t.Errorf("replica %d sent %d reports while every Open worked", i, st.Reports)
		}
	}
	// A failure reaches Redis: the count above can tell.
	fail.Store(true)
	for n := 0; ; n++ {
		c, err := pools[0].Get(ctx) // the idle ones first, then an Open
		if err != nil {
			break
		}
		if n == 4 {
			t.Fatalf("Get with Open failing handed %v", c)
		}
		pools[0].Discard(c)
	}
	awaitTold(t, "the failure reported", func() bool { return r.steps.read()[stepFail] == 1 }, r.tell)
}
