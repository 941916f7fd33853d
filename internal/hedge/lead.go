package hedge

import (
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// Lead sets a race's alarms early by about how late they ring, so that a
// hedge goes out close to Delay after its attempt, not Delay plus the
// timer's lateness. Go's timers ring late: the runtime sleeps in whole
// milliseconds when it is idle, so a 5.3 ms timer rings near 6 ms. A
// hedge sent late is a p99 made longer by as much.
//
// A hedge sent early costs more than one sent late: it doubles a request
// the caller chose not to hedge yet. So the lead learns slowly upwards and
// quickly downwards. It keeps near the low end of the lateness, and only
// the alarms that ring unusually soon send their hedge early, by little.
//
// The zero Lead sets alarms on time and learns from the first ring. A
// clock whose timers ring on time (a virtual one, unless a test makes it
// late) teaches it nothing, and the lead stays zero. It is safe for
// concurrent use.
type Lead struct {
	ns atomic.Int64
}

// For is the lead a race hedging by h uses: l when h sets a fixed Delay,
// nil when the delay is a latency quantile, or h is nil. A quantile says
// what share of requests to hedge, and an alarm set early would hedge
// more than that share. Left late, its hedges go out past the quantile
// by a timer's lateness, and a few fewer go.
func (l *Lead) For(h *client.Hedge) *Lead {
	if h == nil || h.Delay <= 0 {
		return nil
	}
	return l
}

// Delay is how long a race hedging by h under b waits before a hedge
// (see client.Hedge.DelayFrom), and the lead its alarms are set early by
// (see For); false when no hedge is due. h is read once, so the delay and
// the lead agree.
func (l *Lead) Delay(h *client.Hedge, b *client.Budget) (time.Duration, *Lead, bool) {
	if h == nil {
		return 0, nil, false
	}
	c := *h
	d, ok := c.DelayFrom(b)
	return d, l.For(&c), ok
}

// leadGain is the share of a late ring's error a Lead takes in: an
// average over the last eight late rings or so, quick to learn and slow
// to be swayed by one stall. An early ring's error is taken in whole. The
// lead settles where the early rings' error is an eighth of the late
// rings' in sum: for lateness spread evenly over a millisecond, at about
// a quarter of it, with one hedge in four or five early. A ring's
// error counts as at most half the delay either way.
const leadGain = 8

// early is how long before d from now to set an alarm due d from now:
// the lead, but never more than half of d. A nil Lead is no lead.
func (l *Lead) early(d time.Duration) time.Duration {
	if l == nil || d <= 0 {
		return 0
	}
	return min(time.Duration(l.ns.Load()), d/2)
}

// rang takes in one alarm's error: how long after its due time it rang,
// negative if it rang early, for an alarm due d after it was set. A late
// ring moves the lead up by an eighth of its error, an early one down by
// all of it, each counted as at most d/2. The lead stays between zero
// and d/2, the most early ever uses, so a machine that stalls for a while
// leaves no lead it takes long to unlearn.
func (l *Lead) rang(late, d time.Duration) {
	if l == nil || d <= 0 {
		return
	}
	half := int64(d / 2)
	err := min(max(int64(late), -half), half)
	if err > 0 {
		err /= leadGain
	}
	for {
		old := l.ns.Load()
		lead := min(max(old+err, 0), half)
		if l.ns.CompareAndSwap(old, lead) {
			return
		}
	}
}

// Ahead is how long before their due time alarms are set: the lead, of
// which an alarm uses at most half its delay. A nil Lead is never ahead.
func (l *Lead) Ahead() time.Duration {
	if l == nil {
		return 0
	}
	return time.Duration(l.ns.Load())
}
