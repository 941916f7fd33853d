package engine

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Reply is where an actor leaves its one answer to one request, and where
// the caller waits for it: cheaper than a channel with room for one, which
// takes a lock on each side. The caller that asked runs the actor itself
// whenever it finds it idle (see the package documentation), and then the
// answer is already there when Ask returns, written with plain stores
// (Set). Otherwise the caller spins while its request is in line and the
// line moves, helps the actor along if its goroutine has not started on
// it, and then parks.
//
// The zero Reply is empty and ready for use. A Reply takes one answer per
// request: the actor calls Put exactly once, the caller reads it with Take
// (after Ready or Await said it is there), and may then use the Reply for
// its next request. It must not be copied once used.
type Reply[A any] struct {
	at uint64 // where Ask queued the request, plus one; 0 if it ran at once
	// state is read and changed atomically while the request is out; the
	// caller resets it with a plain write once it has the answer, since
	// nobody else looks at it until the next request is sent, and that
	// send orders the write before the actor's next look. (On amd64 an
	// atomic store is a locked exchange, as dear as a CAS.)
	state uint32
	val   A
	wake  chan struct{} // made by the caller before it first parks; room for one
	mb    *mailbox      // the actor's, set by the caller before it parks
	woken int64         // when Put woke the parked caller (nanotime)
}

const (
	replyEmpty  uint32 = iota // waiting for the answer, the caller not parked
	replyParked               // the caller is parked on wake
	replyFull                 // the answer is in val
)

// Ask sends msg, a request to be answered on r, to ref's actor, as
// ref.Send does, and notes where it was queued: Await spins only while the
// request is in line (see the package documentation). A request sent
// otherwise is awaited by parking.
func (r *Reply[A]) Ask(ref *Ref, msg any) { r.at = ref.mb.post(msg) }

// Put leaves the answer and wakes the caller if it parked. The actor calls
// it once per request; it never blocks.
func (r *Reply[A]) Put(a A) {
	r.val = a
	if atomic.SwapUint32(&r.state, replyFull) == replyParked {
		mb := r.mb // read before the wake: the caller may reuse r at once
		r.woken = nanotime()
		r.wake <- struct{}{}
		mb.wokeOne()
	}
}

// Set is Put for an actor that knows its caller is the goroutine running
// it (Ref.Inline): that caller cannot be parked, so plain writes do.
func (r *Reply[A]) Set(a A) {
	r.val = a
	r.state = replyFull
}

// Ready says whether the answer is there. After Await has reported false,
// Ready and Take collect the answer as safely as a second Await does.
func (r *Reply[A]) Ready() bool { return atomic.LoadUint32(&r.state) == replyFull }

// Take reads the answer and empties the Reply for the next request. Call it
// only once Ready or Await has said the answer is there.
func (r *Reply[A]) Take() A {
	a := r.val
	var zero A
	r.val = zero // the Reply keeps nothing of the answer alive
	r.mb = nil   // nor the actor it parked on
	r.state = replyEmpty
	return a
}

// Await blocks until the answer is there, and reports true; or until done
// is closed first, and reports false. ref's actor is the one that will
// answer: how long to spin before parking is learnt per actor. A nil done
// never closes. An answer that comes as done closes wins: Await reports
// true. After a false the request is still out and its answer will still
// come: the caller withdraws it (the actor answers that too) and calls
// Await again, with a nil done, to collect the one answer.
func (r *Reply[A]) Await(ref *Ref, done <-chan struct{}) bool {
	switch atomic.LoadUint32(&r.state) {
	case replyFull:
		return true
	case replyEmpty:
		if ref.mb.await(&r.state, r.at) {
			return true
		}
		ref.mb.help() // the actor may be waiting for a goroutine: run it here
		if atomic.LoadUint32(&r.state) == replyFull {
			return true
		}
		if r.wake == nil {
			r.wake = make(chan struct{}, 1)
		}
		r.mb = ref.mb
		if !atomic.CompareAndSwapUint32(&r.state, replyEmpty, replyParked) {
			return true // answered just now
		}
	}
	if done == nil {
		<-r.wake // a plain receive is cheaper than a select
		ref.mb.ran(r.woken)
		return true
	}
	select {
	case <-r.wake:
		ref.mb.ran(r.woken)
		return true
	case <-done:
		// Unpark before leaving, so no Put sends a wake after this. A Put
		// that got here first has swapped in full and is sending its wake:
		// take it, or it would be left for the next request, and Take
		// would clear the Reply while Put still reads it.
		if atomic.CompareAndSwapUint32(&r.state, replyParked, replyEmpty) {
			return false
		}
		<-r.wake
		ref.mb.ran(r.woken)
		return true
	}
}

// spinner is an actor's adaptive spin. A caller whose request is queued
// looks for its answer while the request is still in line and the line is
// moving: the actor is running on another processor and will get to it. It
// parks when the line stands still for a while (the goroutine running the
// actor has been preempted, or waits for this very processor), and soon
// after the actor has taken its request without answering, since then the
// actor has parked the request itself (a Take waiting for a resource). How
// long "a while" is adapts: it doubles with every spin that ends in an
// answer and halves with every stall (once, however many callers saw it);
// at zero, one caller in probeEvery spins anyway to see whether things
// have changed.
// With one processor spinning can never pay, and nobody spins.
type spinner struct {
	limit   atomic.Int32
	probe   atomic.Uint32
	stalled atomic.Uint64 // the head at which a stall last halved the limit
	off     bool
}

const (
	spinStart  = 256
	spinMax    = 4096
	spinProbe  = 64      // the stall a probe waits out while the limit is zero
	probeEvery = 32      // callers per probe while the limit is zero
	spinTaken  = 128     // looks for an answer once the actor has taken the request
	spinCap    = 1 << 11 // looks in all, however fast the line moves
	spinHelp   = 32      // looks at a line standing still before seeing whether it waits for a goroutine
)

// init readies a spinner: spinning from spinStart, or never on one
// processor.
func (s *spinner) init() {
	s.off = runtime.GOMAXPROCS(0) < 2
	s.limit.Store(spinStart)
}

// await spins on state until it reads full, and reports true, or until
// spinning stops paying, and reports false. at is where the request was
// queued, plus one (see post); 0 means its sender ran it, so an answer not
// there yet will come from the actor's FIFO, and waiting for it is parking.
// A line that stands still because the mailbox waits for its goroutine is
// not a stall: the caller takes the mailbox over (help) and spins on.
func (m *mailbox) await(state *uint32, at uint64) bool {
	s := &m.spin
	if s.off || at == 0 || m.mode != hybrid {
		return false // only under hybrid do callers run the actor; else its goroutine needs the processor a spinner would take
	}
	n := s.limit.Load()
	if n == 0 {
		if s.probe.Add(1)%probeEvery != 0 {
			return false
		}
		n = spinProbe
	}
	head := &m.user.head
	last, still, taken := head.Load(), int32(0), int32(0)
	for range spinCap {
		if atomic.LoadUint32(state) == replyFull {
			if l := s.limit.Load(); l < spinMax {
				s.limit.Store(min(max(2*l, spinProbe), spinMax))
			}
			return true
		}
		switch h := head.Load(); {
		case h >= at: // taken
			if taken++; taken >= spinTaken {
				return false // parked by the actor: no fault of spinning
			}
		case h != last:
			last, still = h, 0
		default:
			still++
			if still&(spinHelp-1) == 0 && m.handed.Load() {
				m.help()
				still = 0
				continue
			}
			if still >= n {
				// One stall is one halving, however many callers saw it.
				if old := s.stalled.Load(); old != h && s.stalled.CompareAndSwap(old, h) {
					s.limit.Store(s.limit.Load() / 2)
				}
				return false
			}
		}
	}
	return false
}

// epoch anchors nanotime.
var epoch = time.Now()

// nanotime is the monotonic clock in nanoseconds, for the engine's own
// scheduling choices (never an actor's time, which is the engine's Clock);
// a test moves it on by nanoSkew.
func nanotime() int64 { return int64(time.Since(epoch)) + nanoSkew.Load() }

var nanoSkew atomic.Int64
