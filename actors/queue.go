package actors

import "math"

// queue holds an actor's parked callers, each in the FIFO line of its
// limit: one line for a pool, a bucket or a window, one per waiting key for
// a keyed limiter. Slots and lines live in slices reused through free
// lists, so parking does not allocate once the slices have grown, and a
// caller that gives up is withdrawn at once, in O(1), by the handle the
// queue wrote into its request when it parked: the slot's index and a
// generation. A handle whose slot is free or holds another parking is
// stale, so a withdrawal that comes after the answer finds nothing.
//
// The zero queue is not ready: call init.
type queue[R waiter] struct {
	slots    []slot[R]
	lines    []line
	free     int32  // first free slot, chained through next; -1 when none
	freeLine int32  // first free line, chained through next; -1 when none
	seq      uint32 // parkings so far, the high half of a handle
	parked   int    // in all lines
}

// waiter is a request that can be parked: a pointer to a struct whose
// handle word the queue owns while the request is parked.
type waiter interface {
	comparable
	handle() *uint64
}

// slot is one parked request, linked into its line.
type slot[R waiter] struct {
	req        R // the zero R while free
	gen        uint64
	cost       float64
	line       int32
	prev, next int32
}

// line is the FIFO of one limit's parked callers. key, at and heap are the
// owner's to use; the queue only resets at when the head changes.
type line struct {
	head, tail int32   // oldest and newest slot; -1 when empty
	n          int32   // parked
	ahead      float64 // their cost in all: what they take before a newcomer
	key        int32   // keyed: whose line; -1 otherwise
	at         int64   // when the head can be granted, as its owner found; MaxInt64 when not known
	heap       int32   // keyed: position in the wake heap, -1 outside it
	next       int32   // chains free lines
}

// compactAt is the most slots a queue keeps without compacting: past it,
// slots go back once fewer than a quarter of them hold a parked caller.
const compactAt = 64

func (q *queue[R]) init() { q.free, q.freeLine = -1, -1 }

// newLine makes an empty line for key and returns its index.
func (q *queue[R]) newLine(key int32) int32 {
	li := reuse(&q.lines, &q.freeLine, func(l *line) int32 { return l.next })
	q.lines[li] = line{head: -1, tail: -1, key: key, at: math.MaxInt64, heap: -1, next: -1}
	return li
}

// dropLine frees an empty line.
func (q *queue[R]) dropLine(li int32) {
	q.lines[li] = line{head: -1, tail: -1, key: -1, heap: -1, next: q.freeLine}
	q.freeLine = li
}

// park puts req at the back of line li, costing cost, and writes its
// handle into it: the one time the queue touches the request's memory
// while the caller waits for its answer.
func (q *queue[R]) park(li int32, req R, cost float64) {
	i := reuse(&q.slots, &q.free, func(s *slot[R]) int32 { return s.next })
	q.seq++
	if q.seq == 0 {
		q.seq = 1 // handle 0 names no parking, as in a fresh request
	}
	ln := &q.lines[li]
	gen := uint64(q.seq)<<32 | uint64(uint32(i))
	*req.handle() = gen
	q.slots[i] = slot[R]{req: req, gen: gen, cost: cost, line: li, prev: ln.tail, next: -1}
	if ln.tail >= 0 {
		q.slots[ln.tail].next = i
	} else {
		ln.head = i
	}
	ln.tail = i
	ln.n++
	ln.ahead += cost
	q.parked++
}

// front is the oldest caller in line li; false when the line is empty.
func (q *queue[R]) front(li int32) (R, bool) {
	if h := q.lines[li].head; h >= 0 {
		return q.slots[h].req, true
	}
	var none R
	return none, false
}

// pop takes the oldest caller out of line li, which must not be empty.
func (q *queue[R]) pop(li int32) { q.unlink(q.lines[li].head) }

// withdraw takes req out of its line if it is parked, and says which line.
// A request answered already (or never parked) is not found: its handle
// names a slot that is free or holds another parking. Reading the handle is
// the one read of a request that may be answered already; a caller reusing
// its request sets the exported fields and leaves the handle alone, so the
// two never touch the same word.
func (q *queue[R]) withdraw(req R) (int32, bool) {
	var none R
	if req == none {
		return -1, false
	}
	gen := *req.handle()
	i := int(uint32(gen))
	if gen == 0 || i >= len(q.slots) || q.slots[i].req != req || q.slots[i].gen != gen {
		return -1, false
	}
	li := q.slots[i].line
	q.unlink(int32(i))
	return li, true
}

func (q *queue[R]) unlink(i int32) {
	s := &q.slots[i]
	ln := &q.lines[s.line]
	if s.prev >= 0 {
		q.slots[s.prev].next = s.next
	} else {
		ln.head = s.next
		ln.at = math.MaxInt64 // a new head: its instant is the owner's to find
	}
	if s.next >= 0 {
		q.slots[s.next].prev = s.prev
	} else {
		ln.tail = s.prev
	}
	ln.n--
	ln.ahead -= s.cost
	if ln.n == 0 {
		ln.ahead = 0 // no rounding left behind by the sums
	}
	q.parked--
	*s = slot[R]{next: q.free}
	q.free = i
	if n := len(q.slots); n > compactAt && 4*q.parked < n {
		q.compact()
	}
}

// compact moves the parked callers into a slice just big enough, in line
// order, and rewrites their handles: after a spike of waiters has passed,
// the memory goes too, and each parked request pins nothing else. A
// handle keeps its generation and takes the new index, so one held by a
// request answered before stays stale. It runs once fewer than a quarter of
// the slots are in use, so its cost is O(1) a withdrawal, amortized.
func (q *queue[R]) compact() {
	var slots []slot[R]
	if q.parked > 0 {
		slots = make([]slot[R], 0, 2*q.parked)
	}
	for li := range q.lines {
		ln := &q.lines[li]
		if ln.n == 0 {
			continue
		}
		prev := int32(-1)
		for i := ln.head; i >= 0; i = q.slots[i].next {
			s := q.slots[i]
			j := int32(len(slots))
			s.gen = s.gen&^(1<<32-1) | uint64(uint32(j))
			*s.req.handle() = s.gen
			s.prev, s.next = prev, -1
			if prev >= 0 {
				slots[prev].next = j
			} else {
				ln.head = j
			}
			slots = append(slots, s)
			prev = j
		}
		ln.tail = prev
	}
	q.slots, q.free = slots, -1
}

// reuse returns the index of a free entry of *s: the first on the chain
// that starts at *free and runs through each entry's next, or else a new
// one at the end. A queue's slots and lines and a keyed actor's keys are
// slices reused this way, so that steady traffic allocates nothing.
func reuse[T any](s *[]T, free *int32, next func(*T) int32) int32 {
	if i := *free; i >= 0 {
		*free = next(&(*s)[i])
		return i
	}
	var fresh T
	*s = append(*s, fresh)
	return int32(len(*s) - 1)
}

// drain takes every parked caller out, line by line and oldest first in
// each, and hands it to answer.
func (q *queue[R]) drain(answer func(R)) {
	for li := range q.lines {
		for q.lines[li].n > 0 {
			req, _ := q.front(int32(li))
			q.pop(int32(li))
			answer(req)
		}
	}
}
