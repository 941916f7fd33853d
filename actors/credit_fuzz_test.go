package actors

import (
	"math"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

// The operations FuzzCreditActor makes, one per pair of input bytes.
const (
	opDraw       = iota // draw from the credit, asking the actor when it is dry; arg: how many, how many times
	opAsk               // an Allow without Wait straight to the actor; arg: how many
	opPark              // an Allow with Wait, no deadline
	opCreditLeft        // Left: the actor takes the credit back
	opStep              // the clock moves a little: arg eighths of a window's lease span, or of a ms
	opJump              // the clock moves a lot: arg%64 tenths of a second
	numCreditOps
)

// FuzzCreditActor drives a bucket or window that lends credit through
// random runs of draws, Allows asked of the actor, parked Waits, Lefts and
// clock moves, and holds it to the promise credit is allowed to bend only
// one way: over the whole run, no stretch of time saw more granted, by
// draws and by the actor together, than the exact limit allows. Draws are
// counted by Drawn, and every parked caller is answered exactly once.
func FuzzCreditActor(f *testing.F) {
	f.Add(false, uint8(3), uint8(0), []byte{opDraw, 1, opDraw, 1, opStep, 3, opDraw, 2, opPark, 0, opDraw, 1, opJump, 1, opDraw, 1})
	f.Add(false, uint8(1), uint8(1), []byte{opDraw, 0, opDraw, 0, opDraw, 0, opJump, 2, opDraw, 0, opCreditLeft, 0, opAsk, 0, opDraw, 0})
	f.Add(false, uint8(0), uint8(0), []byte{opDraw, 0xff, opDraw, 0xfe, opCreditLeft, 0, opDraw, 0xff, opJump, 3, opDraw, 0xfd})
	f.Add(true, uint8(0), uint8(0), []byte{opDraw, 0, opStep, 1, opDraw, 0, opStep, 200, opDraw, 0, opPark, 0, opJump, 1, opDraw, 0})
	f.Add(true, uint8(1), uint8(1), []byte{opDraw, 0, opDraw, 0, opCreditLeft, 0, opStep, 255, opDraw, 0, opJump, 9, opDraw, 0})
	// Past the quota in a burst, after a quiet spell and a Left: the lease
	// was lent at the Left, its draws come later, and the window must count
	// them no earlier than they came.
	f.Add(true, uint8(0), uint8(0), []byte{opJump, 50, opCreditLeft, 0, opStep, 6, opDraw, 255, opDraw, 255, opDraw, 255, opDraw, 255, opDraw, 255, opJump, 9, opStep, 180, opDraw, 255})
	// Draws in one span after another of one lease, then past its last.
	f.Add(true, uint8(0), uint8(0), []byte{opCreditLeft, 0, opDraw, 40, opStep, 9, opDraw, 40, opStep, 9, opDraw, 40, opStep, 9, opDraw, 40, opStep, 9, opDraw, 40, opJump, 9, opStep, 12, opDraw, 255})
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, window bool, k1, k2 uint8, ops []byte) {
		if len(ops) > 512 {
			ops = ops[:512]
		}
		v := r.begin()
		if window {
			allow := [...]int{1024, 1500, 4096, 1 << 17}[k1%4] // the last renews ahead and lends a spare
			w := [...]time.Duration{time.Second, 10 * time.Second}[k2%2]
			ref, credit, err := SpawnWindowCredit(r.e, "", allow, w)
			ref = r.spawned(t, ref, err)
			pol := windowRef{w: policy.NewWindow(allow, w), allow: allow, window: w}
			runCredit(t, v, ref.Send, "", credit, pol, true, w/windowSpans, ops, nil)
			return
		}
		rate := [...]float64{0, 1, 10, 1000}[k1%4]
		burst := [...]float64{16, 32, 100, 2048}[k2%4] // the last renews ahead
		ref, credit, err := SpawnBucketCredit(r.e, "", rate, burst)
		ref = r.spawned(t, ref, err)
		pol := bucketRef{b: policy.NewBucket(rate, burst, v.Now()), rate: rate, burst: burst}
		runCredit(t, v, ref.Send, "", credit, pol, false, time.Millisecond, ops, nil)
	})
}

// lent is what a caller draws from: a limiter's Credit, or a keyed
// bucket's credit for one key (hotCredit).
type lent interface {
	Draw(n int64) bool
	DrawAt(now, n int64) bool
	Drawn() int64
}

// runCredit is one execution of FuzzCreditActor against an actor reached
// by send, for key (empty for a limiter that is not keyed). span scales
// the small clock steps: a window's lease span, or a millisecond for a
// bucket. check, if not nil, is asked after every operation for what is
// wrong with the actor.
func runCredit(t *testing.T, v *moontest.Clock, send func(any), key string, credit lent, pol limiterRef, window bool, span time.Duration, ops []byte, check func() error) {
	t.Helper()
	if c, ok := credit.(*Credit); !ok || c == nil {
		if h, ok := credit.(hotCredit); !ok || h.h == nil {
			t.Fatal("a limiter big enough to lend returned nothing to draw from")
		}
	}
	var grants []grant
	var drawn int64
	var line []*Allow // parked, oldest first
	ask := func(n float64, wait bool) *Allow {
		m := &Allow{Now: v.Now(), Key: key, N: n, Wait: wait, Reply: make(chan Permit, 1)}
		send(m)
		return m
	}
	// collect records the parked callers answered by now, in line order.
	collect := func() {
		for len(line) > 0 {
			select {
			case p := <-line[0].Reply:
				if p.OK {
					grants = append(grants, grant{at: v.Now(), n: 1})
				} else if p.Err == nil {
					t.Fatalf("a parked caller was refused with no error: %+v", p)
				}
				line = line[1:]
				continue
			default:
			}
			return
		}
	}
	for s := 0; s+1 < len(ops); s += 2 {
		arg := ops[s+1]
		n := float64(1)
		if !window {
			n = float64(1 + arg%3)
		}
		switch ops[s] % numCreditOps {
		case opDraw: // many times, so a run can spend a burst or a quota of thousands
			times := 1 + int(arg)/8 // a bucket: up to 32 draws of n
			if window {
				times = 1 + int(arg)
			}
			for range times {
				var ok bool
				if window {
					ok = credit.DrawAt(v.Now(), 1)
				} else {
					ok = credit.Draw(int64(n))
				}
				if ok {
					drawn++
				} else if p := <-ask(n, false).Reply; !p.OK {
					continue
				}
				grants = append(grants, grant{at: v.Now(), n: n})
			}
		case opAsk:
			if p := <-ask(n, false).Reply; p.OK {
				grants = append(grants, grant{at: v.Now(), n: n})
			}
		case opPark:
			line = append(line, ask(1, true))
		case opCreditLeft:
			reply := make(chan Permit, 1)
			send(&Left{Now: v.Now(), Key: key, Reply: reply})
			if p := <-reply; p.Left < 0 || math.IsNaN(p.Left) {
				t.Fatalf("Left %v", p.Left)
			}
		case opStep:
			stepClock(t, v, v.Now()+int64(arg)*int64(span)/8, collect)
		case opJump:
			stepClock(t, v, v.Now()+int64(arg%64)*int64(100*time.Millisecond), collect)
		}
		collect()
		if check != nil {
			if err := check(); err != nil {
				t.Fatalf("after operation %d: %v", s/2, err)
			}
		}
	}
	stepClock(t, v, v.Now()+int64(time.Hour), collect)
	collect()
	for _, m := range line { // a bucket of rate 0 never grants them
		send(&Withdraw{Allow: m})
		if p := <-m.Reply; p.OK || p.Err == nil {
			t.Fatalf("a withdrawn caller was answered %+v", p)
		}
	}
	for _, m := range line {
		once(t, m.Reply, "Allow", -1)
	}
	if got := credit.Drawn(); got != drawn {
		t.Fatalf("Drawn %d, draws that succeeded %d", got, drawn)
	}
	if err := pol.fits(grants); err != nil {
		t.Fatal(err)
	}
}
