package hedge_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/internal/hedge"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// A hedge that answers wins. The attempt it beat is cancelled, and what
// that attempt brings back later is released.
func TestRaceHedgeWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var released []string
		actx, cancel := context.WithCancel(context.Background())
		r := &hedge.Race[string]{
			Clock: vclock.Real(),
			Delay: 100 * time.Millisecond,
			Left:  1,
			Ready: func(context.Context) (hedge.Send[string], func(), bool) {
				return func() hedge.Result[string] {
					time.Sleep(10 * time.Millisecond)
					return hedge.Result[string]{Val: "hedge", Answer: true}
				}, nil, true
			},
			Release: func(v string) {
				mu.Lock()
				released = append(released, v)
				mu.Unlock()
			},
		}
		start := time.Now()
		e, err := r.Run(context.Background(), cancel, func() hedge.Result[string] {
			<-actx.Done()
			return hedge.Result[string]{Val: "attempt", Err: actx.Err()}
		})
		if err != nil || e.I != 1 || e.Val != "hedge" || r.Sent != 1 {
			t.Fatalf("Run = %+v, %v with %d sent; want the hedge, one sent", e, err, r.Sent)
		}
		if took := time.Since(start); took != 110*time.Millisecond {
			t.Fatalf("won after %v, want 110ms", took)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(released, []string{"attempt"}) {
			t.Fatalf("released %q, want the attempt's", released)
		}
		e.Cancel()
	})
}

// A hedge whose Wait fails is not sent. Its readied request is dropped,
// and it is no failure: the attempt's own failure is what Run returns.
func TestRaceUnsentHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := errors.New("busy")
		drops := 0
		_, cancel := context.WithCancel(context.Background())
		r := &hedge.Race[string]{
			Clock: vclock.Real(),
			Delay: 100 * time.Millisecond,
			Left:  1,
			Ready: func(context.Context) (hedge.Send[string], func(), bool) {
				send := func() hedge.Result[string] {
					t.Error("a hedge whose Wait failed was sent")
					return hedge.Result[string]{}
				}
				return send, func() { drops++ }, true
			},
			Wait: func(context.Context) error { return errors.New("no token") },
		}
		e, err := r.Run(context.Background(), cancel, func() hedge.Result[string] {
			time.Sleep(200 * time.Millisecond)
			return hedge.Result[string]{Val: "attempt", Err: busy}
		})
		if err != nil || e.I != 0 || e.Answer || !errors.Is(e.Err, busy) {
			t.Fatalf("Run = %+v, %v; want the attempt's failure", e, err)
		}
		if drops != 1 {
			t.Fatalf("dropped %d readied hedges, want 1", drops)
		}
	})
}

// When ctx ends first, Run returns its error and cancels every attempt.
func TestRaceCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer stop()
		actx, cancel := context.WithCancel(ctx)
		r := &hedge.Race[string]{Clock: vclock.Real(), Delay: time.Second, Left: 1}
		_, err := r.Run(ctx, cancel, func() hedge.Result[string] {
			<-actx.Done()
			return hedge.Result[string]{Err: actx.Err()}
		})
		if !errors.Is(err, context.DeadlineExceeded) || r.Sent != 0 {
			t.Fatalf("Run = %v with %d sent, want the deadline and none sent", err, r.Sent)
		}
		synctest.Wait()
	})
}
