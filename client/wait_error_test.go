package client

import (
	"context"
	"errors"
	"strings"
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

// TestWaitErrorNamesLimiter: the error of a Wait that would never end, or
// a Retry whose next sleep would pass the deadline, names what holds it.
func TestWaitErrorNamesLimiter(t *testing.T) {
	r := newLimitRig(t)
	b, _ := NewBucket(r.eng, 0, 1)
	w, _ := NewWindow(r.eng, 0, time.Minute)
	kb, _ := NewKeyedBucket(r.eng, 0, 1)
	kw, _ := NewKeyedWindow(r.eng, 0, time.Minute)
	tb, _ := NewTieredBucket(r.eng, nil, map[string]Rate{"": {PerSecond: 0, Burst: 1}})
	if !b.Allow() || !kb.Allow("k") || !tb.Allow("k") {
		t.Fatal("a full bucket refused its one token")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		wait func() error
		by   string
	}{
		{"Bucket", func() error { return b.Wait(ctx) }, "the bucket"},
		{"Window", func() error { return w.Wait(ctx) }, "the window"},
		{"KeyedBucket", func() error { return kb.Wait(ctx, "k") }, "the key's bucket"},
		{"KeyedWindow", func() error { return kw.Wait(ctx, "k") }, "the key's window"},
		{"TieredBucket", func() error { return tb.Wait(ctx, "k") }, "the key's bucket"},
		{"Retry", func() error {
			backoff := Backoff{Base: time.Hour, Attempts: 2, Jitter: Rigid}
			return Retry(ctx, backoff, func(context.Context) error { return errors.New("down") })
		}, "the retry's backoff"},
	} {
		err := c.wait()
		var we *WaitError
		if !errors.As(err, &we) || we.By != c.by {
			t.Errorf("%s: %v, want a *WaitError by %q", c.name, err, c.by)
			continue
		}
		if !strings.Contains(err.Error(), " for "+c.by+" ") {
			t.Errorf("%s: error reads %q, without %q", c.name, err, c.by)
		}
	}
}
