package engine

import (
	"runtime"
	"sync/atomic"
)

// ring is a mailbox's queue of user messages: a bounded, lock-free queue
// for many senders and one receiver (whoever holds the mailbox), after
// Dmitry Vyukov's bounded queue. Each cell carries a sequence number that
// says whose turn it is: a sender claims a cell by moving tail on with a CAS,
// writes the message and publishes it by storing the sequence; the receiver
// reads a cell once its sequence says it is published. No lock, no
// allocation, and unlike a channel no lock shared by both ends.
//
// A claimed cell is published a moment later; until then the receiver sees
// the queue as empty at that cell, even if later cells are ready. The
// mailbox's status word counts a message before it is queued, so the
// receiver knows something is on its way and lets go (see mailbox.let).
type ring struct {
	tail  atomic.Uint64
	_     [56]byte // senders hammer tail; keep the receiver's head off its cache line
	head  atomic.Uint64
	_     [56]byte
	cells []cell
	mask  uint64
}

type cell struct {
	seq atomic.Uint64
	msg any
}

func newRing(size int) *ring {
	n := 1
	for n < size {
		n <<= 1
	}
	r := &ring{cells: make([]cell, n), mask: uint64(n - 1)}
	for i := range r.cells {
		r.cells[i].seq.Store(uint64(i))
	}
	return r
}

// push queues msg, waiting (yielding the processor) while the ring is full:
// backpressure, as a full channel would give. It returns msg's place in
// line: the receiver has taken it once head has passed it.
func (r *ring) push(msg any) uint64 {
	for {
		pos := r.tail.Load()
		c := &r.cells[pos&r.mask]
		switch seq := c.seq.Load(); {
		case seq == pos:
			if r.tail.CompareAndSwap(pos, pos+1) {
				c.msg = msg
				c.seq.Store(pos + 1)
				return pos
			}
		case seq < pos:
			runtime.Gosched() // full: the receiver has not freed this cell yet
		}
	}
}

// pop takes the oldest message if it is published, and frees its cell
// for a sender. head moves past it only at done, once the message has run:
// whoever watches head (a caller spinning for its answer, a virtual clock
// waiting for a Tick) knows that a message head has passed has run. Only
// the holder of the mailbox calls them, done after each pop that took one.
func (r *ring) pop() (any, bool) {
	h := r.head.Load()
	c := &r.cells[h&r.mask]
	if c.seq.Load() != h+1 {
		return nil, false
	}
	msg := c.msg
	c.msg = nil
	c.seq.Store(h + r.mask + 1)
	return msg, true
}

// done moves head past the message pop took.
func (r *ring) done() { r.head.Store(r.head.Load() + 1) }

// ready says whether the oldest message is published. Anyone may ask: a
// goroutine that has just let the mailbox go asks it to see whether it must
// take the mailbox back.
func (r *ring) ready() bool {
	h := r.head.Load()
	return r.cells[h&r.mask].seq.Load() == h+1
}
