package actors

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// TestAdaptiveTimesSomeUnderLoad: at a hundred calls a millisecond the
// callers time a few hundred calls a window, not all of them, and the
// latency the gate learns is still theirs. At a trickle every call is
// timed.
func TestAdaptiveTimesSomeUnderLoad(t *testing.T) {
	h := newHarness(t)
	ref, room, err := SpawnAdaptive(h.e, "", policy.AdaptiveConfig{Min: 1000, Max: 1000, Start: 1000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	run := func(perMs int, d time.Duration) (calls, timed int) {
		for range d / time.Millisecond {
			for range perMs {
				ok, tm := room.Enter(2)
				if !ok {
					t.Fatal("no room at 1,000")
				}
				calls++
				if tm {
					timed++
					room.Leave(5 * time.Millisecond)
				} else {
					room.Drop()
				}
			}
			h.clock.Advance(time.Millisecond)
		}
		return calls, timed
	}
	if calls, timed := run(1, 300*time.Millisecond); timed != calls {
		t.Fatalf("a call a millisecond: %d of %d timed, want all", timed, calls)
	}
	run(100, 300*time.Millisecond)
	calls, timed := run(100, 100*time.Millisecond)
	if timed < adaptiveTimed/2 || timed > 4*adaptiveTimed {
		t.Fatalf("%d of %d calls timed in a window, want a few hundred", timed, calls)
	}
	s := inspectAdaptive(t, ref)
	if s.Latency != 5*time.Millisecond || s.Classes[2].Entered != int64(300+300*100+100*100) {
		t.Fatalf("stats %+v: want a latency of 5ms and every call counted", s)
	}
}

// inspectAdaptive asks ref's adaptive gate for its stats.
func inspectAdaptive(t *testing.T, ref *engine.Ref) AdaptiveStats {
	t.Helper()
	reply := make(chan AdaptiveStats, 1)
	ref.Send(&AdaptiveInspect{Reply: reply})
	select {
	case s := <-reply:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no stats after 5s")
	}
	return AdaptiveStats{}
}

// TestAdaptiveLimitFallsCutsTheLine: when the limit falls, a line that
// follows it is cut to its new length, the lowest class and the latest
// comers first, and those cut are answered ErrOverLimit. A fixed line is
// not cut.
func TestAdaptiveLimitFallsCutsTheLine(t *testing.T) {
	t.Run("following", func(t *testing.T) { limitFalls(t, 0) })
	t.Run("fixed", func(t *testing.T) { limitFalls(t, 16) })
}

// limitFalls fills a line of queue (0: twice the limit, 16) and brings the
// limit from 8 down to 4: a line that follows the limit is cut to 8, a
// fixed one is not cut.
func limitFalls(t *testing.T, queue int) {
	const ms = int64(time.Millisecond)
	a := &adaptiveActor{
		ctl:   *policy.NewAdaptive(policy.AdaptiveConfig{Start: 8}, 0),
		room:  &AdaptiveRoom{},
		queue: queue,
		every: 25 * time.Millisecond,
	}
	a.alarm.clock = vclock.NewVirtual()
	// Eight inside, through the actor, and a window at 10 ms.
	for range 8 {
		m := &AdaptiveEnter{Now: 0, Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
		a.Handle(m)
		if p := m.Slot.Take(); !p.OK {
			t.Fatalf("enter: %+v", p)
		}
	}
	addSamples(a.room, 200, 10*time.Millisecond)
	a.Handle(&Tick{Now: 100 * ms})
	// A full line, twice the limit: eight low, then eight high.
	line := make([]*AdaptiveEnter, 16)
	for i := range line {
		line[i] = &AdaptiveEnter{Now: 0, Class: 0, Wait: true, Slot: new(engine.Reply[Permit])}
		if i >= 8 {
			line[i].Class = 3
		}
		a.Handle(line[i])
	}
	if a.waiting != 16 {
		t.Fatalf("%d waiting, want 16", a.waiting)
	}
	// A window at 40 ms with the line full: a queue.
	addSamples(a.room, 200, 40*time.Millisecond)
	a.Handle(&Tick{Now: 200 * ms})
	if l := a.ctl.Limit(); l != 4 {
		t.Fatalf("limit %d, want 4", l)
	}
	for i, m := range line {
		cut := queue == 0 && i < 8
		if m.Slot.Ready() != cut {
			t.Fatalf("waiter %d (class %d): answered %v, want %v", i, m.Class, m.Slot.Ready(), cut)
		}
		if cut {
			if p := m.Slot.Take(); !errors.Is(p.Err, ErrOverLimit) || !errors.Is(p.Err, ErrShed) {
				t.Fatalf("waiter %d cut with %v, want ErrOverLimit", i, p.Err)
			}
		}
	}
	shed, waiting := int64(8), 8
	if queue != 0 {
		shed, waiting = 0, 16
	}
	if a.counts[0].Shed != shed || a.waiting != waiting {
		t.Fatalf("shed %d, waiting %d; want %d and %d", a.counts[0].Shed, a.waiting, shed, waiting)
	}
	a.alarm.stop()
}

// addSamples adds n calls of rtt each to r's stripes.
func addSamples(r *AdaptiveRoom, n int, rtt time.Duration) {
	for range n {
		r.Leave(rtt)
	}
}

// TestAdaptiveDeadlinesReachTheLimit: the deadline of a caller who asks
// the actor reaches the limit. A queue whose latency fits it does not cut
// the limit below its start; one that does not fit cuts it only as far as
// the deadline needs; with no deadline, the queue alone decides.
func TestAdaptiveDeadlinesReachTheLimit(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, tc := range []struct {
		left  time.Duration // the waiter's time to its deadline
		limit int
	}{
		{time.Second, 8},
		{40 * time.Millisecond, 6}, // 8 × 40/(1.25 × 40)
		{0, 4},                     // 8 × 15/40, at most a half
	} {
		a := &adaptiveActor{
			ctl:   *policy.NewAdaptive(policy.AdaptiveConfig{Start: 8}, 0),
			room:  &AdaptiveRoom{},
			every: 25 * time.Millisecond,
		}
		a.alarm.clock = vclock.NewVirtual()
		for range 8 {
			m := &AdaptiveEnter{Now: 0, Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
			a.Handle(m)
		}
		addSamples(a.room, 200, 10*time.Millisecond)
		a.Handle(&Tick{Now: 100 * ms})
		// A caller in line, then a window at 40 ms: a queue.
		m := &AdaptiveEnter{Now: 150 * ms, Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
		if tc.left != 0 {
			m.Deadline = 150*ms + int64(tc.left)
		}
		a.Handle(m)
		addSamples(a.room, 200, 40*time.Millisecond)
		a.Handle(&Tick{Now: 200 * ms})
		if l := a.ctl.Limit(); l != tc.limit {
			t.Errorf("deadline %v away: limit %d, want %d", tc.left, l, tc.limit)
		}
		a.alarm.stop()
	}
}

// fixedAdaptive is an adaptive gate's actor with a limit that stays at
// limit, on a virtual clock, run by hand: at is the instant ms
// milliseconds after the clock's start.
func fixedAdaptive(t *testing.T, limit int) (a *adaptiveActor, clock *vclock.Virtual, at func(ms int64) int64) {
	clock = vclock.NewVirtual()
	t0 := clock.Now()
	a = &adaptiveActor{
		ctl:   *policy.NewAdaptive(policy.AdaptiveConfig{Min: limit, Max: limit, Start: limit}, t0),
		room:  &AdaptiveRoom{},
		every: 25 * time.Millisecond,
	}
	a.alarm.clock = clock
	t.Cleanup(a.alarm.stop)
	return a, clock, func(ms int64) int64 { return t0 + ms*int64(time.Millisecond) }
}

// TestAdaptiveTurnWeighsRecentLatency: a waiter whose turn comes is let
// in only if the latency of the calls that finished last, and a quarter,
// fits before its deadline. A window's mean, up to a window old, is not
// enough: when a burst builds a queue at the dependency, the calls let in
// would finish late. The room goes to the next waiter, who has the time.
func TestAdaptiveTurnWeighsRecentLatency(t *testing.T) {
	a, clock, at := fixedAdaptive(t, 8)
	t0 := at(0)
	for range 8 {
		m := &AdaptiveEnter{Now: t0, Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
		a.Handle(m)
		if p := m.Slot.Take(); !p.OK {
			t.Fatalf("enter: %+v", p)
		}
	}
	// A window of calls of 10 ms.
	addSamples(a.room, 200, 10*time.Millisecond)
	clock.AdvanceTo(at(100))
	a.Handle(&Tick{Now: at(100)})
	if l := a.ctl.Latency(); l != 10*time.Millisecond {
		t.Fatalf("window latency %v, want 10ms", l)
	}
	// Two wait: one with 30 ms to its deadline, one with a second.
	short := &AdaptiveEnter{Now: at(100), Deadline: at(130), Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
	long := &AdaptiveEnter{Now: at(100), Deadline: at(1100), Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
	a.Handle(short)
	a.Handle(long)
	if short.Slot.Ready() || long.Slot.Ready() || a.waiting != 2 {
		t.Fatalf("%d waiting, want both in line", a.waiting)
	}
	// A queue builds at the dependency: calls now take 18 ms. A look
	// reads them within the window.
	addSamples(a.room, 16, 18*time.Millisecond)
	clock.AdvanceTo(at(110))
	a.Handle(&Tick{Now: at(110)})
	if l := a.ctl.Latency(); l != 10*time.Millisecond {
		t.Fatalf("window latency %v, want still 10ms", l)
	}
	// One leaves: 20 ms is left to the first waiter, under 18 ms and a
	// quarter.
	a.Handle(Leave{})
	if !short.Slot.Ready() || !long.Slot.Ready() {
		t.Fatal("both waiters should be answered")
	}
	if p := short.Slot.Take(); !errors.Is(p.Err, ErrDeadline) || p.After != 22500*time.Microsecond {
		t.Fatalf("the waiter 20ms from its deadline: %+v, want ErrDeadline after 22.5ms", p)
	}
	if p := long.Slot.Take(); !p.OK {
		t.Fatalf("the waiter a second from its deadline: %+v, want in", p)
	}
	if a.counts[1].Deadline != 1 || a.held != 8 {
		t.Fatalf("deadline refusals %d, held %d; want 1 and 8", a.counts[1].Deadline, a.held)
	}
}

// TestAdaptiveRecentLatencyBounded: one call far slower than the rest
// moves the recent latency to at most twice the window's, so a waiter is
// not refused for a deadline the other calls would fit.
func TestAdaptiveRecentLatencyBounded(t *testing.T) {
	a, clock, at := fixedAdaptive(t, 8)
	for range 8 {
		m := &AdaptiveEnter{Now: at(0), Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
		a.Handle(m)
		m.Slot.Take()
	}
	addSamples(a.room, 200, 10*time.Millisecond)
	clock.AdvanceTo(at(100))
	a.Handle(&Tick{Now: at(100)})
	// Seven calls of 10 ms and one of 30 s, read within the next window.
	addSamples(a.room, 7, 10*time.Millisecond)
	addSamples(a.room, 1, 30*time.Second)
	clock.AdvanceTo(at(110))
	a.Handle(&Tick{Now: at(110)})
	if r := a.recent(); r != 20*time.Millisecond {
		t.Fatalf("recent latency %v, want twice the window's 10ms", r)
	}
	for _, sum := range []time.Duration{20*time.Millisecond - 1, 20 * time.Millisecond, 20*time.Millisecond + 1} {
		was := a.last
		a.last.n, a.last.sum = 1, int64(sum)
		a.fresh.n, a.fresh.sum = 0, 0
		if r := a.recent(); r != min(sum, 20*time.Millisecond) {
			t.Fatalf("a call of %v: recent latency %v, want it within twice the window's", sum, r)
		}
		a.last = was
	}
	m := &AdaptiveEnter{Now: at(110), Deadline: at(140), Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
	a.Handle(m)
	a.Handle(Leave{})
	if p := m.Slot.Take(); !p.OK {
		t.Fatalf("a waiter 30ms from its deadline: %+v, want in", p)
	}
}

// TestAdaptiveTimerKeepsTheLease: while nobody waits, the actor reads
// the callers' latencies on its timer with the room still lent, so
// callers go on entering through it meanwhile, and those inside give
// their room back to it afterwards without a message. The in-flight it
// reads counts only the callers inside.
func TestAdaptiveTimerKeepsTheLease(t *testing.T) {
	a, clock, at := fixedAdaptive(t, 8)
	a.lend()
	for i := range 3 {
		if ok, _ := a.room.Enter(1); !ok {
			t.Fatalf("enter %d: no room lent", i)
		}
	}
	// Calls that finished before, read by the timer.
	a.room.stripes[0].n.Add(16)
	a.room.stripes[0].sum.Add(int64(16 * 10 * time.Millisecond))
	clock.AdvanceTo(at(25))
	a.Handle(&Tick{Now: at(25)})
	if got := a.inside(); got != 3 {
		t.Fatalf("inside %d after the timer read, want 3", got)
	}
	for i := range 3 {
		if !a.room.Drop() {
			t.Fatalf("leave %d: the room went to the actor, want it back in the lease", i)
		}
	}
	for i := range 8 {
		if ok, _ := a.room.Enter(1); !ok {
			t.Fatalf("enter %d of 8 after the timer: no room", i)
		}
	}
	if ok, _ := a.room.Enter(1); ok {
		t.Fatal("a ninth entered a gate of 8")
	}
	if a.room.busy.Load() {
		t.Fatal("the actor says it is answering after it has read")
	}
}

// TestAdaptiveLeaveLendsWhatItFrees: a Leave that comes to the actor, from
// a caller let in outside the lease, frees its room into the lease still
// out, and the limit holds.
func TestAdaptiveLeaveLendsWhatItFrees(t *testing.T) {
	a, _, _ := fixedAdaptive(t, 4)
	a.lend()
	for range 4 {
		if ok, _ := a.room.Enter(1); !ok {
			t.Fatal("no room lent")
		}
	}
	// A request takes the lease back: the four are now held outside it.
	reply := make(chan AdaptiveStats, 1)
	a.Handle(&AdaptiveInspect{Reply: reply})
	if s := <-reply; s.InFlight != 4 {
		t.Fatalf("in flight %d, want 4", s.InFlight)
	}
	if a.room.Drop() {
		t.Fatal("a caller held outside the lease gave its room to a lease that lent none")
	}
	a.Handle(Leave{}) // none lent: the actor takes it in with the lease back
	if ok, _ := a.room.Enter(1); !ok {
		t.Fatal("the room a Leave freed was not lent")
	}
	// Two of those left outside the lease: their Leaves come to the actor
	// while a lease is out, and lend their room into it.
	for range 2 {
		a.Handle(Leave{})
	}
	for i := range 2 {
		if ok, _ := a.room.Enter(1); !ok {
			t.Fatalf("enter %d: the room freed by a Leave was not lent", i)
		}
	}
	if ok, _ := a.room.Enter(1); ok {
		t.Fatal("a fifth entered a gate of 4")
	}
	if got := a.inside(); got != 4 {
		t.Fatalf("inside %d, want 4", got)
	}
}

// TestAdaptiveRoomSettled: Settled does not wait on an actor that answers
// nobody, or for ever on one that stays busy; the actor is not busy once
// it has answered, and has lent again.
func TestAdaptiveRoomSettled(t *testing.T) {
	a, _, _ := fixedAdaptive(t, 4)
	a.lend()
	reply := make(chan AdaptiveStats, 1)
	a.Handle(&AdaptiveInspect{Reply: reply})
	<-reply
	if a.room.busy.Load() || a.room.Settled() {
		t.Fatal("the actor is busy, or settled, after it answered")
	}
	if ok, _ := a.room.Enter(1); !ok {
		t.Fatal("nothing lent after the answer")
	}
	var r AdaptiveRoom
	r.busy.Store(true)
	if r.Settled() {
		t.Fatal("settled while the actor stayed busy")
	}
}

// TestAdaptiveBusyOnlyWhenItMayLend: while the actor answers with the room
// taken back, callers who find none may spin for the lend to follow
// (Settled); with callers in line nothing will be lent, and the actor
// does not say it is busy, so they ask at once.
func TestAdaptiveBusyOnlyWhenItMayLend(t *testing.T) {
	for _, waiting := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			a, _, at := fixedAdaptive(t, 4)
			a.lend()
			for range 4 {
				if ok, _ := a.room.Enter(1); !ok {
					t.Fatal("no room lent")
				}
			}
			if waiting {
				m := &AdaptiveEnter{Now: at(0), Class: 1, Wait: true, Slot: new(engine.Reply[Permit])}
				a.Handle(m)
				if a.waiting != 1 {
					t.Fatalf("%d waiting, want 1", a.waiting)
				}
			}
			reply := make(chan AdaptiveStats) // the actor blocks on it, mid-answer
			go a.Handle(&AdaptiveInspect{Reply: reply})
			synctest.Wait()
			busy := a.room.busy.Load()
			<-reply
			synctest.Wait()
			if busy == waiting || a.room.busy.Load() {
				t.Fatalf("with a caller waiting %v: busy %v while answering, %v after; want %v, then false", waiting, busy, a.room.busy.Load(), !waiting)
			}
		})
	}
}

// TestAdaptiveSleepSeesACallSinceTheFold: the timer stops only if no call
// came through the lent room since the fold that found nothing new. One
// that did left its latency in the stripes, and its Leave saw the actor
// awake and woke nobody: the actor reads on.
func TestAdaptiveSleepSeesACallSinceTheFold(t *testing.T) {
	a, _, at := fixedAdaptive(t, 8)
	a.lend()
	a.awake = true
	a.fold(at(0))
	if ok, _ := a.room.Enter(1); !ok {
		t.Fatal("no room lent")
	}
	if !a.room.Leave(time.Millisecond) {
		t.Fatal("the room went to the actor, want it back in the lease")
	}
	if a.sleep() || a.room.asleep.Load() || !a.awake {
		t.Fatal("the actor slept with a call unread")
	}
	a.fold(at(1))
	if !a.sleep() || !a.room.asleep.Load() || a.awake {
		t.Fatal("the actor did not sleep with nothing new")
	}
}

// TestAdaptiveEnteredOnlyGrows: while callers of one class pass through
// the lent room, a stats read never counts them in another class, and no
// class's Entered ever falls.
func TestAdaptiveEnteredOnlyGrows(t *testing.T) {
	h := newHarness(t)
	ref, room, err := SpawnAdaptive(h.e, "", policy.AdaptiveConfig{Min: 8, Max: 8, Start: 8}, 0)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ok, _ := room.Enter(2); ok {
					room.Drop()
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	var last [AdaptiveClasses]int64
	for i := range 3000 {
		s := inspectAdaptive(t, ref)
		for c := range last {
			if s.Classes[c].Entered < last[c] {
				t.Fatalf("read %d: class %d Entered fell from %d to %d", i, c, last[c], s.Classes[c].Entered)
			}
			last[c] = s.Classes[c].Entered
		}
		if s.Classes[1].Entered != 0 {
			t.Fatalf("read %d: class 1 Entered %d with no caller of class 1", i, s.Classes[1].Entered)
		}
		h.clock.Advance(time.Millisecond)
	}
}

// TestAdaptiveTinyWindow: a window of a nanosecond is a millisecond, so
// the actor's timer reads a fourth of a millisecond apart, not all the
// time.
func TestAdaptiveTinyWindow(t *testing.T) {
	h := newHarness(t)
	_, room, err := SpawnAdaptive(h.e, "", policy.AdaptiveConfig{Min: 4, Max: 4, Start: 4, Window: time.Nanosecond}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := room.Enter(2); !ok {
		t.Fatal("no room at 4")
	}
	room.Leave(time.Microsecond) // wakes the actor: it sets its timer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.clock.WaitPending(ctx, 1); err != nil {
		t.Fatalf("no timer after a Leave woke the actor: %v", err)
	}
	if d, ok := h.clock.Next(); !ok || d != policy.MinAdaptiveWindow/adaptiveLooks {
		t.Fatalf("next tick in %v, want %v", d, policy.MinAdaptiveWindow/adaptiveLooks)
	}
}
