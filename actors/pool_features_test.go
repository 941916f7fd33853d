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
	if err := r.eng.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	sl := &SetLimits{Reply: make(chan error, 1)}
	rs := &Reset{Reply: make(chan error, 1)}
	fl := &Fill[int64]{Reply: make(chan Answer[int64], 1)}
	fd := &Filled[int64]{Item: 1, Reply: make(chan Answer[int64], 1)}
	du := &Due[int64]{Reply: make(chan []int64, 1)}
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
	if got := <-du.Reply; got != nil {
		t.Errorf("Due: %v", got)
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
