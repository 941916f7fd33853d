package actors

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

// The operations FuzzLimiterActor sends, one per pair of input bytes.
const (
	opAllow      = iota // an Allow without Wait; arg: how many
	opAllowWait         // an Allow with Wait; arg: how many, and a deadline or none
	opWithdraw          // arg: which Allow to withdraw
	opLeft              // Left
	opLimTick           // a Tick at the clock's now, as a timer would send
	opLimAdvance        // the clock moves, firing the actor's timers one by one
	numLimOps
)

// limiterRef is the policy a limiter actor must agree with, held in
// lockstep: it takes exactly what the actor grants, when the actor grants
// it.
type limiterRef interface {
	take(now int64, n float64) bool
	next(now int64, n float64) time.Duration // 0 when a take of n would pass now
	left(now int64) float64
	free(n float64) bool // whether asking for n is always granted, parked callers or not
	// fits says whether grants can have passed in these amounts at these
	// instants, judged from the limit alone.
	fits(grants []grant) error
}

// grant is one Allow the actor granted, and when.
type grant struct {
	at int64
	n  float64
}

type bucketRef struct {
	b           *policy.Bucket
	rate, burst float64 // as NewBucket read them
}

func (r bucketRef) take(now int64, n float64) bool          { return r.b.Take(now, n) }
func (r bucketRef) free(n float64) bool                     { return n <= 0 }
func (r bucketRef) next(now int64, n float64) time.Duration { return r.b.Next(now, n) }
func (r bucketRef) left(now int64) float64                  { return r.b.Tokens(now) }

// fits: between any two grants, no more was granted than the burst plus what
// the rate earned in between.
func (r bucketRef) fits(gs []grant) error {
	if math.IsInf(r.rate, 1) {
		return nil
	}
	for i := range gs {
		sum := 0.0
		for j := i; j < len(gs); j++ {
			sum += max(gs[j].n, 0)
			earned := r.rate * float64(gs[j].at-gs[i].at) / 1e9
			if bound := r.burst + earned; sum > bound*(1+1e-9)+1e-9 {
				return fmt.Errorf("granted %v from +%v to +%v, more than the burst %v and the %v earned",
					sum, time.Duration(gs[i].at-moontest.Epoch), time.Duration(gs[j].at-moontest.Epoch), r.burst, earned)
			}
		}
	}
	return nil
}

type windowRef struct {
	w      *policy.Window
	allow  int
	window time.Duration
}

func (r windowRef) take(now int64, _ float64) bool          { return r.w.Take(now) }
func (r windowRef) free(float64) bool                       { return false }
func (r windowRef) next(now int64, _ float64) time.Duration { return r.w.Next(now) }
func (r windowRef) left(now int64) float64                  { return float64(r.w.Left(now)) }

// fits: no stretch a window long holds more than allow grants.
func (r windowRef) fits(gs []grant) error {
	if r.allow <= 0 && len(gs) > 0 {
		return fmt.Errorf("%d granted by a window allowing nothing", len(gs))
	}
	if r.window <= 0 {
		return nil
	}
	for i := range gs {
		k := 0
		for j := i; j < len(gs) && gs[j].at-gs[i].at < int64(r.window); j++ {
			k++
		}
		if k > r.allow {
			return fmt.Errorf("%d granted in the %v from +%v, allow %d", k, r.window, time.Duration(gs[i].at-moontest.Epoch), r.allow)
		}
	}
	return nil
}

// fuzzAllow is one Allow FuzzLimiterActor sent.
type fuzzAllow struct {
	m         *Allow
	seq       int
	got       *Permit
	parked    bool // it was not answered on arrival
	withdrawn bool // a Withdraw was sent while it was parked
}

// limFuzz is one execution of FuzzLimiterActor.
type limFuzz struct {
	t   *testing.T
	v   *moontest.Clock
	ref *engine.Ref
	pol limiterRef
	n   []float64 // what an Allow may ask for, picked by its arg

	step   int
	allows []*fuzzAllow // every Allow, in the order sent
	line   []*fuzzAllow // parked and not yet answered, oldest first
	fresh  *fuzzAllow   // an Allow with Wait sent since the last settle
	grants []grant
	left   []chan Permit
}

func (f *limFuzz) fatalf(format string, args ...any) {
	f.t.Helper()
	f.t.Fatalf("step %d at +%v: "+format, append([]any{f.step, time.Duration(f.v.Now() - moontest.Epoch)}, args...)...)
}

func (f *limFuzz) send(arg byte, wait bool) *fuzzAllow {
	now := f.v.Now()
	m := &Allow{Now: now, N: f.n[int(arg&0x0f)%len(f.n)], Wait: wait, Reply: make(chan Permit, 2)}
	if k := int64(arg >> 4); wait && k > 0 {
		// From now to 19.6s on, finer near: (k-1)² tenths of a second.
		m.Deadline = now + (k-1)*(k-1)*int64(100*time.Millisecond)
	}
	a := &fuzzAllow{m: m, seq: len(f.allows)}
	f.allows = append(f.allows, a)
	f.ref.Send(m)
	return a
}

// allow is an Allow without Wait. With nobody parked it is answered as the
// policy answers; with anybody parked it is refused, so nobody overtakes
// them.
func (f *limFuzz) allow(arg byte) {
	a := f.send(arg, false)
	p := recv(f.t, a.m.Reply, "Allow")
	a.got = &p
	now, n := a.m.Now, a.m.N
	switch {
	case p.Err != nil:
		f.fatalf("Allow(%v) = %+v", n, p)
	case f.pol.free(n):
		// Asking a bucket for nothing overtakes nobody: always granted.
		if !p.OK {
			f.fatalf("Allow(%v) with %d parked = %+v, want granted", n, len(f.line), p)
		}
	case len(f.line) > 0:
		if p.OK || p.After <= 0 {
			f.fatalf("Allow(%v) with %d parked = %+v, want refused with a wait", n, len(f.line), p)
		}
	case p.OK:
		if !f.pol.take(now, n) {
			f.fatalf("Allow(%v) granted, which the policy refuses", n)
		}
		f.grants = append(f.grants, grant{now, n})
	default:
		if want := f.pol.next(now, n); want == 0 || p.After != want {
			f.fatalf("Allow(%v) = %+v, the policy says wait %v", n, p, want)
		}
	}
}

// settle waits until the actor has handled everything sent so far, then
// checks what the parked callers were answered: in FIFO order, granted only
// what the policy allows and never past a deadline, refused only past a
// deadline, and nobody left parked whose turn has come.
func (f *limFuzz) settle() {
	f.t.Helper()
	now := f.v.Now()
	lm := &Left{Now: now, Reply: make(chan Permit, 2)}
	f.left = append(f.left, lm.Reply)
	f.ref.Send(lm)
	left := recv(f.t, lm.Reply, "Left")

	for _, a := range f.allows {
		a.got = poll(f.t, a.m.Reply, a.got, "Allow", a.seq)
	}

	if a := f.fresh; a != nil {
		f.fresh = nil
		f.arrived(a, now)
	}

	// Withdrawn while parked: answered ErrCancelled, wherever in line.
	kept := f.line[:0]
	for _, a := range f.line {
		switch {
		case a.withdrawn && (a.got == nil || !errors.Is(a.got.Err, ErrCancelled)):
			f.fatalf("Allow %d withdrawn while parked, answered %+v", a.seq, a.got)
		case a.withdrawn:
		case a.got != nil && errors.Is(a.got.Err, ErrCancelled):
			f.fatalf("Allow %d answered ErrCancelled, never withdrawn", a.seq)
		default:
			kept = append(kept, a)
		}
	}
	f.line = kept

	// The rest leave the line from the front only.
	for len(f.line) > 0 {
		a := f.line[0]
		n, dl := a.m.N, a.m.Deadline
		if a.got == nil {
			if f.pol.next(now, n) == 0 {
				f.fatalf("Allow %d (%v) is first in line and its tokens are there, but it is still parked", a.seq, n)
			}
			break
		}
		switch p := *a.got; {
		case p.OK:
			if dl != 0 && now > dl {
				f.fatalf("Allow %d granted %v past its deadline", a.seq, time.Duration(now-dl))
			}
			if !f.pol.take(now, n) {
				f.fatalf("Allow %d (%v) granted after waiting, which the policy refuses", a.seq, n)
			}
			f.grants = append(f.grants, grant{now, n})
		case errors.Is(p.Err, ErrDeadline):
			if !(dl != 0 && now > dl) && f.pol.next(now, n) != policy.Never {
				f.fatalf("Allow %d (%v) refused %+v before its deadline", a.seq, n, p)
			}
		default:
			f.fatalf("Allow %d answered %+v after waiting", a.seq, p)
		}
		f.line = f.line[1:]
	}
	for _, a := range f.line {
		if a.got != nil {
			f.fatalf("Allow %d answered %+v while Allow %d, parked before it, still waits", a.seq, *a.got, f.line[0].seq)
		}
	}

	// Left is the policy's count, and the wait a newcomer would face.
	want := f.pol.next(now, 1)
	if got := f.pol.left(now); left.Left != got || left.Err != nil {
		f.fatalf("Left = %+v, the policy holds %v", left, got)
	}
	if len(f.line) == 0 && left.After != want || len(f.line) > 0 && left.After < want {
		f.fatalf("Left says a newcomer waits %v with %d parked; the policy alone says %v", left.After, len(f.line), want)
	}
}

// arrived checks an Allow with Wait on its arrival: granted at once if
// nobody was parked and its tokens were there; refused at once only when
// its wait cannot end or would pass its deadline; parked otherwise.
func (f *limFuzz) arrived(a *fuzzAllow, now int64) {
	n, dl := a.m.N, a.m.Deadline
	alone := len(f.line) == 0 || f.pol.free(n) // nothing asked of a bucket waits behind nobody
	ready := alone && f.pol.next(now, n) == 0
	if a.got == nil {
		a.parked = true
		f.line = append(f.line, a)
		return
	}
	switch p := *a.got; {
	case p.OK:
		if !alone {
			f.fatalf("Allow %d (%v) with Wait granted on arrival, overtaking %d parked", a.seq, n, len(f.line))
		}
		if !f.pol.take(now, n) {
			f.fatalf("Allow %d (%v) with Wait granted, which the policy refuses", a.seq, n)
		}
		f.grants = append(f.grants, grant{now, n})
	case errors.Is(p.Err, ErrDeadline):
		if ready {
			f.fatalf("Allow %d (%v) refused %+v with its tokens there and nobody parked", a.seq, n, p)
		}
		if p.After != policy.Never && !(dl != 0 && later(now, p.After) > dl) {
			f.fatalf("Allow %d (%v) refused at once %+v, deadline +%v", a.seq, n, p, time.Duration(dl-now))
		}
		if want := f.pol.next(now, n); alone && p.After != want {
			f.fatalf("Allow %d (%v) refused at once with After %v, the policy says %v", a.seq, n, p.After, want)
		}
	default:
		f.fatalf("Allow %d (%v) with Wait answered %+v on arrival", a.seq, n, p)
	}
}

func (f *limFuzz) withdraw(arg byte) {
	list := f.allows
	if arg&0x80 != 0 && len(f.line) > 0 { // mostly one that is parked
		list = f.line
	}
	a, ok := pick(list, arg&0x3f)
	if !ok {
		return
	}
	if a.got == nil && a.parked {
		a.withdrawn = true
	}
	if arg&0x40 != 0 {
		f.ref.Send(Withdraw{Allow: a.m})
	} else {
		f.ref.Send(&Withdraw{Allow: a.m})
	}
}

// advance moves the clock by an amount from arg, settling the actor at
// every instant its timers fire.
func (f *limFuzz) advance(arg byte) {
	unit := [...]time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second, time.Minute}[arg>>6]
	stepClock(f.t, f.v, f.v.Now()+int64(arg&0x3f)*int64(unit), f.settle)
}

// FuzzLimiterActor sends a bucket or window actor on the virtual clock
// random runs of Allow (waiting or not, with deadlines or none), Withdraw,
// Left, Tick and clock moves, with a policy.Bucket or policy.Window taking
// exactly what the actor grants, and holds the actor to what its callers
// rely on:
//   - with nobody parked, an Allow without Wait is answered as the policy
//     answers, After included; with anybody parked it is refused;
//   - every grant is one the policy allows at that instant, and over the
//     whole run no stretch of time saw more granted than the limit allows;
//   - parked callers leave the line in the order they came, granted at the
//     instant their tokens are there (never left parked past it) and never
//     past their deadline, refused only past it or when the wait can never
//     end; a withdrawn one is answered ErrCancelled;
//   - every request is answered exactly once, and Left reports the policy's
//     count.
func FuzzLimiterActor(f *testing.F) {
	// window false: rate, burst index the tables below; true: allow, window.
	f.Add(false, uint8(2), uint8(2), []byte{opAllow, 0, opAllow, 0, opAllow, 0, opAllowWait, 0, opAllowWait, 4, opAllow, 0, opLeft, 0, opLimAdvance, 0x45, opLimAdvance, 0x8a})
	f.Add(false, uint8(3), uint8(3), []byte{opAllow, 7, opAllowWait, 0x20, opAllowWait, 0x34, opAllowWait, 0x30, opAllowWait, 0x10, opLimTick, 0, opLimAdvance, 0x45, opLimAdvance, 0x85})
	f.Add(false, uint8(3), uint8(1), []byte{opAllow, 0, opAllowWait, 0, opAllowWait, 0, opWithdraw, 0x81, opWithdraw, 0, opAllowWait, 10, opAllowWait, 11, opLimAdvance, 0x88, opWithdraw, 0x80})
	f.Add(false, uint8(0), uint8(0), []byte{opAllow, 0, opAllowWait, 0, opAllow, 8, opAllow, 9, opAllow, 10, opAllow, 11, opLimAdvance, 0xff})
	f.Add(true, uint8(2), uint8(1), []byte{opAllow, 0, opAllow, 0, opAllowWait, 0, opAllowWait, 0x25, opAllowWait, 0, opLimAdvance, 0x85, opLeft, 0, opLimAdvance, 0x85, opWithdraw, 0x80})
	// A window's wait behind others is estimated from below: the second
	// caller parks hoping for +10s, its turn comes at +15s, past its
	// deadline of +11.4s, and the slot goes to the third.
	f.Add(true, uint8(2), uint8(3), []byte{opAllow, 0, opLimAdvance, 0x85, opAllow, 0, opAllowWait, 0, opAllowWait, 0x90, opAllowWait, 0, opLimAdvance, 0x85, opLimAdvance, 0x85, opLimAdvance, 0x85})
	f.Add(true, uint8(0), uint8(2), []byte{opAllow, 0, opAllowWait, 0, opLeft, 0, opLimAdvance, 0x81})
	f.Add(true, uint8(1), uint8(0), []byte{opAllow, 0, opAllow, 0, opAllowWait, 0, opLimAdvance, 0x41})
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, window bool, k1, k2 uint8, ops []byte) {
		if len(ops) > 256 {
			ops = ops[:256]
		}
		v := r.begin()
		lf := &limFuzz{t: t, v: v}
		var ref *engine.Ref
		var err error
		if window {
			allow := int(k1 % 5) // 0 allows nothing
			span := [...]time.Duration{0, time.Second, 3 * time.Second, 10 * time.Second}[k2%4]
			ref, err = SpawnWindow(r.e, "", allow, span)
			lf.pol = windowRef{w: policy.NewWindow(allow, span), allow: allow, window: span}
			lf.n = []float64{1}
		} else {
			rate := [...]float64{0, 0.5, 1, 10, math.Inf(1)}[k1%5]
			burst := [...]float64{0, 1, 2, 3, 0.5}[k2%5]
			b := policy.NewBucket(rate, burst, v.Now())
			full := b.Tokens(v.Now())
			ref, err = SpawnBucket(r.e, "", rate, burst)
			lf.pol = bucketRef{b: b, rate: max(rate, 0), burst: full}
			lf.n = []float64{1, 1, 1, 1, 2, 2, 0.5, 3, 0, -1, math.NaN(), math.Inf(1), full, full + 1, 0.25, 5}
		}
		lf.ref = r.spawned(t, ref, err)
		for s := 0; s+1 < len(ops); s += 2 {
			lf.step = s / 2
			arg := ops[s+1]
			switch ops[s] % numLimOps {
			case opAllow:
				lf.allow(arg)
			case opAllowWait:
				lf.fresh = lf.send(arg, true)
			case opWithdraw:
				lf.withdraw(arg)
			case opLeft:
				// settle asks Left and checks it
			case opLimTick:
				lf.ref.Send(&Tick{Now: v.Now()})
			case opLimAdvance:
				lf.advance(arg)
			}
			lf.settle()
		}

		// An hour on, everyone whose wait can end has been answered;
		// withdrawing the rest answers them. Nobody is answered twice.
		lf.step = -1
		lf.advance(0xff)
		lf.settle()
		for _, a := range lf.line {
			a.withdrawn = true
			lf.ref.Send(&Withdraw{Allow: a.m})
		}
		lf.settle()
		for _, a := range lf.allows {
			if a.got == nil {
				lf.fatalf("Allow %d was never answered", a.seq)
			}
			once(t, a.m.Reply, "Allow", a.seq)
		}
		for _, ch := range lf.left {
			once(t, ch, "Left", -1)
		}
		if err := lf.pol.fits(lf.grants); err != nil {
			t.Fatal(err)
		}
	})
}
