package actors

import (
	"context"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// TestWithdrawnWaitersLeaveNothing: callers who give up while nobody else
// comes leave nothing in the queue. Before, every withdrawn Take stayed
// queued (pinning its request) until someone waited again: 50,000 timed-out
// Gets kept about 14 MiB for good.
func TestWithdrawnWaitersLeaveNothing(t *testing.T) {
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 1}})
	held, err := r.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const gaveUp = 50000
	for range gaveUp {
		m := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
		r.ref.Send(m)
		r.ref.Send(&Cancel[int64]{Take: m})
		if a := <-m.Reply; a.Err != ErrCancelled {
			t.Fatalf("withdrawn take answered %+v", a)
		}
	}
	queued, capacity := r.queue()
	if queued >= compactAt || capacity > 4*compactAt {
		t.Errorf("after %d withdrawn waiters the queue holds %d entries in an array of %d", gaveUp, queued, capacity)
	}
	if s := r.stats(); s.Waiting != 0 || s.Cancelled != gaveUp {
		t.Errorf("waiting %d, cancelled %d", s.Waiting, s.Cancelled)
	}
	// Order survives a compaction: three wait, the middle one withdraws
	// among many that do, and the other two are served first come first.
	first := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(first)
	for range 3 * compactAt {
		m := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
		r.ref.Send(m)
		r.ref.Send(&Cancel[int64]{Take: m})
		<-m.Reply
	}
	last := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(last)
	r.give(held)
	if a := <-first.Reply; a.Verdict != policy.Ready || a.Item != held {
		t.Fatalf("first in line got %+v, want the returned resource", a)
	}
	r.give(held)
	if a := <-last.Reply; a.Verdict != policy.Ready || a.Item != held {
		t.Fatalf("last in line got %+v, want the returned resource", a)
	}
	r.give(held)
	r.balance()
}

// queue reads how many entries the FIFO holds and its array's capacity.
func (r *rig) queue() (queued, capacity int) {
	done := make(chan struct{})
	r.ref.Send(&inspect[int64]{fn: func(b *books[int64]) {
		queued, capacity = b.q.parked, cap(b.q.slots)
		close(done)
	}})
	<-done
	return queued, capacity
}

// TestDefaultSeedsDiffer: two pools left at the default seed draw different
// jitter, so replicas started from one binary do not back off in lockstep;
// two given the same seed draw the same. Before, the default seed was 0 for
// every pool.
func TestDefaultSeedsDiffer(t *testing.T) {
	hold := func(seed uint64) time.Duration {
		t.Helper()
		backoff := policy.Backoff{Base: time.Second, Factor: 2, Cap: time.Minute, Attempts: 1 << 20, Jitter: policy.Full}
		r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 1}, Seed: seed, Ward: policy.Ward{Backoff: backoff}})
		if a := r.take(false); a.Verdict != policy.Make {
			t.Fatalf("first take: %v", a.Verdict)
		}
		r.ref.Send(&Unmade{Now: r.now()})
		a := r.take(false)
		if a.Verdict != policy.Later {
			t.Fatalf("take after a failed make: %v, want Later", a.Verdict)
		}
		return a.After
	}
	if a, b := hold(0), hold(0); a == b {
		t.Errorf("two pools at the default seed held makes for the same %v", a)
	}
	if a, b := hold(42), hold(42); a != b {
		t.Errorf("two pools with seed 42 held for %v and %v", a, b)
	}
}

// TestProbeArmsNoTimer: while the probe after a hold is out, a caller held
// for it waits for the probe's outcome, not a timer: no Tick is asked for,
// and the outcome serves it. Before, the actor woke every backoff ceiling
// for as long as the probe was out.
func TestProbeArmsNoTimer(t *testing.T) {
	bo := policy.Backoff{Base: time.Second, Factor: 2, Cap: time.Minute, Jitter: policy.Rigid}
	r := newRig(t, PoolConfig{Limits: policy.Limits{Size: 2}, Ward: policy.Ward{Backoff: bo}})
	if a := r.take(false); a.Verdict != policy.Make {
		t.Fatalf("first take: %v", a.Verdict)
	}
	r.ref.Send(&Unmade{Now: r.now()})
	r.clock.Advance(time.Second) // the hold is over
	if a := r.take(false); a.Verdict != policy.Make {
		t.Fatalf("take after the hold: %v, want Make (the probe)", a.Verdict)
	}
	m := &Take[int64]{Now: r.now(), Wait: true, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(m)
	if s := r.stats(); s.Waiting != 1 || s.HeldBy[policy.ReasonProbe] != 1 {
		t.Fatalf("waiting %d, held for the probe %d; want 1, 1", s.Waiting, s.HeldBy[policy.ReasonProbe])
	}
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending while the probe is out, want none", n)
	}
	r.next.Add(1)
	made := &Made[int64]{Now: r.now(), Item: 1, Reply: make(chan Answer[int64], 1)}
	r.ref.Send(made)
	if a := <-made.Reply; !a.Kept {
		t.Fatalf("the probe's resource was not kept: %+v", a)
	}
	if a := <-m.Reply; a.Verdict != policy.Make {
		t.Fatalf("the caller held for the probe got %v once it worked, want Make", a.Verdict)
	}
	r.ref.Send(&Release{Now: r.now()})
	r.give(1)
	r.balance()
}
