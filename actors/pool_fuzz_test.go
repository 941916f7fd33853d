package actors

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

// The operations FuzzPoolActor sends, one per pair of input bytes: the
// operation, then an argument.
const (
	opTake     = iota // a Take without Wait
	opTakeWait        // a Take with Wait, left parked if it must wait
	opGive            // arg: which held item; strict or not; now and then misuse
	opMade            // a new resource for a Make (or, misused, for none)
	opUnmade          // the make failed
	opRelease         // the caller gave up before making
	opDrop            // arg: which held item; strict, with a reply or not; or an unknown one
	opCancel          // arg: which waiting Take to withdraw
	opTick            // a Tick at the clock's now, as a timer would send
	opClose           // Close
	opAdvance         // the clock moves, firing the actor's timers one by one
	opCollect         // collect what the pool retired, and close it
	numPoolOps
)

// fuzzWard is the ward of the pool actor under test and of its reference
// pool: the zero Ward, a bucket that spaces makes a second apart, or a
// backoff that holds makes back after a failure. A Ward is configuration, so
// the two pools share the value and nothing else. It is the only place
// FuzzPoolActor builds a ward.
func fuzzWard(kind uint8) policy.Ward {
	switch kind % 3 {
	case 1:
		return policy.Ward{Bucket: policy.Rate{PerSecond: 1, Burst: 1}}
	case 2:
		// Rigid ignores the draw, so the actor's own random source and the
		// reference's none give the same holds.
		return policy.Ward{Backoff: policy.Backoff{Base: time.Second, Factor: 2, Cap: 4 * time.Second, Attempts: 5, Jitter: policy.Rigid}}
	}
	return policy.Ward{}
}

// fuzzTake is one Take with Wait the fuzzer sent: what the model says it
// was answered (nil while parked) and what the actor answered.
type fuzzTake struct {
	m    *Take[int64]
	seq  int
	want *Answer[int64]
	got  *Answer[int64]
}

// actorModel is the pool actor's behaviour written plainly: a policy.Pool
// for the bookkeeping (FuzzPool holds that one to a model of its own), a
// slice for the FIFO of parked callers, and the instants the actor's timer
// must fire at, worked out from the pool rather than from timers. A caller
// gets from the actor exactly what it gets here.
type actorModel struct {
	p      *policy.Pool[int64]
	max    int         // MaxWaiting; 0 is no cap
	fifo   []*fuzzTake // parked, oldest first
	later  int64       // when a make may be tried for a parked caller after Later; 0 if none
	retire []int64     // retired, not yet collected
	now    int64       // the clock's reading
	ticks  int         // instants it has woken at, as a guard against a loop
}

func (m *actorModel) answerOf(t policy.Taken[int64]) Answer[int64] {
	a := Answer[int64]{Verdict: t.Verdict, Item: t.Item, After: t.After, Why: t.Why}
	if t.Verdict == policy.Shed && t.Why == policy.ReasonClosed {
		a.Err = ErrClosed
	}
	return a
}

// decide asks the pool, retiring stale resources on the caller's behalf.
func (m *actorModel) decide(now int64) policy.Taken[int64] {
	for {
		t := m.p.Take(now)
		if t.Verdict != policy.Stale {
			return t
		}
		m.retire = append(m.retire, t.Item)
	}
}

// take is a Take without Wait: always answered at once, Wait while others
// are parked (it does not overtake them).
func (m *actorModel) take(now int64) Answer[int64] {
	if len(m.fifo) > 0 {
		return Answer[int64]{Verdict: policy.Wait}
	}
	return m.answerOf(m.decide(now))
}

// wait is a Take with Wait: answered at once, or parked behind those already
// parked (nobody overtakes them), or parked because it must wait.
func (m *actorModel) wait(now int64, w *fuzzTake) {
	if len(m.fifo) > 0 {
		m.park(w)
		m.serve(now)
		return
	}
	t := m.decide(now)
	if t.Verdict == policy.Wait || t.Verdict == policy.Later {
		if t.Verdict == policy.Later && t.Why != policy.ReasonProbe { // a probe's outcome re-serves the line itself
			m.wakeAt(now, t.After)
		}
		m.park(w)
		return
	}
	a := m.answerOf(t)
	w.want = &a
}

func (m *actorModel) park(w *fuzzTake) {
	if m.max > 0 && len(m.fifo) >= m.max {
		w.want = &Answer[int64]{Verdict: policy.Shed, Err: ErrTooManyWaiting}
		return
	}
	m.fifo = append(m.fifo, w)
}

// serve answers the parked, oldest first, while there is something for them.
func (m *actorModel) serve(now int64) {
	for len(m.fifo) > 0 {
		t := m.decide(now)
		if t.Verdict == policy.Later && t.Why != policy.ReasonProbe { // a probe's outcome re-serves the line itself
			m.wakeAt(now, t.After)
		}
		if t.Verdict == policy.Wait || t.Verdict == policy.Later {
			return
		}
		a := m.answerOf(t)
		m.fifo[0].want = &a
		m.fifo = m.fifo[1:]
	}
}

func (m *actorModel) wakeAt(now int64, d time.Duration) {
	at := now + int64(d)
	if d >= policy.Never || at < now {
		at = math.MaxInt64
	}
	if m.later == 0 || at < m.later {
		m.later = at
	}
}

func (m *actorModel) cancel(w *fuzzTake) {
	if k := slices.Index(m.fifo, w); k >= 0 {
		m.fifo = slices.Delete(m.fifo, k, k+1)
		w.want = &Answer[int64]{Verdict: policy.Wait, Err: ErrCancelled}
	}
}

func (m *actorModel) give(item int64, strict bool, now int64) Answer[int64] {
	if strict && !m.p.Lent(item) {
		return Answer[int64]{Err: ErrNotLent}
	}
	kept := m.p.Give(item, now)
	m.serve(now)
	return Answer[int64]{Kept: kept}
}

// made refuses a resource the pool holds already (ErrDuplicate) and one
// made for a closed pool (not kept), freeing the room either way.
func (m *actorModel) made(item int64, now int64) Answer[int64] {
	var a Answer[int64]
	switch {
	case m.p.Holds(item):
		m.p.Release()
		a.Err = ErrDuplicate
	case m.p.Closed():
		m.p.Release()
	default:
		m.p.Made(item, now)
		a.Kept = m.p.Lent(item)
	}
	m.serve(now)
	return a
}

func (m *actorModel) drop(item int64, strict bool, now int64) Answer[int64] {
	if strict && !m.p.Lent(item) {
		return Answer[int64]{Err: ErrNotLent}
	}
	m.p.Drop(item)
	m.serve(now)
	return Answer[int64]{}
}

// tick is the actor's timer firing at now: evict, and try the parked again.
func (m *actorModel) tick(now int64) {
	if m.later != 0 && now >= m.later {
		m.later = 0
	}
	m.retire = m.p.EvictInto(now, m.retire)
	m.serve(now)
}

func (m *actorModel) close(now int64) {
	if m.p.Closed() {
		return
	}
	m.retire = append(m.retire, m.p.Close()...)
	for _, w := range m.fifo {
		w.want = &Answer[int64]{Verdict: policy.Shed, Why: policy.ReasonClosed, Err: ErrClosed}
	}
	m.fifo = nil
	m.serve(now)
}

// due is the next instant the actor must wake at on its own: the first
// idle resource to go stale, or the end of a Later.
func (m *actorModel) due() int64 {
	at := int64(math.MaxInt64)
	if d, ok := m.p.Deadline(); ok {
		at = d
	}
	if m.later != 0 {
		at = min(at, m.later)
	}
	return at
}

// advance is the clock moving to end: the actor wakes at every instant it
// is due, in order.
func (m *actorModel) advance(t *testing.T, end int64) {
	for {
		at := m.due()
		if at > end {
			m.now = end
			return
		}
		if m.ticks++; m.ticks > 100_000 {
			t.Fatal("the model keeps waking: a harness bug")
		}
		m.now = max(at, m.now)
		m.tick(m.now)
	}
}

// poolFuzz is one execution of FuzzPoolActor: the actor, its model, and the
// books of every resource, kept from the answers alone.
type poolFuzz struct {
	t   *testing.T
	v   *moontest.Clock
	ref *engine.Ref
	m   *actorModel
	lim policy.Limits

	step  int
	next  int64                // the last resource made
	alien int64                // the last resource the pool never made, for misuse
	held  []int64              // lent to the fuzzer, in the order it got them
	makes int                  // Make answers not yet followed by Made, Unmade or Release
	state map[int64]string     // "held", "home" (given back and kept), "closed"
	takes []*fuzzTake          // every Take with Wait, in the order sent
	sent  []chan Answer[int64] // every other reply channel, for answers that come twice
}

func (f *poolFuzz) fatalf(format string, args ...any) {
	f.t.Helper()
	f.t.Fatalf("step %d: "+format, append([]any{f.step}, args...)...)
}

func (f *poolFuzz) now() int64 { return f.v.Now() }

func (f *poolFuzz) reply() chan Answer[int64] {
	ch := make(chan Answer[int64], 2) // room for a wrong second answer, so it shows
	f.sent = append(f.sent, ch)
	return ch
}

// receive books what an answer granted: a resource lent, or room to make one.
func (f *poolFuzz) receive(a Answer[int64], what string) {
	f.t.Helper()
	if a.Err != nil {
		return
	}
	switch a.Verdict {
	case policy.Ready:
		if s := f.state[a.Item]; s != "home" {
			f.fatalf("%s: Ready %d, which is %q: lent twice, or never in the pool", what, a.Item, s)
		}
		f.state[a.Item] = "held"
		f.held = append(f.held, a.Item)
	case policy.Make:
		f.makes++
	}
}

// closeItem is the fuzzer closing a resource, which must happen once.
func (f *poolFuzz) closeItem(item int64, what string) {
	f.t.Helper()
	if f.state[item] == "closed" {
		f.fatalf("%s: %d closed twice", what, item)
	}
	f.state[item] = "closed"
}

func (f *poolFuzz) unhold(item int64) {
	f.held = slices.DeleteFunc(f.held, func(h int64) bool { return h == item })
}

// settle waits for the actor to handle everything sent so far, then checks
// the answers parked callers got against the model's, the FIFO and the
// books.
func (f *poolFuzz) settle() {
	f.t.Helper()
	ask := &Inspect{Reply: make(chan Stats, 1)}
	f.ref.Send(ask)
	s := recv(f.t, ask.Reply, "Inspect")

	for i, w := range f.takes {
		had := w.got != nil
		if w.got = poll(f.t, w.m.Reply, w.got, "waiting Take", w.seq); !had && w.got != nil {
			a := *w.got
			if a.Err == nil && (a.Verdict == policy.Ready || a.Verdict == policy.Make) {
				// FIFO: everyone parked before it has had an answer.
				for _, u := range f.takes[:i] {
					if u.got == nil {
						f.fatalf("waiting Take %d granted %v while Take %d, parked before it, still waits", w.seq, a.Verdict, u.seq)
					}
				}
			}
			f.receive(a, fmt.Sprintf("waiting Take %d", w.seq))
		}
		switch {
		case (w.got == nil) != (w.want == nil):
			f.fatalf("waiting Take %d: the actor answered %s, the model %s", w.seq, show(w.got), show(w.want))
		case w.got != nil && *w.got != *w.want:
			f.fatalf("waiting Take %d: the actor answered %s, the model %s", w.seq, show(w.got), show(w.want))
		}
	}

	p := f.m.p
	if s.Live != s.Idle+s.Busy || s.Live < 0 || s.Idle < 0 || s.Busy < 0 {
		f.fatalf("stats out of balance: %+v", s)
	}
	if f.lim.Size > 0 && s.Live > f.lim.Size {
		f.fatalf("live %d over size %d", s.Live, f.lim.Size)
	}
	if s.Live != p.Live() || s.Idle != p.Idle() || s.Busy != p.Busy() || s.Waiting != len(f.m.fifo) || s.Closed != p.Closed() {
		f.fatalf("actor has live %d idle %d busy %d waiting %d closed %v; the model %d %d %d %d %v",
			s.Live, s.Idle, s.Busy, s.Waiting, s.Closed, p.Live(), p.Idle(), p.Busy(), len(f.m.fifo), p.Closed())
	}
	// What is lent is exactly what the fuzzer holds; the rest of Busy is
	// room reserved for makes it was granted.
	if r := s.Busy - len(f.held); r < 0 || r > f.makes {
		f.fatalf("busy %d with %d held and %d makes granted", s.Busy, len(f.held), f.makes)
	}
	for _, it := range f.held {
		if !p.Lent(it) {
			f.fatalf("the fuzzer holds %d, which the pool does not lend", it)
		}
	}
}

func show(a *Answer[int64]) string {
	if a == nil {
		return "nothing yet"
	}
	return fmt.Sprintf("%+v", *a)
}

// pick chooses one of list by arg, or ok false when it is empty.
func pick[T any](list []T, arg byte) (T, bool) {
	var zero T
	if len(list) == 0 {
		return zero, false
	}
	return list[int(arg)%len(list)], true
}

func (f *poolFuzz) take() {
	now := f.now()
	m := &Take[int64]{Now: now, Reply: f.reply()}
	f.ref.Send(m)
	got := recv(f.t, m.Reply, "Take")
	if want := f.m.take(now); got != want {
		f.fatalf("Take = %+v, the model says %+v", got, want)
	}
	f.receive(got, "Take")
}

func (f *poolFuzz) takeWait() {
	now := f.now()
	w := &fuzzTake{m: &Take[int64]{Now: now, Wait: true, Reply: make(chan Answer[int64], 2)}, seq: len(f.takes)}
	f.takes = append(f.takes, w)
	f.ref.Send(w.m)
	f.m.wait(now, w)
}

func (f *poolFuzz) give(arg byte) {
	strict := arg&1 == 1
	var item int64
	switch {
	case (arg>>1)&3 != 3:
		it, ok := pick(f.held, arg>>4)
		if !ok {
			return
		}
		item = it
	case arg&8 != 0:
		// Given twice. Strict, because the fuzzer cannot tell an idle
		// resource from one the pool has retired and not handed over yet,
		// and a lax Give of a retired one would fill a reserved room with
		// a resource about to be closed: the caller's misuse, which
		// Strict exists to catch.
		strict = true
		var home []int64
		for it, s := range f.state {
			if s == "home" {
				home = append(home, it)
			}
		}
		slices.Sort(home)
		it, ok := pick(home, arg>>4)
		if !ok {
			return
		}
		item = it
	default: // one the pool never made
		f.alien++
		item = f.alien
	}
	now := f.now()
	m := &Give[int64]{Now: now, Item: item, Strict: strict, Reply: f.reply()}
	f.ref.Send(m)
	got := recv(f.t, m.Reply, "Give")
	if want := f.m.give(item, strict, now); got != want {
		f.fatalf("Give(%d, strict %v) = %+v, the model says %+v", item, strict, got, want)
	}
	if got.Err != nil {
		return
	}
	switch s := f.state[item]; {
	case s == "held" && got.Kept:
		f.state[item] = "home"
		f.unhold(item)
	case s == "held":
		f.unhold(item)
		f.closeItem(item, "Give refused")
	case s == "" && got.Kept: // an alien filled a reserved room
		f.state[item] = "home"
	case s == "home" && !got.Kept:
		f.fatalf("Give(%d) of one at home answered not kept", item)
	}
	// A refused alien, or one given back twice, is the caller's to deal
	// with and never entered the books.
}

func (f *poolFuzz) made() {
	f.next++
	item := f.next
	now := f.now()
	m := &Made[int64]{Now: now, Item: item, Reply: f.reply()}
	f.ref.Send(m)
	got := recv(f.t, m.Reply, "Made")
	if want := f.m.made(item, now); got != want {
		f.fatalf("Made(%d) = %+v, the model says %+v", item, got, want)
	}
	f.makes = max(f.makes-1, 0)
	if got.Kept {
		f.state[item] = "held"
		f.held = append(f.held, item)
	} else {
		f.closeItem(item, "Made refused")
	}
}

func (f *poolFuzz) unmade() {
	now := f.now()
	f.ref.Send(&Unmade{Now: now})
	f.m.p.Unmade(now)
	f.m.serve(now)
	f.makes = max(f.makes-1, 0)
}

func (f *poolFuzz) release() {
	now := f.now()
	f.ref.Send(&Release{Now: now})
	f.m.p.Release()
	f.m.serve(now)
	f.makes = max(f.makes-1, 0)
}

func (f *poolFuzz) drop(arg byte) {
	strict, answered := arg&1 == 1, arg&2 != 0
	var item int64
	if (arg>>2)&3 != 3 {
		it, ok := pick(f.held, arg>>4)
		if !ok {
			return
		}
		item = it
	} else {
		f.alien++
		item = f.alien
	}
	now := f.now()
	m := &Drop[int64]{Now: now, Item: item, Strict: strict}
	if answered {
		m.Reply = f.reply()
	}
	f.ref.Send(m)
	want := f.m.drop(item, strict, now)
	if answered {
		if got := recv(f.t, m.Reply, "Drop"); got != want {
			f.fatalf("Drop(%d, strict %v) = %+v, the model says %+v", item, strict, got, want)
		}
	}
	if want.Err == nil && f.state[item] == "held" {
		f.unhold(item)
		f.closeItem(item, "Drop")
	}
}

func (f *poolFuzz) cancel(arg byte) {
	list := f.takes
	if arg&0x80 != 0 { // mostly one still waiting
		list = slices.DeleteFunc(slices.Clone(list), func(w *fuzzTake) bool { return w.want != nil })
	}
	w, ok := pick(list, arg&0x7f)
	if !ok {
		return
	}
	f.ref.Send(&Cancel[int64]{Take: w.m})
	f.m.cancel(w)
}

func (f *poolFuzz) tick() {
	now := f.now()
	f.ref.Send(&Tick{Now: now})
	f.m.tick(now)
}

func (f *poolFuzz) close() {
	now := f.now()
	m := &Close{Now: now, Reply: make(chan Stats, 2)}
	f.ref.Send(m)
	s := recv(f.t, m.Reply, "Close")
	f.m.close(now)
	if !s.Closed || s.Waiting != 0 || s.Live != f.m.p.Live() || s.Idle != 0 {
		f.fatalf("Close answered %+v; the model has live %d, nothing idle or waiting", s, f.m.p.Live())
	}
	once(f.t, m.Reply, "Close", -1)
}

// advance moves the clock by an amount from arg, the model waking at every
// instant it is due as the actor's timers fire.
func (f *poolFuzz) advance(arg byte) {
	unit := [...]time.Duration{10 * time.Millisecond, 250 * time.Millisecond, time.Second, time.Minute}[arg>>6]
	end := f.now() + int64(arg&0x3f)*int64(unit)
	stepClock(f.t, f.v, end, func() {
		f.m.advance(f.t, f.now())
		f.settle()
	})
	f.m.advance(f.t, end)
}

func (f *poolFuzz) collect() {
	m := &Collect[int64]{Reply: make(chan []int64, 2)}
	f.ref.Send(m)
	got := recv(f.t, m.Reply, "Collect")
	want := f.m.retire
	f.m.retire = nil
	if !slices.Equal(got, want) {
		f.fatalf("Collect = %v, the model retired %v", got, want)
	}
	for _, it := range got {
		if s := f.state[it]; s != "home" {
			f.fatalf("Collect handed back %d, which is %q", it, s)
		}
		f.closeItem(it, "Collect")
	}
	once(f.t, m.Reply, "Collect", -1)
}

// FuzzPoolActor sends a pool actor on the virtual clock random runs of Take
// (waiting or not), Give, Made, Unmade, Release, Drop, Cancel, Tick, Close,
// Collect and clock moves, and holds it to what its callers rely on:
//   - every answer is the one a plain model gives (policy.Pool for the books,
//     a slice for the FIFO, the timer's instants worked out from the pool);
//   - every request is answered exactly once, none lost and none twice;
//   - parked callers are granted in the order they came;
//   - nothing is lent to two holders, and every resource leaves the books
//     exactly once: closed by its holder after a refused Give or Made or a
//     Drop, or collected after the pool retired it, and at the end, after
//     Close and everything handed back, nothing is live and every resource
//     has been closed.
func FuzzPoolActor(f *testing.F) {
	// Knobs: size, idle, keep (seconds), life (seconds), MaxWaiting, ward.
	f.Add(uint8(1), uint8(1), uint8(0), uint8(0), uint8(0), uint8(0), // park, then give
		[]byte{opTakeWait, 0, opMade, 0, opTakeWait, 0, opTakeWait, 0, opGive, 0, opGive, 0, opGive, 0})
	f.Add(uint8(1), uint8(1), uint8(0), uint8(0), uint8(0), uint8(0), // a cancel racing the answer
		[]byte{opTake, 0, opMade, 0, opTakeWait, 0, opGive, 0, opCancel, 0, opTakeWait, 0, opCancel, 0x81, opGive, 0})
	f.Add(uint8(2), uint8(2), uint8(0), uint8(0), uint8(0), uint8(0), // close with parked callers
		[]byte{opTake, 0, opTake, 0, opMade, 0, opTakeWait, 0, opTakeWait, 0, opClose, 0, opMade, 0, opGive, 0, opGive, 0, opCollect, 0})
	f.Add(uint8(2), uint8(0), uint8(0), uint8(0), uint8(0), uint8(1), // Later from the ward's bucket
		[]byte{opTake, 0, opRelease, 0, opTake, 0, opTakeWait, 0, opTakeWait, 0, opAdvance, 0x42, opMade, 0, opAdvance, 0x81, opUnmade, 0})
	f.Add(uint8(3), uint8(0), uint8(0), uint8(0), uint8(0), uint8(2), // Later from the ward's backoff
		[]byte{opTake, 0, opUnmade, 0, opTakeWait, 0, opTick, 0, opAdvance, 0x84, opUnmade, 0, opTakeWait, 0, opAdvance, 0x88, opMade, 0, opMade, 0})
	f.Add(uint8(3), uint8(2), uint8(2), uint8(5), uint8(0), uint8(0), // eviction by keep and by life
		[]byte{opTake, 0, opMade, 0, opTake, 0, opMade, 0, opGive, 0, opAdvance, 0x81, opGive, 0, opAdvance, 0x83, opCollect, 0, opTake, 0, opAdvance, 0x85, opCollect, 0})
	f.Add(uint8(1), uint8(0), uint8(0), uint8(0), uint8(1), uint8(0), // a cap on waiters, and misuse
		[]byte{opTake, 0, opMade, 0, opTakeWait, 0, opTakeWait, 0, opGive, 7, opGive, 15, opDrop, 13, opDrop, 3, opMade, 0, opUnmade, 0, opRelease, 0})
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, size, idle, keep, life, maxWaiting, ward uint8, ops []byte) {
		if len(ops) > 256 {
			ops = ops[:256]
		}
		v := r.begin()
		lim := policy.Limits{
			Size: int(size % 5), // 0 is no limit
			Idle: int(idle % 4),
			Keep: time.Duration(keep%7) * time.Second, // 0 is for ever
			Life: time.Duration(life%13) * time.Second,
		}
		w := fuzzWard(ward)
		cfg := PoolConfig{Limits: lim, Ward: w, MaxWaiting: int(maxWaiting % 4), Seed: 1}
		ref, err := SpawnPool[int64](r.e, "", cfg, nil)
		pf := &poolFuzz{
			t: t, v: v, ref: r.spawned(t, ref, err), lim: lim,
			m:     &actorModel{p: policy.NewPool[int64](lim, w), max: cfg.MaxWaiting, now: v.Now()},
			alien: 1 << 40,
			state: map[int64]string{},
		}
		for s := 0; s+1 < len(ops); s += 2 {
			pf.step = s / 2
			arg := ops[s+1]
			switch ops[s] % numPoolOps {
			case opTake:
				pf.take()
			case opTakeWait:
				pf.takeWait()
			case opGive:
				pf.give(arg)
			case opMade:
				pf.made()
			case opUnmade:
				pf.unmade()
			case opRelease:
				pf.release()
			case opDrop:
				pf.drop(arg)
			case opCancel:
				pf.cancel(arg)
			case opTick:
				pf.tick()
			case opClose:
				pf.close()
			case opAdvance:
				pf.advance(arg)
			case opCollect:
				pf.collect()
			}
			pf.settle()
		}
		pf.finish()
	})
}

// finish closes the pool and hands everything back, as a client's shutdown
// does, and checks that nothing is left: no caller unanswered, nothing live,
// every resource closed exactly once, no request answered twice.
func (f *poolFuzz) finish() {
	f.step = -1
	f.close()
	f.settle()
	f.collect()
	for _, it := range slices.Clone(f.held) {
		now := f.now()
		m := &Give[int64]{Now: now, Item: it, Strict: true, Reply: f.reply()}
		f.ref.Send(m)
		got := recv(f.t, m.Reply, "Give after Close")
		if want := f.m.give(it, true, now); got != want || got.Kept {
			f.fatalf("Give(%d) after Close = %+v, want %+v and not kept", it, got, want)
		}
		f.unhold(it)
		f.closeItem(it, "Give after Close")
	}
	for f.makes > 0 {
		f.release()
	}
	f.settle()
	d := &Drained{Reply: make(chan Stats, 2)}
	f.ref.Send(d)
	if s := recv(f.t, d.Reply, "Drained"); s.Live != 0 || s.Busy != 0 || s.Waiting != 0 {
		f.fatalf("after everything came home: %+v", s)
	}
	once(f.t, d.Reply, "Drained", -1)
	f.collect()
	for _, w := range f.takes {
		if w.got == nil {
			f.fatalf("waiting Take %d was never answered", w.seq)
		}
	}
	for it, s := range f.state {
		if s != "closed" {
			f.fatalf("resource %d is %q at the end: lost", it, s)
		}
	}
	for _, ch := range f.sent {
		once(f.t, ch, "a request", -1)
	}
}
