package policy

import "time"

// Window is a sliding-window quota: at most allow events in any stretch of
// time window long. An event at t counts while now − t < window.
//
// Where a bucket smooths, a window counts. "A thousand a day" is a window,
// not a rate: answered with a bucket, a client could spend the whole day's
// allowance in the first minute.
//
// The stamps of the counted events are kept, so the count is exact rather
// than the estimate a two-counter scheme gives. Events counted at one
// instant share one stamp, with how many they are: TakeN of a thousand
// costs what a Take does. The stamps sit in a ring that grows by doubling
// up to allow as it fills, and is never copied otherwise: Take is O(1)
// amortized, a quota of a million a day costs the same per call as one of
// ten, and memory follows the instants counted, not allow: 16 bytes an
// instant, so up to 16 × allow bytes for events counted one at a time.
// Left and Next change nothing, so they search for the stamps that have
// fallen out since the last Take rather than dropping them: O(1) when
// none have, O(log k) for k.
//
// A clock that goes backwards is read as standing still at the latest time
// an event was counted: an earlier now is taken as that time, and an event
// counted then is stamped with it. It counts for longer, never shorter, so
// in the window's own time no window-long stretch ever holds more than
// allow.
//
// The zero Window has allow 0 and so refuses everything. Build one with
// NewWindow.
type Window struct {
	allow  int
	window int64   // nanoseconds
	ring   []stamp // oldest at head, in order
	head   int     // index of the oldest stamp
	stamps int     // stamps in the ring
	n      int     // events the stamps hold
	base   int64   // events counted before the oldest stamp, ever
	last   int64   // newest stamp ever counted; meaningful once one was
}

// stamp is the events counted at one instant: at, and upto, how many
// events were counted ever, these included. So the events of a stamp are
// its upto less the one before it, and a search by upto finds the stamp
// of the i-th event.
type stamp struct {
	at   int64
	upto int64
}

// NewWindow is an empty window allowing allow events in any stretch window
// long.
//
// An allow <= 0 is a quota of nothing: every Take is refused, Left is 0 and
// Next is Never. A window <= 0 forgets each event the moment it happens,
// so nothing is ever refused (unless allow <= 0).
func NewWindow(allow int, window time.Duration) *Window {
	return &Window{allow: allow, window: int64(window)}
}

// clock is the window's reading of now: never before the last event.
func (w *Window) clock(now int64) int64 {
	if w.ring != nil { // an event has been counted
		return max(now, w.last)
	}
	return now
}

// gone is how many of the oldest stamps have left the window at t, which
// is never before the newest stamp, and how many events they hold. It
// finds the boundary by galloping from the oldest, so it costs O(log k)
// for k gone and O(1) for none, and it changes nothing.
func (w *Window) gone(t int64) (stamps, events int) {
	if w.stamps == 0 || !w.out(w.at(0).at, t) {
		return 0, 0
	}
	// at(lo) is out; find the first index in [lo+1, stamps) that is still in.
	lo, step := 0, 1
	hi := w.stamps
	for lo+step < w.stamps {
		if !w.out(w.at(lo+step).at, t) {
			hi = lo + step
			break
		}
		lo += step
		step *= 2
	}
	for hi-lo > 1 { // at(lo) out, at(hi) in or hi == stamps
		mid := lo + (hi-lo)/2
		if w.out(w.at(mid).at, t) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, int(w.at(hi-1).upto - w.base)
}

// out is whether an event stamped s has left the window at t >= s.
func (w *Window) out(s, t int64) bool {
	// t >= s, so the wrapped difference read unsigned is exact.
	return uint64(t-s) >= uint64(w.window)
}

// at is the i-th oldest stamp.
func (w *Window) at(i int) *stamp {
	j := w.head + i
	if j >= len(w.ring) {
		j -= len(w.ring)
	}
	return &w.ring[j]
}

// Take is whether an event is within the quota at now, counting it if it
// is. A refused Take changes nothing.
func (w *Window) Take(now int64) bool { return w.TakeN(now, 1) }

// TakeN is whether n events at now all fit the quota, counting them all if
// they do, as n Takes at now would one after another; a refused TakeN
// changes nothing. An n <= 0 counts nothing and is true. It costs what one
// Take does, whatever n.
func (w *Window) TakeN(now int64, n int) bool {
	if n <= 0 {
		return true
	}
	if w.allow <= 0 {
		return false
	}
	if w.window <= 0 {
		return true
	}
	t := w.clock(now)
	k, e := w.gone(t)
	if n > w.allow-(w.n-e) {
		return false
	}
	if k > 0 {
		w.base = w.at(k - 1).upto
		w.head += k
		if w.head >= len(w.ring) {
			w.head -= len(w.ring)
		}
		w.stamps -= k
		w.n -= e
	}
	upto := w.base + int64(w.n) + int64(n)
	if w.stamps > 0 && w.at(w.stamps-1).at == t {
		w.at(w.stamps - 1).upto = upto // one more event of the newest stamp
	} else {
		if w.stamps == len(w.ring) {
			w.grow()
		}
		*w.at(w.stamps) = stamp{at: t, upto: upto}
		w.stamps++
	}
	w.n += n
	w.last = t
	return true
}

// grow doubles the ring, up to allow, keeping the stamps in order. A stamp
// holds at least one event, so allow stamps are the most it needs.
func (w *Window) grow() {
	size := min(max(2*len(w.ring), 8), w.allow)
	ring := make([]stamp, size)
	for i := range w.stamps {
		ring[i] = *w.at(i)
	}
	w.ring, w.head = ring, 0
}

// Left is how many more events the window would count at now. It changes
// nothing.
func (w *Window) Left(now int64) int {
	if w.allow <= 0 {
		return 0
	}
	if w.window <= 0 {
		return w.allow
	}
	_, e := w.gone(w.clock(now))
	return max(w.allow-(w.n-e), 0)
}

// Next is how long from now until the window has room: 0 when it has room
// now, else the moment its oldest counted event falls out. It changes
// nothing, and is Never for a window of allow <= 0, or when that moment is
// past the end of the clock.
func (w *Window) Next(now int64) time.Duration {
	if w.allow <= 0 {
		return Never
	}
	if w.window <= 0 {
		return 0
	}
	k, e := w.gone(w.clock(now))
	if w.n-e < w.allow {
		return 0
	}
	// Room opens when all but allow-1 of the counted events have left: the
	// oldest, unless SetAllow lowered allow below the count. It is the
	// event counted ever as number base+n-allow+1; its stamp is the first
	// whose upto reaches that, and it is still in.
	g := w.base + int64(w.n-w.allow) + 1
	lo, hi := k, w.stamps-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if w.at(mid).upto-g >= 0 { // running totals: compared by difference, as they may wrap
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	oldest := w.at(lo).at
	if oldest > int64(Never)-w.window {
		return Never
	}
	// oldest+window is after the window's clock, and so after now: the
	// wrapped difference read unsigned is exact, if perhaps too long.
	d := uint64(oldest + w.window - now)
	if d > uint64(Never) {
		return Never
	}
	return time.Duration(d)
}

// SetAllow changes how many events the window allows, keeping the events
// it has counted: lowered below them, it refuses until enough have left
// the window (Left is 0, never less, and Next says when). An allow <= 0 is
// a quota of nothing, as in NewWindow.
func (w *Window) SetAllow(allow int) { w.allow = allow }
