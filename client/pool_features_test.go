package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// TestTryGetNeverWaits: TryGet lends an idle resource, opens one when there
// is room, and otherwise answers ErrNoneIdle at once: when every resource
// is lent, when the ward holds opens back, and when a Get is in line ahead
// of it (which it does not overtake). Its ctx has no deadline: a TryGet
// that waited would hang the test.
func TestTryGetNeverWaits(t *testing.T) {
	r := newRig(t, PoolConfig[*conn]{
		Limits: policy.Limits{Size: 2},
		Ward:   policy.Ward{Bucket: policy.Rate{PerSecond: 1, Burst: 1}},
	})
	ctx := context.Background()
	a, err := r.pool.TryGet(ctx) // room and a token: opened
	if err != nil {
		t.Fatalf("TryGet with room: %v", err)
	}
	if _, err := r.pool.TryGet(ctx); !errors.Is(err, ErrNoneIdle) {
		t.Fatalf("TryGet with the bucket empty: %v, want ErrNoneIdle", err)
	}
	r.put(a)
	if got, err := r.pool.TryGet(ctx); err != nil || got != a {
		t.Fatalf("TryGet with one idle: %v, %v; want conn %d", got, err, a.id)
	}
	r.clock.Advance(time.Second) // a token again
	b, err := r.pool.TryGet(ctx)
	if err != nil {
		t.Fatalf("TryGet with room after a second: %v", err)
	}
	if _, err := r.pool.TryGet(ctx); !errors.Is(err, ErrNoneIdle) {
		t.Fatalf("TryGet with both lent: %v, want ErrNoneIdle", err)
	}

	got := make(chan *conn, 1)
	go func() { got <- r.get() }()
	r.waitFor("a Get in line", func() bool { return r.pool.Stats().Waiting() == 1 })
	if _, err := r.pool.TryGet(ctx); !errors.Is(err, ErrNoneIdle) {
		t.Fatalf("TryGet behind a waiting Get: %v, want ErrNoneIdle", err)
	}
	r.put(a) // to the Get in line, not to a TryGet
	r.put(<-got)
	r.put(b)
	r.balance()
}
