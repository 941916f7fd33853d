package actors

// MaxReservations is how many Reserves a bucket keeps outstanding for an
// Unreserve; past it the oldest is forgotten, so a caller that never cancels
// costs a bounded amount of memory.
const MaxReservations = 1024

// reservations is a bucket's book of outstanding Reserves. For each it
// keeps an upper bound on the tokens the bucket has held since it was
// granted (peak): the bucket without the reservation would have held up to
// N more, but never more than its burst, so what an Unreserve gives back is
// N, less the part of it that the burst would have cut off by then. The
// bound is refreshed at the start of every message, when the bucket holds
// the most it has held since the last one: between messages it only earns.
type reservations struct {
	open []reservation // oldest first
	next uint64        // the last ticket given
}

type reservation struct {
	ticket uint64
	n      float64 // at most what an Unreserve gives back
	peak   float64 // the most the bucket may have held since
}

// add books a reservation of n granted with held left in the bucket.
func (r *reservations) add(n, held float64) uint64 {
	if len(r.open) == MaxReservations {
		r.open = append(r.open[:0], r.open[1:]...)
	}
	r.next++
	r.open = append(r.open, reservation{ticket: r.next, n: n, peak: held})
	return r.next
}

// see notes that the bucket holds held now.
func (r *reservations) see(held float64) {
	for i := range r.open {
		r.open[i].peak = max(r.open[i].peak, held)
	}
}

// settle folds each peak under burst into what an Unreserve may give back and
// restarts it at held: called when the burst is about to change, since the
// part a burst cut off is lost whatever the burst becomes.
func (r *reservations) settle(burst, held float64) {
	for i := range r.open {
		o := &r.open[i]
		o.n = max(min(o.n, burst-o.peak), 0)
		o.peak = held
	}
}

// take removes ticket and says how much its Unreserve gives back under
// burst; false if it is not outstanding.
func (r *reservations) take(ticket uint64, burst float64) (float64, bool) {
	for i, o := range r.open {
		if o.ticket == ticket {
			r.open = append(r.open[:i], r.open[i+1:]...)
			return max(min(o.n, burst-o.peak), 0), true
		}
	}
	return 0, false
}

// watch refreshes the reservations' peaks with what the bucket holds at the
// clock's reading now: called before the message's takes, and before a
// lender takes back its credit (the lent tokens are still inside then), it
// is the most the bucket held since the last message.
func (l *limiter[S, R]) watch() {
	if len(l.resv.open) > 0 {
		l.resv.see(l.rule.left(&l.state, max(l.now, l.alarm.clock.Now())))
	}
}

// retune applies m: it serves whom the old numbers owe first, so the
// change applies from now and not before, then changes the numbers and
// serves the line again by the new ones.
func (l *limiter[S, R]) retune(m *Retune) {
	l.seen(m.Now)
	l.serve()
	l.resv.settle(l.rule.top(), l.rule.left(&l.state, l.now))
	l.rule = l.rule.retune(&l.state, l.now, m).(R)
	l.resv.settle(l.rule.top(), l.rule.left(&l.state, l.now))
	l.q.lines[0].at = maxInstant // the head's instant is the new numbers' to find
	l.serve()
	reply(m.Reply, Permit{OK: true, Left: spare(l.rule, &l.state, l.now, l.q.lines[0].n)})
}

// reserve answers m as an Allow without Wait does, and books a grant.
func (l *limiter[S, R]) reserve(m *Reserve) {
	l.seen(m.Now)
	ln := &l.q.lines[0]
	if ln.n > 0 {
		l.serve()
	}
	switch {
	case l.rule.cost(m.N) == 0:
		reply(m.Reply, Permit{OK: true, Left: spare(l.rule, &l.state, m.Now, ln.n)})
	case ln.n == 0 && l.rule.take(&l.state, m.Now, m.N):
		held := l.rule.left(&l.state, m.Now)
		var ticket uint64
		if l.rule.top() > 0 { // a bucket: a window gives nothing back
			ticket = l.resv.add(m.N, held)
		}
		reply(m.Reply, Permit{OK: true, Left: held, Ticket: ticket})
	default:
		reply(m.Reply, Permit{After: l.rule.wait(&l.state, m.Now, ln.ahead, m.N), Left: spare(l.rule, &l.state, m.Now, ln.n)})
	}
}

// cancel gives back what m's reservation is owed, and serves the line,
// whose head may now have its tokens.
func (l *limiter[S, R]) cancel(m *Unreserve) {
	l.seen(m.Now)
	n, ok := l.resv.take(m.Ticket, l.rule.top())
	if n > 0 {
		l.rule.give(&l.state, l.now, n)
		l.serve()
	}
	reply(m.Reply, Permit{OK: ok, Left: n})
}

// maxInstant is a line's at when its head's instant is not known.
const maxInstant = int64(^uint64(0) >> 1)
