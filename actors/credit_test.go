package actors

import (
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// TestHugeBurstLends: a bucket whose burst is near the largest float lends
// its lease like any other (the lease and what the bucket holds are
// compared as floats, before the conversion to an integer that would
// overflow), so its Allows are drawn, not asked of the actor.
func TestHugeBurstLends(t *testing.T) {
	h := newHarness(t)
	ref, credit, err := SpawnBucketCredit(h.e, "", 1, math.MaxFloat64)
	if err != nil {
		t.Fatal(err)
	}
	reply := make(chan Permit, 1)
	ref.Send(&Left{Now: h.clock.Now(), Reply: reply})
	<-reply // the actor has lent by now, after Started and after this
	if !credit.Draw(1) {
		t.Fatal("a bucket of burst MaxFloat64 lent nothing")
	}
}

// TestCreditSettled: Settled does not wait on an idle actor, or for ever
// on one that stays busy. (Whether it sees a busy actor finish depends on
// that actor running on another processor meanwhile, which a test cannot
// count on: TestWindowCreditLentAfterAnswer checks the actor is idle, and
// has lent, once it has answered.)
func TestCreditSettled(t *testing.T) {
	var none *Credit
	if none.Settled() {
		t.Error("a nil Credit settled")
	}
	var c Credit
	if c.Settled() {
		t.Error("an idle actor's Credit waited and settled")
	}
	c.busy.Store(true)
	if c.Settled() {
		t.Error("settled while the actor stayed busy")
	}
}

// TestWindowCreditLentAfterAnswer: once the window's actor has answered a
// caller that found the lease spent, it has lent afresh and says it is
// done, so a caller that waited on Settled meanwhile can draw. The window
// is small enough that its spans take all its room and its spare holds
// nothing.
func TestWindowCreditLentAfterAnswer(t *testing.T) {
	h := newHarness(t)
	ref, credit, err := SpawnWindowCredit(h.e, "", 16*1024, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now()
	left(ref, "", now) // the actor has lent by now
	n := 0
	for credit.DrawAt(now, 1) {
		n++
	}
	if n != 1024 {
		t.Fatalf("drew %d from the first span, want 1,024", n)
	}
	if p := ask(ref, "", now, 1); !p.OK {
		t.Fatalf("Allow through the actor: %+v", p)
	}
	credit.Settled()
	if credit.busy.Load() {
		t.Fatal("the actor answered and still says it is busy")
	}
	if !credit.DrawAt(now, 1) {
		t.Fatal("nothing lent after the actor answered")
	}
}

// TestWindowCreditSpans: a window lends spans ahead as far as its room
// goes, sixteen of them for this one, so draws in each of them need no
// actor; a draw past the last one, with the clock still at the first,
// goes to the actor. What was drawn in a span is
// counted at that span's end: once the window has moved past the first
// span's end, its draws have left, and the later spans' draws are still
// counted. The window's spans take all its room, so it lends no spare.
func TestWindowCreditSpans(t *testing.T) {
	h := newHarness(t)
	const allow = 16 * 1024
	ref, credit, err := SpawnWindowCredit(h.e, "", allow, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	span := int64(time.Second / windowSpans)
	from := h.clock.Now()
	left(ref, "", from) // the actor has lent by now, from this instant
	const ahead = 16
	for k := range int64(ahead) {
		at := from + k*span + span/2
		for i := range 10 {
			if !credit.DrawAt(at, 1) {
				t.Fatalf("span %d, draw %d: refused, with the lease lent for %d spans", k, i, ahead)
			}
		}
	}
	if credit.DrawAt(from+ahead*span, 1) {
		t.Fatal("drew past the lease's last span")
	}
	h.clock.AdvanceTo(from + int64(time.Second) + span + span/2)
	want := float64(allow - 10*(ahead-1))
	if got := left(ref, "", h.clock.Now()); got != want {
		t.Fatalf("Left %v a window after the first span, want %v: only the first span's 10 draws have left", got, want)
	}
}

// TestWindowCreditRenewsAhead: as the clock moves through a hundred spans,
// the first draw of a span asks the actor to lend the spans ahead, and
// the actor never takes back the span being drawn. So every draw is
// served by the stripe of its own span: none falls to the spare, none to
// the actor. The actor counts them all, each at its span's end.
func TestWindowCreditRenewsAhead(t *testing.T) {
	const allow = 1 << 20
	h, ref, credit, from := lentWindow(t, allow, time.Second)
	span := int64(time.Second / windowSpans)
	const spans, each = 100, 10
	for k := range int64(spans) {
		h.clock.AdvanceTo(from + k*span + span/2)
		for i := range each {
			if !credit.DrawAt(h.clock.Now(), 1) {
				t.Fatalf("span %d, draw %d: refused, with the window far from full", k, i)
			}
			if w := credit.stripes[spareStripe].w.Load(); w>>32 != 0 {
				t.Fatalf("span %d, draw %d: drawn from the spare, not from the span's own stripe", k, i)
			}
		}
	}
	if got := credit.Drawn(); got != spans*each {
		t.Fatalf("Drawn %d, want %d", got, spans*each)
	}
	if got := left(ref, "", h.clock.Now()); got != allow-spans*each {
		t.Fatalf("Left %v, want %v: every draw counted once", got, allow-spans*each)
	}
}

// TestWindowCreditSpareAfterQuiet: after a quiet spell longer than the
// lease, no span is lent for the clock's reading. The first draw comes
// from the spare, with no answer asked of the actor, and its renewal
// lends the spans from there on, so the next span's draws are its own.
func TestWindowCreditSpareAfterQuiet(t *testing.T) {
	const allow = 1 << 20
	h, ref, credit, from := lentWindow(t, allow, time.Second)
	span := int64(time.Second / windowSpans)
	const k = 1000 // spans of quiet: far past the lease
	h.clock.AdvanceTo(from + k*span + span/2)
	if !credit.DrawAt(h.clock.Now(), 1) {
		t.Fatal("the first draw after a quiet spell was refused: no spare")
	}
	if tag := credit.spans[(k+1)&(spanRing-1)].Load() >> 32; tag != k+1 {
		t.Fatalf("the next span's stripe is lent for span %d, want %d: the draw asked no renewal", tag, k+1)
	}
	h.clock.AdvanceTo(from + (k+1)*span + span/2)
	if !credit.DrawAt(h.clock.Now(), 1) {
		t.Fatal("the next span's draw was refused")
	}
	if got := left(ref, "", h.clock.Now()); got != allow-2 {
		t.Fatalf("Left %v, want %v", got, allow-2)
	}
}

// TestWindowCreditSpareOutlastsALateRenewal: while a renewal is asked
// and has not run (its goroutine waits for a processor), callers of a
// large window draw the current span's lease and then the spare, which
// holds all the room beyond the spans lent ahead: far more than the
// 65,535 a span's word can hold. None is refused and none asks the actor.
// Once the renewal runs, every draw is counted.
func TestWindowCreditSpareOutlastsALateRenewal(t *testing.T) {
	const allow = 1 << 20
	h, ref, credit, _ := lentWindow(t, allow, time.Second)
	const lease = 1024          // a span's, the most: allow/16 is more
	credit.renewing.Store(true) // asked, and not yet run
	now := h.clock.Now()
	var n int64
	for n < allow && credit.DrawAt(now, 1) {
		n++
	}
	// The clock is in the first of the spans lent. The others stay lent
	// for their own time, and the spare leaves room for as many more, for
	// the next renewal to lend. All the rest was drawn at once.
	if want := int64(allow - (2*spanRing-1)*lease); n != want {
		t.Fatalf("drew %d at one instant with the renewal late, want %d: all but the spans ahead and a lease of them", n, want)
	}
	credit.renewing.Store(false)
	credit.renew()
	if got := left(ref, "", now); got != float64(allow-n) {
		t.Fatalf("Left %v after the renewal, want %v: every draw counted", got, allow-n)
	}
}

// TestWindowCreditSpareCountedSoon: a burst drawn at one instant, most
// of it from the spare, is counted at that instant while the actor keeps
// up: the spare asks for a renewal every spareCount draws. So a window
// later all of it has left, but for fewer than spareCount events the
// actor counts only when it next takes the spare back.
func TestWindowCreditSpareCountedSoon(t *testing.T) {
	const allow = 1 << 20
	h, ref, credit, from := lentWindow(t, allow, time.Second)
	const burst = 500_000
	for i := range burst {
		if !credit.DrawAt(from, 1) {
			t.Fatalf("draw %d of the burst refused", i)
		}
	}
	span := int64(time.Second / windowSpans)
	h.clock.AdvanceTo(from + int64(time.Second) + 2*span)
	if got := left(ref, "", h.clock.Now()); got <= allow-spareCount {
		t.Fatalf("Left %v a window after the burst, want above %v: the burst's events are counted late", got, allow-spareCount)
	}
}

// TestWindowCreditLargeAtItsQuota: a window large enough to lend a
// spare is spent to its quota at a few instants, by draws and, once the
// credit is dry, by the actor. What it grants must fit an exact window fed
// the same grants. Spent at once it grants the whole quota; a quarter and
// half a window on, nothing; a window and two spans on, all of it again
// but for fewer than spareCount spare events counted late.
func TestWindowCreditLargeAtItsQuota(t *testing.T) {
	const allow = 1 << 18 // spans lent ahead and a spare of 131,072
	const window = time.Second
	h, ref, credit, from := lentWindow(t, allow, window)
	shadow := policy.NewWindow(allow, window)
	span := int64(window / windowSpans)
	for _, st := range []struct {
		at       int64 // since from
		least    int   // granted at least
		most     int   // and at most
		drawFrom bool  // some came from the credit
	}{
		{0, allow, allow, true},
		{int64(window / 4), 0, 0, false},
		{int64(window / 2), 0, 0, false},
		{int64(window) + 2*span, allow - spareCount, allow, true},
		{int64(window) + 3*span, 0, spareCount, false},
	} {
		h.clock.AdvanceTo(from + st.at)
		now := h.clock.Now()
		var got, drawn int
		for got <= allow {
			if credit.DrawAt(now, 1) {
				drawn++
			} else if !ask(ref, "", now, 1).OK {
				break
			}
			got++
			if !shadow.Take(now) {
				t.Fatalf("+%v: granted %d, more than the window allows", time.Duration(st.at), got)
			}
		}
		t.Logf("+%v: granted %d, %d drawn", time.Duration(st.at), got, drawn)
		if got < st.least || got > st.most || (drawn > 0) != st.drawFrom {
			t.Fatalf("+%v: granted %d (%d drawn), want %d to %d (drawn: %v)", time.Duration(st.at), got, drawn, st.least, st.most, st.drawFrom)
		}
	}
}

// TestBucketCreditOutlastsALateRenewal: a bucket of a billion tokens a
// second lends a millisecond of its rate at a time, so while a renewal
// is asked and has not run, its callers draw a million tokens without the
// actor. Once the renewal runs, every draw is counted.
func TestBucketCreditOutlastsALateRenewal(t *testing.T) {
	h := newHarness(t)
	const rate, burst = 1e9, 1e9
	ref, credit, err := SpawnBucketCredit(h.e, "", rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now()
	left(ref, "", now)          // the actor has lent by now
	credit.renewing.Store(true) // asked, and not yet run
	var n int64
	for n < 2e6 && credit.Draw(1) {
		n++
	}
	if n != rate/1000 {
		t.Fatalf("drew %d with the renewal late, want %d: a millisecond of the rate", n, int64(rate/1000))
	}
	credit.renewing.Store(false)
	credit.renew()
	if got := left(ref, "", now); got != burst-float64(n) {
		t.Fatalf("Left %v after the renewal, want %v: every draw counted", got, burst-float64(n))
	}
}

// TestBucketCreditRenewsAhead: a caller that draws a bucket's lease low
// has the actor top it up, so a hundred leases' worth are drawn one token
// at a time without a single refusal, and the bucket counts every one.
func TestBucketCreditRenewsAhead(t *testing.T) {
	h := newHarness(t)
	const burst = 1e6
	ref, credit, err := SpawnBucketCredit(h.e, "", 0, burst)
	if err != nil {
		t.Fatal(err)
	}
	left(ref, "", h.clock.Now()) // the actor has lent by now
	lease := leaseOf(0, burst)
	n := 100 * lease
	for i := range n {
		if !credit.Draw(1) {
			t.Fatalf("draw %d of %d refused, from a lease of %d and a bucket of %v", i, n, lease, burst)
		}
	}
	if got := credit.Drawn(); got != n {
		t.Fatalf("Drawn %d, want %d", got, n)
	}
	if got := left(ref, "", h.clock.Now()); got != burst-float64(n) {
		t.Fatalf("Left %v, want %v", got, burst-float64(n))
	}
}

// TestCreditSettledKeepsProcessor: Settled never gives its processor away.
// With one processor and a goroutine that never blocks beside it, a
// caller that yielded would wait out the other's time slice (10 ms) at
// every yield; Settled instead gives up on an actor that stays busy
// within a few microseconds. A real-clock bound: the virtual clock cannot
// show the scheduler.
func TestCreditSettledKeepsProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var c Credit
	c.busy.Store(true)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // a neighbour that never blocks
		defer close(done)
		for !stop.Load() {
		}
	}()
	// The fastest of five tries: a try the machine pauses is not the
	// one judged, while one that yields loses a time slice every time.
	took := time.Duration(math.MaxInt64)
	for range 5 {
		start := time.Now()
		settled := c.Settled()
		took = min(took, time.Since(start))
		if settled {
			stop.Store(true)
			<-done
			t.Fatal("settled while the actor stayed busy")
		}
	}
	stop.Store(true)
	<-done
	if took > 5*time.Millisecond {
		t.Fatalf("Settled took at least %v beside a busy goroutine; want it back within 5ms, having kept its processor", took)
	}
}

// TestBucketCreditDrawsFew: a bucket's lease is split into few stripes,
// so a Draw of a quarter of the lease finds it in one stripe, without the
// actor.
func TestBucketCreditDrawsFew(t *testing.T) {
	h := newHarness(t)
	ref, credit, err := SpawnBucketCredit(h.e, "", 1, 1024)
	if err != nil {
		t.Fatal(err)
	}
	left(ref, "", h.clock.Now()) // the actor has lent by now
	var lease int64
	for i := range credit.stripes {
		lease += int64(credit.stripes[i].w.Load() & stripeMask)
	}
	if lease < 8 {
		t.Fatalf("lent %d, want a lease to split", lease)
	}
	if !credit.Draw(lease / 4) {
		t.Fatalf("a Draw of %d from a lease of %d found no stripe holding it", lease/4, lease)
	}
}

// A window's span tag holds the span's low 32 bits. A stripe lent long
// ago for span s is not lent for span s+2³², which it would match: draws
// there go to the actor, and the window lets no more through than allow.
func TestWindowCreditOldTagNotLent(t *testing.T) {
	const allow = 1024
	const window = 256 * time.Nanosecond // spans of 1ns: 2³² of them pass in 4.3s
	h, ref, credit, from := lentWindow(t, allow, window)
	h.clock.AdvanceTo(from + 5)
	for range 10 {
		if !credit.DrawAt(h.clock.Now(), 1) {
			t.Fatal("a draw in span 5 was refused")
		}
	}
	h.clock.AdvanceTo(from + 1<<32 + 5) // span 2³²+5: stripe 5, whose tag reads 5
	now := h.clock.Now()
	granted := 0
	for credit.DrawAt(now, 1) || ask(ref, "", now, 1).OK {
		granted++
	}
	if granted != allow {
		t.Fatalf("let through %d at one instant, want the window's %d", granted, allow)
	}
}

// The spare's draws are counted no earlier than they came, even when the
// renewal that takes the spare back loses the processor after it read
// the clock and draws land meanwhile.
func TestWindowCreditSpareCountedAfterDraws(t *testing.T) {
	const allow = 1 << 20
	const window = time.Second
	h, ref, credit, _ := lentWindow(t, allow, window)
	if w := credit.stripes[spareStripe].w.Load(); w&stripeMask == 0 {
		t.Fatal("no spare lent")
	}
	const drawn = 1024 + 1000 // more than the current span's lease: the rest from the spare
	var at int64
	var got int
	lendSpansPause = func() {
		lendSpansPause = nil
		h.clock.Advance(10 * time.Millisecond)
		at = h.clock.Now()
		for range drawn {
			if credit.DrawAt(at, 1) {
				got++
			}
		}
	}
	t.Cleanup(func() { lendSpansPause = nil })
	read := h.clock.Now() // the renewal's reading of the clock
	credit.renewing.Store(true)
	ref.Send(renewal)
	left(ref, "", h.clock.Now()) // the renewal has run
	if got != drawn {
		t.Fatalf("drew %d while the renewal paused, want %d", got, drawn)
	}
	// A window from the renewal's reading still holds the draws, made
	// 10ms after it: the window lets through only what is left.
	h.clock.AdvanceTo(read + int64(window))
	now := h.clock.Now()
	granted := 0
	for credit.DrawAt(now, 1) || ask(ref, "", now, 1).OK {
		granted++
	}
	if got+granted > allow {
		t.Fatalf("let through %d and then %d in one window: %d, above the window's %d", got, granted, got+granted, allow)
	}
}

// lentWindow is a window with credit on a fresh harness, after a Left at
// from that has made the actor lend its spans.
func lentWindow(t *testing.T, allow int, window time.Duration) (h *harness, ref *engine.Ref, credit *Credit, from int64) {
	t.Helper()
	h = newHarness(t)
	ref, credit, err := SpawnWindowCredit(h.e, "", allow, window)
	if err != nil || credit == nil {
		t.Fatalf("SpawnWindowCredit = %v, %v; want a credit", credit, err)
	}
	from = h.clock.Now()
	if got := left(ref, "", from); got != float64(allow) {
		t.Fatalf("Left = %v, want %d", got, allow)
	}
	return h, ref, credit, from
}
