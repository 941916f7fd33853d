package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// TestWaitErrorNamesHolder: the error of a Get the ward holds past its
// deadline names what holds it and rounds the wait.
func TestWaitErrorNamesHolder(t *testing.T) {
	backoff := policy.Backoff{Base: 2 * time.Second, Factor: 2, Cap: time.Minute, Attempts: 1 << 20, Jitter: policy.Rigid}
	r := newRig(t, PoolConfig[*conn]{Limits: policy.Limits{Size: 1}, Ward: policy.Ward{Backoff: backoff}})
	r.be.up.Store(r.clock.Now() + int64(time.Hour))
	if _, err := r.pool.Get(r.ctx); !errors.As(err, new(*OpenError)) {
		t.Fatalf("first Get against a dead backend: %v", err)
	}
	r.clock.Advance(86114 * time.Nanosecond)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := r.pool.Get(ctx)
	var we *WaitError
	if !errors.As(err, &we) || we.Wait != 1999913886*time.Nanosecond {
		t.Fatalf("Get during the hold: %v, want a *WaitError of 1.999913886s", err)
	}
	want := "moonpool: a wait of 2s for the ward's backoff would pass the deadline"
	if got := err.Error(); got != want {
		t.Errorf("error reads %q, want %q", got, want)
	}
}

// TestWaitErrorText: what a WaitError says, by what holds and for how long.
func TestWaitErrorText(t *testing.T) {
	for _, c := range []struct {
		err  *WaitError
		want string
	}{
		{&WaitError{Wait: 1999913886}, "moonpool: a wait of 2s would pass the deadline"},
		{&WaitError{Wait: 1234567, By: "the bucket"}, "moonpool: a wait of 1.23ms for the bucket would pass the deadline"},
		{&WaitError{Wait: 61234500000, By: "the window"}, "moonpool: a wait of 1m1.2s for the window would pass the deadline"},
		{&WaitError{Wait: 999, By: "the gate"}, "moonpool: a wait of 999ns for the gate would pass the deadline"},
		{&WaitError{Wait: policy.Never, By: "the bucket"}, "moonpool: a wait for the bucket would never end"},
		{&WaitError{Wait: policy.Never}, "moonpool: a wait would never end"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%#v reads %q, want %q", c.err, got, c.want)
		}
		if !errors.Is(c.err, ErrExceedsDeadline) {
			t.Errorf("%#v does not match ErrExceedsDeadline", c.err)
		}
	}
}
