// Package hedge races an attempt against copies of itself, for the
// clients of moonhttp and moongrpc. The leaves say how to ready, send
// and let go of one attempt. The race itself is the same for both.
package hedge

import (
	"context"
	"sync"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// Result is what one attempt came back with.
type Result[T any] struct {
	Val T
	Err error
	// Answer says the attempt wins: no other attempt could do better.
	Answer bool
}

// Send makes one readied attempt and says what came back.
type Send[T any] func() Result[T]

// Entrant is one attempt of a race, and what it came back with.
type Entrant[T any] struct {
	Result[T]
	I    int           // its index: 0 for the attempt, then each hedge
	Took time.Duration // from sending to the answer
	// Cancel ends the attempt's ctx. Run has not called it for a winner,
	// whose answer may still need its ctx.
	Cancel context.CancelFunc
	unsent bool // the hedge was never sent: its Wait failed
}

// Race is one attempt's race between the attempt and its hedges. Set its
// fields, then call Run once.
type Race[T any] struct {
	Clock  engine.Clock
	Budget *client.Budget // asked before each hedge; nil allows all
	Delay  time.Duration  // how long an attempt goes unanswered before a hedge
	Left   int            // the most hedges this race sends
	// First says the attempt is its request's first, so its latency is
	// given to Budget.Observe.
	First bool
	// Ready readies one hedge on ctx, its own. It returns the send, and
	// drop to let go of what it readied if the hedge is not sent. A
	// hedge it cannot ready is skipped. Drop may be nil.
	Ready func(ctx context.Context) (send Send[T], drop func(), ok bool)
	// Wait, if set, runs before each hedge is sent. A hedge whose Wait
	// fails is not sent, and is neither an answer nor a failure.
	Wait func(ctx context.Context) error
	// Release lets go of what a losing attempt brought. Nil releases
	// nothing.
	Release func(T)
	// Lead, if set, learns how late the alarms for hedges ring and sets
	// them early by as much. Nil sets each for Delay.
	Lead *Lead
	// Sent is how many hedges Run sent.
	Sent int

	out chan Entrant[T] // room for every entrant, so none ever blocks

	mu       sync.Mutex
	over     bool                 // a winner is chosen or the race given up
	cancels  []context.CancelFunc // each entrant's, by index
	here     context.CancelFunc   // the hedge Run sends itself, while it runs
	answered bool                 // an answer was handed to the race
}

// Run sends the attempt, made by send on a ctx that cancel ends, and a
// hedge each Delay while no answer has come. It stops sending hedges at
// Left, or when the budget refuses one. The first answer wins, and Run
// returns it. If every attempt fails, Run returns the last failure. If
// ctx ends first, Run returns its error. Every entrant but a winner is
// cancelled, and what the losers bring is released.
//
// The last hedge is sent from Run's own goroutine: a hedge that wins, as
// a hedge sent after a slow attempt usually does, is answered with no
// hand-off between goroutines. An answer of another entrant meanwhile
// cancels that hedge's ctx, and Run returns once its send does.
func (r *Race[T]) Run(ctx context.Context, cancel context.CancelFunc, send Send[T]) (Entrant[T], error) {
	r.out = make(chan Entrant[T], 1+r.Left)
	start := r.Clock.Now()
	r.run(ctx, send, nil, cancel, false)
	timer := r.alarm(start)
	defer func() { timer.stop() }()
	out := 1            // entrants still running
	firstOut := true    // entrant 0 is among them
	var last Entrant[T] // the latest failure
	// settle takes in e, an entrant that came back, and reports whether
	// the race is over.
	settle := func(e Entrant[T]) bool {
		out--
		if e.I == 0 {
			firstOut = false
		}
		switch {
		case e.unsent:
		case e.Answer:
			r.end(e.I)
			r.release(last)
			if r.First && e.I == 0 {
				// The attempt's own latency, from its send to its
				// answer, as a latency is usually counted.
				r.Budget.Observe(e.Took)
			} else if r.First && firstOut {
				// The first attempt lost: its latency is at least
				// this long. Leaving it out would make the quantile
				// ever shorter and the hedges ever more.
				r.Budget.Observe(time.Duration(r.Clock.Now() - start))
			}
			last = e
			return true
		default:
			r.release(last)
			last = e
		}
		if out == 0 {
			r.end(-1)
			return true
		}
		return false
	}
	for {
		select {
		case <-timer.due:
			r.Lead.rang(time.Duration(r.Clock.Now()-timer.at), r.Delay)
			// An entrant may have come back as the alarm rang: take it in
			// first, lest a hedge go out after an answer.
			select {
			case e := <-r.out:
				if settle(e) {
					return last, nil
				}
			default:
			}
			if r.beaten() {
				continue // an answer is in r.out: the next turn takes it
			}
			hctx, hcancel := context.WithCancel(ctx)
			send, drop, ok := r.Ready(hctx)
			if !ok {
				hcancel()
				continue // this hedge cannot be readied
			}
			if !r.Budget.Hedge() {
				if drop != nil {
					drop()
				}
				hcancel()
				continue // refused: this race sends no more hedges
			}
			r.Sent++
			out++
			if r.Sent < r.Left {
				r.run(hctx, send, drop, hcancel, true)
				timer = r.alarm(r.Clock.Now())
				continue
			}
			e, beaten := r.runHere(hctx, send, drop, hcancel)
			if beaten {
				// An answer came first, and is in r.out: the hedge lost,
				// or was never sent.
				if e.unsent {
					r.Sent--
				}
				out--
				e.Cancel()
				r.release(e)
				continue
			}
			if settle(e) {
				return last, nil
			}
		case e := <-r.out:
			if settle(e) {
				return last, nil
			}
		case <-ctx.Done():
			r.end(-1)
			r.release(last)
			return Entrant[T]{}, ctx.Err()
		}
	}
}

// alarm says when a hedge is due.
type alarm struct {
	due  <-chan time.Time
	stop func() bool
	at   int64 // when the hedge is due, on the race's clock
}

// alarm is the alarm for a hedge due Delay after from, which is now or
// just before: set early by the Lead. On the real clock it is a channel
// timer, which wakes the race straight from the runtime's timer. Another
// clock's AfterFunc runs a func, which rings the alarm.
func (r *Race[T]) alarm(from int64) alarm {
	at := from + int64(r.Delay)
	d := r.Delay - r.Lead.early(r.Delay)
	if r.Clock == vclock.Real() {
		t := time.NewTimer(d)
		return alarm{due: t.C, stop: t.Stop, at: at}
	}
	due := make(chan time.Time, 1)
	t := r.Clock.AfterFunc(d, func() {
		select {
		case due <- time.Time{}:
		default:
		}
	})
	return alarm{due: due, stop: t.Stop, at: at}
}

// run makes one entrant on a goroutine of its own, after Wait if it is
// a hedge, and hands what comes back to the race.
func (r *Race[T]) run(ctx context.Context, send Send[T], drop func(), cancel context.CancelFunc, hedge bool) {
	r.mu.Lock()
	i := len(r.cancels)
	r.cancels = append(r.cancels, cancel)
	r.mu.Unlock()
	go func() { r.hand(r.attempt(ctx, i, send, drop, cancel, hedge)) }()
}

// attempt makes entrant i, after Wait if it is a hedge, and says what
// came back. A hedge whose Wait fails is dropped, unsent.
func (r *Race[T]) attempt(ctx context.Context, i int, send Send[T], drop func(), cancel context.CancelFunc, hedge bool) Entrant[T] {
	if hedge && r.Wait != nil {
		if err := r.Wait(ctx); err != nil {
			if drop != nil {
				drop()
			}
			return Entrant[T]{I: i, Cancel: cancel, unsent: true}
		}
	}
	start := r.Clock.Now()
	res := send()
	return Entrant[T]{Result: res, I: i, Took: time.Duration(r.Clock.Now() - start), Cancel: cancel}
}

// runHere makes one hedge on Run's goroutine, after Wait, and returns
// what came back. beaten says an answer was handed to the race before it
// or while it ran: one before it leaves it unsent, one while it runs
// cancels it.
func (r *Race[T]) runHere(ctx context.Context, send Send[T], drop func(), cancel context.CancelFunc) (e Entrant[T], beaten bool) {
	r.mu.Lock()
	i := len(r.cancels)
	r.cancels = append(r.cancels, cancel)
	if r.answered {
		r.mu.Unlock()
		if drop != nil {
			drop()
		}
		return Entrant[T]{I: i, Cancel: cancel, unsent: true}, true
	}
	r.here = cancel
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.here = nil
		beaten = r.answered
		r.mu.Unlock()
	}()
	return r.attempt(ctx, i, send, drop, cancel, true), false
}

// beaten reports whether an answer has been handed to the race.
func (r *Race[T]) beaten() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered
}

// hand gives e to the race, or cancels and releases it if the race is
// over. An answer cancels the hedge Run sends itself, if one runs, so
// that Run can take the answer in.
func (r *Race[T]) hand(e Entrant[T]) {
	r.mu.Lock()
	if !r.over {
		r.out <- e
		if e.Answer {
			r.answered = true
			if r.here != nil {
				r.here()
			}
		}
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	e.Cancel()
	r.release(e)
}

// end closes the race: every entrant but the winner (-1 for none) is
// cancelled, and what the others already brought is released. Entrants
// that come back later release their own.
func (r *Race[T]) end(winner int) {
	r.mu.Lock()
	r.over = true
	r.mu.Unlock()
	for i, cancel := range r.cancels {
		if i != winner {
			cancel()
		}
	}
	for {
		select {
		case e := <-r.out:
			r.release(e)
		default:
			return
		}
	}
}

// release lets go of what e brought, if anything.
func (r *Race[T]) release(e Entrant[T]) {
	if r.Release != nil && !e.unsent && e.Cancel != nil {
		r.Release(e.Val)
	}
}
