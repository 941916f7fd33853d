package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/internal/hedge"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// releases notes what a race released, from any of its goroutines.
type releases struct {
	mu   sync.Mutex
	vals []string
}

func (r *releases) add(v string) {
	r.mu.Lock()
	r.vals = append(r.vals, v)
	r.mu.Unlock()
}

func (r *releases) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.vals)
}

// A hedge that answers wins. The attempt it beat is cancelled, and what
// that attempt brings back later is released.
func TestRaceHedgeWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var released releases
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
			Release: released.add,
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
		if got := released.all(); !slices.Equal(got, []string{"attempt"}) {
			t.Fatalf("released %q, want the attempt's", got)
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

// goroutine is the calling goroutine's number, from its stack's header.
func goroutine() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// The last hedge is sent from Run's own goroutine, so a hedge that wins
// needs no hand-off; the hedges before it, and the attempt, run on
// goroutines of their own.
func TestRaceLastHedgeOnRunsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		on := map[string]string{}
		note := func(who string) {
			mu.Lock()
			on[who] = goroutine()
			mu.Unlock()
		}
		actx, cancel := context.WithCancel(context.Background())
		n := 0
		r := &hedge.Race[string]{
			Clock: vclock.Real(),
			Delay: 100 * time.Millisecond,
			Left:  2,
			Ready: func(ctx context.Context) (hedge.Send[string], func(), bool) {
				n++
				who := fmt.Sprint("hedge ", n)
				return func() hedge.Result[string] {
					note(who)
					if who == "hedge 1" {
						<-ctx.Done()
						return hedge.Result[string]{Val: who, Err: ctx.Err()}
					}
					time.Sleep(10 * time.Millisecond)
					return hedge.Result[string]{Val: who, Answer: true}
				}, nil, true
			},
		}
		e, err := r.Run(context.Background(), cancel, func() hedge.Result[string] {
			note("attempt")
			<-actx.Done()
			return hedge.Result[string]{Val: "attempt", Err: actx.Err()}
		})
		if err != nil || e.Val != "hedge 2" || r.Sent != 2 {
			t.Fatalf("Run = %+v, %v with %d sent; want the second hedge, two sent", e, err, r.Sent)
		}
		synctest.Wait()
		me := goroutine()
		mu.Lock()
		defer mu.Unlock()
		if on["hedge 2"] != me || on["attempt"] == me || on["hedge 1"] == me || on["attempt"] == on["hedge 1"] {
			t.Fatalf("sent on goroutines %v, Run on %s; want only the last hedge on Run's", on, me)
		}
		e.Cancel()
	})
}

// An answer that comes while Run sends the last hedge itself cancels that
// hedge: Run returns the answer as soon as the hedge's send returns, and
// what the hedge brought is released.
func TestRaceAnswerCancelsTheLastHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var released releases
		_, cancel := context.WithCancel(context.Background())
		r := &hedge.Race[string]{
			Clock: vclock.Real(),
			Delay: 100 * time.Millisecond,
			Left:  1,
			Ready: func(ctx context.Context) (hedge.Send[string], func(), bool) {
				return func() hedge.Result[string] {
					select {
					case <-ctx.Done():
						// An answer of its own, as a server that saw the
						// cancel might give: it still loses.
						return hedge.Result[string]{Val: "hedge", Answer: true}
					case <-time.After(time.Hour):
						return hedge.Result[string]{Val: "late hedge", Answer: true}
					}
				}, nil, true
			},
			Release: released.add,
		}
		start := time.Now()
		e, err := r.Run(context.Background(), cancel, func() hedge.Result[string] {
			time.Sleep(150 * time.Millisecond)
			return hedge.Result[string]{Val: "attempt", Answer: true}
		})
		if err != nil || e.I != 0 || e.Val != "attempt" {
			t.Fatalf("Run = %+v, %v; want the attempt's answer", e, err)
		}
		if took := time.Since(start); took != 150*time.Millisecond {
			t.Fatalf("answered after %v, want 150ms", took)
		}
		synctest.Wait()
		if got := released.all(); !slices.Equal(got, []string{"hedge"}) {
			t.Fatalf("released %q, want the hedge's", got)
		}
		e.Cancel()
	})
}

// An answer that comes while Run readies the last hedge, before it sends
// it, leaves that hedge unsent: Run returns the answer at once.
func TestRaceAnswerBeforeTheLastHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		actx, cancel := context.WithCancel(context.Background())
		answer := make(chan struct{})
		drops := 0
		r := &hedge.Race[string]{
			Clock: vclock.Real(),
			Delay: 100 * time.Millisecond,
			Left:  1,
			Ready: func(ctx context.Context) (hedge.Send[string], func(), bool) {
				close(answer) // the attempt answers while the hedge is readied
				synctest.Wait()
				return func() hedge.Result[string] {
					t.Error("a hedge was sent after the attempt had answered")
					<-ctx.Done()
					return hedge.Result[string]{Val: "hedge", Err: ctx.Err()}
				}, func() { drops++ }, true
			},
		}
		start := time.Now()
		e, err := r.Run(context.Background(), cancel, func() hedge.Result[string] {
			select {
			case <-answer:
			case <-actx.Done():
			}
			return hedge.Result[string]{Val: "attempt", Answer: true}
		})
		if err != nil || e.Val != "attempt" || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("Run = %+v, %v after %v; want the attempt's answer at 100ms", e, err, time.Since(start))
		}
		if drops != 1 || r.Sent != 0 {
			t.Fatalf("dropped %d readied hedges with %d sent, want 1 dropped and none sent", drops, r.Sent)
		}
		e.Cancel()
	})
}
