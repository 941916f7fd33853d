package engine

import (
	"runtime"
	"sync/atomic"
)

// Reply is where an actor leaves its one answer to one request, and where
// the caller waits for it: cheaper than a channel with room for one, which
// takes a lock on each side. The caller that asked runs the actor itself
// whenever it finds it idle (see the package documentation), and then the
// answer is already there when Send returns, written with plain stores
// (Set). Otherwise the caller spins a short while, as long as spinning has
// lately been paying off on this actor, helps the actor along if its
// goroutine has not started on it, and then parks.
//
// The zero Reply is empty and ready for use. A Reply takes one answer per
// request: the actor calls Put exactly once, the caller reads it with Take
// (after Ready or Await said it is there), and may then use the Reply for
// its next request. It must not be copied once used.
type Reply[A any] struct {
	// state is read and changed atomically while the request is out; the
	// caller resets it with a plain write once it has the answer, since
	// nobody else looks at it until the next request is sent, and that
	// send orders the write before the actor's next look. (On amd64 an
	// atomic store is a locked exchange, as dear as a CAS.)
	state uint32
	val   A
	wake  chan struct{} // made by the caller before it first parks; room for one
}

const (
	replyEmpty  uint32 = iota // waiting for the answer, the caller not parked
	replyParked               // the caller is parked on wake
	replyFull                 // the answer is in val
)

// Put leaves the answer and wakes the caller if it parked. The actor calls
// it once per request; it never blocks.
func (r *Reply[A]) Put(a A) {
	r.val = a
	if atomic.SwapUint32(&r.state, replyFull) == replyParked {
		r.wake <- struct{}{}
	}
}

// Set is Put for an actor that knows its caller is the goroutine running
// it (Ref.Inline): that caller cannot be parked, so plain writes do.
func (r *Reply[A]) Set(a A) {
	r.val = a
	r.state = replyFull
}

// Ready says whether the answer is there.
func (r *Reply[A]) Ready() bool { return atomic.LoadUint32(&r.state) == replyFull }

// Take reads the answer and empties the Reply for the next request. Call it
// only once Ready or Await has said the answer is there.
func (r *Reply[A]) Take() A {
	a := r.val
	var zero A
	r.val = zero // the Reply keeps nothing of the answer alive
	r.state = replyEmpty
	return a
}

// Await blocks until the answer is there, and reports true; or until done
// is closed first, and reports false. ref's actor is the one that will
// answer: how long to spin before parking is learnt per actor. A nil done
// never closes. After a false the request is still out and its answer will
// still come: the caller withdraws it (the actor answers that too) and
// calls Await again, with a nil done, to collect the one answer.
func (r *Reply[A]) Await(ref *Ref, done <-chan struct{}) bool {
	switch atomic.LoadUint32(&r.state) {
	case replyFull:
		return true
	case replyEmpty:
		if ref.mb.spin.wait(&r.state) {
			return true
		}
		ref.mb.help() // the actor may be waiting for a goroutine: run it here
		if atomic.LoadUint32(&r.state) == replyFull {
			return true
		}
		if r.wake == nil {
			r.wake = make(chan struct{}, 1)
		}
		if !atomic.CompareAndSwapUint32(&r.state, replyEmpty, replyParked) {
			return true // answered just now
		}
	}
	if done == nil {
		<-r.wake // a plain receive is cheaper than a select
		return true
	}
	select {
	case <-r.wake:
		return true
	case <-done:
		return false
	}
}

// spinner is an actor's adaptive spin: how many times a caller looks for
// its answer before parking. Spinning pays when the actor is running on
// another processor and will answer within a few hundred nanoseconds; it
// only burns a processor when the goroutine running the actor has been
// preempted, or is waiting for this very processor. So the limit grows a
// little with every spin that ends in an answer and halves with every one
// that ends in parking; at zero, one caller in probeEvery spins anyway to
// see whether things have changed. With one processor spinning can never
// pay, and nobody spins.
type spinner struct {
	limit atomic.Int32
	probe atomic.Uint32
	off   bool
}

const (
	spinStart  = 256
	spinMax    = 4096
	spinProbe  = 64 // the spin of a probe while the limit is zero
	probeEvery = 32
)

// init readies a spinner: spinning from spinStart, or never on one
// processor.
func (s *spinner) init() {
	s.off = runtime.GOMAXPROCS(0) < 2
	s.limit.Store(spinStart)
}

// wait spins on state until it reads full or the limit runs out, and
// reports which.
func (s *spinner) wait(state *uint32) bool {
	if s.off {
		return false
	}
	n := s.limit.Load()
	if n == 0 {
		if s.probe.Add(1)%probeEvery != 0 {
			return false
		}
		n = spinProbe
	}
	for i := int32(0); i < n; i++ {
		if atomic.LoadUint32(state) == replyFull {
			if l := s.limit.Load(); l < spinMax {
				s.limit.Store(min(l+l/8+1, spinMax))
			}
			return true
		}
	}
	s.limit.Store(s.limit.Load() / 2)
	return false
}
