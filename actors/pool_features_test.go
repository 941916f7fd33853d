package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// TestNewRequestsRefusedWhenStopped: every request the pool's newer
// features send that wants an answer gets one from a stopped actor, so no
// caller of SetLimits, Reset, a background open or a keep-alive check
// waits for ever.
func TestNewRequestsRefusedWhenStopped(t *testing.T) {
	r := newRig(t, PoolConfig{})
	if err := r.e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	sl := &SetLimits{Reply: make(chan error, 1)}
	rs := &Reset{Reply: make(chan error, 1)}
	fl := &Fill[int64]{Reply: make(chan Answer[int64], 1)}
	fd := &Filled[int64]{Item: 1, Reply: make(chan Answer[int64], 1)}
	du := &Due[int64]{Reply: make(chan Answer[int64], 1)}
	ck := &Checked[int64]{Item: 1, Reply: make(chan Answer[int64], 1)}
	for _, m := range []any{sl, rs, fl, fd, du, ck} {
		r.ref.Send(m)
	}
	if err := <-sl.Reply; !errors.Is(err, ErrStopped) {
		t.Errorf("SetLimits: %v", err)
	}
	if err := <-rs.Reply; !errors.Is(err, ErrStopped) {
		t.Errorf("Reset: %v", err)
	}
	if a := <-fl.Reply; a.Verdict != policy.Shed || !errors.Is(a.Err, ErrStopped) {
		t.Errorf("Fill: %+v", a)
	}
	if a := <-fd.Reply; a.Kept || !errors.Is(a.Err, ErrStopped) {
		t.Errorf("Filled: %+v", a)
	}
	if a := <-du.Reply; a.Verdict != policy.Wait || !errors.Is(a.Err, ErrStopped) {
		t.Errorf("Due: %+v", a)
	}
	if a := <-ck.Reply; a.Kept || !errors.Is(a.Err, ErrStopped) {
		t.Errorf("Checked: %+v", a)
	}
}

// TestCheckFlag: a Take's answer asks for a check exactly when the
// resource went unused for CheckIdle or longer, and a keep-alive check
// brings it up to date.
func TestCheckFlag(t *testing.T) {
	r := newRig(t, PoolConfig{Check: true, CheckIdle: time.Second})
	item, _ := r.get(context.Background())
	r.give(item)
	r.clock.Advance(999 * time.Millisecond)
	if a := r.take(false); a.Item != item || a.Check {
		t.Fatalf("after 999ms idle: %+v, want %d unchecked", a, item)
	}
	r.give(item)
	r.clock.Advance(time.Second)
	if a := r.take(false); a.Item != item || !a.Check {
		t.Fatalf("after 1s idle: %+v, want %d to check", a, item)
	}
	r.give(item)
}

// TestUnfilledRoomGoesToTheLine: the room a background make reserved and
// gave up goes to the caller parked for it at once, and no background make
// is granted past Size.
func TestUnfilledRoomGoesToTheLine(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 2, MinIdle: 1}})
	fill := func() policy.Verdict {
		m := &Fill[int64]{Now: r.now(), Reply: make(chan Answer[int64], 1)}
		r.ref.Send(m)
		return (<-m.Reply).Verdict
	}
	a := r.take(false) // room reserved for a caller's make
	if a.Verdict != policy.Make {
		t.Fatalf("first take: %+v", a)
	}
	if v := fill(); v != policy.Make {
		t.Fatalf("fill with room and nothing idle: %v, want Make", v)
	}
	parked := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(parked) // Size reached: it waits
	if s := r.stats(); s.Waiting != 1 {
		t.Fatalf("waiting %d, want 1", s.Waiting)
	}
	r.ref.Send(&Unfilled{Now: r.now()}) // the background make gave up: its room...
	if got := <-parked.Reply; got.Verdict != policy.Make {
		t.Fatalf("the parked caller got %+v, want the room (Make)", got)
	}
	if v := fill(); v != policy.Wait {
		t.Fatalf("fill with the pool full: %v, want Wait", v)
	}
	r.ref.Send(&Release{Now: r.now()})
	r.ref.Send(&Release{Now: r.now()})
}

// TestCloseAfterKeepAliveTick: a keep-alive tick comes just before Close,
// after the owner's checker has stopped (it stops before it sends Close).
// The tick lends nothing by itself (the owner borrows one resource at a
// time with Due), so the pool drains and a Drained is answered, where a
// tick that lent every due resource left them for a check no one would
// run, and Close waited for ever. A Due after Close lends nothing.
func TestCloseAfterKeepAliveTick(t *testing.T) {
	checks := make(chan struct{}, 1)
	r := newRig(t, PoolConfig{Check: true, KeepAlive: time.Second, Checks: checks})
	item, err := r.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.give(item)
	r.ref.Send(&Tick{Now: r.now()}) // starts the keep-alive's timer
	r.clock.Advance(time.Second)
	<-checks // the tick's signal, which no one will answer
	if s := r.stats(); s.Busy != 0 || s.Idle != 1 {
		t.Fatalf("after the tick: busy %d idle %d, want 0 and 1", s.Busy, s.Idle)
	}
	c := &Close{Now: r.now(), Reply: make(chan Stats, 1)}
	r.ref.Send(c)
	<-c.Reply
	d := &Drained{Reply: make(chan Stats, 1)}
	r.ref.Send(d)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a net for a hung test
	defer cancel()
	select {
	case s := <-d.Reply:
		if s.Busy != 0 || s.Live != 0 || s.Shutdown != 1 {
			t.Errorf("drained: busy %d live %d shutdown %d, want 0, 0, 1", s.Busy, s.Live, s.Shutdown)
		}
	case <-ctx.Done():
		t.Fatal("Drained never answered: a resource lent to the keep-alive holds the Close up")
	}
	du := &Due[int64]{Now: r.now(), Reply: make(chan Answer[int64], 1)}
	r.ref.Send(du)
	if a := <-du.Reply; a.Verdict != policy.Wait {
		t.Errorf("Due after Close: %+v, want Wait", a)
	}
	if got := r.collect(); len(got) != 1 || got[0] != item {
		t.Errorf("retired %v, want [%d]", got, item)
	}
	r.balance()
}

// TestFilledAcrossReset: a background open begun before a Reset and done
// after it is refused (ErrOutdated, counted Outdated), its room freed, as
// a caller's is: the warm-up does not restock the pool with what the Reset
// cleared.
func TestFilledAcrossReset(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 2, MinIdle: 1}})
	fl := &Fill[int64]{Now: r.now(), Reply: make(chan Answer[int64], 1)}
	r.ref.Send(fl)
	a := <-fl.Reply
	if a.Verdict != policy.Make {
		t.Fatalf("fill: %+v, want Make", a)
	}
	rs := &Reset{Now: r.now(), Reply: make(chan error, 1)}
	r.ref.Send(rs)
	if err := <-rs.Reply; err != nil {
		t.Fatal(err)
	}
	item := r.next.Add(1)
	fd := &Filled[int64]{Now: r.now(), Item: item, Gen: a.Gen, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(fd)
	if got := <-fd.Reply; got.Kept || !errors.Is(got.Err, ErrOutdated) {
		t.Fatalf("filled across the Reset: %+v, want ErrOutdated", got)
	}
	r.close(item)
	if s := r.stats(); s.Outdated != 1 || s.Live != 0 || s.Opening != 0 {
		t.Errorf("outdated %d live %d opening %d, want 1, 0, 0", s.Outdated, s.Live, s.Opening)
	}
	r.balance()
}
