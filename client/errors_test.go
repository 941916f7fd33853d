package client

import (
	"context"
	"errors"
	"testing"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

// TestErrorsMatchAcrossLayers: a refusal an actor answers is the client's
// sentinel for the same condition, so errors.Is works whichever layer a
// caller talks to. Before, actors.ErrShed meant "too many waiting" and
// matched neither client.ErrShed nor client.ErrTooManyWaiting.
func TestErrorsMatchAcrossLayers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		is    []error
		isNot []error
	}{
		{"too many waiting", actors.ErrTooManyWaiting, []error{ErrTooManyWaiting, ErrShed}, []error{ErrClosed, ErrBreaker}},
		{"breaker", actors.ErrBreaker, []error{ErrBreaker, ErrShed}, []error{ErrTooManyWaiting}},
		{"overloaded", actors.ErrOverloaded, []error{ErrOverloaded, ErrShed}, []error{ErrBreaker}},
		{"stopped actor", actors.ErrStopped, []error{ErrClosed, engine.ErrStopped}, []error{ErrShed}},
		{"closed", actors.ErrClosed, []error{ErrClosed}, []error{ErrShed, actors.ErrStopped}},
		{"not lent", actors.ErrNotLent, []error{ErrNotLent}, []error{ErrClosed}},
		{"duplicate", actors.ErrDuplicate, []error{ErrDuplicate}, []error{ErrNotLent}},
		{"deadline", actors.ErrDeadline, []error{ErrExceedsDeadline}, []error{ErrClosed}},
		{"held", actors.ErrHeld, []error{ErrExceedsDeadline, actors.ErrDeadline}, []error{ErrShed}},
	} {
		for _, want := range tc.is {
			if !errors.Is(tc.err, want) {
				t.Errorf("%s: %v does not match %v", tc.name, tc.err, want)
			}
		}
		for _, not := range tc.isNot {
			if errors.Is(tc.err, not) {
				t.Errorf("%s: %v matches %v", tc.name, tc.err, not)
			}
		}
	}
}

// TestActorShedIsClientShed: the answer a pool actor gives a waiter past
// MaxWaiting is client.ErrTooManyWaiting, as Get returns it.
func TestActorShedIsClientShed(t *testing.T) {
	clock := moontest.NewClock(t)
	eng := NewEngine(WithClock(clock))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	ref, err := actors.SpawnPool[int](eng, "", actors.PoolConfig{Limits: policy.Limits{Size: 1}, MaxWaiting: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	take := func() *actors.Take[int] {
		m := &actors.Take[int]{Now: clock.Now(), Wait: true, Reply: make(chan actors.Answer[int], 1)}
		ref.Send(m)
		return m
	}
	if a := <-take().Reply; a.Verdict != policy.Make {
		t.Fatalf("first take: %+v", a)
	}
	parked := take()
	a := <-take().Reply
	if !errors.Is(a.Err, ErrTooManyWaiting) || !errors.Is(a.Err, ErrShed) {
		t.Fatalf("a waiter past the cap got %v, want ErrTooManyWaiting", a.Err)
	}
	ref.Send(&actors.Cancel[int]{Take: parked})
	<-parked.Reply
	ref.Send(&actors.Release{Now: clock.Now()})
}
